/* The blocked GEMM driver shared by the SIMD files (included once per instruction set). The includer
 * defines GEMM_MR, GEMM_NR, GEMM_NAME (the function to define) and
 *     static void ukernel(size_t kc, const float *a, const float *b, float *C, size_t ldc, float alpha, float beta,
 *                         int m, int n);
 * (and, with GEMM_CUSTOM_PACK, its own pack_a / pack_b with the signatures below)
 * which computes an MR x NR tile from packed panels (a: [kc][MR], b: [kc][NR]) and stores
 * C = alpha * tile + beta * C (beta 0: C not read) for its first m rows and n columns.
 *
 * Loops as in BLIS: NC-wide column blocks of B, KC-deep slices packed once, MC-high row blocks of A
 * packed per slice, then MR x NR micro-tiles. Partial panels are zero-padded. */
#ifndef GEMM_MR
#error "define GEMM_MR, GEMM_NR and GEMM_NAME before including gemm_blocked.h"
#endif

#include "kernels/gemm_blocks.h"

static inline size_t gb_min(size_t a, size_t b) { return a < b ? a : b; }

#ifndef GEMM_CUSTOM_PACK
/* A[ic.., pc..] (mc x kc of op(A)) -> panels of MR rows: Ap[p * MR * kc + k * MR + i]. */
static void pack_a(bool ta, const float *A, size_t lda, size_t ic, size_t pc, size_t mc, size_t kc, float *Ap) {
    for (size_t p = 0; p < mc; p += GEMM_MR) {
        size_t mr = gb_min(GEMM_MR, mc - p);
        float *dst = Ap + p * kc;
        if (ta) {
            for (size_t k = 0; k < kc; k++) {
                const float *src = A + (pc + k) * lda + ic + p;
                size_t i = 0;
                for (; i < mr; i++) dst[k * GEMM_MR + i] = src[i];
                for (; i < GEMM_MR; i++) dst[k * GEMM_MR + i] = 0.0f;
            }
        } else {
            for (size_t i = 0; i < mr; i++) {
                const float *src = A + (ic + p + i) * lda + pc;
                for (size_t k = 0; k < kc; k++) dst[k * GEMM_MR + i] = src[k];
            }
            for (size_t i = mr; i < GEMM_MR; i++)
                for (size_t k = 0; k < kc; k++) dst[k * GEMM_MR + i] = 0.0f;
        }
    }
}

/* B[pc.., jc..] (kc x nc of op(B)) -> panels of NR columns: Bp[q * NR * kc + k * NR + j]. */
static void pack_b(bool tb, const float *B, size_t ldb, size_t pc, size_t jc, size_t kc, size_t nc, float *Bp) {
    for (size_t q = 0; q < nc; q += GEMM_NR) {
        size_t nr = gb_min(GEMM_NR, nc - q);
        float *dst = Bp + q * kc;
        if (!tb) {
            for (size_t k = 0; k < kc; k++) {
                const float *src = B + (pc + k) * ldb + jc + q;
                size_t j = 0;
                for (; j < nr; j++) dst[k * GEMM_NR + j] = src[j];
                for (; j < GEMM_NR; j++) dst[k * GEMM_NR + j] = 0.0f;
            }
        } else {
            for (size_t j = 0; j < nr; j++) {
                const float *src = B + (jc + q + j) * ldb + pc;
                for (size_t k = 0; k < kc; k++) dst[k * GEMM_NR + j] = src[k];
            }
            for (size_t j = nr; j < GEMM_NR; j++)
                for (size_t k = 0; k < kc; k++) dst[k * GEMM_NR + j] = 0.0f;
        }
    }
}

#endif

void GEMM_NAME(bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda, const float *B,
               size_t ldb, float beta, float *C, size_t ldc, float *work) {
    if (M == 0 || N == 0) return;
    if (K == 0 || alpha == 0.0f) {
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    float *Ap = work, *Bp = work + GM_GEMM_MC * GM_GEMM_KC;
    for (size_t jc = 0; jc < N; jc += GM_GEMM_NC) {
        size_t nc = gb_min(GM_GEMM_NC, N - jc);
        for (size_t pc = 0; pc < K; pc += GM_GEMM_KC) {
            size_t kc = gb_min(GM_GEMM_KC, K - pc);
            float b = pc == 0 ? beta : 1.0f;
            pack_b(tb, B, ldb, pc, jc, kc, nc, Bp);
            for (size_t ic = 0; ic < M; ic += GM_GEMM_MC) {
                size_t mc = gb_min(GM_GEMM_MC, M - ic);
                pack_a(ta, A, lda, ic, pc, mc, kc, Ap);
                for (size_t jr = 0; jr < nc; jr += GEMM_NR)
                    for (size_t ir = 0; ir < mc; ir += GEMM_MR)
                        ukernel(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc, alpha, b,
                                (int)gb_min(GEMM_MR, mc - ir), (int)gb_min(GEMM_NR, nc - jr));
            }
        }
    }
}
