/* Token sampling as the seed library does it (gemma/gm/text/_sampling.py, _sampler_loop.py); the public
 * API is in gemma.h. Internal pieces shared with tests. */
#ifndef GM_TEXT_SAMPLER_H
#define GM_TEXT_SAMPLER_H

#include <stddef.h>

#include "base/threefry.h"
#include "gemma.h"

/* The key the next gm_sampler_next() will split. */
gm_prng_key gm_sampler_current_key(const gm_sampler *s);

/* Nucleus cutoff of TopPSampling for x[n] (logits already divided by T, no NaN, at least one finite):
 * sort descending, c = #(cumulative softmax < p), return sorted[c]; tokens strictly below it are dropped.
 * Returns -INFINITY when c == n (nothing is dropped, as JAX's out-of-range take_along_axis gives NaN).
 * The softmax and the cumulative masses are in double; only the values of a band holding most of the mass
 * are searched (sampler.c).
 * scratch holds n floats. */
float gm_top_p_cutoff(const float *x, size_t n, float p, float *scratch);

#endif
