/* JAX-compatible counter-based PRNG: threefry2x32 (20 rounds) and the jax.random functions the
 * sampler needs (key, split, bits, uniform, gumbel, categorical), bit for bit as JAX computes them
 * on CPU for float32.
 *
 * Two bit layouts exist. JAX >= 0.5 defaults to jax_threefry_partitionable=True: element i of a
 * bits/split output hashes the 64-bit counter (i >> 32, i & 0xffffffff) and, for 32-bit bits,
 * returns out0 ^ out1. With the flag off ("original") the counters 0..n-1 (padded to even) are
 * split into two halves that are hashed pairwise and the outputs concatenated. Both are here. */
#ifndef GM_BASE_THREEFRY_H
#define GM_BASE_THREEFRY_H

#include <stddef.h>
#include <stdint.h>

#include "gemma.h"

typedef struct gm_prng_key {
    uint32_t k[2]; /* jax.random.key_data(key) */
} gm_prng_key;

typedef enum gm_prng_layout {
    GM_PRNG_PARTITIONABLE = 0, /* jax_threefry_partitionable=True (default since JAX 0.5.0) */
    GM_PRNG_ORIGINAL = 1       /* jax_threefry_partitionable=False */
} gm_prng_layout;

/* The raw block function: x = (x0, x1) hashed under key, 20 rounds. */
void gm_threefry2x32(gm_prng_key key, uint32_t x0, uint32_t x1, uint32_t out[2]);

/* jax.random.key(seed) with the default jax_enable_x64=False: the seed is first narrowed to int32
 * (so only its low 32 bits count, negative seeds wrap) and the key is (0, (uint32)seed). */
gm_prng_key gm_prng_key_from_seed(int64_t seed);
/* The same under jax_enable_x64=True: (seed >> 32, seed & 0xffffffff) of the int64 seed. */
gm_prng_key gm_prng_key_from_seed_x64(int64_t seed);

/* jax.random.split(key, n) -> out[0..n-1]. */
void gm_prng_split(gm_prng_key key, gm_prng_layout layout, size_t n, gm_prng_key *out);

/* Element i of jax.random.bits(key, (n,), uint32) (any shape with n elements flattens the same). */
uint32_t gm_prng_bits32_at(gm_prng_key key, gm_prng_layout layout, size_t n, size_t i);
/* jax.random.bits(key, (n,), uint32) -> out[n]. */
void gm_prng_bits32(gm_prng_key key, gm_prng_layout layout, size_t n, uint32_t *out);

/* JAX's float32 conversion: bitcast((bits >> 9) | 0x3f800000) - 1, a value in [0, 1). */
float gm_prng_bits_to_unit(uint32_t bits);
/* jax.random.uniform(key, (n,), float32, minval, maxval): max(minval, u * (maxval - minval) + minval). */
void gm_prng_uniform(gm_prng_key key, gm_prng_layout layout, size_t n, float minval, float maxval,
                     float *out);
/* log for float32 as XLA's CPU backend computes it (the Cephes polynomial of its vectorised
 * emitter, with the FMAs LLVM forms on x86-64 with FMA). It differs from glibc logf in the last
 * bit for ~15% of inputs, which changes gumbel noise; matched bit for bit on all 2^23 values
 * k * 2^-23 and 2^20 random inputs in (0, 20) against jaxlib 0.10.2. */
float gm_xla_logf(float x);

/* Every gumbel sample lies in [-4.48, 15.95] (u in [FLT_MIN, 1 - 2^-23]). */
#define GM_GUMBEL_MAX 16.0f

/* jax.random.gumbel(key, (n,), float32) (mode "low", the default):
 * -log(-log(uniform(minval=FLT_MIN, maxval=1))). */
float gm_prng_gumbel_from_bits(uint32_t bits);
void gm_prng_gumbel(gm_prng_key key, gm_prng_layout layout, size_t n, float *out);
/* The portable build of gumbel/categorical, bypassing the FMA dispatch (tests compare the two). */
void gm_prng_gumbel_portable(gm_prng_key key, gm_prng_layout layout, size_t n, float *out);
size_t gm_prng_categorical_portable(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n);

/* jax.random.categorical(key, logits[n]) = argmax(logits + gumbel(key, (n,))), first index on
 * ties, like jnp.argmax (a NaN sum wins, the first one). Needs no memory; n > 0. Noise is computed
 * only for logits within GM_GUMBEL_MAX of the best noisy value, so peaked distributions are cheap.
 * The original layout supports n < 2^32 - 1 (JAX switches to a block scheme beyond). */
size_t gm_prng_categorical(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n);

#endif
