/* libFuzzer harness: any bytes as a safetensors file (8-byte length + header), parsed from memory.
 * Build with -DGM_FUZZ=ON (clang); run: build/fuzz_safetensors -max_total_time=60 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | data[i];
    if (n > size - 8) return 0; /* gm_safetensors_read rejects this before parsing */
    gm_safetensors st;
    if (gm_safetensors_parse((const char *)data + 8, (size_t)n, size, "fuzz", &st) == GM_OK) {
        for (size_t i = 0; i < st.n_tensors; i++)
            if (st.tensors[i].offset + st.tensors[i].nbytes > size) __builtin_trap();
        gm_safetensors_free(&st);
    }
    return 0;
}
