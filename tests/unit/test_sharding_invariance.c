/* Same prompt, same logits (within 1e-4 of the largest logit) and the same greedy tokens on 1, 2, 3,
 * 4 and 8 in-process devices, under the fsdp, tp and replicated plans, on the real 270M. */
#include <math.h>
#include <stdlib.h>

#include "gemma.h"
#include "test_util.h"

#define GEN 12

static int run(const char *path, int devices, gm_sharding rule, int threads, const int32_t *prompt, size_t n, float *logits,
               int32_t *gen) {
    gm_model *m = gm_test_load_mesh(path, devices, rule, threads, 256);
    if (!m) return -1;
    gm_session *s;
    int V = gm_model_config(m)->vocab_size;
    float *tmp = malloc((size_t)V * sizeof *tmp);
    int rc = gm_session_new(m, &s) == GM_OK && gm_session_forward(s, prompt, n, logits, NULL) == GM_OK ? 0 : -1;
    int32_t tok = 0;
    for (int i = 0; i < V; i++) if (logits[i] > logits[tok]) tok = i;
    for (int g = 0; rc == 0 && g < GEN; g++) {
        gen[g] = tok;
        if (gm_session_forward(s, &tok, 1, tmp, NULL) != GM_OK) rc = -1;
        tok = 0;
        for (int i = 0; i < V; i++) if (tmp[i] > tmp[tok]) tok = i;
    }
    if (rc) fprintf(stderr, "forward: %s\n", gm_last_error());
    free(tmp);
    gm_session_free(s);
    gm_model_free(m);
    return rc;
}

int main(void) {
    const char *path = gm_test_model_path();
    if (!path) return 77;
    /* "The history of the Roman Empire is" with BOS, from HF tokenizers */
    const int32_t prompt[] = {2, 818, 4083, 529, 506, 10995, 23436, 563};
    size_t n = sizeof prompt / sizeof prompt[0];
    const int V = 262144;
    float *ref = malloc(V * sizeof *ref), *got = malloc(V * sizeof *got);
    int32_t ref_gen[GEN], got_gen[GEN];
    CHECK(run(path, 1, GM_SHARDING_REPLICATED, 1, prompt, n, ref, ref_gen) == 0, "1 device");
    float maxabs = 0;
    for (int i = 0; i < V; i++) maxabs = fmaxf(maxabs, fabsf(ref[i]));
    struct { int devices; gm_sharding rule; int threads; } cases[] = {
        {2, GM_SHARDING_FSDP, 1}, {3, GM_SHARDING_FSDP, 1}, {4, GM_SHARDING_FSDP, 1}, {8, GM_SHARDING_FSDP, 1},
        {2, GM_SHARDING_TP, 1},   {4, GM_SHARDING_TP, 1},   {2, GM_SHARDING_REPLICATED, 1}, {2, GM_SHARDING_FSDP, 2},
        {1, GM_SHARDING_REPLICATED, 2}, {1, GM_SHARDING_REPLICATED, 3}, /* products in steps per thread (device.c) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (run(path, cases[c].devices, cases[c].rule, cases[c].threads, prompt, n, got, got_gen) != 0) {
            CHECK(0, "case %zu failed to run", c);
            continue;
        }
        float worst = 0;
        for (int i = 0; i < V; i++) worst = fmaxf(worst, fabsf(got[i] - ref[i]));
        CHECK(worst / maxabs <= 1e-4f, "%d devices (rule %d, %d threads): max |diff| %g vs max |logit| %g",
              cases[c].devices, (int)cases[c].rule, cases[c].threads, worst, maxabs);
        int same = 1;
        for (int g = 0; g < GEN; g++) same &= got_gen[g] == ref_gen[g];
        CHECK(same, "%d devices (rule %d): greedy tokens differ", cases[c].devices, (int)cases[c].rule);
    }
    free(ref);
    free(got);
    return gm_test_finish();
}
