/* Inline core of the JAX PRNG, included by threefry.c (portable build) and threefry_avx2.c (built
 * with -mfma, where fmaf() is one instruction instead of a libm call). fmaf is exact by definition,
 * so both builds give identical bits; only the speed differs. Not a public header. */
#ifndef GM_BASE_THREEFRY_CORE_H
#define GM_BASE_THREEFRY_CORE_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/threefry.h"

/* Every rounding step below is meant as written: no contraction into FMAs beyond the explicit ones
 * (gcc does not contract in ISO C mode; clang needs the pragma). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define GM_TF_ROTL(x, d) (((x) << (d)) | ((x) >> (32 - (d))))
#define GM_TF_ROUND(x0, x1, d)                                                                     \
    do {                                                                                           \
        x0 += x1;                                                                                  \
        x1 = GM_TF_ROTL(x1, d);                                                                    \
        x1 ^= x0;                                                                                  \
    } while (0)
#define GM_TF_GROUP_A(x0, x1)                                                                      \
    do {                                                                                           \
        GM_TF_ROUND(x0, x1, 13);                                                                   \
        GM_TF_ROUND(x0, x1, 15);                                                                   \
        GM_TF_ROUND(x0, x1, 26);                                                                   \
        GM_TF_ROUND(x0, x1, 6);                                                                    \
    } while (0)
#define GM_TF_GROUP_B(x0, x1)                                                                      \
    do {                                                                                           \
        GM_TF_ROUND(x0, x1, 17);                                                                   \
        GM_TF_ROUND(x0, x1, 29);                                                                   \
        GM_TF_ROUND(x0, x1, 16);                                                                   \
        GM_TF_ROUND(x0, x1, 24);                                                                   \
    } while (0)

/* Threefry-2x32, 20 rounds: 5 groups of 4 with rotations (13,15,26,6) / (17,29,16,24) alternating
 * and a key injection after each group (jax._src.random.threefry2x32, unrolled lowering). */
static inline void gm_tf_block(gm_prng_key key, uint32_t x0, uint32_t x1, uint32_t out[2]) {
    const uint32_t k0 = key.k[0], k1 = key.k[1], k2 = k0 ^ k1 ^ 0x1BD11BDAu;
    x0 += k0;
    x1 += k1;
    GM_TF_GROUP_A(x0, x1);
    x0 += k1;
    x1 += k2 + 1u;
    GM_TF_GROUP_B(x0, x1);
    x0 += k2;
    x1 += k0 + 2u;
    GM_TF_GROUP_A(x0, x1);
    x0 += k0;
    x1 += k1 + 3u;
    GM_TF_GROUP_B(x0, x1);
    x0 += k1;
    x1 += k2 + 4u;
    GM_TF_GROUP_A(x0, x1);
    x0 += k2;
    x1 += k0 + 5u;
    out[0] = x0;
    out[1] = x1;
}

/* Original layout of threefry_2x32(key, iota(n)): counters padded to even length M, hashed as
 * pairs (c[j], c[j + M/2]); output j < M/2 is word 0 of pair j, output j >= M/2 word 1 of pair
 * j - M/2. The padding counter is 0. */
static inline uint32_t gm_tf_original_word(gm_prng_key key, size_t n, size_t i) {
    size_t half = (n + (n & 1)) / 2;
    uint32_t out[2];
    if (i < half) {
        size_t j = i + half;
        gm_tf_block(key, (uint32_t)i, j < n ? (uint32_t)j : 0u, out);
        return out[0];
    }
    gm_tf_block(key, (uint32_t)(i - half), (uint32_t)i, out);
    return out[1];
}

static inline uint32_t gm_tf_bits_at(gm_prng_key key, gm_prng_layout layout, size_t n, size_t i) {
    if (layout == GM_PRNG_PARTITIONABLE) {
        /* counter = the 64-bit flat index as (hi, lo); 32-bit output = word0 ^ word1 */
        uint32_t out[2];
        gm_tf_block(key, (uint32_t)((uint64_t)i >> 32), (uint32_t)i, out);
        return out[0] ^ out[1];
    }
    return gm_tf_original_word(key, n, i);
}

static inline float gm_tf_unit(uint32_t bits) {
    uint32_t u = (bits >> 9) | 0x3f800000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f - 1.0f;
}

static inline float gm_tf_uniform(uint32_t bits, float minval, float maxval) {
    /* XLA on an FMA-capable x86 CPU contracts floats * (maxval - minval) + minval into one FMA. */
    float v = fmaf(gm_tf_unit(bits), maxval - minval, minval);
    return v > minval ? v : minval; /* lax.max(minval, v) */
}

static inline float gm_tf_log(float x) {
    if (isnan(x) || x < 0.0f) return NAN;
    if (x == 0.0f) return -INFINITY;
    if (isinf(x)) return x;
    if (x < FLT_MIN) x = FLT_MIN; /* the approximation flushes subnormal inputs */
    /* frexp of a normal float: x = m * 2^e with m in [0.5, 1) */
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    float ef = (float)((int)((xb >> 23) & 0xffu) - 126);
    uint32_t mb = (xb & 0x807fffffu) | 0x3f000000u;
    float m;
    memcpy(&m, &mb, sizeof m);
    /* Move m to [sqrt(1/2), sqrt(2)) and subtract 1: both steps are exact. */
    float t = m < 0.707106781186547524f ? m : 0.0f;
    if (t != 0.0f) ef -= 1.0f;
    float r = (m - 1.0f) + t;
    float r2 = r * r;
    float r3 = r2 * r;
    /* Cephes degree-8 polynomial in three interleaved chains, each step one FMA. */
    float y = fmaf(7.0376836292e-2f, r, -1.1514610310e-1f);
    float y1 = fmaf(-1.2420140846e-1f, r, 1.4249322787e-1f);
    float y2 = fmaf(2.0000714765e-1f, r, -2.4999993993e-1f);
    y = fmaf(y, r, 1.1676998740e-1f);
    y1 = fmaf(y1, r, -1.6668057665e-1f);
    y2 = fmaf(y2, r, 3.3333331174e-1f);
    y = fmaf(y, r3, y1);
    y = fmaf(y, r3, y2);
    /* y * r^3 + e * ln2_lo as one FMA (LLVM contracts the first product), then the exact terms. */
    float elo = ef * -2.12194440e-4f;
    y = fmaf(y, r3, elo);
    r = r - r2 * 0.5f; /* r2 * 0.5 is exact */
    r = r + y;
    return r + ef * 0.693359375f; /* e * ln2_hi is exact (ln2_hi has 10 significant bits) */
}

static inline float gm_tf_gumbel(uint32_t bits) {
    return -gm_tf_log(-gm_tf_log(gm_tf_uniform(bits, FLT_MIN, 1.0f)));
}

/* argmax(logits + gumbel), first index on ties, first NaN wins (jnp.argmax). Starts from the
 * largest logit's noisy value so the bound prunes early: a gumbel sample is < GM_GUMBEL_MAX and
 * float rounding is monotone, so when logits[i] + GM_GUMBEL_MAX rounds below the best sum,
 * logits[i] + g does too and i cannot win. NaN logits are never pruned. */
static inline size_t gm_tf_categorical(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n) {
    size_t top = 0;
    for (size_t i = 1; i < n; i++) {
        if (i % 64 == 0 && n - i >= 64) { /* skip whole blocks with nothing larger (vectorized) */
            float t = logits[top];
            int up = 0;
            for (size_t j = 0; j < 64; j++) up |= logits[i + j] > t;
            if (!up) {
                i += 63;
                continue;
            }
        }
        if (logits[i] > logits[top]) top = i;
    }
    size_t best = top;
    float best_v = logits[top] + gm_tf_gumbel(gm_tf_bits_at(key, layout, n, top));
    size_t first_nan = isnan(best_v) ? top : n;
    for (size_t i = 0; i < n; i++) {
        if (i % 64 == 0 && n - i >= 64) { /* skip whole blocks that cannot win (a loop the compiler vectorizes) */
            int live = 0;
            for (size_t j = 0; j < 64; j++) live |= !(logits[i + j] + GM_GUMBEL_MAX < best_v);
            if (!live) {
                i += 63;
                continue;
            }
        }
        if (i == top || logits[i] + GM_GUMBEL_MAX < best_v) continue;
        float v = logits[i] + gm_tf_gumbel(gm_tf_bits_at(key, layout, n, i));
        if (isnan(v)) {
            if (i < first_nan) first_nan = i;
        } else if (v > best_v || (v == best_v && i < best)) {
            best = i;
            best_v = v;
        }
    }
    return first_nan < n ? first_nan : best;
}

#endif
