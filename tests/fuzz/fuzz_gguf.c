/* libFuzzer harness: any bytes as a GGUF file, through every reader that sees one: the header, metadata
 * and tensor directory (gm_gguf_open via gm_source_open), the config (gm_config_from_gguf), the GGUF
 * vocabulary (gm_tokenizer_load), and the weight loader plus one forward step (gm_model_load).
 * Properties: an accepted file has a consistent config and every tensor reads back; nothing crashes.
 * Seeds: tests/fuzz/corpus/fuzz_gguf (tiny models written by the gguf package, crafted variants). */
#include "fuzz/fuzz_util.h"

#include "gemma.h"
#include "io/source.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fz_write("model.gguf", data, size, path, sizeof path);

    gm_source *src = NULL;
    if (gm_source_open(path, &src) == GM_OK) {
        const gm_config *c = gm_source_config(src);
        FZ_ASSERT(gm_config_validate(c, "fuzz") == GM_OK, "accepted config fails validation: %s", gm_last_error());
        size_t n = gm_source_tensor_count(src);
        for (size_t i = 0; i < n; i++) {
            const gm_tensor_info *t = gm_source_tensor_at(src, i);
            FZ_ASSERT(t->row_bytes > 0 && t->nbytes % t->row_bytes == 0, "tensor %s: %llu bytes, rows of %llu", t->name,
                      (unsigned long long)t->nbytes, (unsigned long long)t->row_bytes);
            FZ_ASSERT(t->offset <= size && t->nbytes <= size - t->offset, "tensor %s past the end", t->name);
            void *buf = malloc(t->nbytes ? t->nbytes : 1);
            if (!buf) abort();
            gm_status st = gm_source_read_rows(src, t, 0, t->nbytes / t->row_bytes, buf);
            FZ_ASSERT(st == GM_OK, "accepted tensor %s does not read: %s", t->name, gm_last_error());
            free(buf);
        }
        (void)gm_source_fingerprint(src);
        gm_source_close(src);
    }

    gm_tokenizer *tok = NULL;
    if (gm_tokenizer_load(path, &tok) == GM_OK) {
        static const char text[] = "Hello <start_of_turn>user\nw\xc3\xa9lt \xff\xfe <bos>  x";
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (gm_tokenizer_encode(tok, text, sizeof text - 1, gm_tokenizer_bos_id(tok) >= 0, &ids, &n_ids) == GM_OK) {
            for (size_t i = 0; i < n_ids; i++)
                FZ_ASSERT(ids[i] >= 0 && ids[i] < gm_tokenizer_vocab_size(tok), "id %d out of range", ids[i]);
            char *back = NULL;
            FZ_ASSERT(gm_tokenizer_decode(tok, ids, n_ids, &back) == GM_OK, "decode of encode failed: %s", gm_last_error());
            gm_free(back);
        }
        gm_free(ids);
        gm_tokenizer_free(tok);
    }

    gm_load_options o;
    gm_load_options_default(&o);
    o.cache_length = 8;
    o.use_mpi = false;
    gm_model *m = NULL;
    if (gm_model_load(path, &o, &m) == GM_OK) {
        fz_forward_step(m, 0);
        gm_model_free(m);
    }
    return 0;
}
