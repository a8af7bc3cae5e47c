/* The sampler against the seed library's sampling methods as run by JAX (tests/fixtures/sampler_jax.json,
 * from tests/reference/gen_sampler_fixtures.py), plus argument validation and the top-k helper. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"
#include "json_fixture.h"
#include "ref_logits.h"
#include "text/sampler.h"
#include "text/topk.h"
#include "test_util.h"

static const char *str_of(const cJSON *o, const char *k) { return cJSON_GetStringValue(cJSON_GetObjectItem(o, k)); }
static double num_of(const cJSON *o, const char *k) { return cJSON_GetObjectItem(o, k)->valuedouble; }

static gm_sample_method method_of(const char *m) {
    if (!strcmp(m, "random")) return GM_SAMPLE_RANDOM;
    if (!strcmp(m, "top_k")) return GM_SAMPLE_TOP_K;
    if (!strcmp(m, "top_p")) return GM_SAMPLE_TOP_P;
    return GM_SAMPLE_GREEDY;
}

/* Every case: 5 steps of the seed's loop over np.roll(base, 37 * step). */
static void test_jax_cases(const cJSON *root, const float *l1000, const float *big) {
    int steps = (int)num_of(root, "steps"), roll = (int)num_of(root, "roll"), n_cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        gm_sampler_config cfg = gm_sampler_config_default();
        cfg.method = method_of(str_of(c, "method"));
        cfg.temperature = (float)num_of(c, "temperature");
        if (cJSON_GetObjectItem(c, "top_k")) cfg.top_k = (int)num_of(c, "top_k");
        if (cJSON_GetObjectItem(c, "top_p")) cfg.top_p = (float)num_of(c, "top_p");
        cfg.seed = (int64_t)num_of(c, "seed");
        cfg.prng_original_layout = !cJSON_IsTrue(cJSON_GetObjectItem(c, "partitionable"));
        bool is_big = !strcmp(str_of(c, "logits"), "l262144");
        size_t V = is_big ? GM_REF_BIG_V : 1000;
        const float *base = is_big ? big : l1000;

        const cJSON *fj = cJSON_GetObjectItem(c, "forbidden");
        int32_t forbidden[8];
        size_t nf = (size_t)cJSON_GetArraySize(fj);
        for (size_t i = 0; i < nf && i < 8; i++) forbidden[i] = (int32_t)cJSON_GetArrayItem(fj, (int)i)->valuedouble;

        gm_sampler *s = NULL;
        gm_status st = gm_sampler_create(&cfg, forbidden, nf, &s);
        CHECK(st == GM_OK, "create: %s", gm_last_error());
        if (st != GM_OK) continue;
        float *x = malloc(V * sizeof *x);
        const cJSON *tokens = cJSON_GetObjectItem(c, "tokens");
        for (int step = 0; step < steps; step++) {
            size_t shift = (size_t)(roll * step) % V;
            for (size_t i = 0; i < V; i++) x[(i + shift) % V] = base[i]; /* np.roll */
            int32_t id = -1;
            st = gm_sampler_next(s, x, V, &id);
            int want = (int)cJSON_GetArrayItem(tokens, step)->valuedouble;
            CHECK(st == GM_OK && id == want, "%s %s T=%g k=%d p=%g seed=%lld %s step %d: got %d, JAX %d (%s)",
                  str_of(c, "logits"), str_of(c, "method"), (double)cfg.temperature, cfg.top_k, (double)cfg.top_p,
                  (long long)cfg.seed, cfg.prng_original_layout ? "original" : "partitionable", step, id, want,
                  st == GM_OK ? "ok" : gm_last_error());
        }
        free(x);
        gm_sampler_free(s);
        n_cases++;
    }
    CHECK(n_cases >= 100, "only %d JAX cases", n_cases);
}

/* gm_sample_categorical(seed, logits) == jax.random.categorical(jax.random.key(seed), logits). */
static void test_sample_categorical(const float *big) {
    cJSON *prng = gm_test_load_json("prng_jax.json");
    size_t n10, n1000;
    float *l10 = gm_test_json_floats(cJSON_GetObjectItem(prng, "logits10_bits"), &n10);
    float *l1000 = gm_test_json_floats(cJSON_GetObjectItem(prng, "logits1000_bits"), &n1000);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(prng, "partitionable")) {
        int64_t seed = (int64_t)num_of(c, "seed");
        int32_t a = -1, b = -1, d = -1;
        CHECK(gm_sample_categorical(seed, l10, n10, &a) == GM_OK && a == (int)num_of(c, "categorical10"),
              "seed %lld: categorical10 %d", (long long)seed, a);
        CHECK(gm_sample_categorical(seed, l1000, n1000, &b) == GM_OK && b == (int)num_of(c, "categorical1000"),
              "seed %lld: categorical1000 %d", (long long)seed, b);
        CHECK(gm_sample_categorical(seed, big, GM_REF_BIG_V, &d) == GM_OK && d == (int)num_of(c, "categorical262144"),
              "seed %lld: categorical262144 %d", (long long)seed, d);
    }
    free(l10);
    free(l1000);
    cJSON_Delete(prng);
}

static void test_top_k_probs(const cJSON *root, const float *l1000, const float *big) {
    const cJSON *tops = cJSON_GetObjectItem(root, "top_k_probs");
    const char *names[2] = {"l1000", "l262144"};
    for (int t = 0; t < 2; t++) {
        const cJSON *ref = cJSON_GetObjectItem(tops, names[t]);
        const cJSON *ids = cJSON_GetObjectItem(ref, "ids"), *probs = cJSON_GetObjectItem(ref, "probs");
        size_t k = (size_t)cJSON_GetArraySize(ids), V = t ? GM_REF_BIG_V : 1000, n = 0;
        gm_token_prob out[64];
        CHECK(gm_logits_top_k(t ? big : l1000, V, k, out, &n) == GM_OK && n == k, "top_k %s: %s", names[t], gm_last_error());
        for (size_t j = 0; j < n; j++) {
            double want = cJSON_GetArrayItem(probs, (int)j)->valuedouble;
            CHECK(out[j].id == (int32_t)cJSON_GetArrayItem(ids, (int)j)->valuedouble, "%s top[%zu] id %d", names[t], j,
                  out[j].id);
            CHECK(fabs(out[j].prob - want) <= 1e-12 * want + 1e-300, "%s top[%zu] prob %.17g vs numpy %.17g", names[t], j,
                  out[j].prob, want);
            CHECK(out[j].logit == (t ? big : l1000)[out[j].id], "%s top[%zu] logit", names[t], j);
        }
    }
    /* k > vocab clamps, -inf gets probability 0, ties keep the lower id first. */
    float v[5] = {1.0f, -INFINITY, 3.0f, 1.0f, 3.0f};
    gm_token_prob o[8];
    size_t n = 0;
    CHECK(gm_logits_top_k(v, 5, 8, o, &n) == GM_OK && n == 5, "clamped count %zu", n);
    CHECK(o[0].id == 2 && o[1].id == 4 && o[2].id == 0 && o[3].id == 3 && o[4].id == 1, "tie order %d %d %d %d %d",
          o[0].id, o[1].id, o[2].id, o[3].id, o[4].id);
    CHECK(o[4].prob == 0.0 && fabs(o[0].prob + o[1].prob + o[2].prob + o[3].prob - 1.0) < 1e-15, "probs sum to 1");
    /* Stability: logits of 1e4 would overflow a naive exp. */
    float h[3] = {10000.0f, 9999.0f, -10000.0f};
    CHECK(gm_logits_top_k(h, 3, 3, o, &n) == GM_OK && fabs(o[0].prob - 1.0 / (1.0 + exp(-1.0))) < 1e-15,
          "stable softmax %.17g", o[0].prob);
    v[2] = NAN;
    CHECK(gm_logits_top_k(v, 5, 2, o, &n) == GM_ERR_ARG && strstr(gm_last_error(), "logits[2]"), "NaN: %s",
          gm_last_error());
}

static void test_topk_indices(void) {
    float v[8] = {0.5f, 2.0f, 2.0f, -1.0f, 7.0f, 2.0f, -INFINITY, 0.5f};
    int32_t idx[8];
    gm_topk_indices(v, 8, 4, idx);
    CHECK(idx[0] == 4 && idx[1] == 1 && idx[2] == 2 && idx[3] == 5, "top4 %d %d %d %d", idx[0], idx[1], idx[2], idx[3]);
    gm_topk_indices(v, 8, 8, idx);
    CHECK(idx[4] == 0 && idx[5] == 7 && idx[6] == 3 && idx[7] == 6, "full order tail %d %d %d %d", idx[4], idx[5],
          idx[6], idx[7]);
    /* Long inputs with many ties (values from a small set, so whole blocks tie with the kept ones) and
     * rising runs against a selection written out here: largest first, equal values by index. */
    enum { N = 5000 };
    float *w = malloc(N * sizeof *w);
    int32_t *got = malloc(N * sizeof *got);
    char *taken = malloc(N);
    uint32_t r = 777;
    int bad = 0, cases = 0;
    for (int kind = 0; kind < 3; kind++)
        for (size_t k = 1; k <= 1000; k = k * 3 + 1, cases++) {
            for (int i = 0; i < N; i++) {
                r = r * 1664525u + 1013904223u;
                w[i] = kind == 0 ? (float)(r >> 28) : kind == 1 ? (float)(r >> 8) : (float)i * 0.5f;
            }
            gm_topk_indices(w, N, k, got);
            memset(taken, 0, N);
            for (size_t j = 0; j < k; j++) {
                int b = -1;
                for (int i = 0; i < N; i++)
                    if (!taken[i] && (b < 0 || w[i] > w[b])) b = i;
                taken[b] = 1;
                if (got[j] != b) {
                    if (bad++ < 3) printf("top-%zu kind %d rank %zu: %d, want %d\n", k, kind, j, got[j], b);
                    break;
                }
            }
        }
    CHECK(bad == 0, "top-k of 5000 values: %d of %d cases differ from the selection", bad, cases);
    free(w), free(got), free(taken);
}

static int desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void test_top_p_cutoff(void) {
    float scratch[8];
    /* probabilities 0.5, 0.3, 0.2 (as logits): p = 0.6 keeps the first two, p = 0.85 all three. */
    float x[3] = {logf(0.3f), logf(0.5f), logf(0.2f)};
    CHECK(gm_top_p_cutoff(x, 3, 0.6f, scratch) == x[0], "p=0.6 cuts at the 0.3 token");
    CHECK(gm_top_p_cutoff(x, 3, 0.4f, scratch) == x[1], "p=0.4 keeps only the top token");
    CHECK(gm_top_p_cutoff(x, 3, 0.85f, scratch) == x[2], "p=0.85 keeps all");
    float eq[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    CHECK(gm_top_p_cutoff(eq, 4, 0.3f, scratch) == 1.0f, "equal logits are all kept (none strictly below)");
    float f[3] = {-INFINITY, 2.0f, -INFINITY};
    CHECK(gm_top_p_cutoff(f, 3, 0.9f, scratch) == 2.0f, "-inf entries are never the cutoff");
    /* 20000 logits spread over distances from 0 to ~10^5 from the max (some -inf): the cutoff equals
     * the brute-force one (sort everything, first sorted value where the cumulative softmax reaches p) */
    enum { N = 20000 };
    float *v = malloc(N * sizeof *v), *sorted = malloc(N * sizeof *sorted), *sc = malloc(N * sizeof *sc);
    uint32_t r = 12345;
    int bad = 0, cases = 0;
    for (int spread = 0; spread < 4; spread++)
        for (int k = 0; k < 6; k++, cases++) {
            static const float ps[6] = {0.05f, 0.3f, 0.6f, 0.9f, 0.95f, 0.999f};
            static const float scale[4] = {0.5f, 4.0f, 30.0f, 1e5f};
            for (int i = 0; i < N; i++) {
                r = r * 1664525u + 1013904223u;
                v[i] = (float)(r >> 8) / 16777216.0f * scale[spread] * (i % 3 ? 1.0f : 0.1f);
                if (i % 997 == 5) v[i] = -INFINITY;
            }
            memcpy(sorted, v, sizeof *v * N);
            qsort(sorted, N, sizeof *sorted, desc);
            double sum = 0, cum = 0;
            for (int i = 0; i < N; i++) sum += exp((double)v[i] - (double)sorted[0]);
            float want = -INFINITY;
            for (int i = 0; i < N; i++) {
                cum += exp((double)sorted[i] - (double)sorted[0]) / sum;
                if (!(cum < (double)ps[k])) {
                    want = sorted[i];
                    break;
                }
            }
            float got = gm_top_p_cutoff(v, N, ps[k], sc);
            if (got != want && bad++ < 4) printf("top-p spread %g p %g: cutoff %g, brute force %g\n", scale[spread], ps[k], got, want);
        }
    CHECK(bad == 0, "top-p cutoff equals the brute-force one in %d of %d cases", cases - bad, cases);
    free(v), free(sorted), free(sc);
}

static gm_status make(gm_sample_method m, float t, int k, float p, gm_sampler **s) {
    gm_sampler_config c = gm_sampler_config_default();
    c.method = m;
    c.temperature = t;
    c.top_k = k;
    c.top_p = p;
    return gm_sampler_create(&c, NULL, 0, s);
}

static void expect_arg(gm_status st, const char *needle, const char *what) {
    CHECK(st == GM_ERR_ARG && strstr(gm_last_error(), needle), "%s: status %d, message '%s' should name '%s'", what,
          (int)st, gm_last_error(), needle);
}

static void test_validation(void) {
    gm_sampler *s = NULL;
    expect_arg(make(GM_SAMPLE_RANDOM, -0.5f, 1, 0.9f, &s), "temperature", "temperature < 0");
    CHECK(s == NULL, "no sampler on error");
    expect_arg(make(GM_SAMPLE_RANDOM, NAN, 1, 0.9f, &s), "temperature", "temperature NaN");
    expect_arg(make(GM_SAMPLE_RANDOM, INFINITY, 1, 0.9f, &s), "temperature", "temperature inf");
    expect_arg(make(GM_SAMPLE_TOP_K, 1.0f, 0, 0.9f, &s), "top_k", "top_k 0");
    expect_arg(make(GM_SAMPLE_TOP_K, 1.0f, -3, 0.9f, &s), "top_k", "top_k < 0");
    expect_arg(make(GM_SAMPLE_TOP_P, 1.0f, 1, 0.0f, &s), "top_p", "top_p 0");
    expect_arg(make(GM_SAMPLE_TOP_P, 1.0f, 1, 1.5f, &s), "top_p", "top_p > 1");
    expect_arg(make(GM_SAMPLE_TOP_P, 1.0f, 1, -0.1f, &s), "top_p", "top_p < 0");
    expect_arg(make(GM_SAMPLE_TOP_P, 1.0f, 1, NAN, &s), "top_p", "top_p NaN");
    expect_arg(make((gm_sample_method)9, 1.0f, 1, 0.9f, &s), "method", "bad method");
    expect_arg(gm_sampler_create(NULL, NULL, 0, &s), "config", "NULL config");
    gm_sampler_config c = gm_sampler_config_default();
    int32_t neg[2] = {5, -2};
    expect_arg(gm_sampler_create(&c, neg, 2, &s), "forbidden_ids[1]", "negative forbidden id");
    expect_arg(gm_sampler_create(&c, NULL, 2, &s), "forbidden_ids", "NULL forbidden list");
    CHECK(make(GM_SAMPLE_TOP_P, 1.0f, 1, 1.0f, &s) == GM_OK, "top_p = 1 is valid");
    gm_sampler_free(s);
    CHECK(gm_sampler_config_check(&c) == GM_OK, "the default config is valid");
    gm_sampler_free(NULL);

    float x[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    int32_t id = 0;
    CHECK(make(GM_SAMPLE_TOP_K, 1.0f, 7, 0.9f, &s) == GM_OK, "create top_k 7");
    CHECK(gm_sampler_next(s, x, 6, &id) == GM_ERR_RANGE && strstr(gm_last_error(), "top_k"), "top_k > vocab: %s",
          gm_last_error());
    CHECK(id == -1, "id is -1 after an error");
    expect_arg(gm_sampler_next(s, x, 0, &id), "vocab", "vocab 0");
    expect_arg(gm_sampler_next(s, NULL, 6, &id), "logits", "NULL logits");
    gm_sampler_free(s);

    CHECK(make(GM_SAMPLE_RANDOM, 1.0f, 1, 0.9f, &s) == GM_OK, "create random");
    x[4] = NAN;
    expect_arg(gm_sampler_next(s, x, 6, &id), "logits[4]", "NaN logit");
    x[4] = INFINITY;
    expect_arg(gm_sampler_next(s, x, 6, &id), "logits[4]", "+inf logit");
    x[4] = 0.5f;
    gm_sampler_free(s);

    int32_t forb[2] = {1, 6};
    CHECK(gm_sampler_create(&c, forb, 2, &s) == GM_OK, "create with forbidden");
    CHECK(gm_sampler_next(s, x, 6, &id) == GM_ERR_RANGE && strstr(gm_last_error(), "6"), "forbidden id >= vocab: %s",
          gm_last_error());
    gm_sampler_free(s);
    int32_t all[3] = {0, 1, 2};
    float y[3] = {1.0f, 2.0f, 3.0f};
    c.method = GM_SAMPLE_RANDOM;
    CHECK(gm_sampler_create(&c, all, 3, &s) == GM_OK, "create all forbidden");
    CHECK(gm_sampler_next(s, y, 3, &id) == GM_ERR_RANGE && strstr(gm_last_error(), "-inf"), "nothing to sample: %s",
          gm_last_error());
    gm_sampler_free(s);
    CHECK(gm_sample_categorical(1, NULL, 3, &id) == GM_ERR_ARG, "categorical NULL logits");
    y[1] = NAN;
    expect_arg(gm_sample_categorical(1, y, 3, &id), "logits[1]", "categorical NaN");
}

/* Temperature 0 is greedy for every method (the seed divides by zero instead, issue #562), greedy
 * honours forbidden ids, and each step advances the key as split(rng)[0]. */
static void test_temperature_zero_and_keys(const float *l1000) {
    int32_t want = 0;
    for (int i = 1; i < 1000; i++)
        if (l1000[i] > l1000[want]) want = i;
    for (int m = GM_SAMPLE_GREEDY; m <= GM_SAMPLE_TOP_P; m++) {
        gm_sampler *s = NULL;
        CHECK(make((gm_sample_method)m, 0.0f, 50, 0.5f, &s) == GM_OK, "create T=0");
        int32_t id = -1;
        CHECK(gm_sampler_next(s, l1000, 1000, &id) == GM_OK && id == want, "method %d at T=0: %d, argmax %d", m, id,
              want);
        gm_prng_key k0 = gm_prng_key_from_seed(0), two[2];
        gm_prng_split(k0, GM_PRNG_PARTITIONABLE, 2, two);
        gm_prng_key k1 = gm_sampler_current_key(s);
        CHECK(k1.k[0] == two[0].k[0] && k1.k[1] == two[0].k[1], "key advanced to split(key)[0]");
        gm_sampler_reseed(s, 0);
        k1 = gm_sampler_current_key(s);
        CHECK(k1.k[0] == k0.k[0] && k1.k[1] == k0.k[1], "reseed restarts the stream");
        gm_sampler_free(s);
    }
    gm_sampler_config c = gm_sampler_config_default();
    gm_sampler *s = NULL;
    CHECK(gm_sampler_create(&c, &want, 1, &s) == GM_OK, "create greedy forbidding the argmax");
    int32_t id = -1;
    CHECK(gm_sampler_next(s, l1000, 1000, &id) == GM_OK && id != want, "greedy skips a forbidden argmax");
    gm_sampler_free(s);
}

/* How many of the largest logits each method reads (what the screened vocabulary product keeps exact):
 * argmax reads one, top-k k, random and top-p the whole softmax. */
static void test_logits_top(void) {
    gm_sampler_config c = gm_sampler_config_default();
    CHECK(gm_sampler_logits_top(&c) == 1, "greedy reads the largest logit only");
    c.method = GM_SAMPLE_TOP_K, c.top_k = 40, c.temperature = 0.7f;
    CHECK(gm_sampler_logits_top(&c) == 40, "top-k 40 reads 40 logits, not %d", gm_sampler_logits_top(&c));
    c.temperature = 0.0f;
    CHECK(gm_sampler_logits_top(&c) == 1, "temperature 0 is greedy whatever the method");
    c.temperature = 1.0f, c.method = GM_SAMPLE_RANDOM;
    CHECK(gm_sampler_logits_top(&c) == 0, "random sampling reads every logit");
    c.method = GM_SAMPLE_TOP_P;
    CHECK(gm_sampler_logits_top(&c) == 0, "top-p reads every logit");
    CHECK(gm_sampler_logits_top(NULL) == 0, "NULL config: every logit");
}

int main(void) {
    test_logits_top();
    cJSON *root = gm_test_load_json("sampler_jax.json");
    size_t n1000;
    float *l1000 = gm_test_json_floats(cJSON_GetObjectItem(root, "l1000_bits"), &n1000);
    CHECK(n1000 == 1000, "l1000 size %zu", n1000);
    float *big = malloc(GM_REF_BIG_V * sizeof *big);
    for (int i = 0; i < GM_REF_BIG_V; i++) big[i] = gm_ref_big_logit(i);

    test_jax_cases(root, l1000, big);
    test_sample_categorical(big);
    test_top_k_probs(root, l1000, big);
    test_topk_indices();
    test_top_p_cutoff();
    test_validation();
    test_temperature_zero_and_keys(l1000);

    free(big);
    free(l1000);
    cJSON_Delete(root);
    return gm_test_finish();
}
