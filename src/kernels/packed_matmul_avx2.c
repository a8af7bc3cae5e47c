/* AVX2 batched products (T > 1) of packed matrices with f32 inputs: each panel's 16 rows are decoded to
 * f32, KC columns at a time, into a [column][16 rows] buffer that then meets the inputs six at a time in
 * a 6 x 16 FMA tile (the sgemm micro-kernel's shape). Decoding is exact (the same value as
 * gm_packed_row), so the product is an f32 one, with no rounding of the inputs at all.
 *
 * Why not the int16 terms without VNNI: one int16 matvec per input decodes and widens the codes again
 * for every input, then spends two vpmaddwd and two vpaddd per 16 weights (vpmaddwd issues on one of
 * Zen 1's four vector pipes, FMAs on two); here two FMAs per 16 weights and input, the decoding paid
 * once per panel for all T inputs (prefill 5.8-6.8x on a Zen 1 guest, docs/BENCHMARKS.md). */
#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
#include "kernels/packed_avx2.h"
#include "kernels/quant_x86.h"

enum {
    KC = 512, /* columns decoded at a time: a 32 KiB buffer, with six input rows' 12 KiB in L2 */
    NT = 6    /* inputs per FMA tile: 12 accumulators, two weight and one input register */
};

/* 8 codes (bytes 0-7 of v) as f32 */
GM_AI __m256 codes_f32(__m128i v, int is_signed) {
    return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
}

/* Column pair bytes (lanes 2r + j) -> out[0..15] = column j = 0, rows 0-15; out[16..31] = column 1,
 * each w = code * s + m for rows' scales s (sl rows 0-7, sh rows 8-15) and offsets m. */
GM_AI void decode_pair(__m256i v, int is_signed, __m256 sl, __m256 sh, __m256 ml, __m256 mh, float *out) {
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                           14, 1, 3, 5, 7, 9, 11, 13, 15);
    /* per 128-bit lane [rows, column 0][rows, column 1]; then the 64-bit quarters in order 0, 2, 1, 3 */
    v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xd8);
    __m128i c0 = _mm256_castsi256_si128(v), c1 = _mm256_extracti128_si256(v, 1);
    _mm256_store_ps(out, _mm256_fmadd_ps(codes_f32(c0, is_signed), sl, ml));
    _mm256_store_ps(out + 8, _mm256_fmadd_ps(codes_f32(_mm_srli_si128(c0, 8), is_signed), sh, mh));
    _mm256_store_ps(out + 16, _mm256_fmadd_ps(codes_f32(c1, is_signed), sl, ml));
    _mm256_store_ps(out + 24, _mm256_fmadd_ps(codes_f32(_mm_srli_si128(c1, 8), is_signed), sh, mh));
}

/* Tile b of a panel (16 rows x 32 columns) as f32 weights, w[c * 16 + r]. */
GM_AI void decode_tile(gm_pack_kind K, const gm_packed *P, const uint8_t *panel, size_t b, float *w) {
    const uint8_t *t = panel + b * P->tile_bytes;
    if (K == GM_PK_BF16) { /* [16 pairs][16 rows][2] bf16: column 2q in the low half of a row's 32 bits */
        const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
        for (int q = 0; q < 16; q++) {
            __m256i lo = _mm256_load_si256((const __m256i *)(t + 64 * q)), hi = _mm256_load_si256((const __m256i *)(t + 64 * q + 32));
            _mm256_store_ps(w + 32 * q, _mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)));
            _mm256_store_ps(w + 32 * q + 8, _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16)));
            _mm256_store_ps(w + 32 * q + 16, _mm256_castsi256_ps(_mm256_and_si256(lo, hi16)));
            _mm256_store_ps(w + 32 * q + 24, _mm256_castsi256_ps(_mm256_and_si256(hi, hi16)));
        }
        return;
    }
    __m256 sa_l, sa_h, sb_l, sb_h, m_l = _mm256_setzero_ps(), m_h = m_l;
    __m256i off = _mm256_setzero_si256(); /* subtracted from the codes: Q5_0's 16, Q6_K's 32 */
    switch (K) {
    case GM_PK_D16: case GM_PK_N5D: {
        const uint8_t *s = t + (K == GM_PK_D16 ? 512 : 320);
        sa_l = sb_l = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)s));
        sa_h = sb_h = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(s + 16)));
        if (K == GM_PK_N5D) off = _mm256_set1_epi8(16);
        break;
    }
    case GM_PK_N6C: { /* a scale per 16 columns: pairs 0-7, then pairs 8-15 */
        __m256 s[2], s2[2];
        k_scales16(K, P, panel, b, s, s2);
        sa_l = s[0], sa_h = s[1], sb_l = s2[0], sb_h = s2[1];
        off = _mm256_set1_epi8(32);
        break;
    }
    default: { /* SM32, N4SM: s[16] then m[16] in the tile; N4K: formed from its scale codes */
        __m256 ks[2], km[2];
        if (K == GM_PK_N4K) k_scales16(K, P, panel, b, ks, km);
        else {
            const float *s = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256));
            ks[0] = _mm256_load_ps(s), ks[1] = _mm256_load_ps(s + 8);
            km[0] = _mm256_load_ps(s + 16), km[1] = _mm256_load_ps(s + 24);
        }
        sa_l = sb_l = ks[0], sa_h = sb_h = ks[1], m_l = km[0], m_h = km[1];
        break;
    }
    }
    for (int g = 0; g < 8; g++) {
        __m256i a, b;
        int sg;
        tile_bytes(K, t, g, &a, &b, &sg);
        if (K == GM_PK_N5D || gm_pack_kind_q6(K)) { /* codes minus their offset fit in int8 */
            a = _mm256_sub_epi8(a, off), b = _mm256_sub_epi8(b, off);
            sg = 1;
        }
        decode_pair(a, sg, sa_l, sa_h, m_l, m_h, w + 32 * g);
        decode_pair(b, sg, sb_l, sb_h, m_l, m_h, w + 32 * (g + 8));
    }
}

/* acc[i] (rows 0-7, 8-15) = sum over n columns of w[c][rows] * x[i * ldx + c], i < nt (a constant after
 * inlining: the tests on it vanish and the 2 nt accumulators are named registers; an array indexed in a
 * loop stayed in memory) */
GM_AI void fma_tile(const float *w, size_t n, const float *x, size_t ldx, int nt, __m256 acc[NT][2]) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx, *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
    for (size_t c = 0; c < n; c++) {
        __m256 w0 = _mm256_load_ps(w + 16 * c), w1 = _mm256_load_ps(w + 16 * c + 8);
#define STEP(i)                                                                                                        \
    if (nt > i) {                                                                                                      \
        __m256 xb = _mm256_broadcast_ss(x##i + c);                                                                     \
        a##i = _mm256_fmadd_ps(w0, xb, a##i);                                                                          \
        b##i = _mm256_fmadd_ps(w1, xb, b##i);                                                                          \
    }
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5)
#undef STEP
    }
    acc[0][0] = a0, acc[0][1] = b0, acc[1][0] = a1, acc[1][1] = b1, acc[2][0] = a2, acc[2][1] = b2;
    acc[3][0] = a3, acc[3][1] = b3, acc[4][0] = a4, acc[4][1] = b4, acc[5][0] = a5, acc[5][1] = b5;
}

/* Inputs [t0, t0 + nt) against the decoded columns [c0, c0 + n) of panel p */
GM_AI void tokens(const float *w, size_t n, const gm_xq *xq, size_t c0, size_t t0, int nt, size_t p, size_t r0,
                  size_t r1, float *Y, size_t ldy) {
    __m256 acc[NT][2];
    fma_tile(w, n, xq->x + t0 * xq->ldx + c0, xq->ldx, nt, acc);
    for (int i = 0; i < nt; i++) put_rows(Y + (t0 + (size_t)i) * ldy, acc[i][0], acc[i][1], p, r0, r1, c0 > 0);
}

GM_AI void matmul_k(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                    size_t ldy, float *w) {
    const size_t cols = P->cols;
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *panel = P->data + p * P->panel_bytes;
        for (size_t c0 = 0; c0 < cols; c0 += KC) {
            size_t n = cols - c0 < KC ? cols - c0 : KC;
            for (size_t b = 0; b < n / 32; b++) decode_tile(K, P, panel, c0 / 32 + b, w + 512 * b);
            size_t t0 = 0;
            for (; t0 + NT <= T; t0 += NT) tokens(w, n, xq, c0, t0, NT, p, r0, r1, Y, ldy);
            switch (T - t0) {
            case 5: tokens(w, n, xq, c0, t0, 5, p, r0, r1, Y, ldy); break;
            case 4: tokens(w, n, xq, c0, t0, 4, p, r0, r1, Y, ldy); break;
            case 3: tokens(w, n, xq, c0, t0, 3, p, r0, r1, Y, ldy); break;
            case 2: tokens(w, n, xq, c0, t0, 2, p, r0, r1, Y, ldy); break;
            case 1: tokens(w, n, xq, c0, t0, 1, p, r0, r1, Y, ldy); break;
            default: break;
            }
        }
    }
}

void gm_packed_matmul_f32_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                               size_t ldy) {
    if (r1 <= r0) return;
    _Alignas(32) float w[KC * GM_PANEL_ROWS]; /* [KC][16], 32 KiB */
    switch (P->kind) {
    case GM_PK_D16: matmul_k(GM_PK_D16, P, r0, r1, xq, T, Y, ldy, w); break;
    case GM_PK_SM32: matmul_k(GM_PK_SM32, P, r0, r1, xq, T, Y, ldy, w); break;
    case GM_PK_N4SM: matmul_k(GM_PK_N4SM, P, r0, r1, xq, T, Y, ldy, w); break;
    case GM_PK_N4K: matmul_k(GM_PK_N4K, P, r0, r1, xq, T, Y, ldy, w); break;
    case GM_PK_N5D: matmul_k(GM_PK_N5D, P, r0, r1, xq, T, Y, ldy, w); break;
    case GM_PK_N6C: matmul_k(GM_PK_N6C, P, r0, r1, xq, T, Y, ldy, w); break;
    case GM_PK_BF16: matmul_k(GM_PK_BF16, P, r0, r1, xq, T, Y, ldy, w); break;
    default: break;
    }
}
