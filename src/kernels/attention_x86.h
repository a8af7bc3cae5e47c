/* The scalar bookkeeping of the SIMD attention rows (ops_avx2.c, ops_avx512.c): the span of positions the
 * rows cover, empty pieces, the softcap and maximum of a row's scores, and the end of its softmax. Static
 * inline: each file compiles it with its own flags. */
#ifndef GM_KERNELS_ATTENTION_X86_H
#define GM_KERNELS_ATTENTION_X86_H

#include <math.h>
#include <string.h>

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

/* The rows of group g: 4 g .. 4 g + attn_group_rows(n, g) - 1 */
GM_AI int attn_group_rows(int n, int g) { return n - 4 * g < 4 ? n - 4 * g : 4; }

/* [glo, ghi]: the positions group g's rows read, within attn_span's [lo, hi] */
GM_AI void attn_group_span(const gm_attn_rows *a, int g, int *glo, int *ghi) {
    const int i0 = 4 * g, rn = attn_group_rows(a->n, g);
    *glo = a->first[i0], *ghi = a->last[i0];
    for (int i = i0 + 1; i < i0 + rn; i++) {
        if (a->first[i] < *glo) *glo = a->first[i];
        if (a->last[i] > *ghi) *ghi = a->last[i];
    }
}

/* The queries side by side, row i at qb + i qs (rows up to a multiple of 4 zero): loads at constant offsets
 * from one base, where a pointer per row did not fit the registers beside the accumulators */
GM_AI void attn_copy_queries(const gm_attn_rows *a, size_t H, float *qb, size_t qs) {
    for (int i = 0; i < (a->n + 3) / 4 * 4; i++)
        if (i < a->n) memcpy(qb + (size_t)i * qs, a->q[i], H * sizeof(float));
        else memset(qb + (size_t)i * qs, 0, H * sizeof(float));
}

/* Zero outputs for each group whose rows all read nothing (empty pieces): the value sums skip it */
GM_AI void attn_zero_empty_groups(const gm_attn_rows *a, size_t H) {
    for (int g = 0; 4 * g < a->n; g++) {
        int glo, ghi;
        attn_group_span(a, g, &glo, &ghi);
        for (int i = 4 * g; glo > ghi && i < 4 * g + attn_group_rows(a->n, g); i++)
            memset(a->out[i], 0, H * sizeof(float));
    }
}

/* Group g's positions [s0, s1] inside the block [sb, se] of the value sums (false: none), and whether the
 * block holds its first position (its sums start from zero, else from what the block before left) */
GM_AI bool attn_group_in_block(const gm_attn_rows *a, int g, int sb, int se, int *s0, int *s1, bool *fresh) {
    int glo, ghi;
    attn_group_span(a, g, &glo, &ghi);
    *s0 = glo > sb ? glo : sb, *s1 = ghi < se ? ghi : se;
    *fresh = *s0 == glo;
    return *s0 <= *s1;
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
