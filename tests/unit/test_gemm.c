#define _POSIX_C_SOURCE 200809L
/* Every SIMD GEMM this CPU runs against the scalar reference (double accumulation) on random data:
 * all four transpose combinations, shapes that leave partial micro-tiles and cross the KC / MC / NC
 * blocks, leading dimensions with padding, alpha/beta (beta 0 must ignore NaN in C), and no writes
 * outside C. Tolerance: 1e-5 of sum |a_ik b_kj| per element. Also the threaded entry point. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "test_util.h"

static uint64_t rs = 0x243f6a8885a308d3ull;
static float rnd(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((rs >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static float *fill(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = rnd();
    return p;
}

static double abs_dot(bool ta, bool tb, const float *A, size_t lda, const float *B, size_t ldb, size_t i, size_t j,
                      size_t K) {
    double s = 0;
    for (size_t k = 0; k < K; k++)
        s += fabs((double)(ta ? A[k * lda + i] : A[i * lda + k]) * (double)(tb ? B[j * ldb + k] : B[k * ldb + j]));
    return s;
}

static int run_case(gm_sgemm_fn fn, const char *isa, gm_gemm_ctx *ctx, bool ta, bool tb, size_t M, size_t N, size_t K,
                    float alpha, float beta) {
    size_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
    size_t arows = ta ? K : M, brows = tb ? N : K;
    float *A = fill(arows * lda), *B = fill(brows * ldb), *C0 = fill((M + 2) * ldc);
    float *C1 = malloc((M + 2) * ldc * sizeof *C1), *Cr = malloc((M + 2) * ldc * sizeof *Cr);
    if (beta == 0.0f)
        for (size_t i = 0; i < M; i++) C0[i * ldc] = NAN; /* must not leak into the result */
    memcpy(C1, C0, (M + 2) * ldc * sizeof *C1);
    memcpy(Cr, C0, (M + 2) * ldc * sizeof *Cr);
    float *work = NULL;
    if (posix_memalign((void **)&work, 64, gm_sgemm_work_floats() * sizeof(float))) return 1;
    gm_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, ldc, work);
    if (ctx) gm_gemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    else fn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc, work);
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < M + 2; i++)
        for (size_t j = 0; j < ldc; j++) {
            size_t o = i * ldc + j;
            if (i >= M || j >= N) { /* outside C: untouched */
                if (memcmp(&C1[o], &C0[o], sizeof(float))) bad++;
                continue;
            }
            double scale = fabs(alpha) * abs_dot(ta, tb, A, lda, B, ldb, i, j, K) + (beta != 0.0f ? fabs(beta * C0[o]) : 0.0) + 1e-30;
            double err = fabs((double)C1[o] - (double)Cr[o]) / scale;
            if (!(err <= 1e-5)) bad++;
            if (err > worst || isnan(err)) worst = isnan(err) ? INFINITY : err;
        }
    CHECK(bad == 0, "%s%s ta=%d tb=%d M=%zu N=%zu K=%zu alpha=%g beta=%g: %d bad elements, worst rel err %.3g", isa,
          ctx ? " (threaded)" : "", ta, tb, M, N, K, alpha, beta, bad, worst);
    free(A), free(B), free(C0), free(C1), free(Cr), free(work);
    return bad;
}

int main(void) {
    const char *isas[] = {"avx2", "avx512"};
    size_t shapes[][3] = {{1, 1, 1},  {5, 7, 3},    {12, 32, 16},  {13, 33, 17},  {25, 70, 300},
                          {200, 40, 260}, {64, 3100, 20}, {7, 19, 600}, {190, 50, 513}};
    float ab[][2] = {{1, 0}, {0.5f, 1}, {-2, 0.25f}};
    int ran = 0;
    for (size_t s = 0; s < sizeof isas / sizeof isas[0]; s++) {
        gm_sgemm_fn fn = gm_sgemm_lookup(isas[s]);
        if (!fn) {
            printf("%s: not supported by this CPU, skipped\n", isas[s]);
            continue;
        }
        ran++;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int t = 0; t < 4; t++)
                run_case(fn, isas[s], NULL, t & 1, t >> 1, shapes[i][0], shapes[i][1], shapes[i][2], ab[(i + t) % 3][0],
                         ab[(i + t) % 3][1]);
    }
    /* the dispatcher's choice through the threaded entry point (bands of rows and of columns) */
    gm_gemm_ctx *ctx;
    CHECK(gm_gemm_ctx_create(3, &ctx) == GM_OK, "%s", gm_last_error());
    for (int t = 0; t < 4; t++) {
        run_case(NULL, "dispatch", ctx, t & 1, t >> 1, 300, 70, 90, 1, 0);
        run_case(NULL, "dispatch", ctx, t & 1, t >> 1, 40, 500, 70, 1, 1);
    }
    gm_gemm_ctx_free(ctx);
    CHECK(gm_sgemm_lookup("nonsense") == NULL, "unknown isa");
    printf("%d SIMD implementations checked\n", ran);
    return gm_test_finish();
}
