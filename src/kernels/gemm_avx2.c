/* AVX2 GEMM micro-kernel: a 6 x 16 tile in 12 ymm accumulators. Partial tiles go through a small
 * buffer. */
#include <immintrin.h>

#include "kernels/gemm.h"

#define GEMM_MR 6
#define GEMM_NR 16
#define GEMM_NAME gm_sgemm_avx2

static void ukernel(size_t kc, const float *a, const float *b, float *C, size_t ldc, float alpha, float beta, int m,
                    int n) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (size_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        __m256 x;
#define ROW(i, r0, r1)                                                                                                 \
    x = _mm256_broadcast_ss(a + i);                                                                                    \
    r0 = _mm256_fmadd_ps(x, b0, r0);                                                                                   \
    r1 = _mm256_fmadd_ps(x, b1, r1);
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
#undef ROW
        a += GEMM_MR;
        b += GEMM_NR;
    }
    float tile[GEMM_MR][GEMM_NR];
    __m256 rows[GEMM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    __m256 va = _mm256_set1_ps(alpha);
    for (int i = 0; i < GEMM_MR; i++) {
        _mm256_storeu_ps(tile[i], _mm256_mul_ps(rows[i][0], va));
        _mm256_storeu_ps(tile[i] + 8, _mm256_mul_ps(rows[i][1], va));
    }
    for (int i = 0; i < m; i++) {
        float *c = C + (size_t)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < n; j++) c[j] = tile[i][j];
        else
            for (int j = 0; j < n; j++) c[j] = tile[i][j] + beta * c[j];
    }
}

#include "kernels/gemm_blocked.h"
