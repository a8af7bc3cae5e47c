/* Scalar reference matvec / matmul: dequantize a chunk of up to 256 weights (whole blocks) with the
 * reference dequantizer, dot it in f32, and add chunk sums in f64. The f64 total makes this the
 * accurate baseline the SIMD kernels are tested against; matmul gives bit-identical results to
 * matvec for every input column. */
#include "kernels/kernels_internal.h"

enum { CHUNK = 256, TGROUP = 64 };

static float dot_f32(const float *a, const float *b, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void gm_matvec_ref(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x,
                   float *y) {
    gm_matmul_ref(type, W, row_bytes, rows, cols, x, 1, y, rows);
}

void gm_matmul_ref(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X,
                   size_t T, float *Y, size_t ldy) {
    float w[CHUNK];
    double acc[TGROUP];
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = (const uint8_t *)W + r * row_bytes;
        for (size_t t0 = 0; t0 < T; t0 += TGROUP) {
            size_t nt = T - t0 < TGROUP ? T - t0 : TGROUP;
            for (size_t t = 0; t < nt; t++) acc[t] = 0.0;
            for (size_t c = 0; c < cols; c += CHUNK) {
                size_t n = cols - c < CHUNK ? cols - c : CHUNK;
                gm_dequant_row_ref(type, row + gm_kernels_bytes_of(type, c), w, n);
                for (size_t t = 0; t < nt; t++) acc[t] += dot_f32(w, X + (t0 + t) * cols + c, n);
            }
            for (size_t t = 0; t < nt; t++) Y[(t0 + t) * ldy + r] = (float)acc[t];
        }
    }
}

const gm_kernel_ops gm_kernels_scalar = {"scalar", gm_dequant_row_ref, gm_matvec_ref, gm_matmul_ref};
