/* gm_session_forward_top (the screened vocabulary product) against gm_session_forward on the real 270M,
 * whose vocabulary matrix is Q8_0, and on the tiny BF16 fixture (hf_tiny, 512 rows), whose matrix the
 * screen reads through its int8 screening copy: at the prompt's last position and at every one of 16 greedy steps,
 * for top 1, 3 and 64, on 1 device (1 and 2 threads), 2 and 3 fsdp devices, 2 tp and 3 replicated (rows cut
 * inside panels), and the BF16 fixture with --precision fast as well (its screen against its own fast forward):
 *  - every logit at or above the top-th largest exact one is bit for bit the exact one;
 *  - every other value is below it (4 steps and 3 of the meshes under the sanitizers);
 * so greedy and top-k sampling read exactly what the whole product gives. Where the chosen kernels
 * screen (AVX2, AVX-512 VNNI, AMX), the screen must have run at every step, and (the 270M) recomputed exactly
 * fewer than 1 % of the rows per step for top 1 and 10 % for the others (else it would cost more than it
 * saves). */
#define _GNU_SOURCE /* mkdtemp */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"
#include "kernels/packed.h"
#include "test_util.h"

static int n_steps = 16; /* 4 under the sanitizers (GM_SANITIZED), where decode is ~5x slower */

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* the promise of gm_session_forward_top for `top` (kth: the top-th largest exact logit); returns the number
 * of rows that break it */
static int check_top(const float *exact, const float *got, int V, int top, float kth, const char *what, int step) {
    int bad = 0;
    for (int i = 0; i < V; i++) {
        bool ok = exact[i] >= kth ? memcmp(&exact[i], &got[i], sizeof(float)) == 0 : got[i] < kth;
        if (!ok && bad++ < 3)
            fprintf(stderr, "  %s top %d step %d: row %d exact %.9g got %.9g (top-th largest %.9g)\n", what, top, step, i,
                    exact[i], got[i], kth);
    }
    return bad;
}

/* "The history of the Roman Empire is" with BOS, from HF tokenizers; for the 512-row fixture ids below 512 */
static const int32_t prompt_270m[] = {2, 818, 4083, 529, 506, 10995, 23436, 563}, prompt_tiny[] = {2, 81, 408, 52, 7};

/* with `cache`: loaded through that weight cache directory, which must already hold this load (mapped) */
static void run_loaded(const char *path, int devices, gm_sharding rule, int threads, const char *cache,
                       gm_precision precision, const char *what) {
    gm_load_options o;
    gm_load_options_default(&o);
    o.devices = devices, o.sharding = rule, o.threads_per_device = threads, o.cache_length = 128;
    o.use_mpi = false, o.weight_cache = cache, o.precision = precision;
    gm_model *m = NULL;
    if (gm_model_load(path, &o, &m) != GM_OK) fprintf(stderr, "load %s: %s\n", path, gm_last_error());
    if (m && cache)
        CHECK(strcmp(gm_model_weight_cache(m), "mapped") == 0, "%s: weight cache %s", what, gm_model_weight_cache(m));
    if (!m) {
        CHECK(0, "%s: the model did not load", what);
        return;
    }
    const int V = gm_model_config(m)->vocab_size;
    const bool tiny = V < 1000;
    const int32_t *prompt = tiny ? prompt_tiny : prompt_270m;
    size_t n_prompt = tiny ? sizeof prompt_tiny / sizeof *prompt_tiny : sizeof prompt_270m / sizeof *prompt_270m;
    const int tops[] = {1, 3, 64};
    float *exact = malloc((size_t)V * sizeof *exact), *got = malloc((size_t)V * sizeof *got);
    float *sorted = malloc((size_t)V * sizeof *sorted);
    gm_session *full = NULL, *screened[3] = {NULL, NULL, NULL};
    gm_status st = gm_session_new(m, &full);
    for (int k = 0; k < 3 && st == GM_OK; k++) st = gm_session_new(m, &screened[k]);
    int bad = 0;
    uint64_t steps[3] = {0, 0, 0}, rows[3] = {0, 0, 0};
    int32_t tok = -1;
    for (int step = 0; step <= n_steps && st == GM_OK; step++) {
        const int32_t *in = step ? &tok : prompt;
        size_t n = step ? 1 : n_prompt;
        st = gm_session_forward(full, in, n, exact, NULL);
        memcpy(sorted, exact, (size_t)V * sizeof *sorted);
        qsort(sorted, (size_t)V, sizeof *sorted, cmp_desc);
        for (int k = 0; k < 3 && st == GM_OK; k++) {
            gm_screen_counters before = gm_model_screen_counters(m);
            st = gm_session_forward_top(screened[k], in, n, tops[k], got);
            gm_screen_counters after = gm_model_screen_counters(m);
            steps[k] += after.steps - before.steps, rows[k] += after.exact_rows - before.exact_rows;
            if (st == GM_OK) bad += check_top(exact, got, V, tops[k], sorted[tops[k] - 1], what, step);
        }
        tok = 0;
        for (int i = 1; i < V; i++) tok = exact[i] > exact[tok] ? i : tok;
    }
    CHECK(st == GM_OK, "%s: %s", what, gm_last_error());
    CHECK(bad == 0, "%s: %d screened logits break the promise", what, bad);
    /* tp splits the vocabulary matrix by columns: no screen there, every logit exact */
    for (int k = 0; k < 3 && gm_packed_can_screen(GM_PK_D16) && rule != GM_SHARDING_TP; k++) {
        double per = steps[k] ? (double)rows[k] / (double)steps[k] : 0;
        CHECK(steps[k] == (uint64_t)n_steps + 1, "%s top %d: %llu screened products, expected %d", what, tops[k],
              (unsigned long long)steps[k], n_steps + 1);
        CHECK(tiny || per < V / (tops[k] == 1 ? 100 : 10), "%s top %d: %.0f rows recomputed exactly per step", what,
              tops[k], per);
        printf("%s, top %d: %.0f of %d rows recomputed exactly per step\n", what, tops[k], per, V);
    }
    gm_session_free(full);
    for (int k = 0; k < 3; k++) gm_session_free(screened[k]);
    gm_model_free(m);
    free(exact), free(got), free(sorted);
}

static void run(const char *path, int devices, gm_sharding rule, int threads, const char *what) {
    run_loaded(path, devices, rule, threads, NULL, GM_PRECISION_EXACT, what);
}

int main(void) {
    bool sanitized = getenv("GM_SANITIZED") != NULL;
    if (sanitized) n_steps = 4;
    /* BF16: the screen reads the int8 copy, the exact pass the BF16 panels */
    char tiny[1024];
    gm_test_fixture("hf_tiny", tiny, sizeof tiny);
    run(tiny, 1, GM_SHARDING_REPLICATED, 1, "BF16 fixture, 1 device");
    run(tiny, 2, GM_SHARDING_FSDP, 2, "BF16 fixture, 2 devices fsdp, 2 threads");
    /* --precision fast: a BF16 vocabulary matrix screens there too (one token's fast BF16 product is exact) */
    run_loaded(tiny, 1, GM_SHARDING_REPLICATED, 1, NULL, GM_PRECISION_FAST, "BF16 fixture, 1 device, fast");
    run_loaded(tiny, 2, GM_SHARDING_FSDP, 2, NULL, GM_PRECISION_FAST, "BF16 fixture, 2 devices fsdp, fast");
    /* the copy from the weight cache: written by a first load, mapped by the next */
    char dir[] = "/tmp/gm_screen_copy_XXXXXX";
    if (mkdtemp(dir)) {
        gm_load_options o;
        gm_load_options_default(&o);
        o.use_mpi = false, o.weight_cache = dir, o.cache_length = 128;
        gm_model *first = NULL;
        CHECK(gm_model_load(tiny, &o, &first) == GM_OK && strcmp(gm_model_weight_cache(first), "written") == 0,
              "BF16 fixture: the weight cache was not written (%s)", first ? gm_model_weight_cache(first) : "no model");
        gm_model_free(first);
        run_loaded(tiny, 1, GM_SHARDING_REPLICATED, 1, dir, GM_PRECISION_EXACT,
                   "BF16 fixture, 1 device, from the weight cache");
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "cannot remove %s", dir);
    } else {
        CHECK(0, "mkdtemp failed");
    }
    const char *path = gm_test_model_path();
    if (!path) return gm_test_finish();
    run(path, 1, GM_SHARDING_REPLICATED, 1, "1 device");
    run(path, 3, GM_SHARDING_FSDP, 2, "3 devices fsdp, 2 threads");
    run(path, 2, GM_SHARDING_TP, 1, "2 devices tp");
    if (!sanitized) {
        run(path, 1, GM_SHARDING_REPLICATED, 2, "1 device, 2 threads");
        run(path, 2, GM_SHARDING_FSDP, 1, "2 devices fsdp");
        run(path, 3, GM_SHARDING_REPLICATED, 1, "3 devices replicated (rows cut inside panels)");
    }
    /* bad arguments */
    CHECK(gm_session_forward_top(NULL, NULL, 1, 1, NULL) == GM_ERR_ARG, "NULL session");
    return gm_test_finish();
}
