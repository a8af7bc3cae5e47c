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
    for (size_t t = 0; t < T; t++) {
        const float *xt = x + t * ldx;
        int16_t *q = xq->q + t * cols;
        for (size_t b = 0; b < nb; b++) {
            const float *v = xt + GM_XQ_BLOCK * b;
            float amax = 0.0f;
            for (int i = 0; i < GM_XQ_BLOCK; i++) amax = fmaxf(amax, fabsf(v[i]));
            gm_xq_block_finish(v, amax, q + GM_XQ_BLOCK * b, &xq->d[t * nb + b], &xq->s[t * nb + b]);
        }
    }
}

static float f32_at(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* dot of rows-in-panel lane i of tile t (columns c0 .. c0+n) with q */
static int64_t idot(const uint8_t *t, int i, const int16_t *q, int c0, int n) {
    int64_t s = 0;
    for (int c = c0; c < c0 + n; c++) s += (int64_t)(int8_t)t[32 * (c / 2) + 2 * i + (c & 1)] * q[c];
    return s;
}

/* BF16: exact f32 values of x, or the hi + lo split when the matmul uses it */
static void bf16_matmul_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy,
                            bool split) {
    float *w = malloc(P->cols * sizeof *w);
    if (!w) return;
    for (size_t r = r0; r < r1; r++) {
        gm_packed_row(P, r, w);
        for (size_t t = 0; t < T; t++) {
            double acc = 0;
            for (size_t c = 0; c < P->cols; c++) {
                double x = split ? (double)gm_bf16_to_f32(xq->hi[t * xq->ldq + c]) + gm_bf16_to_f32(xq->lo[t * xq->ldq + c])
                                 : (double)xq->x[t * xq->ldx + c];
                acc += (double)w[c] * x;
            }
            Y[t * ldy + (r - r0)] = (float)acc;
        }
    }
    free(w);
}

void gm_packed_matmul_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    const size_t nb = P->cols / 32;
    if (P->kind == GM_PK_BF16) {
        bf16_matmul_ref(P, r0, r1, xq, T, Y, ldy, T > 1 && xq->split);
        return;
    }
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *panel = P->data + r / GM_PANEL_ROWS * P->panel_bytes;
        int i = (int)(r % GM_PANEL_ROWS);
        for (size_t t = 0; t < T; t++) {
            const int16_t *q = xq->q + t * xq->ldq;
            double acc = 0.0;
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *tile = panel + b * P->tile_bytes;
                double dx = xq->d[t * xq->ldd + b];
                const int16_t *qb = q + 32 * b;
                switch (P->kind) {
                case GM_PK_D16:
                    acc += (double)gm_f16_to_f32(gm_kernels_le16(tile + 512 + 2 * i)) * dx * (double)idot(tile, i, qb, 0, 32);
                    break;
                case GM_PK_SM32:
                    acc += (double)f32_at(tile + 512 + 4 * i) * dx * (double)idot(tile, i, qb, 0, 32) +
                           (double)f32_at(tile + 576 + 4 * i) * (double)xq->s[t * xq->ldd + b];
                    break;
                case GM_PK_S16:
                    acc += (double)f32_at(tile + 512 + 4 * i) * dx * (double)idot(tile, i, qb, 0, 16) +
                           (double)f32_at(tile + 576 + 4 * i) * dx * (double)idot(tile, i, qb, 16, 16);
                    break;
                default: break;
                }
            }
            Y[t * ldy + (r - r0)] = (float)acc;
        }
    }
}

void gm_packed_matvec_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    gm_packed_matmul_ref(P, r0, r1, xq, 1, y, 0);
}

const gm_packed_ops gm_packed_scalar = {gm_quantize_x_ref, gm_packed_matvec_ref, gm_packed_matmul_ref};
