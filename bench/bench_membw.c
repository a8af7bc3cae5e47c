/* Read-bandwidth ceiling of this machine: T threads stream disjoint parts of one buffer held the
 * way the engine holds weights (anonymous memory, 2 MiB aligned, MADV_HUGEPAGE, touched first),
 * summing it with 512-bit (or 256-bit) loads, alternately with and without software prefetch 4 KiB
 * ahead (whichever is faster on this machine counts). Best and median of several passes, per thread
 * count. This is the denominator of "decode bandwidth efficiency" in docs/BENCHMARKS.md.
 * --matvec: each pass also runs the engine's packed BF16 matvec (the decode kernel) over the same
 * buffer as a 1152-column matrix, rows split over the threads, and prints both speeds per pass, to tell
 * a slow kernel from a slow moment of the machine.
 *
 * usage: bench_membw [--mib N (default 1024)] [--threads 1,2] [--passes P (default 7)] [--json] [--matvec] */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/clock.h"
#include "base/threads.h"
#include "kernels/packed.h"

static int g_prefetch = 1; /* software prefetch 4 KiB ahead (set once in main) */

__attribute__((target("avx512f"))) static double sum_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        if (g_prefetch) {
            _mm_prefetch((const char *)p + i + 4096, _MM_HINT_T0);
            _mm_prefetch((const char *)p + i + 4096 + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)p + i + 4096 + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)p + i + 4096 + 192, _MM_HINT_T0);
        }
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    return (double)_mm512_reduce_add_epi64(a0);
}

__attribute__((target("avx2"))) static double sum_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        if (g_prefetch) {
            _mm_prefetch((const char *)p + i + 4096, _MM_HINT_T0);
            _mm_prefetch((const char *)p + i + 4096 + 64, _MM_HINT_T0);
        }
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const void *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const void *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const void *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const void *)(p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    int64_t s[4];
    _mm256_storeu_si256((__m256i *)s, a0);
    return (double)(s[0] + s[1] + s[2] + s[3]);
}

typedef struct job {
    const uint8_t *buf;
    size_t bytes;
    int use512;
    volatile double sink;
} job;

static void worker(void *ctx, int i, int n) {
    job *j = ctx;
    size_t lo, hi;
    gm_split_range(j->bytes, n, i, 4096, &lo, &hi);
    double s = j->use512 ? sum_avx512(j->buf + lo, hi - lo) : sum_avx2(j->buf + lo, hi - lo);
    if (i == 0) j->sink = s;
}

/* the decode kernel over the buffer as a BF16 matrix, each participant its share of the panels */
typedef struct mv_job {
    gm_packed P;
    gm_xq xq;
    float *y;
} mv_job;

static void mv_worker(void *ctx, int i, int n) {
    mv_job *m = ctx;
    size_t lo, hi;
    gm_split_range(m->P.rows / GM_PANEL_ROWS, n, i, 1, &lo, &hi);
    gm_packed_matvec(&m->P, lo * GM_PANEL_ROWS, hi * GM_PANEL_ROWS, &m->xq, m->y + lo * GM_PANEL_ROWS);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    size_t mib = 1024;
    int passes = 7, json = 0, matvec = 0;
    const char *threads = "1,2";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = argv[++i];
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--matvec")) matvec = 1;
        else {
            fprintf(stderr, "usage: %s [--mib N] [--threads 1,2] [--passes P] [--json] [--matvec]\n", argv[0]);
            return 2;
        }
    }
    if (passes < 1 || passes > 1000 || mib < 1) return 2;
    size_t bytes = mib << 20;
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 2u << 20, bytes) != 0) {
        fprintf(stderr, "cannot allocate %zu MiB\n", mib);
        return 1;
    }
    madvise(buf, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    mv_job mv = {0};
    if (matvec) { /* bf16 values in [2^-7, 2^-6): no NaN or denormal in the products */
        for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)buf)[i] = (uint16_t)(0x3c00 | (i * 2654435761u >> 20 & 0x7f));
        enum { C = 1152 };
        gm_pack_describe(GM_BF16, bytes / (2 * C) / GM_PANEL_ROWS * GM_PANEL_ROWS, C, &mv.P);
        mv.P.data = buf; /* the packed layout of any bf16 values: its bytes are all the bench needs */
        static float x[C];
        for (int c = 0; c < C; c++) x[c] = (float)(c % 13) * 0.01f;
        mv.xq.s = malloc(C / 32 * sizeof(float));
        mv.y = malloc(mv.P.rows * sizeof(float));
        if (!mv.xq.s || !mv.y) return 1;
        gm_prepare_x_bf16(x, C, 1, C, false, &mv.xq);
    }
    __builtin_cpu_init();
    int use512 = __builtin_cpu_supports("avx512f");
    if (json) printf("[");
    int first = 1;
    for (const char *p = threads; *p;) {
        int t = atoi(p);
        if (t < 1 || t > 256) return 2;
        gm_pool *pool;
        if (gm_pool_create(t, &pool) != GM_OK) return 1;
        job j = {buf, bytes, use512, 0};
        gm_pool_run(pool, worker, &j); /* warm-up */
        double *gbs = malloc((size_t)passes * sizeof *gbs), *mvs = malloc((size_t)passes * sizeof *mvs);
        if (!gbs || !mvs) return 1;
        for (int k = 0; k < passes; k++) {
            double best_k = 0;
            for (int pf = 0; pf < 2; pf++) {
                g_prefetch = pf;
                double t0 = gm_now_seconds();
                gm_pool_run(pool, worker, &j);
                double v = (double)bytes / (gm_now_seconds() - t0) / 1e9;
                if (v > best_k) best_k = v;
            }
            gbs[k] = best_k;
            if (matvec) {
                double t0 = gm_now_seconds();
                gm_pool_run(pool, mv_worker, &mv);
                double v = (double)(mv.P.rows / GM_PANEL_ROWS * mv.P.panel_bytes) / (gm_now_seconds() - t0) / 1e9;
                mvs[k] = v;
                if (!json) printf("  %d thread%s pass %d: loads %.2f GB/s, BF16 matvec %.2f GB/s\n", t, t > 1 ? "s" : "", k, best_k, v);
            }
        }
        qsort(gbs, (size_t)passes, sizeof *gbs, cmp_double);
        double best = gbs[passes - 1], med = gbs[passes / 2];
        if (matvec) qsort(mvs, (size_t)passes, sizeof *mvs, cmp_double);
        if (json) {
            printf("%s{\"threads\":%d,\"mib\":%zu,\"best_gb_s\":%.2f,\"median_gb_s\":%.2f,\"isa\":\"%s\"", first ? "" : ",",
                   t, mib, best, med, use512 ? "avx512" : "avx2");
            if (matvec) printf(",\"bf16_matvec_median_gb_s\":%.2f", mvs[passes / 2]);
            printf("}");
        } else
            printf("read bandwidth, %d thread%s, %zu MiB, %s loads: best %.2f GB/s, median %.2f GB/s (%d passes)\n", t,
                   t > 1 ? "s" : "", mib, use512 ? "512-bit" : "256-bit", best, med, passes);
        first = 0;
        free(gbs);
        free(mvs);
        gm_pool_free(pool);
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    if (json) printf("]\n");
    free(mv.xq.s);
    free(mv.y);
    free(buf);
    return 0;
}
