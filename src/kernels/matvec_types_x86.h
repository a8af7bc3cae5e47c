/* The per-type entry points of one x86 ISA's weight kernels, shared by matvec_avx2.c and matvec_avx512.c.
 * Included at the end of such a file, after its GM_AI float_rows, quant_rows and dequant_t, its panel_gemm,
 * its RB and KC and MATVEC_LANES (floats per vector), all compiled with that file's flags. Each storage type
 * gets its own specialization (the type a constant, so the type tests fold away), and matvec_by_type /
 * dequant_by_type / matmul_by_type switch over them: the three functions of that ISA's gm_kernel_ops. */
#ifndef GM_KERNELS_MATVEC_TYPES_X86_H
#define GM_KERNELS_MATVEC_TYPES_X86_H

#include <string.h>

#include "kernels/kernels_internal.h"

GM_AI void matvec_t(gm_dtype t, const uint8_t *W, size_t rb, size_t rows, size_t cols, const float *x, float *y) {
    size_t r = 0;
    int is_float = t == GM_F32 || t == GM_F16 || t == GM_BF16;
    for (; r + 4 <= rows; r += 4) {
        if (is_float) float_rows(t, W + r * rb, rb, cols, x, y + r, 4);
        else quant_rows(t, W + r * rb, rb, cols, x, y + r, 4);
    }
    for (; r < rows; r++) {
        if (is_float) float_rows(t, W + r * rb, rb, cols, x, y + r, 1);
        else quant_rows(t, W + r * rb, rb, cols, x, y + r, 1);
    }
}

#define INSTANCE(T, name) \
    static void name(const uint8_t *W, size_t rb, size_t rows, size_t cols, const float *x, float *y) { \
        matvec_t(T, W, rb, rows, cols, x, y);                                                          \
    }
INSTANCE(GM_F32, mv_f32)
INSTANCE(GM_F16, mv_f16)
INSTANCE(GM_BF16, mv_bf16)
INSTANCE(GM_Q4_0, mv_q4_0)
INSTANCE(GM_Q4_1, mv_q4_1)
INSTANCE(GM_Q5_0, mv_q5_0)
INSTANCE(GM_Q5_1, mv_q5_1)
INSTANCE(GM_Q8_0, mv_q8_0)
INSTANCE(GM_Q4_K, mv_q4_k)
INSTANCE(GM_Q5_K, mv_q5_k)
INSTANCE(GM_Q6_K, mv_q6_k)
#undef INSTANCE

static void matvec_by_type(gm_dtype type, const void *W, size_t rb, size_t rows, size_t cols, const float *x,
                           float *y) {
    const uint8_t *w = W;
    switch (type) {
    case GM_F32: mv_f32(w, rb, rows, cols, x, y); return;
    case GM_F16: mv_f16(w, rb, rows, cols, x, y); return;
    case GM_BF16: mv_bf16(w, rb, rows, cols, x, y); return;
    case GM_Q4_0: mv_q4_0(w, rb, rows, cols, x, y); return;
    case GM_Q4_1: mv_q4_1(w, rb, rows, cols, x, y); return;
    case GM_Q5_0: mv_q5_0(w, rb, rows, cols, x, y); return;
    case GM_Q5_1: mv_q5_1(w, rb, rows, cols, x, y); return;
    case GM_Q8_0: mv_q8_0(w, rb, rows, cols, x, y); return;
    case GM_Q4_K: mv_q4_k(w, rb, rows, cols, x, y); return;
    case GM_Q5_K: mv_q5_k(w, rb, rows, cols, x, y); return;
    case GM_Q6_K: mv_q6_k(w, rb, rows, cols, x, y); return;
    default: gm_matvec_ref(type, W, rb, rows, cols, x, y); return;
    }
}

static void dequant_by_type(gm_dtype type, const void *row, float *out, size_t n) {
    const uint8_t *p = row;
    switch (type) {
    case GM_F32: dequant_t(GM_F32, p, out, n); return;
    case GM_F16: dequant_t(GM_F16, p, out, n); return;
    case GM_BF16: dequant_t(GM_BF16, p, out, n); return;
    case GM_Q4_0: dequant_t(GM_Q4_0, p, out, n); return;
    case GM_Q4_1: dequant_t(GM_Q4_1, p, out, n); return;
    case GM_Q5_0: dequant_t(GM_Q5_0, p, out, n); return;
    case GM_Q5_1: dequant_t(GM_Q5_1, p, out, n); return;
    case GM_Q8_0: dequant_t(GM_Q8_0, p, out, n); return;
    case GM_Q4_K: dequant_t(GM_Q4_K, p, out, n); return;
    case GM_Q5_K: dequant_t(GM_Q5_K, p, out, n); return;
    case GM_Q6_K: dequant_t(GM_Q6_K, p, out, n); return;
    default: gm_dequant_row_ref(type, row, out, n); return;
    }
}

/* Each RB-row panel dequantized KC columns at a time into an f32 tile (rows zero past kc, rounded up to a
 * whole vector, and past the matrix's last row), which panel_gemm multiplies by every input. */
static void matmul_by_type(gm_dtype type, const void *W, size_t rb, size_t rows, size_t cols, const float *X, size_t T,
                           float *Y, size_t ldy) {
    _Alignas(64) float tile[RB * KC];
    const uint8_t *w = W;
    if (cols == 0) { /* an empty dot product is 0, as in the reference */
        for (size_t t = 0; t < T; t++) memset(Y + t * ldy, 0, rows * sizeof *Y);
        return;
    }
    for (size_t r0 = 0; r0 < rows; r0 += RB) {
        int nr = rows - r0 >= RB ? RB : (int)(rows - r0);
        for (size_t k0 = 0; k0 < cols; k0 += KC) {
            size_t kc = cols - k0 >= KC ? KC : cols - k0;
            size_t kpad = (kc + MATVEC_LANES - 1) / MATVEC_LANES * MATVEC_LANES;
            for (int r = 0; r < RB; r++) {
                if (r < nr) {
                    dequant_by_type(type, w + (r0 + r) * rb + gm_kernels_bytes_of(type, k0), tile + r * KC, kc);
                    memset(tile + r * KC + kc, 0, (kpad - kc) * sizeof(float));
                } else {
                    memset(tile + r * KC, 0, kpad * sizeof(float));
                }
            }
            panel_gemm(tile, kc, X + k0, cols, T, Y + r0, ldy, nr, k0 > 0);
        }
    }
}

#endif
