/* random_shapes_check MODEL.gguf SHAPE DEVICES RULE: runs the three reference sequences of
 * tests/fixtures/gemma3_random/random.json for SHAPE (1b, 4b, 27b) on DEVICES in-process devices with
 * sharding RULE (fsdp, tp, replicated) and compares the logits at every position with transformers':
 * max |diff| / max |logit| <= 1e-3 (the fixture's sensitivity table shows every structural mistake
 * moves some logit by >= 0.1). Under mpirun, ranks other than 0 follow. Prints "N passed, N failed". */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"
#include "gmrf.h"
#include "json_fixture.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL SHAPE DEVICES fsdp|tp|replicated\n", argv[0]);
        return 2;
    }
    gm_load_options o;
    gm_load_options_default(&o);
    o.devices = atoi(argv[3]);
    o.sharding = !strcmp(argv[4], "tp") ? GM_SHARDING_TP : !strcmp(argv[4], "replicated") ? GM_SHARDING_REPLICATED
                                                                                          : GM_SHARDING_FSDP;
    o.cache_length = 64;
    gm_model *m;
    if (gm_model_load(argv[1], &o, &m) != GM_OK) {
        fprintf(stderr, "load: %s\n", gm_last_error());
        return 1;
    }
    if (gm_model_rank(m) != 0) {
        gm_status st = gm_model_serve(m);
        gm_model_free(m);
        gm_shutdown();
        return st == GM_OK ? 0 : 1;
    }
    cJSON *fx = gm_test_load_json("gemma3_random/random.json");
    const cJSON *shape = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, "shapes"), argv[2]);
    CHECK(shape != NULL, "shape %s in random.json", argv[2]);
    int V = gm_model_config(m)->vocab_size;
    const cJSON *seq, *seqs = shape ? cJSON_GetObjectItem(shape, "sequences") : NULL;
    cJSON_ArrayForEach(seq, seqs) {
        const cJSON *ids_j = cJSON_GetObjectItem(seq, "ids");
        int n = cJSON_GetArraySize(ids_j);
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        for (int i = 0; i < n; i++) ids[i] = (int32_t)cJSON_GetArrayItem(ids_j, i)->valuedouble;
        char file[256];
        snprintf(file, sizeof file, "gemma3_random/%s", cJSON_GetObjectItem(seq, "logits_file")->valuestring);
        gmrf ref = gmrf_load(file);
        float *all = malloc((size_t)n * (size_t)V * sizeof *all);
        gm_session *s = NULL;
        bool ok = gm_session_new(m, &s) == GM_OK && gm_session_forward(s, ids, (size_t)n, NULL, all) == GM_OK;
        CHECK(ok, "%s seq %d: %s", argv[2], n, gm_last_error());
        float mx = 0, worst = 0;
        for (size_t k = 0; ok && k < (size_t)n * (size_t)V; k++) {
            mx = fmaxf(mx, fabsf(ref.f[k]));
            worst = fmaxf(worst, fabsf(all[k] - ref.f[k]));
        }
        CHECK(ok && ref.count == (uint64_t)n * (uint64_t)V && worst / mx <= 1e-3f, "%s seq %d on %s devices (%s): %g of %g",
              argv[2], n, argv[3], argv[4], worst, mx);
        printf("%s %2d tokens, %s devices %s: max |diff| / max |logit| = %.2e\n", argv[2], n, argv[3], argv[4], worst / mx);
        gm_session_free(s);
        free(all);
        free(ids);
        gmrf_free(&ref);
    }
    cJSON_Delete(fx);
    gm_model_free(m);
    gm_shutdown();
    return gm_test_finish();
}
