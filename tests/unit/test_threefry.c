/* threefry2x32 and the jax.random functions built on it against JAX's own outputs
 * (tests/fixtures/prng_jax.json, made by tests/reference/gen_prng_fixtures.py). Bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threefry.h"
#include "json_fixture.h"
#include "ref_logits.h"
#include "test_util.h"

static uint32_t u32_at(const cJSON *arr, int i) { return (uint32_t)cJSON_GetArrayItem(arr, i)->valuedouble; }

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_block_function(const cJSON *root) {
    const cJSON *rows = cJSON_GetObjectItem(root, "threefry2x32");
    CHECK(cJSON_GetArraySize(rows) >= 4, "threefry vectors missing");
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const cJSON *k = cJSON_GetObjectItem(row, "key"), *x = cJSON_GetObjectItem(row, "x");
        const cJSON *o = cJSON_GetObjectItem(row, "out");
        gm_prng_key key = {{u32_at(k, 0), u32_at(k, 1)}};
        uint32_t out[2];
        gm_threefry2x32(key, u32_at(x, 0), u32_at(x, 1), out);
        CHECK(out[0] == u32_at(o, 0) && out[1] == u32_at(o, 1), "threefry(%08x %08x; %08x %08x) = %08x %08x, JAX %08x %08x",
              key.k[0], key.k[1], u32_at(x, 0), u32_at(x, 1), out[0], out[1], u32_at(o, 0), u32_at(o, 1));
    }
}

static void test_seeds(const cJSON *root) {
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "seeds")) {
        int64_t seed = (int64_t)cJSON_GetObjectItem(row, "seed")->valuedouble;
        const cJSON *kx32 = cJSON_GetObjectItem(row, "key_x32"), *kx64 = cJSON_GetObjectItem(row, "key_x64");
        gm_prng_key a = gm_prng_key_from_seed(seed), b = gm_prng_key_from_seed_x64(seed);
        CHECK(a.k[0] == u32_at(kx32, 0) && a.k[1] == u32_at(kx32, 1), "key(%lld) = (%u, %u), JAX (%u, %u)",
              (long long)seed, a.k[0], a.k[1], u32_at(kx32, 0), u32_at(kx32, 1));
        CHECK(b.k[0] == u32_at(kx64, 0) && b.k[1] == u32_at(kx64, 1), "x64 key(%lld) = (%u, %u), JAX (%u, %u)",
              (long long)seed, b.k[0], b.k[1], u32_at(kx64, 0), u32_at(kx64, 1));
    }
}

static void check_keys(const char *what, int64_t seed, const gm_prng_key *got, const cJSON *want) {
    int n = cJSON_GetArraySize(want), bad = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *k = cJSON_GetArrayItem(want, i);
        bad += got[i].k[0] != u32_at(k, 0) || got[i].k[1] != u32_at(k, 1);
    }
    CHECK(bad == 0, "%s seed %lld: %d keys differ from JAX", what, (long long)seed, bad);
}

static void check_u32(const char *what, int64_t seed, const uint32_t *got, const cJSON *want) {
    int n = cJSON_GetArraySize(want), bad = 0;
    for (int i = 0; i < n; i++) bad += got[i] != u32_at(want, i);
    CHECK(bad == 0, "%s seed %lld: %d of %d words differ from JAX (first: %08x vs %08x)", what, (long long)seed, bad,
          n, got[0], u32_at(want, 0));
}

static void check_f32(const char *what, int64_t seed, const float *got, const cJSON *want) {
    int n = cJSON_GetArraySize(want), bad = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (bits_of(got[i]) != u32_at(want, i)) {
            bad++;
            if (first < 0) first = i;
        }
    CHECK(bad == 0, "%s seed %lld: %d of %d floats differ from JAX (first [%d]: %.9g vs %.9g)", what, (long long)seed,
          bad, n, first, first >= 0 ? got[first] : 0.0, first >= 0 ? f32_from_bits(u32_at(want, first)) : 0.0);
}

static void test_layout(const cJSON *root, const char *name, gm_prng_layout layout, const float *l10, const float *l1000,
                        const float *big, size_t big_n) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, name)) {
        int64_t seed = (int64_t)cJSON_GetObjectItem(c, "seed")->valuedouble;
        gm_prng_key key = gm_prng_key_from_seed(seed);
        const cJSON *kd = cJSON_GetObjectItem(c, "key");
        CHECK(key.k[0] == u32_at(kd, 0) && key.k[1] == u32_at(kd, 1), "%s key(%lld)", name, (long long)seed);

        gm_prng_key keys[5];
        gm_prng_split(key, layout, 2, keys);
        check_keys("split2", seed, keys, cJSON_GetObjectItem(c, "split2"));
        gm_prng_split(key, layout, 5, keys);
        check_keys("split5", seed, keys, cJSON_GetObjectItem(c, "split5"));

        uint32_t bits[8];
        gm_prng_bits32(key, layout, 7, bits);
        check_u32("bits7", seed, bits, cJSON_GetObjectItem(c, "bits7"));
        for (size_t i = 0; i < 7; i++) /* the random-access form agrees with the bulk form */
            CHECK(gm_prng_bits32_at(key, layout, 7, i) == bits[i], "bits32_at(%zu)", i);
        gm_prng_bits32(key, layout, 8, bits);
        check_u32("bits8", seed, bits, cJSON_GetObjectItem(c, "bits8"));

        float f[1001];
        gm_prng_uniform(key, layout, 9, 0.0f, 1.0f, f);
        check_f32("uniform9", seed, f, cJSON_GetObjectItem(c, "uniform9"));
        gm_prng_uniform(key, layout, 6, -2.5f, 3.7f, f);
        check_f32("uniform6 [-2.5, 3.7)", seed, f, cJSON_GetObjectItem(c, "uniform6_m2.5_3.7"));
        gm_prng_gumbel(key, layout, 10, f);
        check_f32("gumbel10", seed, f, cJSON_GetObjectItem(c, "gumbel10"));
        gm_prng_gumbel(key, layout, 1001, f);
        check_f32("gumbel1001", seed, f, cJSON_GetObjectItem(c, "gumbel1001"));

        size_t want10 = (size_t)cJSON_GetObjectItem(c, "categorical10")->valuedouble;
        size_t want1000 = (size_t)cJSON_GetObjectItem(c, "categorical1000")->valuedouble;
        size_t wantbig = (size_t)cJSON_GetObjectItem(c, "categorical262144")->valuedouble;
        size_t got10 = gm_prng_categorical(key, layout, l10, 10);
        size_t got1000 = gm_prng_categorical(key, layout, l1000, 1000);
        size_t gotbig = gm_prng_categorical(key, layout, big, big_n);
        CHECK(got10 == want10, "%s categorical10 seed %lld: %zu, JAX %zu", name, (long long)seed, got10, want10);
        CHECK(got1000 == want1000, "%s categorical1000 seed %lld: %zu, JAX %zu", name, (long long)seed, got1000,
              want1000);
        CHECK(gotbig == wantbig, "%s categorical262144 seed %lld: %zu, JAX %zu", name, (long long)seed, gotbig, wantbig);

        /* rng, cur = split(rng); categorical(cur, logits), six times */
        const cJSON *chain = cJSON_GetObjectItem(c, "chain1000");
        gm_prng_key rng = key;
        for (int s = 0; s < cJSON_GetArraySize(chain); s++) {
            gm_prng_key two[2];
            gm_prng_split(rng, layout, 2, two);
            rng = two[0];
            size_t got = gm_prng_categorical(two[1], layout, l1000, 1000);
            CHECK(got == (size_t)u32_at(chain, s), "%s chain step %d seed %lld: %zu, JAX %u", name, s, (long long)seed,
                  got, u32_at(chain, s));
        }
    }
}

/* Categorical must pick the first index among equal maxima and return the first NaN like jnp.argmax;
 * pruning must not skip a NaN. */
static void test_categorical_edges(void) {
    gm_prng_key key = gm_prng_key_from_seed(3);
    float l[6] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK(gm_prng_categorical(key, GM_PRNG_PARTITIONABLE, l, 6) == 0, "all -inf picks index 0 like argmax");
    l[4] = NAN;
    l[2] = NAN;
    CHECK(gm_prng_categorical(key, GM_PRNG_PARTITIONABLE, l, 6) == 2, "first NaN wins");
    float m[4] = {100.0f, -1000.0f, NAN, -1000.0f};
    CHECK(gm_prng_categorical(key, GM_PRNG_ORIGINAL, m, 4) == 2, "a NaN far below the max is still found");
    float one[1] = {5.0f};
    CHECK(gm_prng_categorical(key, GM_PRNG_ORIGINAL, one, 1) == 0, "single logit");
    /* The pruning bound: every gumbel value is below GM_GUMBEL_MAX. */
    CHECK(gm_prng_gumbel_from_bits(0xFFFFFFFFu) < GM_GUMBEL_MAX, "largest gumbel %.9g", gm_prng_gumbel_from_bits(0xFFFFFFFFu));
    CHECK(gm_prng_gumbel_from_bits(0) > -5.0f, "smallest gumbel %.9g", gm_prng_gumbel_from_bits(0));
    CHECK(isinf(gm_xla_logf(0.0f)) && gm_xla_logf(0.0f) < 0, "log(0) = -inf");
    CHECK(isnan(gm_xla_logf(-1.0f)), "log(-1) = NaN");
    CHECK(gm_xla_logf(1.0f) == 0.0f, "log(1) = 0");
    CHECK(fabsf(gm_xla_logf(2.0f) - 0.693147182f) < 1e-7f, "log(2) = %.9g", gm_xla_logf(2.0f));
}

/* The FMA build (threefry_avx2.c, chosen at run time) against the portable build on random data. */
static void test_fma_build_matches_portable(void) {
    size_t n = 100003;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *l = malloc(n * sizeof *l);
    for (int layout = 0; layout < 2; layout++) {
        gm_prng_key key = gm_prng_key_from_seed(1234 + layout);
        gm_prng_gumbel(key, (gm_prng_layout)layout, n, a);
        gm_prng_gumbel_portable(key, (gm_prng_layout)layout, n, b);
        CHECK(memcmp(a, b, n * sizeof *a) == 0, "dispatched gumbel differs from the portable build (layout %d)", layout);
        for (int r = 0; r < 5; r++) {
            gm_prng_key k2 = gm_prng_key_from_seed(r);
            for (size_t i = 0; i < n; i++) l[i] = a[(i * 7919 + (size_t)r) % n] * (float)(r + 1);
            size_t x = gm_prng_categorical(k2, (gm_prng_layout)layout, l, n);
            size_t y = gm_prng_categorical_portable(k2, (gm_prng_layout)layout, l, n);
            CHECK(x == y, "categorical: dispatched %zu, portable %zu", x, y);
        }
    }
    free(a);
    free(b);
    free(l);
}

int main(void) {
    cJSON *root = gm_test_load_json("prng_jax.json");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(root, "default_threefry_partitionable")),
          "fixture made with a JAX whose default layout is not partitionable");
    test_block_function(root);
    test_seeds(root);

    size_t n10, n1000;
    float *l10 = gm_test_json_floats(cJSON_GetObjectItem(root, "logits10_bits"), &n10);
    float *l1000 = gm_test_json_floats(cJSON_GetObjectItem(root, "logits1000_bits"), &n1000);
    CHECK(n10 == 10 && n1000 == 1000, "logit fixture sizes %zu %zu", n10, n1000);
    size_t big_n = 262144;
    float *big = malloc(big_n * sizeof *big);
    for (size_t i = 0; i < big_n; i++) big[i] = gm_ref_big_logit((int)i);
    /* The formula's float32 values must be exactly those JAX saw. */
    uint32_t want_hash = (uint32_t)cJSON_GetObjectItem(root, "logits262144_fnv1a")->valuedouble;
    CHECK(gm_ref_fnv1a32(big, big_n) == want_hash, "262144-logit formula differs from the generator's (fnv %08x vs %08x)",
          gm_ref_fnv1a32(big, big_n), want_hash);
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(root, "logits262144_samples")) {
        int i = atoi(s->string);
        CHECK(bits_of(big[i]) == (uint32_t)s->valuedouble, "big_logit(%d) = %.9g", i, big[i]);
    }

    test_layout(root, "partitionable", GM_PRNG_PARTITIONABLE, l10, l1000, big, big_n);
    test_layout(root, "original", GM_PRNG_ORIGINAL, l10, l1000, big, big_n);
    test_categorical_edges();
    test_fma_build_matches_portable();

    free(l10);
    free(l1000);
    free(big);
    cJSON_Delete(root);
    return gm_test_finish();
}
