/* Read-bandwidth ceiling of this machine: T threads stream disjoint parts of one buffer held the
 * way the engine holds weights (anonymous memory, 2 MiB aligned, MADV_HUGEPAGE, touched first),
 * summing it with 512-bit (or 256-bit) loads, alternately with and without software prefetch 4 KiB
 * ahead (whichever is faster on this machine counts). Best and median of several passes, per thread
 * count. This is the denominator of "decode bandwidth efficiency" in docs/BENCHMARKS.md.
 *
 * usage: bench_membw [--mib N (default 1024)] [--threads 1,2] [--passes P (default 7)] [--json] */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/threads.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    size_t mib = 1024;
    int passes = 7, json = 0;
    const char *threads = "1,2";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = argv[++i];
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: %s [--mib N] [--threads 1,2] [--passes P] [--json]\n", argv[0]);
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
        double *gbs = malloc((size_t)passes * sizeof *gbs);
        for (int k = 0; k < passes; k++) {
            double best_k = 0;
            for (int pf = 0; pf < 2; pf++) {
                g_prefetch = pf;
                double t0 = now();
                gm_pool_run(pool, worker, &j);
                double v = (double)bytes / (now() - t0) / 1e9;
                if (v > best_k) best_k = v;
            }
            gbs[k] = best_k;
        }
        qsort(gbs, (size_t)passes, sizeof *gbs, cmp_double);
        double best = gbs[passes - 1], med = gbs[passes / 2];
        if (json)
            printf("%s{\"threads\":%d,\"mib\":%zu,\"best_gb_s\":%.2f,\"median_gb_s\":%.2f,\"isa\":\"%s\"}", first ? "" : ",",
                   t, mib, best, med, use512 ? "avx512" : "avx2");
        else
            printf("read bandwidth, %d thread%s, %zu MiB, %s loads: best %.2f GB/s, median %.2f GB/s (%d passes)\n", t,
                   t > 1 ? "s" : "", mib, use512 ? "512-bit" : "256-bit", best, med, passes);
        first = 0;
        free(gbs);
        gm_pool_free(pool);
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    if (json) printf("]\n");
    free(buf);
    return 0;
}
