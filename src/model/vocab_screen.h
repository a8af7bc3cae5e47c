/* The screened vocabulary product: the logits that greedy and top-k decoding read, exact, for less work
 * than the whole product (docs/DESIGN.md, "The screened vocabulary product"). The pieces that do not need
 * the device: the panels' summaries, the threshold and the exact pass over the rows that reach it. */
#ifndef GM_MODEL_VOCAB_SCREEN_H
#define GM_MODEL_VOCAB_SCREEN_H

#include <stddef.h>

#include "kernels/packed.h"

/* Largest `top` the screen serves; beyond it the whole product runs exactly. */
enum { GM_SCREEN_TOP_MAX = 1024 };

/* The top-th largest lower bound over rows [r0, r1) (y[r - r0], bound[r - r0]; NaN as -inf), -inf when
 * there are fewer than top rows; lo from gm_panel_bounds (kernels/ops.h: each panel's largest
 * lower bound, lo[p - r0 / 16], computed beside the screen while y and bound are hot). Only the rows of the
 * panels whose largest lower bound reaches the top-th largest panel maximum are read (that maximum is at
 * most the answer: top panels hold a row at or above it). heap: room for top doubles. */
double gm_screen_threshold(const float *y, const float *bound, size_t r0, size_t r1, const double *lo, int top,
                           double *heap);

/* Rows [a, b) of P with screened values y[r - a]: every 16-row panel whose largest upper bound (hi[p -
 * a / 16], gm_panel_bounds) reaches tau gets its exact values (gm_packed_matvec with xq's int16 terms)
 * in y. Returns the number of rows recomputed. */
size_t gm_screen_recompute(const gm_packed *P, size_t a, size_t b, const gm_xq *xq, float *y, const double *hi,
                           double tau);

#endif
