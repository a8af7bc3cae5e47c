/* Weight element types, numbered as ggml numbers them (so GGUF type ids map 1:1). */
#ifndef GM_IO_DTYPE_H
#define GM_IO_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum gm_dtype {
    GM_F32 = 0,
    GM_F16 = 1,
    GM_Q4_0 = 2,
    GM_Q4_1 = 3,
    GM_Q5_0 = 6,
    GM_Q5_1 = 7,
    GM_Q8_0 = 8,
    GM_Q4_K = 12,
    GM_Q5_K = 13,
    GM_Q6_K = 14,
    GM_BF16 = 30,
    GM_DTYPE_COUNT = 31
} gm_dtype;

typedef struct gm_dtype_info {
    const char *name;   /* "Q4_K" */
    uint32_t block;     /* elements per block (1 for float types) */
    uint32_t bytes;     /* bytes per block */
} gm_dtype_info;

/* NULL when `type` is not a type this build reads. */
const gm_dtype_info *gm_dtype_get(uint32_t type);
/* Bytes of a row of n elements; false if n is not a multiple of the block or overflows. */
bool gm_dtype_row_bytes(gm_dtype type, uint64_t n, uint64_t *bytes);

#endif
