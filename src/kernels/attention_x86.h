/* The scalar bookkeeping of the SIMD attention rows (ops_avx2.c, ops_avx512.c): the span of positions the
 * rows cover, empty pieces, the softcap and maximum of a row's scores, and the end of its softmax. Static
 * inline: each file compiles it with its own flags. */
#ifndef GM_KERNELS_ATTENTION_X86_H
#define GM_KERNELS_ATTENTION_X86_H

#include <math.h>

#include "kernels/ops.h"
#include "kernels/quant_x86.h"

/* the cache slot after `slot` in a ring of `slots` */
GM_AI size_t next_slot(size_t slot, int slots) { return slot + 1 == (size_t)slots ? 0 : slot + 1; }

/* [lo, hi]: the positions any row reads; false (outputs zero, pieces with no weight) when none does */
GM_AI bool attn_span(const gm_attn_rows *a, size_t H, int *lo, int *hi) {
    *lo = a->first[0], *hi = a->last[0];
    for (int i = 1; i < a->n; i++) {
        if (a->first[i] < *lo) *lo = a->first[i];
        if (a->last[i] > *hi) *hi = a->last[i];
    }
    if (*hi >= *lo) return true;
    for (int i = 0; i < a->n; i++) { /* every row an empty piece */
        for (size_t c = 0; c < H; c++) a->out[i][c] = 0.0f;
        if (a->max_out) a->max_out[i] = -INFINITY, a->sum_out[i] = 0.0f;
    }
    return false;
}

/* [glo, ghi]: the positions rows i0 .. i0 + rn - 1 (one group) read, within attn_span's [lo, hi] */
GM_AI void attn_group_span(const gm_attn_rows *a, int i0, int rn, int *glo, int *ghi) {
    *glo = a->first[i0], *ghi = a->last[i0];
    for (int i = i0 + 1; i < i0 + rn; i++) {
        if (a->first[i] < *glo) *glo = a->first[i];
        if (a->last[i] > *ghi) *ghi = a->last[i];
    }
}

/* Row i's scores sc[len] before the softmax: false for an empty piece (no weight anywhere: sc zeroed),
 * else the softcap applied over [f, l] and *mx their maximum. */
GM_AI bool attn_row_start(const gm_attn_rows *a, int i, float *sc, size_t len, int lo, float softcap, size_t *f,
                          size_t *l, float *mx) {
    if (a->first[i] > a->last[i]) {
        for (size_t s = 0; s < len; s++) sc[s] = 0.0f;
        if (a->max_out) a->max_out[i] = -INFINITY, a->sum_out[i] = 0.0f;
        return false;
    }
    *f = (size_t)(a->first[i] - lo), *l = (size_t)(a->last[i] - lo);
    if (softcap > 0)
        for (size_t s = *f; s <= *l; s++) sc[s] = softcap * tanhf(sc[s] / softcap);
    /* 8 running maxima: one chain of dependent compares over 4096 positions held up every row */
    float m8[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    size_t s = *f;
    for (; s + 8 <= *l + 1; s += 8)
        for (int k = 0; k < 8; k++) m8[k] = sc[s + k] > m8[k] ? sc[s + k] : m8[k];
    float m = -INFINITY;
    for (; s <= *l; s++) m = sc[s] > m ? sc[s] : m;
    for (int k = 0; k < 8; k++) m = m8[k] > m ? m8[k] : m;
    *mx = m;
    return true;
}

/* After sc[f..l] = e^(score - mx) summing to total: probabilities (or, for a piece, the unnormalized values
 * with their max and sum), zero outside [f, l] */
GM_AI void attn_row_finish(const gm_attn_rows *a, int i, float *sc, size_t len, size_t f, size_t l, float mx,
                           double total) {
    float inv = (float)(1.0 / total);
    if (a->max_out) { /* a piece: unnormalized */
        a->max_out[i] = mx;
        a->sum_out[i] = (float)total;
        inv = 1.0f;
    }
    for (size_t t = 0; t < f; t++) sc[t] = 0.0f;
    for (size_t s = f; s <= l; s++) sc[s] *= inv;
    for (size_t s = l + 1; s < len; s++) sc[s] = 0.0f;
}

#endif
