/* libFuzzer harness: a Hugging Face model folder whose config.json and safetensors header are both fuzzed,
 * through gm_source_open (HF names -> GGUF names, shapes against the config) and gm_model_load plus one
 * forward step. Input: 2 bytes little-endian = length of config.json, the config, then the safetensors
 * header JSON; the harness writes model.safetensors as [8-byte length][header][256 KiB of zeros], so any
 * offsets within 256 KiB are backed. Properties: an accepted folder's tensors read back; a loaded model
 * runs. Seeds: tests/fuzz/corpus/fuzz_hf_folder (the tiny transformers checkpoints' configs and headers). */
#include "fuzz/fuzz_util.h"

#include "gemma.h"
#include "io/source.h"

#define DATA_BYTES (256u << 10)

static uint8_t *file_buf;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t cfg_len = (size_t)data[0] | (size_t)data[1] << 8;
    if (cfg_len > size - 2) return 0;
    const uint8_t *cfg = data + 2, *hdr = data + 2 + cfg_len;
    size_t hdr_len = size - 2 - cfg_len;
    char path[512];
    fz_write("config.json", cfg, cfg_len, path, sizeof path);
    if (!file_buf) file_buf = calloc(1, 8 + 65536 + DATA_BYTES);
    if (!file_buf || hdr_len > 65536) return 0;
    uint64_t n = hdr_len;
    for (int i = 0; i < 8; i++) file_buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(file_buf + 8, hdr, hdr_len);
    memset(file_buf + 8 + hdr_len, 0, DATA_BYTES);
    fz_write("model.safetensors", file_buf, 8 + hdr_len + DATA_BYTES, path, sizeof path);

    gm_source *src = NULL;
    if (gm_source_open(fz_dir(), &src) == GM_OK) {
        for (size_t i = 0; i < gm_source_tensor_count(src); i++) {
            const gm_tensor_info *t = gm_source_tensor_at(src, i);
            void *row = malloc(t->row_bytes);
            if (!row) abort();
            FZ_ASSERT(gm_source_read_rows(src, t, t->nbytes / t->row_bytes - 1, 1, row) == GM_OK,
                      "accepted tensor %s does not read: %s", t->name, gm_last_error());
            free(row);
        }
        gm_source_close(src);
    }
    gm_load_options o;
    gm_load_options_default(&o);
    o.cache_length = 8;
    o.use_mpi = false;
    gm_model *m = NULL;
    if (gm_model_load(fz_dir(), &o, &m) == GM_OK) {
        gm_session *s = NULL;
        if (gm_session_new(m, &s) == GM_OK) {
            int32_t ids[2] = {0, gm_model_config(m)->vocab_size - 1};
            FZ_ASSERT(gm_session_forward(s, ids, 2, NULL, NULL) == GM_OK, "forward: %s", gm_last_error());
            gm_session_free(s);
        }
        gm_model_free(m);
    }
    return 0;
}
