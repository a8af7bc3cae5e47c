/* Decode attention alone: one token's query heads against a KV cache of N positions, as the model runs it
 * (Gemma 3: 4 query heads share a 256-wide kv head), with 64 MiB read between calls so that, as in the
 * model, where a token's weights stream through the caches between layers, the keys and values come
 * from memory (--warm: without, the compute-bound speed). Prints the KV bytes read per second of
 * attention. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/ops.h"

int main(int argc, char **argv) {
    int N = 512, L = 4, heads = 4, reps = 10, warm = 0;
    size_t H = 256;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--warm")) warm = 1, i--;
        else if (i + 1 == argc) N = 0; /* an option without its value: the usage below */
        else if (!strcmp(argv[i], "--positions")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) L = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads")) heads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--positions N] [--layers L] [--reps R] [--heads 1-4] [--warm]\n", argv[0]);
            return 2;
        }
    }
    if (N < 1 || L < 1 || reps < 1 || heads < 1 || heads > 4) {
        fprintf(stderr, "usage: %s [--positions N] [--layers L] [--reps R] [--heads 1-4] [--warm] (positive numbers)\n",
                argv[0]);
        return 2;
    }
    size_t kv = (size_t)N * H;
    float *K = malloc((size_t)L * kv * sizeof(float)), *V = malloc((size_t)L * kv * sizeof(float)); /* as the model */
    float *q = malloc((size_t)heads * H * sizeof(float)), *out = malloc((size_t)heads * H * sizeof(float));
    float *scores = malloc((size_t)heads * (size_t)N * sizeof(float));
    if (!K || !V || !q || !out || !scores) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    srand(1);
    for (size_t i = 0; i < (size_t)L * kv; i++) {
        K[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        V[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    for (size_t i = 0; i < (size_t)heads * H; i++) q[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    gm_attn_rows a = {.n = heads};
    for (int h = 0; h < heads; h++) {
        a.q[h] = q + (size_t)h * H;
        a.out[h] = out + (size_t)h * H;
        a.first[h] = 0;
        a.last[h] = N - 1;
    }
    enum { FLUSH = 64 << 20 };
    volatile unsigned char *flush = malloc(FLUSH);
    if (!flush) return 1;
    memset((void *)flush, 1, FLUSH);
    unsigned sink = 0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = 0;
        for (int l = 0; l < L; l++) {
            if (!warm)
                for (size_t i = 0; i < FLUSH; i += 64) sink += flush[i];
            double t0 = gm_now_seconds();
            gm_attention_rows(&a, K + (size_t)l * kv, V + (size_t)l * kv, H, N, H, 0.0f, scores);
            t += gm_now_seconds() - t0;
        }
        if (t < best) best = t;
    }
    if (sink == 1) puts("");
    double bytes = 2.0 * (double)L * (double)kv * sizeof(float);
    printf("attention, %d query heads on one kv head of %zu, %d positions, %d layers, %s cache: %.1f us per layer, "
           "%.2f GB/s of KV (best of %d)\n",
           heads, H, N, L, warm ? "warm" : "cold", best / L * 1e6, bytes / best / 1e9, reps);
    free((void *)flush), free(K), free(V), free(q), free(out), free(scores);
    return 0;
}
