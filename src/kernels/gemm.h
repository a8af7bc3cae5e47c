/* Dense f32 matrix multiply for training (all operands f32, row-major):
 *
 *     C[M][N] = alpha * op(A)[M][K] . op(B)[K][N] + beta * C
 *
 * op(A) = A (stored [M][lda]) or, with ta, A^T (A stored [K][lda]); likewise B ([K][ldb] or, with tb,
 * [N][ldb]). beta == 0 means C is not read (garbage or NaN in C is overwritten).
 * Blocked like BLIS (packed panels, a register-tiled micro-kernel per instruction set: AVX-512
 * 12x32, AVX2 6x16) with a plain scalar reference (gemm_ref.c) that tests compare against. */
#ifndef GM_KERNELS_GEMM_H
#define GM_KERNELS_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "base/threads.h"

typedef void (*gm_sgemm_fn)(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                            const float *B, size_t ldb, float beta, float *C, size_t ldc, float *work);

/* Floats of workspace one single-threaded call needs (packed A block + packed B block). */
size_t gm_sgemm_work_floats(void);

/* Implementations (work: gm_sgemm_work_floats() floats, 64-byte aligned). */
void gm_sgemm_ref(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                  const float *B, size_t ldb, float beta, float *C, size_t ldc, float *work);
void gm_sgemm_avx2(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc, float *work);
void gm_sgemm_avx512(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
                     const float *B, size_t ldb, float beta, float *C, size_t ldc, float *work);

/* The implementation for `isa` ("scalar", "avx2", "avx512") if the CPU runs it, else NULL; NULL isa =
 * the one the kernel dispatcher chose (GM_KERNELS narrows it, as for the matvec kernels). */
gm_sgemm_fn gm_sgemm_lookup(const char *isa);

/* A thread pool with one workspace per thread; gm_gemm splits C over the threads. */
typedef struct gm_gemm_ctx gm_gemm_ctx;
gm_status gm_gemm_ctx_create(int threads, gm_gemm_ctx **out);
void gm_gemm_ctx_free(gm_gemm_ctx *g);
gm_pool *gm_gemm_ctx_pool(gm_gemm_ctx *g);
int gm_gemm_ctx_threads(const gm_gemm_ctx *g);
/* The single-threaded implementation and thread i's workspace (for products inside parallel jobs). */
gm_sgemm_fn gm_gemm_ctx_fn(const gm_gemm_ctx *g);
float *gm_gemm_ctx_work(gm_gemm_ctx *g, int i);
void gm_gemm(gm_gemm_ctx *g, bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
             const float *B, size_t ldb, float beta, float *C, size_t ldc);

#endif
