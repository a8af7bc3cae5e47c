/* libFuzzer harness: any bytes as a safetensors file (8-byte length + JSON header + data), read through
 * gm_safetensors_read from a file. Properties of an accepted file: every tensor lies inside the data
 * region, its byte size is its element count times the dtype size, names are unique, and ranges do
 * not overlap. Seeds: tests/fuzz/corpus/fuzz_safetensors. */
#include "fuzz/fuzz_util.h"

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fz_write("model.safetensors", data, size, path, sizeof path);
    gm_file f;
    if (gm_file_open(&f, path) != GM_OK) abort();
    gm_safetensors st;
    if (gm_safetensors_read(&f, &st) == GM_OK) {
        FZ_ASSERT(st.data_start >= 8 && st.data_start <= size, "data_start %llu", (unsigned long long)st.data_start);
        for (size_t i = 0; i < st.n_tensors; i++) {
            const gm_st_tensor *t = &st.tensors[i];
            FZ_ASSERT(t->offset >= st.data_start && t->offset <= size && t->nbytes <= size - t->offset,
                      "tensor %s outside the data", t->name);
            uint64_t count = 1;
            for (int d = 0; d < t->n_dims; d++) count *= t->shape[d];
            FZ_ASSERT(count * t->elem_bytes == t->nbytes, "tensor %s: shape and bytes disagree", t->name);
            FZ_ASSERT(gm_safetensors_find(&st, t->name) == t, "tensor %s: duplicate name", t->name);
            uint8_t b;
            if (t->nbytes) FZ_ASSERT(gm_file_read(&f, t->offset + t->nbytes - 1, &b, 1) == GM_OK, "last byte unreadable");
        }
        gm_safetensors_free(&st);
    }
    gm_file_close(&f);
    return 0;
}
