/* Scalar reference for the packed kernels: activation quantization (bit-identical on every path) and
 * packed matvec / matmul computed as exact integer dots per tile, scaled and summed in f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"

void gm_quantize_x_ref(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    const size_t nb = cols / GM_XQ_BLOCK;
    xq->cols = cols;
    xq->ldq = cols;
    xq->ldd = nb;
    xq->has_xb = false;
    for (size_t t = 0; t < T; t++) {
        const float *xt = x + t * ldx;
        int16_t *q = xq->q + t * cols;
        for (size_t b = 0; b < nb; b++) {
            const float *v = xt + GM_XQ_BLOCK * b;
            float amax = 0.0f;
            for (int i = 0; i < GM_XQ_BLOCK; i++) amax = fmaxf(amax, fabsf(v[i]));
            gm_xq_block_finish(v, amax, q + GM_XQ_BLOCK * b, xq->q2 + t * cols + GM_XQ_BLOCK * b, &xq->d[t * nb + b],
                               &xq->s[t * nb + b], &xq->qs[4 * (t * nb + b)]);
        }
    }
}

static float f32_at(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* dot of panel row i's codes in tile t (columns c0 .. c0+n) with q */
static int64_t idot(gm_pack_kind k, const uint8_t *t, int i, const int16_t *q, int c0, int n) {
    int64_t s = 0;
    for (int c = c0; c < c0 + n; c++) s += (int64_t)gm_packed_code(k, t, c / 2, 2 * i + (c & 1)) * q[c];
    return s;
}

/* Dequantized rows times the f32 inputs, or their hi + mid + lo split when the matmul uses it (the same
 * values): BF16, and every kind under the AMX matmul; or times hi alone (fast BF16) */
static void bf16_matmul_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy,
                            bool split, bool hi_only) {
    float *w = malloc(P->cols * sizeof *w);
    if (!w) return;
    for (size_t r = r0; r < r1; r++) {
        gm_packed_row(P, r, w);
        for (size_t t = 0; t < T; t++) {
            double acc = 0;
            for (size_t c = 0; c < P->cols; c++) {
                size_t o = t * xq->ldq + c;
                double x = hi_only ? (double)gm_bf16_to_f32(xq->hi[o])
                           : split ? (double)gm_bf16_to_f32(xq->hi[o]) + gm_bf16_to_f32(xq->mid[o]) + gm_bf16_to_f32(xq->lo[o])
                                   : (double)xq->x[t * xq->ldx + c];
                acc += (double)w[c] * x;
            }
            Y[t * ldy + (r - r0)] = (float)acc;
        }
    }
    free(w);
}

/* one tile's contribution to row i for input t: exact integer dots of both input terms, in f64 */
static double tile_ref(const gm_packed *P, const uint8_t *panel, int i, const gm_xq *xq, size_t t, size_t b) {
    const gm_pack_kind k = P->kind;
    const uint8_t *tile = panel + b * P->tile_bytes;
    float ks[2] = {0, 0};
    if (gm_pack_kind_compact(k)) gm_packed_k_scales(P, panel, b, i, ks);
    const int16_t *q1 = xq->q + t * xq->ldq + 32 * b, *q2 = xq->q2 + t * xq->ldq + 32 * b;
    const int32_t *qs = xq->qs + 4 * (t * xq->ldd + b);
    double dx = xq->d[t * xq->ldd + b];
    /* sum over columns [c0, c0 + n) of (code - off) * (q1 + q2 / 32768) */
#define DOT(c0, n, off, s1, s2)                                                                                        \
    ((double)(idot(k, tile, i, q1, c0, n) - (int64_t)(off) * (s1)) +                                                   \
     (double)(idot(k, tile, i, q2, c0, n) - (int64_t)(off) * (s2)) / 32768.0)
    switch (k) {
    case GM_PK_D16:
        return (double)gm_f16_to_f32(gm_kernels_le16(tile + 512 + 2 * i)) * dx * DOT(0, 32, 0, 0, 0);
    case GM_PK_N5D: case GM_PK_N5R:
        return (double)gm_f16_to_f32(gm_kernels_le16(tile + 320 + 2 * i)) * dx * DOT(0, 32, 16, qs[0] + qs[1], qs[2] + qs[3]);
    case GM_PK_SM32: case GM_PK_N4SM: {
        size_t so = k == GM_PK_SM32 ? 512 : 256;
        return (double)f32_at(tile + so + 4 * i) * dx * DOT(0, 32, 0, 0, 0) +
               (double)f32_at(tile + so + 64 + 4 * i) * (double)xq->s[t * xq->ldd + b];
    }
    case GM_PK_N4K: case GM_PK_N4R:
        return (double)ks[0] * dx * DOT(0, 32, 0, 0, 0) + (double)ks[1] * (double)xq->s[t * xq->ldd + b];
    case GM_PK_N6: case GM_PK_N6C: case GM_PK_N6H:
        return (double)ks[0] * dx * DOT(0, 16, 32, qs[0], qs[2]) + (double)ks[1] * dx * DOT(16, 16, 32, qs[1], qs[3]);
    default: return 0.0;
    }
#undef DOT
}

typedef double (*tile_fn)(const gm_packed *P, const uint8_t *panel, int i, const gm_xq *xq, size_t t, size_t b);

/* Y[t][r - r0] = the sum over the tiles of row r of tile(...), in f64 */
static void tiles_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy,
                      tile_fn tile) {
    const size_t nb = P->cols / 32;
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *panel = P->data + r / GM_PANEL_ROWS * P->panel_bytes;
        int i = (int)(r % GM_PANEL_ROWS);
        for (size_t t = 0; t < T; t++) {
            double acc = 0.0;
            for (size_t b = 0; b < nb; b++) acc += tile(P, panel, i, xq, t, b);
            Y[t * ldy + (r - r0)] = (float)acc;
        }
    }
}

void gm_packed_matmul_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    if (P->kind == GM_PK_BF16 || (T > 1 && (xq->split || xq->f32))) { /* f32 (or its exact bf16 split) inputs */
        bool split = T > 1 && xq->split;
        bf16_matmul_ref(P, r0, r1, xq, T, Y, ldy, split, split && xq->fast && P->kind == GM_PK_BF16);
        return;
    }
    tiles_ref(P, r0, r1, xq, T, Y, ldy, tile_ref);
}

void gm_packed_matvec_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    gm_packed_matmul_ref(P, r0, r1, xq, 1, y, 0);
}

/* ---- the int8-term inputs of batched products (packed.h) ---- */

/* The int8 terms of one 32-value block v (amax = max |v|, found any way): every path computes exactly
 * this, element by element, so all agree bit for bit. q points at the block's 96 bytes. */
void gm_x8_block_ref(const float *v, float amax, int8_t *q, float *e, int32_t *sum) {
    int bad = !(amax <= 3.4028235e38f);
    for (int i = 0; i < 32; i++) bad |= v[i] != v[i];
    for (int k = 0; k < GM_X8_SUMS; k++) sum[k] = 0;
    if (bad || amax < 1e-30f) {
        memset(q, 0, 96);
        *e = bad ? __builtin_nanf("") : 0.0f;
        return;
    }
    float d = amax / 127.0f, inv = 127.0f / amax, d2 = d / 254.0f;
    float inv2 = inv * 254.0f, inv3 = inv2 * 254.0f;
    int half[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    for (int c = 0; c < 32; c++) {
        float q1 = __builtin_rintf(v[c] * inv), r1 = __builtin_fmaf(-d, q1, v[c]);
        float q2 = __builtin_rintf(r1 * inv2);
        q2 = q2 > 127.0f ? 127.0f : q2 < -127.0f ? -127.0f : q2;
        float r2 = __builtin_fmaf(-d2, q2, r1), q3 = __builtin_rintf(r2 * inv3);
        q3 = q3 > 127.0f ? 127.0f : q3 < -127.0f ? -127.0f : q3;
        int p = gm_x8_pos(c);
        q[p] = (int8_t)q1, q[32 + p] = (int8_t)q2, q[64 + p] = (int8_t)q3;
        half[0][c / 16] += (int)q1, half[1][c / 16] += (int)q2, half[2][c / 16] += (int)q3;
    }
    for (int k = 0; k < 3; k++) sum[k] = half[k][0] + half[k][1], sum[3 + k] = gm_x8_half_pair(half[k][0], half[k][1]);
    *e = d;
}

void gm_x8_to_columns(const int8_t *q, int8_t *qn) {
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < 32; c++) qn[32 * k + c] = q[32 * k + gm_x8_pos(c)];
}

void gm_quantize_x8_ref(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    const size_t nb = cols / GM_XQ_BLOCK;
    xq->cols = cols, xq->ldd = cols / GM_XQ_BLOCK, xq->ld8 = 3 * cols;
    for (size_t t = 0; t < T; t++)
        for (size_t b = 0; b < nb; b++) {
            const float *v = x + t * ldx + GM_XQ_BLOCK * b;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[i]));
            size_t k = t * nb + b;
            gm_x8_block_ref(v, amax, xq->b8 + t * xq->ld8 + 96 * b, &xq->e8[k], &xq->s8[GM_X8_SUMS * k]);
            if (xq->b8n) gm_x8_to_columns(xq->b8 + t * xq->ld8 + 96 * b, xq->b8n + t * xq->ld8 + 96 * b);
        }
    xq->has8 = true;
}

/* one tile's contribution to row i for input t from the int8 terms, in f64 */
static double tile8_ref(const gm_packed *P, const uint8_t *panel, int i, const gm_xq *xq, size_t t, size_t b) {
    const gm_pack_kind k = P->kind;
    const uint8_t *tile = panel + b * P->tile_bytes;
    const int8_t *q = xq->b8 + t * xq->ld8 + 96 * b;
    const int32_t *S = xq->s8 + GM_X8_SUMS * (t * xq->ldd + b);
    double e = xq->e8[t * xq->ldd + b], F = 0, Sx = 0, Fh[2] = {0, 0}, Sh[2] = {0, 0};
    for (int term = 0; term < (xq->fast ? 1 : 3); term++) {
        int64_t dot[2] = {0, 0}, sum[2] = {0, 0}; /* columns 0-15, 16-31 */
        for (int c = 0; c < 32; c++) {
            int v = q[32 * term + gm_x8_pos(c)];
            dot[c / 16] += (int64_t)gm_packed_code(k, tile, c / 2, 2 * i + (c & 1)) * v;
            sum[c / 16] += v;
        }
        double w = term == 0 ? 1.0 : term == 1 ? 1.0 / 254 : 1.0 / 64516;
        for (int h = 0; h < 2; h++) Fh[h] += w * (double)dot[h], Sh[h] += w * (double)sum[h];
        F += w * (double)(dot[0] + dot[1]);
        Sx += w * (double)S[term];
    }
    switch (k) {
    case GM_PK_D16: return (double)gm_f16_to_f32(gm_kernels_le16(tile + 512 + 2 * i)) * e * F;
    case GM_PK_N5D: case GM_PK_N5R:
        return (double)gm_f16_to_f32(gm_kernels_le16(tile + 320 + 2 * i)) * e * (F - 16.0 * Sx);
    case GM_PK_SM32: case GM_PK_N4SM: {
        size_t so = k == GM_PK_SM32 ? 512 : 256;
        return (double)f32_at(tile + so + 4 * i) * e * F + (double)f32_at(tile + so + 64 + 4 * i) * e * Sx;
    }
    case GM_PK_N4K: case GM_PK_N4R: {
        float ks[2];
        gm_packed_k_scales(P, panel, b, i, ks);
        return (double)ks[0] * e * F + (double)ks[1] * e * Sx;
    }
    case GM_PK_N6: case GM_PK_N6C: case GM_PK_N6H: { /* a scale per 16 columns; codes q + 32 */
        float ks[2];
        gm_packed_k_scales(P, panel, b, i, ks);
        return (double)ks[0] * e * (Fh[0] - 32.0 * Sh[0]) + (double)ks[1] * e * (Fh[1] - 32.0 * Sh[1]);
    }
    default: return 0.0;
    }
}

void gm_packed_matmul8_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    tiles_ref(P, r0, r1, xq, T, Y, ldy, tile8_ref);
}

void gm_packed_screen_errors(const gm_packed *P, const float *x, const gm_xq *xq, float *eb, bool copy) {
    /* the largest |code|: Q8_0 -128, Q5_0 as D16 q - 16 in [-16, 15], Q4_0 q - 8 in [-8, 7], Q6_K q - 32 in
     * [-32, 31] (its row's bound then takes the larger of the tile's two scales: gm_packed_screen_ref) */
    const float cmax = P->from == GM_Q5_0 ? 16.0f : P->from == GM_Q4_0 ? 8.0f : P->from == GM_Q6_K ? 32.0f : 128.0f;
    /* Both products add a few f32 roundings of 2^-24 of at most 32 x cmax x 127 e per tile: 1/64 of
     * cmax e per tile covers them with room, 1/32 more the conversions at either end. */
    const float slack = (float)(P->cols / 32) / 64.0f + 1.0f / 32.0f;
    for (size_t b = 0; b < P->cols / 32; b++) {
        const float e = xq->e8[b];
        float r = 0; /* sum |x - e q1|, each from one fma, so within 2^-24 of itself; the sum within 2^-19 */
        for (int c = 0; c < 32; c++) r += fabsf(fmaf(-e, (float)xq->b8[96 * b + gm_x8_pos(c)], x[32 * b + c]));
        eb[b] = cmax * (r * (1.0f + 0x1p-16f) + slack * e);
        if (!copy) continue;
        /* |w - d q| <= d / 2 (to 2^-16 d: the roundings of w (1 / d)); the f32 sum within 32 2^-24 */
        float l1 = 0;
        for (int c = 0; c < 32; c++) l1 += fabsf(x[32 * b + c]);
        eb[b] += 0.5f * l1 * (1.0f + 0x1p-10f);
    }
}

void gm_packed_screen_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y,
                          float *bound) {
    const bool q6 = gm_pack_kind_q6(P->kind);
    if (P->kind != GM_PK_D16 && !q6) return;
    const size_t tiles = P->cols / 32;
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *panel = P->data + r / GM_PANEL_ROWS * P->panel_bytes;
        const int i = (int)(r % GM_PANEL_ROWS);
        double acc = 0, b = 0;
        for (size_t t = 0; t < tiles; t++) {
            const uint8_t *tile = panel + t * P->tile_bytes;
            const int8_t *q = xq->b8 + 96 * t;
            int64_t dot[2] = {0, 0}; /* columns 0-15, 16-31 */
            for (int c = 0; c < 32; c++)
                dot[c / 16] += (int64_t)(gm_packed_code(P->kind, tile, c / 2, 2 * i + (c & 1)) - (q6 ? 32 : 0)) *
                               q[gm_x8_pos(c)];
            float s[2]; /* the scales of the two halves */
            if (q6) gm_packed_k_scales(P, panel, t, i, s);
            else s[0] = s[1] = gm_f16_to_f32(gm_kernels_le16(tile + 512 + 2 * i));
            acc += xq->e8[t] * ((double)s[0] * (double)dot[0] + (double)s[1] * (double)dot[1]);
            b += fmax(fabs((double)s[0]), fabs((double)s[1])) * eb[t];
        }
        y[r - r0] = (float)acc;
        bound[r - r0] = (float)b;
    }
}

const gm_packed_ops gm_packed_scalar = {gm_quantize_x_ref, gm_split_bf16_ref, gm_packed_matvec_ref, gm_packed_matmul_ref,
                                        NULL, gm_quantize_x8_ref, NULL, false, false, false, false, NULL};
