/* Private to src/kernels and its tests: one table of entry points per instruction set, so the
 * dispatcher can pick one and tests can compare every path the CPU runs against the reference. */
#ifndef GM_KERNELS_INTERNAL_H
#define GM_KERNELS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/matvec.h"

typedef struct gm_kernel_ops {
    const char *name; /* "scalar", "avx2", "avx512" */
    void (*dequant_row)(gm_dtype type, const void *row, float *out, size_t n);
    void (*matvec)(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x,
                   float *y);
    void (*matmul)(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X,
                   size_t T, float *Y, size_t ldy);
} gm_kernel_ops;

extern const gm_kernel_ops gm_kernels_scalar;
extern const gm_kernel_ops gm_kernels_avx2;
extern const gm_kernel_ops gm_kernels_avx512;

/* The implementation named `isa` ("scalar", "avx2", "avx512") when this CPU can run it, else NULL. */
const gm_kernel_ops *gm_kernels_lookup(const char *isa);

/* Scalar reference pieces (dequant_ref.c, matvec_ref.c). */
void gm_dequant_row_ref(gm_dtype type, const void *row, float *out, size_t n);
void gm_matvec_ref(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x,
                   float *y);
void gm_matmul_ref(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X,
                   size_t T, float *Y, size_t ldy);

/* Bytes of the first n elements of a row of `type` (n a multiple of the block). */
static inline size_t gm_kernels_bytes_of(gm_dtype type, size_t n) {
    switch (type) {
    case GM_F32: return n * 4;
    case GM_F16: case GM_BF16: return n * 2;
    case GM_Q4_0: return n / 32 * 18;
    case GM_Q4_1: return n / 32 * 20;
    case GM_Q5_0: return n / 32 * 22;
    case GM_Q5_1: return n / 32 * 24;
    case GM_Q8_0: return n / 32 * 34;
    case GM_Q4_K: return n / 256 * 144;
    case GM_Q5_K: return n / 256 * 176;
    case GM_Q6_K: return n / 256 * 210;
    default: return 0;
    }
}

/* Little-endian f16 field at p (block scales are not 2-byte aligned in general). */
static inline uint16_t gm_kernels_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

#endif
