/* The screened vocabulary product: the logits that greedy and top-k decoding read, exact, for less work
 * than the whole product (docs/DESIGN.md, "The screened vocabulary product"). The pieces that do not need
 * the device: the threshold and the exact pass over the rows that reach it. */
#ifndef GM_MODEL_VOCAB_SCREEN_H
#define GM_MODEL_VOCAB_SCREEN_H

#include <stddef.h>

#include "kernels/packed.h"

/* Largest `top` the screen serves; beyond it the whole product runs exactly. */
enum { GM_SCREEN_TOP_MAX = 1024 };

/* The top-th largest lower bound y[i] - bound[i] over i < n (in f64), -inf when n < top. heap: room for
 * top doubles. */
double gm_screen_threshold(const float *y, const float *bound, size_t n, int top, double *heap);

/* Rows [r0, r1) of P with screened values y[r - r0] and bounds bound[r - r0]: every 16-row panel holding a
 * row whose upper bound y + bound reaches tau gets its exact values (gm_packed_matvec with xq's int16
 * terms) in y. Returns the number of rows recomputed. */
size_t gm_screen_recompute(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y, const float *bound,
                           double tau);

#endif
