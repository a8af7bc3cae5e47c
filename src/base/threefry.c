#include "base/threefry.h"

#include "base/threefry_core.h"

/* Built with -mfma in threefry_avx2.c; used when the CPU has FMA (same bits, several times faster
 * than the libm fmaf calls of the portable build). */
void gm_prng_gumbel_fma(gm_prng_key key, gm_prng_layout layout, size_t n, float *out);
size_t gm_prng_categorical_fma(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n);

static int cpu_has_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

void gm_threefry2x32(gm_prng_key key, uint32_t x0, uint32_t x1, uint32_t out[2]) { gm_tf_block(key, x0, x1, out); }

gm_prng_key gm_prng_key_from_seed(int64_t seed) {
    /* random_seed() makes np.int64(seed), which jnp.asarray narrows to int32 when x64 is off; the
     * logical shift right by 32 of a 32-bit value is 0 in XLA. */
    gm_prng_key key = {{0u, (uint32_t)(uint64_t)seed}};
    return key;
}

gm_prng_key gm_prng_key_from_seed_x64(int64_t seed) {
    uint64_t s = (uint64_t)seed;
    gm_prng_key key = {{(uint32_t)(s >> 32), (uint32_t)s}};
    return key;
}

void gm_prng_split(gm_prng_key key, gm_prng_layout layout, size_t n, gm_prng_key *out) {
    for (size_t i = 0; i < n; i++) {
        if (layout == GM_PRNG_PARTITIONABLE) {
            gm_tf_block(key, (uint32_t)((uint64_t)i >> 32), (uint32_t)i, out[i].k);
        } else { /* threefry_2x32(key, iota(2n)).reshape(n, 2) */
            out[i].k[0] = gm_tf_original_word(key, 2 * n, 2 * i);
            out[i].k[1] = gm_tf_original_word(key, 2 * n, 2 * i + 1);
        }
    }
}

uint32_t gm_prng_bits32_at(gm_prng_key key, gm_prng_layout layout, size_t n, size_t i) {
    return gm_tf_bits_at(key, layout, n, i);
}

void gm_prng_bits32(gm_prng_key key, gm_prng_layout layout, size_t n, uint32_t *out) {
    if (layout == GM_PRNG_ORIGINAL) {
        /* One block call yields two outputs: words j and j + M/2. */
        size_t half = (n + (n & 1)) / 2;
        for (size_t j = 0; j < half; j++) {
            uint32_t w[2];
            size_t k = j + half;
            gm_tf_block(key, (uint32_t)j, k < n ? (uint32_t)k : 0u, w);
            out[j] = w[0];
            if (k < n) out[k] = w[1];
        }
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = gm_tf_bits_at(key, layout, n, i);
}

float gm_prng_bits_to_unit(uint32_t bits) { return gm_tf_unit(bits); }

void gm_prng_uniform(gm_prng_key key, gm_prng_layout layout, size_t n, float minval, float maxval, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = gm_tf_uniform(gm_tf_bits_at(key, layout, n, i), minval, maxval);
}

float gm_xla_logf(float x) { return gm_tf_log(x); }

float gm_prng_gumbel_from_bits(uint32_t bits) { return gm_tf_gumbel(bits); }

void gm_prng_gumbel_portable(gm_prng_key key, gm_prng_layout layout, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = gm_tf_gumbel(gm_tf_bits_at(key, layout, n, i));
}

void gm_prng_gumbel(gm_prng_key key, gm_prng_layout layout, size_t n, float *out) {
    if (cpu_has_fma())
        gm_prng_gumbel_fma(key, layout, n, out);
    else
        gm_prng_gumbel_portable(key, layout, n, out);
}

size_t gm_prng_categorical_portable(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n) {
    return gm_tf_categorical(key, layout, logits, n);
}

size_t gm_prng_categorical(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n) {
    return cpu_has_fma() ? gm_prng_categorical_fma(key, layout, logits, n) : gm_tf_categorical(key, layout, logits, n);
}
