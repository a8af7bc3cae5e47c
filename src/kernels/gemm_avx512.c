/* AVX-512 GEMM micro-kernel: a 12 x 32 tile in 24 zmm accumulators; per k, two loads of B and 12
 * broadcasts of A feed 24 FMAs. Partial tiles use lane masks. */
#include <immintrin.h>

#include "kernels/gemm.h"

#define GEMM_MR 12
#define GEMM_NR 32
#define GEMM_NAME gm_sgemm_avx512

static inline __attribute__((always_inline)) void store_row(float *c, __m512 v0, __m512 v1, __m512 va, __m512 vb,
                                                            __mmask16 m0, __mmask16 m1) {
    /* va = alpha, vb = beta (beta == 0: C not read) */
    if (_mm512_cvtss_f32(vb) == 0.0f) {
        _mm512_mask_storeu_ps(c, m0, _mm512_mul_ps(v0, va));
        _mm512_mask_storeu_ps(c + 16, m1, _mm512_mul_ps(v1, va));
    } else {
        _mm512_mask_storeu_ps(c, m0, _mm512_fmadd_ps(v0, va, _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, c), vb)));
        _mm512_mask_storeu_ps(c + 16, m1,
                              _mm512_fmadd_ps(v1, va, _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, c + 16), vb)));
    }
}

static void ukernel(size_t kc, const float *a, const float *b, float *C, size_t ldc, float alpha, float beta, int m,
                    int n) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    __m512 c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
    __m512 c80 = c00, c81 = c00, c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00;
    for (size_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        __m512 x;
#define ROW(i, r0, r1)                                                                                                 \
    x = _mm512_set1_ps(a[i]);                                                                                          \
    r0 = _mm512_fmadd_ps(x, b0, r0);                                                                                   \
    r1 = _mm512_fmadd_ps(x, b1, r1);
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
        ROW(6, c60, c61) ROW(7, c70, c71) ROW(8, c80, c81) ROW(9, c90, c91) ROW(10, ca0, ca1) ROW(11, cb0, cb1)
#undef ROW
        a += GEMM_MR;
        b += GEMM_NR;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
    __m512 rows[GEMM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                               {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {ca0, ca1}, {cb0, cb1}};
    for (int i = 0; i < m; i++) store_row(C + (size_t)i * ldc, rows[i][0], rows[i][1], va, vb, m0, m1);
}

/* packed panels must be 64-byte aligned for the aligned loads: every panel offset is a multiple of
 * NR * kc floats and the workspace is 64-byte aligned. */
#include "kernels/gemm_blocked.h"
