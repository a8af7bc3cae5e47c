/* libFuzzer harness: any bytes as model.safetensors.index.json in a folder holding the three real shards
 * and config.json of tests/fixtures/hf_tiny_mm_sharded (symlinked), opened with gm_source_open. The
 * index names the shard files, so this also covers path handling (names with '/', '..', duplicates).
 * Property of an accepted folder: every tensor reads back. Seeds: tests/fuzz/corpus/fuzz_hf_index. */
#include "fuzz/fuzz_util.h"

#include "io/source.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_link_fixture("hf_tiny_mm_sharded/config.json", "config.json");
    for (int i = 1; i <= 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "model-0000%d-of-00003.safetensors", i);
        char fix[128];
        snprintf(fix, sizeof fix, "hf_tiny_mm_sharded/%s", name);
        fz_link_fixture(fix, name);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fz_write("model.safetensors.index.json", data, size, path, sizeof path);
    gm_source *src = NULL;
    if (gm_source_open(fz_dir(), &src) == GM_OK) {
        size_t n = gm_source_tensor_count(src);
        for (size_t i = 0; i < n; i++) {
            const gm_tensor_info *t = gm_source_tensor_at(src, i);
            void *buf = malloc(t->row_bytes);
            if (!buf) abort();
            FZ_ASSERT(gm_source_read_rows(src, t, t->nbytes / t->row_bytes - 1, 1, buf) == GM_OK,
                      "accepted tensor %s does not read: %s", t->name, gm_last_error());
            free(buf);
        }
        gm_source_close(src);
    }
    return 0;
}
