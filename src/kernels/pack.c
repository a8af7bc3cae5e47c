/* Re-laying quantized GGUF matrices out as 16-row panels (layout in packed.h), reading single rows
 * back, and quantizing activations to int16. Scalar code: it runs once per weight at load time (the
 * hot loop of packing Q8_0, the embedding's type, has its own fast path) and per activation vector. */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"

#define F16(p) gm_f16_to_f32(gm_kernels_le16(p))

gm_pack_kind gm_pack_kind_of(gm_dtype type) {
    switch (type) {
    case GM_Q4_0: case GM_Q8_0: return GM_PK_D16;
    case GM_Q5_1: case GM_Q5_K: return GM_PK_SM32;
    case GM_Q4_1: case GM_Q4_K: return GM_PK_N4SM;
    case GM_Q5_0: return GM_PK_N5D;
    case GM_Q6_K: return GM_PK_N6;
    case GM_BF16: return GM_PK_BF16;
    default: return GM_PK_NONE;
    }
}

static size_t tile_bytes_of(gm_pack_kind k) {
    switch (k) {
    case GM_PK_D16: return 512 + 32;
    case GM_PK_SM32: return 512 + 128;
    case GM_PK_N4SM: return 256 + 128;
    case GM_PK_N5D: return 256 + 64 + 32;
    case GM_PK_N6: return 256 + 128 + 128;
    case GM_PK_BF16: return 1024;
    default: return 0;
    }
}

/* Where a kind's scales start in a tile (after its codes). */
static size_t scale_offset(gm_pack_kind k) {
    switch (k) {
    case GM_PK_N4SM: return 256;
    case GM_PK_N5D: return 320;
    case GM_PK_N6: return 384;
    default: return 512;
    }
}

static bool nibble_kind(gm_pack_kind k) { return k == GM_PK_N4SM || k == GM_PK_N5D || k == GM_PK_N6; }

/* Code of pair p, lane i of tile t (signed for the 8-bit kinds, unsigned 0..63 for the others). */
int gm_packed_code(gm_pack_kind k, const uint8_t *t, int p, int i) {
    if (!nibble_kind(k)) return (int8_t)t[32 * p + i];
    int c = (t[32 * (p & 7) + i] >> (p < 8 ? 0 : 4)) & 15;
    if (k != GM_PK_N4SM) c |= (int)((gm_kernels_le32(t + 256 + 4 * p) >> i) & 1) << 4;
    if (k == GM_PK_N6) c |= (int)((gm_kernels_le32(t + 320 + 4 * p) >> i) & 1) << 5;
    return c;
}

static void put_code(gm_pack_kind k, uint8_t *t, int p, int i, int c) {
    if (!nibble_kind(k)) {
        t[32 * p + i] = (uint8_t)c;
        return;
    }
    uint8_t *b = &t[32 * (p & 7) + i];
    *b = p < 8 ? (uint8_t)((*b & 0xf0) | (c & 15)) : (uint8_t)((*b & 0x0f) | (c & 15) << 4);
    for (int bit = 4; bit <= (k == GM_PK_N6 ? 5 : k == GM_PK_N5D ? 4 : 3); bit++)
        t[(bit == 4 ? 256 : 320) + 4 * p + i / 8] |= (uint8_t)(((c >> bit) & 1) << (i % 8));
}

static size_t block_of(gm_dtype t) { return t == GM_Q4_K || t == GM_Q5_K || t == GM_Q6_K ? 256 : 32; }

size_t gm_packed_bytes(gm_dtype type, size_t rows, size_t cols) {
    gm_pack_kind k = gm_pack_kind_of(type);
    if (k == GM_PK_NONE || cols == 0 || cols % block_of(type)) return 0;
    return (rows + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS * (cols / 32) * tile_bytes_of(k);
}

void gm_pack_describe(gm_dtype type, size_t rows, size_t cols, gm_packed *P) {
    memset(P, 0, sizeof *P);
    P->kind = gm_pack_kind_of(type);
    P->from = type;
    P->rows = rows;
    P->cols = cols;
    P->tile_bytes = tile_bytes_of(P->kind);
    P->panel_bytes = cols / 32 * P->tile_bytes;
}

/* One GGUF block of a row -> its integer codes (offset removed for the symmetric types) and, per
 * 32 values, the scale and the additive term (per 16 values for Q6_K: s[0..15]). Every scale is the
 * exact product the reference dequantizer forms, so s * q (+ m) rounds exactly as it does. */
static void decode_block(gm_dtype t, const uint8_t *b, int8_t *q, float *s, float *m) {
    switch (t) {
    case GM_Q8_0:
        s[0] = F16(b);
        memcpy(q, b + 2, 32);
        return;
    case GM_Q4_0:
        s[0] = F16(b);
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((b[2 + j] & 15) - 8);
            q[j + 16] = (int8_t)((b[2 + j] >> 4) - 8);
        }
        return;
    case GM_Q4_1:
        s[0] = F16(b);
        m[0] = F16(b + 2);
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(b[4 + j] & 15);
            q[j + 16] = (int8_t)(b[4 + j] >> 4);
        }
        return;
    case GM_Q5_0: case GM_Q5_1: {
        int one = t == GM_Q5_1, o = one ? 4 : 2;
        s[0] = F16(b);
        if (one) m[0] = F16(b + 2);
        uint32_t qh = (uint32_t)b[o] | (uint32_t)b[o + 1] << 8 | (uint32_t)b[o + 2] << 16 | (uint32_t)b[o + 3] << 24;
        const uint8_t *qs = b + o + 4;
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            q[j] = (int8_t)(one ? lo : lo - 16);
            q[j + 16] = (int8_t)(one ? hi : hi - 16);
        }
        return;
    }
    case GM_Q4_K: case GM_Q5_K: {
        const uint8_t *sc12 = b + 4;
        float d = F16(b), dmin = F16(b + 2);
        const uint8_t *qh = b + 16, *qs = b + (t == GM_Q5_K ? 48 : 16);
        for (int k = 0; k < 8; k++) {
            int sc, mm;
            if (k < 4) {
                sc = sc12[k] & 63;
                mm = sc12[k + 4] & 63;
            } else {
                sc = (sc12[k + 4] & 15) | ((sc12[k - 4] >> 6) << 4);
                mm = (sc12[k + 4] >> 4) | ((sc12[k] >> 6) << 4);
            }
            s[k] = d * (float)sc;
            m[k] = -(dmin * (float)mm);
            const uint8_t *qq = qs + 32 * (k / 2);
            for (int l = 0; l < 32; l++) {
                int v = (qq[l] >> (4 * (k & 1))) & 15;
                if (t == GM_Q5_K) v |= ((qh[l] >> k) & 1) << 4;
                q[32 * k + l] = (int8_t)v;
            }
        }
        return;
    }
    case GM_Q6_K: {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = F16(b + 208);
        for (int j = 0; j < 16; j++) s[j] = d * (float)sc[j];
        for (int k = 0; k < 8; k++) {
            int h = k / 4, kk = k % 4;
            const uint8_t *lo = ql + 64 * h + 32 * (kk & 1), *hi = qh + 32 * h;
            int shift = kk < 2 ? 0 : 4;
            for (int l = 0; l < 32; l++) {
                int v = ((lo[l] >> shift) & 15) | ((hi[l] >> (2 * kk)) & 3) << 4;
                q[32 * k + l] = (int8_t)(v - 32);
            }
        }
        return;
    }
    default: return;
    }
}

static void put_f32(uint8_t *p, float v) { memcpy(p, &v, 4); }
static float get_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* Q8_0 (the embedding's type): codes and scale bytes move as they are. */
/* BF16: the values move as they are, 2-byte units. */
static void pack_bf16_panel(uint8_t *dst, const uint8_t *W, size_t rb, size_t nrows, size_t tiles) {
    for (size_t b = 0; b < tiles; b++) {
        uint8_t *t = dst + b * 1024;
        for (size_t r = 0; r < nrows; r++) {
            uint32_t pairs[16];
            memcpy(pairs, W + r * rb + b * 64, 64);
            for (int p = 0; p < 16; p++) memcpy(t + 64 * p + 4 * r, &pairs[p], 4);
        }
    }
}

static void pack_q8_0_panel(uint8_t *dst, const uint8_t *W, size_t rb, size_t nrows, size_t tiles) {
    for (size_t b = 0; b < tiles; b++) {
        uint8_t *t = dst + b * 544;
        for (size_t r = 0; r < nrows; r++) {
            const uint8_t *blk = W + r * rb + b * 34;
            t[512 + 2 * r] = blk[0];
            t[512 + 2 * r + 1] = blk[1];
            uint16_t pairs[16];
            memcpy(pairs, blk + 2, 32);
            for (int p = 0; p < 16; p++) memcpy(t + 32 * p + 2 * r, &pairs[p], 2);
        }
    }
}

void gm_pack_rows(gm_packed *P, const void *W, size_t row_bytes, size_t r0, size_t r1) {
    const size_t tiles = P->cols / 32, blk = block_of(P->from), per_block = blk / 32;
    const size_t bbytes = gm_kernels_bytes_of(P->from, blk);
    for (size_t p0 = r0; p0 < r1; p0 += GM_PANEL_ROWS) {
        uint8_t *panel = P->data + p0 / GM_PANEL_ROWS * P->panel_bytes;
        size_t nrows = r1 - p0 < GM_PANEL_ROWS ? r1 - p0 : GM_PANEL_ROWS;
        memset(panel, 0, P->panel_bytes);
        const uint8_t *src = (const uint8_t *)W + (p0 - r0) * row_bytes;
        if (P->from == GM_Q8_0) {
            pack_q8_0_panel(panel, src, row_bytes, nrows, tiles);
            continue;
        }
        if (P->from == GM_BF16) {
            pack_bf16_panel(panel, src, row_bytes, nrows, tiles);
            continue;
        }
        int8_t q[256];
        float s[16], m[8];
        const size_t so = scale_offset(P->kind);
        /* unsigned codes for the nibble kinds: the offsets come back in the kernels */
        const int off = P->kind == GM_PK_N5D ? 16 : P->kind == GM_PK_N6 ? 32 : 0;
        for (size_t r = 0; r < nrows; r++) {
            for (size_t bi = 0; bi < P->cols / blk; bi++) {
                const uint8_t *block = src + r * row_bytes + bi * bbytes;
                decode_block(P->from, block, q, s, m);
                for (size_t k = 0; k < per_block; k++) {
                    uint8_t *t = panel + (bi * per_block + k) * P->tile_bytes;
                    for (int p = 0; p < 16; p++)
                        for (int j = 0; j < 2; j++) put_code(P->kind, t, p, (int)(2 * r) + j, q[32 * k + 2 * p + j] + off);
                    switch (P->kind) {
                    case GM_PK_D16: case GM_PK_N5D: /* d, verbatim */
                        memcpy(t + so + 2 * r, block + (P->from == GM_Q6_K ? 208 : 0), 2);
                        break;
                    case GM_PK_SM32: case GM_PK_N4SM:
                        put_f32(t + so + 4 * r, s[k]);
                        put_f32(t + so + 64 + 4 * r, m[k]);
                        break;
                    case GM_PK_N6:
                        put_f32(t + so + 4 * r, s[2 * k]);
                        put_f32(t + so + 64 + 4 * r, s[2 * k + 1]);
                        break;
                    default: break;
                    }
                }
            }
        }
    }
}

void gm_packed_row(const gm_packed *P, size_t r, float *out) {
    const uint8_t *panel = P->data + r / GM_PANEL_ROWS * P->panel_bytes;
    size_t i = r % GM_PANEL_ROWS;
    for (size_t b = 0; b < P->cols / 32; b++) {
        const uint8_t *t = panel + b * P->tile_bytes;
        if (P->kind == GM_PK_BF16) {
            for (int c = 0; c < 32; c++) out[32 * b + (size_t)c] = gm_bf16_to_f32(gm_kernels_le16(t + 64 * (c / 2) + 4 * i + 2 * (c & 1)));
            continue;
        }
        const size_t so = scale_offset(P->kind);
        for (int c = 0; c < 32; c++) {
            int code = gm_packed_code(P->kind, t, c / 2, (int)(2 * i) + (c & 1));
            float w;
            switch (P->kind) {
            case GM_PK_D16: w = F16(t + so + 2 * i) * (float)code; break;
            case GM_PK_N5D: w = F16(t + so + 2 * i) * (float)(code - 16); break;
            case GM_PK_SM32: case GM_PK_N4SM: w = get_f32(t + so + 4 * i) * (float)code + get_f32(t + so + 64 + 4 * i); break;
            case GM_PK_N6: w = get_f32(t + so + 64 * (size_t)(c / 16) + 4 * i) * (float)(code - 32); break;
            default: w = 0; break;
            }
            out[32 * b + (size_t)c] = w;
        }
    }
}

/* x ~ hi + lo in bf16, each rounded to nearest even (hi = bf16(x), lo = bf16(x - hi)) */
void gm_prepare_x_bf16(const float *x, size_t ldx, size_t T, size_t cols, bool split, gm_xq *xq) {
    xq->x = x;
    xq->ldx = ldx;
    xq->cols = cols;
    xq->ldq = cols;
    xq->ldd = cols / 32;
    xq->split = split && xq->hi && xq->lo;
    if (!xq->split) return;
    size_t Tpad = (T + 15) / 16 * 16;
    for (size_t t = 0; t < Tpad; t++)
        for (size_t c = 0; c < cols; c++) {
            float v = t < T ? x[t * ldx + c] : 0.0f;
            uint16_t h = gm_f32_to_bf16(v);
            xq->hi[t * cols + c] = h;
            xq->lo[t * cols + c] = gm_f32_to_bf16(v - gm_bf16_to_f32(h));
        }
}
