/* The PRNG core compiled with -mavx2 -mfma (see CMakeLists.txt): fmaf() becomes one instruction.
 * Called only after threefry.c checked the CPU; results are bit-identical to the portable build. */
#include "base/threefry_core.h"

void gm_prng_gumbel_fma(gm_prng_key key, gm_prng_layout layout, size_t n, float *out);
size_t gm_prng_categorical_fma(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n);

void gm_prng_gumbel_fma(gm_prng_key key, gm_prng_layout layout, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = gm_tf_gumbel(gm_tf_bits_at(key, layout, n, i));
}

size_t gm_prng_categorical_fma(gm_prng_key key, gm_prng_layout layout, const float *logits, size_t n) {
    return gm_tf_categorical(key, layout, logits, n);
}
