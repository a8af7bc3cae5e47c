#define _POSIX_C_SOURCE 200809L
/* GEMM dispatch (the instruction set the matvec dispatcher chose) and the threaded entry point. */
#include "kernels/gemm.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_blocks.h"
#include "kernels/kernels_internal.h"

size_t gm_sgemm_work_floats(void) { return (size_t)GM_GEMM_MC * GM_GEMM_KC + (size_t)GM_GEMM_KC * GM_GEMM_NC; }

gm_sgemm_fn gm_sgemm_lookup(const char *isa) {
    if (!isa) isa = gm_kernels_isa();
    if (!strcmp(isa, "scalar")) return gm_sgemm_ref;
    if (!gm_kernels_lookup(isa)) return NULL;
    if (!strcmp(isa, "avx2")) return gm_sgemm_avx2;
    if (!strcmp(isa, "avx512")) return gm_sgemm_avx512;
    return NULL;
}

struct gm_gemm_ctx {
    gm_pool *pool;
    int threads;
    gm_sgemm_fn fn;
    float **work; /* [threads] */
};

gm_status gm_gemm_ctx_create(int threads, gm_gemm_ctx **out) {
    *out = NULL;
    if (threads < 1) return gm_fail(GM_ERR_ARG, "gemm: %d threads", threads);
    gm_gemm_ctx *g = calloc(1, sizeof *g);
    if (!g) return gm_fail(GM_ERR_NOMEM, "out of memory");
    g->threads = threads;
    g->fn = gm_sgemm_lookup(NULL);
    g->work = calloc((size_t)threads, sizeof *g->work);
    gm_status st = g->work ? gm_pool_create(threads, &g->pool) : gm_fail(GM_ERR_NOMEM, "out of memory");
    for (int i = 0; st == GM_OK && i < threads; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, gm_sgemm_work_floats() * sizeof(float)) != 0)
            st = gm_fail(GM_ERR_NOMEM, "gemm: cannot allocate a %zu-byte workspace", gm_sgemm_work_floats() * 4);
        g->work[i] = p;
    }
    if (st != GM_OK) {
        gm_gemm_ctx_free(g);
        return st;
    }
    *out = g;
    return GM_OK;
}

void gm_gemm_ctx_free(gm_gemm_ctx *g) {
    if (!g) return;
    for (int i = 0; g->work && i < g->threads; i++) free(g->work[i]);
    free(g->work);
    gm_pool_free(g->pool);
    free(g);
}

gm_pool *gm_gemm_ctx_pool(gm_gemm_ctx *g) { return g->pool; }
int gm_gemm_ctx_threads(const gm_gemm_ctx *g) { return g->threads; }
gm_sgemm_fn gm_gemm_ctx_fn(const gm_gemm_ctx *g) { return g->fn; }
float *gm_gemm_ctx_work(gm_gemm_ctx *g, int i) { return g->work[i]; }

typedef struct gemm_job {
    gm_gemm_ctx *g;
    bool ta, tb, split_n;
    size_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    size_t lda, ldb, ldc;
    float *C;
} gemm_job;

/* Each thread computes a band of C: columns when N >= M, else rows (aligned to the tile sizes). */
static void gemm_worker(void *ctx, int i, int n) {
    gemm_job *j = ctx;
    size_t lo, hi;
    if (j->split_n) {
        gm_split_range(j->N, n, i, 32, &lo, &hi);
        if (hi <= lo) return;
        const float *B = j->tb ? j->B + lo * j->ldb : j->B + lo;
        j->g->fn(j->ta, j->tb, j->M, hi - lo, j->K, j->alpha, j->A, j->lda, B, j->ldb, j->beta, j->C + lo, j->ldc,
                 j->g->work[i]);
    } else {
        gm_split_range(j->M, n, i, 12, &lo, &hi);
        if (hi <= lo) return;
        const float *A = j->ta ? j->A + lo : j->A + lo * j->lda;
        j->g->fn(j->ta, j->tb, hi - lo, j->N, j->K, j->alpha, A, j->lda, j->B, j->ldb, j->beta, j->C + lo * j->ldc,
                 j->ldc, j->g->work[i]);
    }
}

void gm_gemm(gm_gemm_ctx *g, bool ta, bool tb, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
             const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    if (M == 0 || N == 0) return;
    /* small products are not worth waking the pool */
    if (g->threads == 1 || (double)M * (double)N * (double)K < 64.0 * 64 * 64) {
        g->fn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, g->work[0]);
        return;
    }
    gemm_job j = {g, ta, tb, N >= M, M, N, K, alpha, beta, A, B, lda, ldb, ldc, C};
    gm_pool_run(g->pool, gemm_worker, &j);
}
