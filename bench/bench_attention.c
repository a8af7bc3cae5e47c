/* Attention alone: one token's query heads against a KV cache of N positions, as decode runs it (Gemma 3:
 * 4 query heads share a 256-wide kv head), with 64 MiB read between calls so that, as in the model, where
 * a token's weights stream through the caches between layers, the keys and values come from memory
 * (--warm: without, the compute-bound speed). Prints the KV bytes read per second of attention.
 * --tokens B: B consecutive tokens' heads in one call (a prefill's rows, heads x B <= GM_ATTN_ROWS_MAX),
 * against B calls of one token each; prints the time per token of both. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/huge_pages.h"
#include "kernels/ops.h"

int main(int argc, char **argv) {
    int N = 512, L = 4, heads = 4, reps = 10, warm = 0, tokens = 1;
    size_t H = 256;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--warm")) warm = 1, i--;
        else if (i + 1 == argc) N = 0; /* an option without its value: the usage below */
        else if (!strcmp(argv[i], "--positions")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) L = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads")) heads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) tokens = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--positions N] [--layers L] [--reps R] [--heads 1-4] [--tokens B] [--warm]\n",
                    argv[0]);
            return 2;
        }
    }
    if (N < 1 || L < 1 || reps < 1 || heads < 1 || heads > 4 || tokens < 1 || heads * tokens > GM_ATTN_ROWS_MAX ||
        tokens > N) {
        fprintf(stderr,
                "usage: %s [--positions N] [--layers L] [--reps R] [--heads 1-4] [--tokens B, heads x B <= %d, B <= N] "
                "[--warm] (positive numbers)\n",
                argv[0], GM_ATTN_ROWS_MAX);
        return 2;
    }
    size_t kv = (size_t)N * H;
    /* in huge pages, as the model's cache (gm_kv_cache_init) */
    float *K = gm_alloc_huge((size_t)L * kv * sizeof(float)), *V = gm_alloc_huge((size_t)L * kv * sizeof(float));
    const int R = heads * tokens; /* rows: token b's heads are rows b * heads .. */
    float *q = malloc((size_t)R * H * sizeof(float)), *out = malloc((size_t)R * H * sizeof(float));
    float *scores = malloc((size_t)R * (size_t)N * sizeof(float));
    if (!K || !V || !q || !out || !scores) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    srand(1);
    for (size_t i = 0; i < (size_t)L * kv; i++) {
        K[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        V[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    for (size_t i = 0; i < (size_t)R * H; i++) q[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    /* all rows in one call, and each token's heads in a call of its own; token b sees positions
     * [0, N - tokens + b] (the last token all N) */
    gm_attn_rows all = {.n = R}, one[GM_ATTN_ROWS_MAX];
    for (int b = 0; b < tokens; b++) {
        one[b] = (gm_attn_rows){.n = heads};
        for (int h = 0; h < heads; h++) {
            int r = b * heads + h;
            all.q[r] = one[b].q[h] = q + (size_t)r * H;
            all.out[r] = one[b].out[h] = out + (size_t)r * H;
            all.first[r] = one[b].first[h] = 0;
            all.last[r] = one[b].last[h] = N - tokens + b;
        }
    }
    enum { FLUSH = 64 << 20 };
    volatile unsigned char *flush = malloc(FLUSH);
    if (!flush) return 1;
    memset((void *)flush, 1, FLUSH);
    unsigned sink = 0;
    double best[2] = {1e30, 1e30}; /* [0]: one call per token, [1]: one call for all */
    for (int r = 0; r < reps; r++)
        for (int mode = 0; mode < (tokens > 1 ? 2 : 1); mode++) {
            double t = 0;
            for (int l = 0; l < L; l++) {
                if (!warm)
                    for (size_t i = 0; i < FLUSH; i += 64) sink += flush[i];
                const float *Kl = K + (size_t)l * kv, *Vl = V + (size_t)l * kv;
                double t0 = gm_now_seconds();
                if (mode) gm_attention_rows(&all, Kl, Vl, H, N, H, 0.0f, scores);
                else
                    for (int b = 0; b < tokens; b++) gm_attention_rows(&one[b], Kl, Vl, H, N, H, 0.0f, scores);
                t += gm_now_seconds() - t0;
            }
            if (t < best[mode]) best[mode] = t;
        }
    if (sink == 1) puts("");
    double bytes = 2.0 * (double)L * (double)kv * sizeof(float);
    printf("attention, %d query heads on one kv head of %zu, %d positions, %d layers, %s cache: %.1f us per layer, "
           "%.2f GB/s of KV (best of %d)\n",
           heads, H, N, L, warm ? "warm" : "cold", best[0] / L / tokens * 1e6, bytes * tokens / best[0] / 1e9, reps);
    if (tokens > 1)
        printf("%d tokens' heads in one call (%d rows): %.1f us per layer and token, against %.1f in one call per "
               "token (%.2fx)\n",
               tokens, R, best[1] / L / tokens * 1e6, best[0] / L / tokens * 1e6, best[0] / best[1]);
    free((void *)flush), free(K), free(V), free(q), free(out), free(scores);
    return 0;
}
