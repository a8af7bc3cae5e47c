/* Arithmetic peak of one core: 512-bit f32 FMA (vfmadd231ps: what exact BF16 products run on, f32 inputs)
 * and bf16 dot products (vdpbf16ps: what llama.cpp's and our --precision fast BF16 products run on), each
 * with 12 independent accumulators, no memory traffic. A compute-bound product cannot run faster than
 * these; docs/BENCHMARKS.md compares prefill GFLOP/s with them. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "kernels/kernels_internal.h"

enum { ACC = 12 };

__attribute__((target("avx512f,fma"))) static double fma_gflops(long n) {
    __m512 a[ACC];
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_ps(1e-3f * (float)i);
    const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-6f);
    double t0 = gm_now_seconds();
    for (long k = 0; k < n; k++)
#pragma GCC unroll 12
        for (int i = 0; i < ACC; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    double t = gm_now_seconds() - t0;
    __m512 s = a[0];
    for (int i = 1; i < ACC; i++) s = _mm512_add_ps(s, a[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)n * ACC * 16 * 2 / t / 1e9;
}

__attribute__((target("avx512f,avx512bf16"))) static double bf16_gflops(long n) {
    __m512 a[ACC];
    for (int i = 0; i < ACC; i++) a[i] = _mm512_setzero_ps();
    const __m512bh w = (__m512bh)_mm512_set1_epi16(0x3f80), x = (__m512bh)_mm512_set1_epi16(0x3c00); /* 1, 2^-7 */
    double t0 = gm_now_seconds();
    for (long k = 0; k < n; k++)
#pragma GCC unroll 12
        for (int i = 0; i < ACC; i++) a[i] = _mm512_dpbf16_ps(a[i], w, x);
    double t = gm_now_seconds() - t0;
    __m512 s = a[0];
    for (int i = 1; i < ACC; i++) s = _mm512_add_ps(s, a[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)n * ACC * 32 * 2 / t / 1e9;
}

int main(int argc, char **argv) {
    long n = 20000000;
    if (argc > 1) {
        n = atol(argv[1]);
        if (n < 1) {
            fprintf(stderr, "usage: %s [ITERATIONS] (default 20000000 x 12 instructions, best of 3)\n", argv[0]);
            return 2;
        }
    }
    if (!__builtin_cpu_supports("avx512f")) {
        printf("this CPU has no AVX-512: nothing to measure\n");
        return 0;
    }
    double f = 0, b = 0;
    for (int r = 0; r < 3; r++) {
        double v = fma_gflops(n);
        f = v > f ? v : f;
    }
    printf("f32 FMA (vfmadd231ps zmm):   %6.1f GFLOP/s per core\n", f);
    if (!gm_cpu_bf16()) {
        printf("bf16 dot (vdpbf16ps zmm):    this CPU has no AVX512_BF16\n");
        return 0;
    }
    for (int r = 0; r < 3; r++) {
        double v = bf16_gflops(n);
        b = v > b ? v : b;
    }
    printf("bf16 dot (vdpbf16ps zmm):    %6.1f GFLOP/s per core\n", b);
    return 0;
}
