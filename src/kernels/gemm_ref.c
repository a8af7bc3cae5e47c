/* Scalar reference GEMM: the definition, one dot product per output, accumulated in double. */
#include "kernels/gemm.h"

void gm_sgemm_ref(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                  const float *B, size_t ldb, float beta, float *C, size_t ldc, float *work) {
    (void)work;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0;
            for (size_t k = 0; k < K; k++) {
                float a = ta ? A[k * lda + i] : A[i * lda + k];
                float b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += (double)a * (double)b;
            }
            float v = alpha * (float)s;
            C[i * ldc + j] = beta == 0.0f ? v : v + beta * C[i * ldc + j];
        }
}
