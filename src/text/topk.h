/* Top-k selection over float scores in jax.lax.top_k order, and the softmax helpers built on it. */
#ifndef GM_TEXT_TOPK_H
#define GM_TEXT_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "gemma.h"

/* idx[0..k) = indices of the k largest v[0..n), ordered like jax.lax.top_k: value descending, equal
 * values by ascending index (-inf is an ordinary value here; v must hold no NaN). k <= n <= INT32_MAX.
 * O(n log k), no allocation. */
void gm_topk_indices(const float *v, size_t n, size_t k, int32_t *idx);

/* GM_ERR_ARG naming the first NaN or +inf in v[0..n) ("what[i] is NaN"). */
gm_status gm_check_logits(const float *v, size_t n, const char *what);

#endif
