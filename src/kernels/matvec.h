/* Weight kernels: one per storage type, fused dequantize-and-dot. Each has a scalar reference
 * (kernels/dequant_ref.c, matvec_ref.c) and SIMD versions (matvec_avx2.c, matvec_avx512.c) picked at run time.
 * Kernels are single-threaded over the row range they are given: callers split rows across threads. */
#ifndef GM_KERNELS_MATVEC_H
#define GM_KERNELS_MATVEC_H

#include <stddef.h>
#include <stdint.h>

#include "io/dtype.h"

/* Dequantize one row of n elements (n a multiple of the type's block) to f32. */
void gm_dequant_row(gm_dtype type, const void *row, float *out, size_t n);

/* y[r] = sum_c W[r][c] * x[c] for r in [0, rows); W holds `rows` rows of `cols` elements stored as
 * `type`, consecutive rows `row_bytes` apart. */
void gm_matvec(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x, float *y);

/* Batched form for prefill: Y[t * ldy + r] = sum_c W[r][c] * X[t * cols + c] for t in [0, T). */
void gm_matmul(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X, size_t T,
               float *Y, size_t ldy);

/* Which implementation the dispatcher chose ("avx512", "avx2", "scalar"). Chosen once per process from
 * the CPU; GM_KERNELS=scalar|avx2|avx512 forces one (a path the CPU lacks falls back to the best it has).
 * All paths compute in f32 (activations are never rounded to int8); gm_dequant_row is bit-identical to
 * ggml / gguf.quants on every path, and the dot products of different paths differ only by rounding and
 * summation order (within 1e-5 of sum |w x|, tested). */
const char *gm_kernels_isa(void);

/* f16 / bf16 <-> f32 (IEEE half; bf16 = top half of an f32, rounded to nearest even). */
float gm_f16_to_f32(uint16_t h);
uint16_t gm_f32_to_f16(float f);
float gm_bf16_to_f32(uint16_t h);
uint16_t gm_f32_to_bf16(float f);

#endif
