/* Sampling cost per token: gm_sampler_next on one vocabulary of logits (a file of little-endian f32,
 * e.g. `gemma logits --dump-logits FILE "prompt"`; its last `vocab` values are used), for each method at
 * T = 0.7 and 1.0, top-k 64, top-p 0.95. Prints milliseconds per call (mean of R calls).
 *
 * usage: bench_sampler LOGITS.bin [--vocab 262144] [--reps 100] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "gemma.h"

int main(int argc, char **argv) {
    long vocab = 262144, reps = 100;
    const char *path = argc > 1 ? argv[1] : NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--vocab")) vocab = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atol(argv[i + 1]);
        else path = NULL;
    }
    if (!path || vocab < 1 || reps < 1 || argc % 2 != 0) {
        fprintf(stderr, "usage: %s LOGITS.bin [--vocab N] [--reps R]\n", argv[0]);
        return 2;
    }
    float *l = malloc((size_t)vocab * sizeof *l);
    FILE *f = fopen(path, "rb");
    if (!l || !f || fseek(f, -vocab * (long)sizeof *l, SEEK_END) != 0 || fread(l, sizeof *l, (size_t)vocab, f) != (size_t)vocab) {
        fprintf(stderr, "%s: cannot read %ld f32 logits from the end of %s\n", argv[0], vocab, path);
        return 1;
    }
    fclose(f);
    static const char *names[] = {"greedy", "random", "top-k 64", "top-p 0.95"};
    static const float temps[] = {0.7f, 1.0f};
    printf("%-12s %8s %12s\n", "method", "T", "ms per call");
    for (int ti = 0; ti < 2; ti++)
        for (int m = 0; m < 4; m++) {
            gm_sampler_config c = gm_sampler_config_default();
            c.method = (gm_sample_method)m, c.temperature = temps[ti], c.top_k = 64, c.top_p = 0.95f, c.seed = 1;
            gm_sampler *s = NULL;
            if (gm_sampler_create(&c, NULL, 0, &s) != GM_OK) {
                fprintf(stderr, "%s: %s\n", argv[0], gm_last_error());
                return 1;
            }
            int32_t id;
            double t0 = gm_now_seconds();
            for (long r = 0; r < reps; r++)
                if (gm_sampler_next(s, l, (size_t)vocab, &id) != GM_OK) {
                    fprintf(stderr, "%s: %s\n", argv[0], gm_last_error());
                    return 1;
                }
            printf("%-12s %8.1f %12.3f\n", names[m], (double)temps[ti], (gm_now_seconds() - t0) / (double)reps * 1e3);
            gm_sampler_free(s);
        }
    free(l);
    return 0;
}
