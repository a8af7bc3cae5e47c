/* Re-laying quantized GGUF matrices out as 16-row panels (layout in packed.h), reading single rows
 * back, and quantizing activations to int16. It runs once per weight at load time: a generic
 * per-value path for every type (the reference), and SSE2 paths for the types real files hold most
 * of (Q8_0, BF16, Q5_0 as either kind, Q4_K, Q6_K); the activation code runs per input vector. */
#include <emmintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"

#define F16(p) gm_f16_to_f32(gm_kernels_le16(p))

/* The kind each type packs as on kernels without a preference (Q5_0: the 5-bit tiles). */
static gm_pack_kind native_kind(gm_dtype type) {
    switch (type) {
    case GM_Q4_0: case GM_Q8_0: return GM_PK_D16;
    case GM_Q5_1: case GM_Q5_K: return GM_PK_SM32;
    case GM_Q4_1: return GM_PK_N4SM;
    case GM_Q4_K: return GM_PK_N4K;
    case GM_Q5_0: return GM_PK_N5D;
    case GM_Q6_K: return GM_PK_N6;
    case GM_BF16: return GM_PK_BF16;
    default: return GM_PK_NONE;
    }
}

gm_pack_kind gm_pack_kind_of(gm_dtype type) {
    if (type == GM_Q5_0 && gm_packed_ops_chosen()->q5_0_as_d16) return GM_PK_D16;
    if (type == GM_Q5_0 && gm_packed_ops_chosen()->row_form) return GM_PK_N5R;
    if (type == GM_Q4_K && gm_packed_ops_chosen()->row_form) return GM_PK_N4R;
    if (type == GM_Q6_K) return gm_packed_ops_q6_kind(gm_packed_ops_chosen());
    return native_kind(type);
}

bool gm_pack_kind_holds(gm_pack_kind kind, gm_dtype type) {
    return kind != GM_PK_NONE &&
           (kind == native_kind(type) || (type == GM_Q5_0 && (kind == GM_PK_D16 || kind == GM_PK_N5R)) ||
            (type == GM_Q4_K && kind == GM_PK_N4R) || (type == GM_Q6_K && (kind == GM_PK_N6C || kind == GM_PK_N6H)));
}

/* Where a kind's scales start in a tile (after its codes; not the compact kinds: they have none there). */
static size_t scale_offset(gm_pack_kind k) {
    switch (k) {
    case GM_PK_N4SM: return 256;
    case GM_PK_N5D: case GM_PK_N5R: return 320;
    default: return 512;
    }
}

static bool nibble_kind(gm_pack_kind k) {
    return k == GM_PK_N4SM || gm_pack_kind_q4k(k) || k == GM_PK_N5D || k == GM_PK_N5R || gm_pack_kind_q6(k);
}

/* Code of pair p, lane i of tile t (signed for the 8-bit kinds, unsigned 0..63 for the others). */
int gm_packed_code(gm_pack_kind k, const uint8_t *t, int p, int i) {
    if (!nibble_kind(k)) return (int8_t)t[32 * p + i];
    if (k == GM_PK_N6H) { /* column c = 2p + i % 2: step c / 4, slot c % 4 of row i / 2 */
        int c = 2 * p + (i & 1), g = c >> 2, at = 4 * (i >> 1) + (c & 3);
        return (t[64 * (g >> 1) + at] >> 4 * (g & 1) & 15) | (t[256 + 64 * (g >> 2) + at] >> 2 * (g & 3) & 3) << 4;
    }
    if (k == GM_PK_N6 || k == GM_PK_N5R || k == GM_PK_N4R) { /* step g = p % 8, slot 2 (p / 8) + i % 2 of row i / 2 */
        int g = p & 7, at = 4 * (i >> 1) + 2 * (p >> 3) + (i & 1), c = t[64 * (g >> 1) + at] >> 4 * (g & 1) & 15;
        if (k == GM_PK_N4R) return c;
        if (k == GM_PK_N5R) return c | (t[256 + 8 * g + at / 8] >> at % 8 & 1) << 4;
        return c | (t[256 + 64 * (g >> 2) + at] >> 2 * (g & 3) & 3) << 4;
    }
    int c = (t[32 * (p & 7) + i] >> (p < 8 ? 0 : 4)) & 15;
    if (k == GM_PK_N6C) return c | ((t[256 + 32 * (p & 3) + i] >> (2 * (p >> 2))) & 3) << 4;
    if (k != GM_PK_N4SM && k != GM_PK_N4K) c |= (int)((gm_kernels_le32(t + 256 + 4 * p) >> i) & 1) << 4;
    return c;
}

static size_t block_of(gm_dtype t) { return t == GM_Q4_K || t == GM_Q5_K || t == GM_Q6_K ? 256 : 32; }

size_t gm_packed_bytes(gm_dtype type, size_t rows, size_t cols) {
    if (cols == 0 || cols % block_of(type)) return 0;
    gm_packed P;
    gm_pack_describe(type, rows, cols, &P); /* a type that does not pack: kind NONE, 0 bytes */
    return gm_packed_size(&P);
}

void gm_pack_describe(gm_dtype type, size_t rows, size_t cols, gm_packed *P) {
    gm_pack_describe_as(gm_pack_kind_of(type), type, rows, cols, P);
}

void gm_pack_describe_as(gm_pack_kind kind, gm_dtype type, size_t rows, size_t cols, gm_packed *P) {
    memset(P, 0, sizeof *P);
    P->kind = gm_pack_kind_holds(kind, type) ? kind : GM_PK_NONE;
    P->from = type;
    P->rows = rows;
    P->cols = cols;
    P->tile_bytes = gm_pack_tile_bytes(P->kind);
    P->panel_bytes = cols / 32 * P->tile_bytes;
    if (gm_pack_kind_compact(P->kind)) { /* packed.h: codes, 32 bytes of scale codes per tile, f16 scales */
        P->sb_bytes = gm_pack_kind_q4k(P->kind) ? 64 : 32;
        P->sc_at = P->panel_bytes;
        P->sb_at = P->sc_at + cols / 32 * 32;
        P->panel_bytes = (P->sb_at + cols / 256 * P->sb_bytes + 63) / 64 * 64;
    }
}

void gm_packed_k_scales(const gm_packed *P, const uint8_t *panel, size_t b, int i, float out[2]) {
    const uint8_t *sc = gm_packed_sc(P, panel, b), *sb = gm_packed_sb(P, panel, b);
    float d = F16(sb + 2 * i);
    if (gm_pack_kind_q4k(P->kind)) {
        out[0] = d * (float)sc[i];
        out[1] = F16(sb + 32 + 2 * i) * (float)sc[16 + i]; /* -dmin mn */
    } else {
        out[0] = d * (float)(int8_t)sc[i];
        out[1] = d * (float)(int8_t)sc[16 + i];
    }
}

/* The 6-bit scale and minimum of 32-value chunk k (< 8) of a Q4_K / Q5_K block, from its 12 scale bytes */
static int k4_scale(const uint8_t *sc12, int k) {
    return k < 4 ? sc12[k] & 63 : (sc12[k + 4] & 15) | ((sc12[k - 4] >> 6) << 4);
}
static int k4_min(const uint8_t *sc12, int k) {
    return k < 4 ? sc12[k + 4] & 63 : (sc12[k + 4] >> 4) | ((sc12[k] >> 6) << 4);
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
            int sc = k4_scale(sc12, k), mm = k4_min(sc12, k);
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

/* The compact scales (packed.h) of row r's 256-value block b of a Q4_K or Q6_K row into a panel:
 * tile k's scale codes at sc + 32 k (Q4_K: sc, then mn at + 16; Q6_K: the int8 scales of columns
 * 0-15, then 16-31), the f16 d (and Q4_K's -dmin) in the block's record. NULL b: a row past the end,
 * all zero. */
static void put_k_scales(gm_dtype from, const uint8_t *b, uint8_t *sc, uint8_t *sb, size_t r) {
    if (!b) {
        for (int k = 0; k < 8; k++) sc[32 * k + r] = sc[32 * k + 16 + r] = 0;
        memset(sb + 2 * r, 0, 2);
        if (from == GM_Q4_K) memset(sb + 32 + 2 * r, 0, 2);
        return;
    }
    if (from == GM_Q4_K) {
        const uint8_t *sc12 = b + 4;
        for (int k = 0; k < 8; k++) {
            sc[32 * k + r] = (uint8_t)k4_scale(sc12, k);
            sc[32 * k + 16 + r] = (uint8_t)k4_min(sc12, k);
        }
        memcpy(sb + 2 * r, b, 2);
        uint16_t nd = (uint16_t)(gm_kernels_le16(b + 2) ^ 0x8000u); /* -dmin: the sign bit, exactly */
        sb[32 + 2 * r] = (uint8_t)nd, sb[32 + 2 * r + 1] = (uint8_t)(nd >> 8);
        return;
    }
    for (int k = 0; k < 8; k++) sc[32 * k + r] = b[192 + 2 * k], sc[32 * k + 16 + r] = b[192 + 2 * k + 1];
    memcpy(sb + 2 * r, b + 208, 2);
}

/* 8 x 8 transpose of 16-bit elements (SSE2, baseline x86-64): out[j] lane i = in[i] lane j */
static void transpose8x16(const __m128i in[8], __m128i out[8]) {
    __m128i a0 = _mm_unpacklo_epi16(in[0], in[1]), a1 = _mm_unpackhi_epi16(in[0], in[1]);
    __m128i a2 = _mm_unpacklo_epi16(in[2], in[3]), a3 = _mm_unpackhi_epi16(in[2], in[3]);
    __m128i a4 = _mm_unpacklo_epi16(in[4], in[5]), a5 = _mm_unpackhi_epi16(in[4], in[5]);
    __m128i a6 = _mm_unpacklo_epi16(in[6], in[7]), a7 = _mm_unpackhi_epi16(in[6], in[7]);
    __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
    __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
    __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
    __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
    out[0] = _mm_unpacklo_epi64(b0, b4), out[1] = _mm_unpackhi_epi64(b0, b4);
    out[2] = _mm_unpacklo_epi64(b1, b5), out[3] = _mm_unpackhi_epi64(b1, b5);
    out[4] = _mm_unpacklo_epi64(b2, b6), out[5] = _mm_unpackhi_epi64(b2, b6);
    out[6] = _mm_unpacklo_epi64(b3, b7), out[7] = _mm_unpackhi_epi64(b3, b7);
}

/* 4 x 4 transpose of 32-bit elements */
static void transpose4x32(const __m128i in[4], __m128i out[4]) {
    __m128i a0 = _mm_unpacklo_epi32(in[0], in[1]), a1 = _mm_unpackhi_epi32(in[0], in[1]);
    __m128i a2 = _mm_unpacklo_epi32(in[2], in[3]), a3 = _mm_unpackhi_epi32(in[2], in[3]);
    out[0] = _mm_unpacklo_epi64(a0, a2), out[1] = _mm_unpackhi_epi64(a0, a2);
    out[2] = _mm_unpacklo_epi64(a1, a3), out[3] = _mm_unpackhi_epi64(a1, a3);
}

/* 16 bytes, byte j = 16 where bit j of m is set, else 0 */
static __m128i bit4_bytes(uint32_t m) {
    const __m128i sel = _mm_set_epi8((char)128, 64, 32, 16, 8, 4, 2, 1, (char)128, 64, 32, 16, 8, 4, 2, 1);
    __m128i v = _mm_set_epi64x((long long)(0x0101010101010101ull * (m >> 8 & 0xff)),
                               (long long)(0x0101010101010101ull * (m & 0xff)));
    return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(v, sel), sel), _mm_set1_epi8(16));
}

/* A Q5_0 block's 32 codes as int8 q - 16: values 0-15 in *lo, 16-31 in *hi. */
static void q5_0_codes(const uint8_t *blk, __m128i *lo, __m128i *hi) {
    const __m128i m4 = _mm_set1_epi8(0x0f), sixteen = _mm_set1_epi8(16);
    __m128i qs = _mm_loadu_si128((const __m128i *)(blk + 6));
    uint32_t qh = gm_kernels_le32(blk + 2);
    *lo = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(qs, m4), bit4_bytes(qh & 0xffff)), sixteen);
    *hi = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), bit4_bytes(qh >> 16)), sixteen);
}

/* Q8_0, or Q5_0 as D16: per tile, the 16 rows' 16 code pairs (u16) transposed to [pair][row]; scales
 * verbatim. Missing rows (nrows < 16) stay zero. */
static void pack_d16_panel(gm_dtype from, uint8_t *dst, const uint8_t *W, size_t rb, size_t nrows, size_t tiles) {
    const size_t block_bytes = from == GM_Q8_0 ? 34 : 22;
    for (size_t b = 0; b < tiles; b++) {
        uint8_t *t = dst + b * 544;
        __m128i in[16][2];
        for (size_t r = 0; r < 16; r++) {
            if (r < nrows) {
                const uint8_t *blk = W + r * rb + b * block_bytes;
                memcpy(t + 512 + 2 * r, blk, 2);
                if (from == GM_Q8_0) {
                    in[r][0] = _mm_loadu_si128((const __m128i *)(blk + 2));
                    in[r][1] = _mm_loadu_si128((const __m128i *)(blk + 18));
                } else {
                    q5_0_codes(blk, &in[r][0], &in[r][1]);
                }
            } else {
                memset(t + 512 + 2 * r, 0, 2);
                in[r][0] = in[r][1] = _mm_setzero_si128();
            }
        }
        /* rows 8h..8h+7, pairs 8k..8k+7: an 8 x 8 block */
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 2; k++) {
                __m128i blk[8], out[8];
                for (int i = 0; i < 8; i++) blk[i] = in[8 * h + i][k];
                transpose8x16(blk, out);
                for (int j = 0; j < 8; j++) _mm_storeu_si128((__m128i *)(t + 32 * (8 * k + j) + 16 * h), out[j]);
            }
    }
}

/* BF16: per tile, the 16 rows' 16 value pairs (u32) transposed to [pair][row]. */
static void pack_bf16_panel(uint8_t *dst, const uint8_t *W, size_t rb, size_t nrows, size_t tiles) {
    for (size_t b = 0; b < tiles; b++) {
        uint8_t *t = dst + b * 1024;
        __m128i in[16][4];
        for (size_t r = 0; r < 16; r++)
            for (int k = 0; k < 4; k++)
                in[r][k] = r < nrows ? _mm_loadu_si128((const __m128i *)(W + r * rb + b * 64 + 16 * k)) : _mm_setzero_si128();
        for (int h = 0; h < 4; h++)     /* rows 4h..4h+3 */
            for (int k = 0; k < 4; k++) { /* pairs 4k..4k+3 */
                __m128i blk[4] = {in[4 * h][k], in[4 * h + 1][k], in[4 * h + 2][k], in[4 * h + 3][k]}, out[4];
                transpose4x32(blk, out);
                for (int j = 0; j < 4; j++) _mm_storeu_si128((__m128i *)(t + 64 * (4 * k + j) + 16 * h), out[j]);
            }
    }
}

/* The nibble bytes of one row's 32-column tile from two 16-byte halves of 4-bit codes that sit in
 * the low (shift 0) or high (shift 4) nibbles: byte m = code m | code (m + 16) << 4. */
static __m128i nibble_pairs(const uint8_t *q, int shift) {
    const __m128i lo4 = _mm_set1_epi8(0x0f), hi4 = _mm_set1_epi8((char)0xf0);
    __m128i a = _mm_loadu_si128((const __m128i *)q), b = _mm_loadu_si128((const __m128i *)(q + 16));
    if (shift == 0) return _mm_or_si128(_mm_and_si128(a, lo4), _mm_and_si128(_mm_slli_epi16(b, 4), hi4));
    return _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), lo4), _mm_and_si128(b, hi4));
}

/* Plane words from the rows' column masks: word p takes bits 2p, 2p + 1 of row r's mask at bits
 * 2r, 2r + 1, i.e. a transpose of 16 x 16 two-bit cells, done in place by swapping blocks of 8, 4, 2
 * and 1 cells (row r of w in, plane word p out). */
static void transpose_cells2(uint32_t w[16]) {
    static const struct { int rows, shift; uint32_t mask; } level[4] = {
        {8, 16, 0x0000ffffu}, {4, 8, 0x00ff00ffu}, {2, 4, 0x0f0f0f0fu}, {1, 2, 0x33333333u}};
    for (int l = 0; l < 4; l++) {
        int d = level[l].rows, s = level[l].shift;
        for (int r = 0; r < 16; r++) {
            if (r & d) continue; /* r is the upper row of a pair (r, r + d) */
            uint32_t t = ((w[r] >> s) ^ w[r + d]) & level[l].mask;
            w[r + d] ^= t;
            w[r] ^= t << s;
        }
    }
}

static void put_plane(uint8_t *o, const uint32_t plane[16]) {
    for (int p = 0; p < 16; p++)
        for (int b = 0; b < 4; b++) o[4 * p + b] = (uint8_t)(plane[p] >> (8 * b)); /* little-endian */
}

/* The 16 rows' nibble bytes of a tile, transposed into place (as for Q5_0 above). */
static void put_nibbles(uint8_t *t, const __m128i in[16]) {
    for (int h = 0; h < 2; h++) {
        __m128i out[8];
        transpose8x16(in + 8 * h, out);
        for (int g = 0; g < 8; g++) _mm_storeu_si128((__m128i *)(t + 32 * g + 16 * h), out[g]);
    }
}

/* A row's nibbles of a tile in N5R's or N4R's row form (packed.h) from its 16 nibble bytes q (byte j: element
 * j low, j + 16 high; Q5_0's qs, Q4_K's from nibble_pairs): slots 0-3 of step g are elements 2g, 2g + 1,
 * 2g + 16, 2g + 17, so step pair m's 4 bytes are lo(q[4m]) | lo(q[4m + 2]) << 4, lo(q[4m + 1]) |
 * lo(q[4m + 3]) << 4 and the same of the high nibbles: dword m of the result. */
static __m128i n5r_row(__m128i q) {
    const __m128i n4 = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(q, n4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), n4);
    /* byte k: nibble k | nibble k + 2 << 4 (a byte of at most 15 shifted by 4 stays in its byte) */
    lo = _mm_or_si128(lo, _mm_slli_epi16(_mm_srli_si128(lo, 2), 4));
    hi = _mm_or_si128(hi, _mm_slli_epi16(_mm_srli_si128(hi, 2), 4));
    /* word 2k of lo, then of hi, for k = 2m: step pair m in dwords 0, 2 of each half */
    __m128i a = _mm_unpacklo_epi16(lo, hi), b = _mm_unpackhi_epi16(lo, hi);
    enum { EVEN_FIRST = _MM_SHUFFLE(3, 1, 2, 0) }; /* dwords 0, 2 to the low half */
    return _mm_unpacklo_epi64(_mm_shuffle_epi32(a, EVEN_FIRST), _mm_shuffle_epi32(b, EVEN_FIRST));
}

/* The 16 rows' nibbles of an N5R or N4R tile: rows' dwords m transposed 4 rows at a time to byte 64 m + 4 r */
static void put_n5r_nibbles(uint8_t *t, const __m128i in[16]) {
    for (int r = 0; r < 16; r += 4) {
        __m128i a = n5r_row(in[r]), b = n5r_row(in[r + 1]), c = n5r_row(in[r + 2]), d = n5r_row(in[r + 3]);
        __m128i ab0 = _mm_unpacklo_epi32(a, b), ab1 = _mm_unpackhi_epi32(a, b);
        __m128i cd0 = _mm_unpacklo_epi32(c, d), cd1 = _mm_unpackhi_epi32(c, d);
        _mm_storeu_si128((__m128i *)(t + 4 * r), _mm_unpacklo_epi64(ab0, cd0));
        _mm_storeu_si128((__m128i *)(t + 64 + 4 * r), _mm_unpackhi_epi64(ab0, cd0));
        _mm_storeu_si128((__m128i *)(t + 128 + 4 * r), _mm_unpacklo_epi64(ab1, cd1));
        _mm_storeu_si128((__m128i *)(t + 192 + 4 * r), _mm_unpackhi_epi64(ab1, cd1));
    }
}

/* 32 bits to 64 with two zero bits after each 2-bit cell: cell c to bits 4c, 4c + 1 */
static uint64_t spread_cells2(uint32_t w) {
    uint64_t x = w;
    x = (x | x << 16) & 0x0000ffff0000ffffull;
    x = (x | x << 8) & 0x00ff00ff00ff00ffull;
    x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
    return (x | x << 2) & 0x3333333333333333ull;
}

/* Q5_0 -> N5D: byte 32g + 2r + j of a tile is byte 2g + j of row r's qs (low nibble = element
 * 2g + j, high nibble = element 2g + j + 16, as in the tile), so the nibbles are an 8 x 16 transpose
 * of u16; plane word p takes bits 2p, 2p + 1 of every row's qh. N5R (`rows`): the nibbles by put_n5r_nibbles,
 * and step g's plane word interleaves the cells of words g and g + 8 (columns 2g, 2g + 1 and 16 more). */
static void pack_q5_0_panel(uint8_t *dst, const uint8_t *W, size_t rb, size_t nrows, size_t tiles, bool rows) {
    for (size_t b = 0; b < tiles; b++) {
        uint8_t *t = dst + b * 352;
        __m128i in[16];
        uint32_t plane[16] = {0};
        for (size_t r = 0; r < 16; r++) {
            if (r >= nrows) {
                memset(t + 320 + 2 * r, 0, 2);
                in[r] = _mm_setzero_si128();
                continue;
            }
            const uint8_t *blk = W + r * rb + b * 22;
            memcpy(t + 320 + 2 * r, blk, 2);
            plane[r] = gm_kernels_le32(blk + 2); /* row r's bit 4 of each column */
            in[r] = _mm_loadu_si128((const __m128i *)(blk + 6));
        }
        transpose_cells2(plane);
        if (!rows) {
            put_nibbles(t, in);
            put_plane(t + 256, plane);
            continue;
        }
        put_n5r_nibbles(t, in);
        for (int g = 0; g < 8; g++) {
            uint64_t w = spread_cells2(plane[g]) | spread_cells2(plane[g + 8]) << 2;
            memcpy(t + 256 + 8 * g, &w, 8); /* x86: little-endian */
        }
    }
}

/* Row r's crumbs (packed.h, GM_PK_N6C) of the Q6_K tile whose high bits are bits kk2, kk2 + 1 of the 32
 * qh bytes q: byte m = 2 k + j of the result goes to byte 32 k + 2 r + j of the crumb section, and holds
 * the 2-bit parts of columns m, m + 8, m + 16, m + 24. */
static uint64_t crumbs_of_row(const uint8_t *q, int kk2) {
    const __m128i three = _mm_set1_epi8(3);
    __m128i a = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)q), _mm_cvtsi32_si128(kk2)), three);
    __m128i b = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)(q + 16)), _mm_cvtsi32_si128(kk2)), three);
    __m128i f = _mm_or_si128(a, _mm_slli_epi16(b, 4)); /* byte c: columns c, c + 16 */
    __m128i e = _mm_or_si128(f, _mm_slli_epi16(_mm_srli_si128(f, 8), 2));
    return (uint64_t)_mm_cvtsi128_si64(e);
}

/* Words 0, 2, 4, 6 of v in its low half, 1, 3, 5, 7 in its high half (SSE2: no byte shuffle here). */
static __m128i words_even_odd(__m128i v) {
    v = _mm_shufflehi_epi16(_mm_shufflelo_epi16(v, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
    return _mm_shuffle_epi32(v, _MM_SHUFFLE(3, 1, 2, 0));
}

/* Dword 0 of the result: byte k = byte k of dword 0 | byte k of dword 1 << 2 | ... << 4 | ... << 6. */
static uint32_t fold_crumbs(__m128i u) {
    u = _mm_or_si128(u, _mm_slli_epi32(_mm_srli_si128(u, 4), 2));
    u = _mm_or_si128(u, _mm_slli_epi32(_mm_srli_si128(u, 8), 4));
    return (uint32_t)_mm_cvtsi128_si32(u);
}

/* Row r of a Q6_K tile in N6's row form (packed.h), written into tile t: its columns' low 4 bits from 32 ql
 * bytes (nibbles at shift ns), bits 4-5 from 32 qh bytes (at shift hs). Columns c and c + 16 are halves
 * 0 and 1 of a word pair: slot 2h + j of step g is column 16h + 2g + j. By halves (N6H): slot s of step g is
 * column 4g + s, so step pair m's low nibbles are dword 2m of the columns and its high ones dword 2m + 1,
 * and the crumbs of step quad q fold the dwords of half q. */
static void put_n6_row(uint8_t *t, size_t r, const uint8_t *ql, int ns, const uint8_t *qh, int hs, bool halves) {
    const __m128i n4 = _mm_set1_epi8(15), three = _mm_set1_epi8(3);
    const __m128i vns = _mm_cvtsi32_si128(ns), vhs = _mm_cvtsi32_si128(hs);
    __m128i e = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)ql), vns), n4);
    __m128i f = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)(ql + 16)), vns), n4);
    __m128i he = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)qh), vhs), three);
    __m128i hf = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)(qh + 16)), vhs), three);
    __m128i nib;
    uint32_t c0, c1;
    if (halves) {
        enum { EVEN_ODD = _MM_SHUFFLE(3, 1, 2, 0) }; /* dwords 0, 2 low, 1, 3 high */
        e = _mm_shuffle_epi32(e, EVEN_ODD), f = _mm_shuffle_epi32(f, EVEN_ODD);
        nib = _mm_or_si128(_mm_unpacklo_epi64(e, f), _mm_slli_epi16(_mm_unpackhi_epi64(e, f), 4));
        c0 = fold_crumbs(he), c1 = fold_crumbs(hf);
    } else { /* step g's slots are word g of each half: even steps to the low nibbles, odd to the high */
        e = words_even_odd(e), f = words_even_odd(f);
        nib = _mm_or_si128(_mm_unpacklo_epi16(e, f), _mm_slli_epi16(_mm_unpackhi_epi16(e, f), 4));
        c0 = fold_crumbs(_mm_unpacklo_epi16(he, hf)), c1 = fold_crumbs(_mm_unpackhi_epi16(he, hf));
    }
    _Alignas(16) uint8_t n[16];
    _mm_store_si128((__m128i *)n, nib);
    for (int m = 0; m < 4; m++) memcpy(t + 64 * m + 4 * r, n + 4 * m, 4);
    memcpy(t + 256 + 4 * r, &c0, 4);
    memcpy(t + 320 + 4 * r, &c1, 4);
}

/* Q4_K -> N4K / N4R and Q6_K -> N6 / N6H / N6C, one 256-value block (8 tiles) of 16 rows at a time: the same
 * bytes as the generic path below (tests/unit/test_kernels_packed.c compares them), several times faster (the
 * generic path goes value by value). */
static void pack_k_panel(const gm_packed *P, uint8_t *panel, const uint8_t *W, size_t rb, size_t nrows) {
    const gm_dtype from = P->from;
    const size_t bbytes = from == GM_Q4_K ? 144 : 210, tile_bytes = P->tile_bytes;
    for (size_t bi = 0; bi < P->cols / 256; bi++) {
        uint8_t *tiles = panel + bi * 8 * tile_bytes;
        uint8_t *sc = (uint8_t *)gm_packed_sc(P, panel, 8 * bi), *sb = (uint8_t *)gm_packed_sb(P, panel, 8 * bi);
        __m128i in[8][16];
        /* Q6_K's high bits as crumbs (N6C; its rows past the end zero), or N6's and N6H's rows written in place */
        uint64_t crumbs[8][16];
        const bool n6c = P->kind == GM_PK_N6C, n6 = P->kind == GM_PK_N6 || P->kind == GM_PK_N6H;
        const bool n4r = P->kind == GM_PK_N4R;
        for (size_t r = 0; r < 16; r++) {
            if (r >= nrows) {
                for (int k = 0; k < 8; k++) {
                    in[k][r] = _mm_setzero_si128();
                    crumbs[k][r] = 0;
                    if (n6)
                        for (int m = 0; m < 6; m++) memset(tiles + (size_t)k * tile_bytes + 64 * m + 4 * r, 0, 4);
                }
                put_k_scales(from, NULL, sc, sb, r);
                continue;
            }
            const uint8_t *b = W + r * rb + bi * bbytes;
            put_k_scales(from, b, sc, sb, r);
            if (from == GM_Q4_K) {
                for (int k = 0; k < 8; k++) in[k][r] = nibble_pairs(b + 16 + 32 * (k / 2), 4 * (k & 1));
            } else {
                const uint8_t *ql = b, *qh = b + 128;
                for (int k = 0; k < 8; k++) {
                    int h = k / 4, kk = k % 4;
                    if (n6) {
                        put_n6_row(tiles + (size_t)k * tile_bytes, r, ql + 64 * h + 32 * (kk & 1), kk < 2 ? 0 : 4,
                                   qh + 32 * h, 2 * kk, P->kind == GM_PK_N6H);
                        continue;
                    }
                    in[k][r] = nibble_pairs(ql + 64 * h + 32 * (kk & 1), kk < 2 ? 0 : 4);
                    crumbs[k][r] = crumbs_of_row(qh + 32 * h, 2 * kk);
                }
            }
        }
        for (int k = 0; k < 8 && !n6; k++) {
            uint8_t *t = tiles + (size_t)k * tile_bytes;
            if (n4r) { /* rows past the end from their zeroed nibble pairs */
                put_n5r_nibbles(t, in[k]);
                continue;
            }
            put_nibbles(t, in[k]);
            if (n6c)
                for (int r = 0; r < 16; r++)
                    for (int q = 0; q < 4; q++) {
                        t[256 + 32 * q + 2 * r] = (uint8_t)(crumbs[k][r] >> 16 * q);
                        t[256 + 32 * q + 2 * r + 1] = (uint8_t)(crumbs[k][r] >> (16 * q + 8));
                    }
        }
    }
    memset(panel + P->sb_at + P->cols / 256 * P->sb_bytes, 0, P->panel_bytes - P->sb_at - P->cols / 256 * P->sb_bytes);
}

/* One tile from the codes of its 16 rows (codes[r][c], c < 32; unsigned for the nibble kinds). */
static void put_codes(gm_pack_kind k, uint8_t *t, const int8_t codes[16][32]) {
    if (k == GM_PK_D16 || k == GM_PK_SM32) {
        for (int p = 0; p < 16; p++)
            for (int r = 0; r < 16; r++) {
                t[32 * p + 2 * r] = (uint8_t)codes[r][2 * p];
                t[32 * p + 2 * r + 1] = (uint8_t)codes[r][2 * p + 1];
            }
        return;
    }
    if (k == GM_PK_N6 || k == GM_PK_N6H || k == GM_PK_N5R || k == GM_PK_N4R) {
        /* row form: slot s of step g is column 2g + s % 2 + 16 (s / 2), N6H's 4g + s */
        memset(t, 0, gm_pack_kind_q6(k) ? 384 : k == GM_PK_N5R ? 320 : 256); /* N5R's scales follow */
        for (int g = 0; g < 8; g++)
            for (int r = 0; r < 16; r++)
                for (int s = 0; s < 4; s++) {
                    int col = k == GM_PK_N6H ? 4 * g + s : 2 * g + (s & 1) + 16 * (s >> 1);
                    int c = codes[r][col], at = 4 * r + s;
                    t[64 * (g >> 1) + at] |= (uint8_t)((c & 15) << 4 * (g & 1));
                    if (gm_pack_kind_q6(k)) t[256 + 64 * (g >> 2) + at] |= (uint8_t)((c >> 4 & 3) << 2 * (g & 3));
                    else if (k == GM_PK_N5R) t[256 + 8 * g + at / 8] |= (uint8_t)((c >> 4 & 1) << at % 8);
                }
        return;
    }
    for (int g = 0; g < 8; g++)
        for (int i = 0; i < 32; i++) {
            int r = i / 2, j = i & 1;
            t[32 * g + i] = (uint8_t)((codes[r][2 * g + j] & 15) | (codes[r][2 * (g + 8) + j] & 15) << 4);
        }
    if (k == GM_PK_N6C) { /* byte 32 q + i: bits 4-5 of pairs q, q + 4, q + 8, q + 12 */
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < 32; i++) {
                int v = 0;
                for (int s = 0; s < 4; s++) v |= (codes[i / 2][2 * (q + 4 * s) + (i & 1)] >> 4 & 3) << 2 * s;
                t[256 + 32 * q + i] = (uint8_t)v;
            }
        return;
    }
    if (k != GM_PK_N5D) return;
    for (int p = 0; p < 16; p++) { /* bit 4's plane */
        uint32_t w = 0;
        for (int i = 0; i < 32; i++) w |= (uint32_t)((codes[i / 2][2 * p + (i & 1)] >> 4) & 1) << i;
        uint8_t *o = t + 256 + 4 * p;
        o[0] = (uint8_t)w, o[1] = (uint8_t)(w >> 8), o[2] = (uint8_t)(w >> 16), o[3] = (uint8_t)(w >> 24);
    }
}

static void pack_rows(gm_packed *P, const void *W, size_t row_bytes, size_t r0, size_t r1, bool fast) {
    const size_t tiles = P->cols / 32, blk = block_of(P->from), per_block = blk / 32;
    const size_t bbytes = gm_kernels_bytes_of(P->from, blk);
    const size_t so = scale_offset(P->kind);
    /* unsigned codes for the nibble kinds: the offsets come back in the kernels */
    const int off = P->kind == GM_PK_N5D || P->kind == GM_PK_N5R ? 16 : gm_pack_kind_q6(P->kind) ? 32 : 0;
    for (size_t p0 = r0; p0 < r1; p0 += GM_PANEL_ROWS) {
        uint8_t *panel = P->data + p0 / GM_PANEL_ROWS * P->panel_bytes;
        size_t nrows = r1 - p0 < GM_PANEL_ROWS ? r1 - p0 : GM_PANEL_ROWS;
        const uint8_t *src = (const uint8_t *)W + (p0 - r0) * row_bytes;
        if (fast && P->kind == GM_PK_D16 && (P->from == GM_Q8_0 || P->from == GM_Q5_0)) {
            pack_d16_panel(P->from, panel, src, row_bytes, nrows, tiles);
            continue;
        }
        if (P->from == GM_BF16) {
            pack_bf16_panel(panel, src, row_bytes, nrows, tiles);
            continue;
        }
        if (fast && (P->kind == GM_PK_N5D || P->kind == GM_PK_N5R)) {
            pack_q5_0_panel(panel, src, row_bytes, nrows, tiles, P->kind == GM_PK_N5R);
            continue;
        }
        if (fast && (P->from == GM_Q4_K || P->from == GM_Q6_K)) {
            pack_k_panel(P, panel, src, row_bytes, nrows);
            continue;
        }
        memset(panel, 0, P->panel_bytes);
        for (size_t bi = 0; bi < P->cols / blk; bi++) {
            int8_t codes[8][16][32]; /* [tile of the block][row][column] */
            if (nrows < 16) memset(codes, 0, sizeof codes);
            for (size_t r = 0; r < nrows; r++) {
                const uint8_t *block = src + r * row_bytes + bi * bbytes;
                int8_t q[256];
                float sc[16], m[8];
                decode_block(P->from, block, q, sc, m);
                if (gm_pack_kind_compact(P->kind))
                    put_k_scales(P->from, block, (uint8_t *)gm_packed_sc(P, panel, bi * per_block),
                                 (uint8_t *)gm_packed_sb(P, panel, bi * per_block), r);
                for (size_t k = 0; k < per_block; k++) {
                    uint8_t *t = panel + (bi * per_block + k) * P->tile_bytes;
                    for (int c = 0; c < 32; c++) codes[k][r][c] = (int8_t)(q[32 * k + (size_t)c] + off);
                    switch (P->kind) {
                    case GM_PK_D16: case GM_PK_N5D: case GM_PK_N5R: memcpy(t + so + 2 * r, block, 2); break; /* d */
                    case GM_PK_SM32: case GM_PK_N4SM:
                        put_f32(t + so + 4 * r, sc[k]);
                        put_f32(t + so + 64 + 4 * r, m[k]);
                        break;
                    default: break; /* the compact kinds: put_k_scales above */
                    }
                }
            }
            for (size_t k = 0; k < per_block; k++) put_codes(P->kind, panel + (bi * per_block + k) * P->tile_bytes, codes[k]);
        }
    }
}

void gm_pack_rows(gm_packed *P, const void *W, size_t row_bytes, size_t r0, size_t r1) {
    pack_rows(P, W, row_bytes, r0, r1, true);
}

void gm_pack_rows_ref(gm_packed *P, const void *W, size_t row_bytes, size_t r0, size_t r1) {
    pack_rows(P, W, row_bytes, r0, r1, false);
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
        float ks[2] = {0, 0};
        if (gm_pack_kind_compact(P->kind)) gm_packed_k_scales(P, panel, b, (int)i, ks);
        for (int c = 0; c < 32; c++) {
            int code = gm_packed_code(P->kind, t, c / 2, (int)(2 * i) + (c & 1));
            float w;
            switch (P->kind) {
            case GM_PK_D16: w = F16(t + so + 2 * i) * (float)code; break;
            case GM_PK_N5D: case GM_PK_N5R: w = F16(t + so + 2 * i) * (float)(code - 16); break;
            case GM_PK_SM32: case GM_PK_N4SM: w = get_f32(t + so + 4 * i) * (float)code + get_f32(t + so + 64 + 4 * i); break;
            case GM_PK_N4K: case GM_PK_N4R: w = ks[0] * (float)code + ks[1]; break;
            case GM_PK_N6: case GM_PK_N6C: case GM_PK_N6H: w = ks[c / 16] * (float)(code - 32); break;
            default: w = 0; break;
            }
            out[32 * b + (size_t)c] = w;
        }
    }
}

/* x = hi + mid + lo in bf16, each rounded to nearest even: hi = bf16(x), mid = bf16(x - hi),
 * lo = bf16(x - hi - mid) (both differences are exact in f32; 8 + 8 + 8 bits cover an f32's 24) */
void gm_split_bf16_ref(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    size_t Tpad = (T + 15) / 16 * 16;
    for (size_t t = 0; t < Tpad; t++) {
        for (size_t c = 0; c < cols; c++) {
            float v = t < T ? x[t * ldx + c] : 0.0f;
            uint16_t h = gm_f32_to_bf16(v);
            float r = v - gm_bf16_to_f32(h);
            uint16_t m = gm_f32_to_bf16(r);
            xq->hi[t * cols + c] = h;
            xq->mid[t * cols + c] = m;
            xq->lo[t * cols + c] = gm_f32_to_bf16(r - gm_bf16_to_f32(m));
        }
        /* the 32-value sums, for the "+ m * sum(x)" terms of the quantized kinds */
        for (size_t b = 0; t < T && b < cols / 32; b++) {
            float sum = 0;
            for (int i = 0; i < 32; i++) sum += x[t * ldx + 32 * b + (size_t)i];
            xq->s[t * (cols / 32) + b] = sum;
        }
    }
}

gm_xq gm_xq_rows(const gm_xq *xq, size_t cols, size_t t0) {
    gm_xq v = *xq;
    const size_t nb = cols / GM_XQ_BLOCK;
    if (v.q) v.q += t0 * cols, v.q2 += t0 * cols, v.d += t0 * nb, v.s += t0 * nb, v.qs += 4 * t0 * nb;
    if (v.b8) v.b8 += t0 * 3 * cols, v.e8 += t0 * nb, v.s8 += GM_X8_SUMS * t0 * nb;
    if (v.b8n) v.b8n += t0 * 3 * cols;
    v.xb = NULL, v.has_xb = false;
    return v;
}

void gm_prepare_x_bf16(const float *x, size_t ldx, size_t T, size_t cols, bool split, gm_xq *xq) {
    xq->x = x;
    xq->ldx = ldx;
    xq->cols = cols;
    xq->ldq = cols;
    xq->ldd = cols / 32;
    xq->split = split && xq->hi && xq->mid && xq->lo && xq->s;
    if (xq->split) gm_packed_ops_chosen()->split_bf16(x, ldx, T, cols, xq);
}

/* The smallest f16 at or above v >= 0 (v within the f16 range). */
static uint16_t f16_at_least(float v) {
    uint16_t h = gm_f32_to_f16(v);
    return gm_f16_to_f32(h) < v ? (uint16_t)(h + 1) : h;
}

/* One BF16 tile (bf16 [16 pairs][16 rows][2]: value k is row (k % 32) / 2's) into a D16 one (the same order
 * of codes, then f16 d[16]); false on a value the copy cannot hold. Straight loops over the 512 values, the
 * per-row quantities expanded to the 32 lanes of a pair, so the compiler vectorizes them. */
static bool copy_tile(const uint8_t *s, uint8_t *t) {
    float w[512], amax[32], inv[32];
    int bad = 0;
    for (int k = 0; k < 512; k++) {
        uint32_t u = (uint32_t)gm_kernels_le16(s + 2 * k) << 16;
        memcpy(&w[k], &u, 4);
        bad |= !(fabsf(w[k]) <= 65504.0f * 127.0f); /* inf, NaN, or a scale past f16 */
    }
    if (bad) return false;
    for (int l = 0; l < 32; l++) amax[l] = 0;
    for (int k = 0; k < 512; k++) amax[k & 31] = fabsf(w[k]) > amax[k & 31] ? fabsf(w[k]) : amax[k & 31]; /* finite */
    for (int i = 0; i < GM_PANEL_ROWS; i++) {
        uint16_t h = f16_at_least((amax[2 * i] > amax[2 * i + 1] ? amax[2 * i] : amax[2 * i + 1]) / 127.0f);
        float d = gm_f16_to_f32(h);
        t[512 + 2 * i] = (uint8_t)h, t[512 + 2 * i + 1] = (uint8_t)(h >> 8);
        inv[2 * i] = inv[2 * i + 1] = d > 0 ? 1.0f / d : 0.0f;
    }
    /* |w inv| <= 127 (to 2^-16): adding and taking away 1.5 2^23 rounds it to the nearest integer */
    for (int k = 0; k < 512; k++) {
        float q = (w[k] * inv[k & 31] + 0x1.8p23f) - 0x1.8p23f;
        q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
        t[k] = (uint8_t)(int8_t)(int)q;
    }
    return true;
}

bool gm_pack_screen_copy(const gm_packed *src, gm_packed *dst, size_t r0, size_t r1) {
    const size_t tiles = src->cols / 32;
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *s = src->data + p * src->panel_bytes;
        uint8_t *d = dst->data + p * dst->panel_bytes;
        for (size_t b = 0; b < tiles; b++)
            if (!copy_tile(s + b * 1024, d + b * dst->tile_bytes)) return false;
    }
    return true;
}
