/* GFLOP/s of the training GEMM on the shapes one Gemma 3 270M training step uses (T = 256 tokens).
 * usage: bench_gemm [threads] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "kernels/gemm.h"
#include "kernels/matvec.h"
#define gm_sgemm_isa_name gm_kernels_isa

/* CPU time of the whole process (all threads): on a shared machine, wall time also counts the time
 * other processes held the cores */
static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    gm_gemm_ctx *g;
    if (gm_gemm_ctx_create(threads, &g) != GM_OK) return 1;
    struct { const char *what; int ta, tb; size_t M, N, K; } cases[] = {
        {"fwd  X.W^T  gate", 0, 1, 256, 2048, 640},
        {"bwd  dY.W   gate", 0, 0, 256, 640, 2048},
        {"bwd  dY^T.X gate", 1, 0, 2048, 640, 256},
        {"fwd  X.W^T  q", 0, 1, 256, 1024, 640},
        {"head X.E^T (64 rows, 32k vocab)", 0, 1, 64, 32768, 640},
        {"head dL.E  (64 rows, 32k vocab)", 0, 0, 64, 640, 32768},
        {"head X.E^T (252 rows, 262k vocab)", 0, 1, 252, 262144, 640},
        {"head dL.E  (252 rows, 262k vocab)", 0, 0, 252, 640, 262144},
        {"fwd  X.W^T  gate (252)", 0, 1, 252, 2048, 640},
        {"bwd  dY.W   gate (252)", 0, 0, 252, 640, 2048},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t M = cases[c].M, N = cases[c].N, K = cases[c].K;
        float *A = malloc(M * K * 4), *B = malloc(K * N * 4), *C = malloc(M * N * 4);
        for (size_t i = 0; i < M * K; i++) A[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < K * N; i++) B[i] = (float)(i % 5) * 0.1f;
        size_t lda = cases[c].ta ? M : K, ldb = cases[c].tb ? K : N;
        gm_gemm(g, cases[c].ta, cases[c].tb, M, N, K, 1, A, lda, B, ldb, 0, C, N);
        int reps = 0;
        double t0 = gm_now_seconds(), c0 = cpu(), t;
        do {
            gm_gemm(g, cases[c].ta, cases[c].tb, M, N, K, 1, A, lda, B, ldb, 0, C, N);
            reps++;
        } while ((t = gm_now_seconds() - t0) < 0.5 || reps < 2);
        double ct = cpu() - c0;
        printf("%-34s %5zu x %5zu x %5zu: %7.1f GFLOP/s wall, %7.1f per CPU-second (%s, %d threads)\n", cases[c].what,
               M, N, K, 2.0 * M * N * K * reps / t * 1e-9, 2.0 * M * N * K * reps / ct * 1e-9, gm_sgemm_isa_name(),
               threads);
        free(A), free(B), free(C);
    }
    gm_gemm_ctx_free(g);
    return 0;
}
