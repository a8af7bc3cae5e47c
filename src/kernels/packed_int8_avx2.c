/* AVX2 products with the int8 input terms (packed.h): vpmaddubsw multiplies a row's 4 codes of step g
 * (columns 2g, 2g + 1, 2g + 16, 2g + 17, as u8) by the term's 4 bytes, vpmaddwd by ones sums them to
 * one int32 per row, 8 rows per register. On AVX2 this serves --precision fast decode (one token, the
 * first term alone: a third of the int16 path's multiplies) and the screened vocabulary product (D16 and
 * Q6_K's N6C, whose two 16-column scales weigh vpmaddubsw's two int16 sums of a row's 4 codes in the
 * vpmaddwd that would otherwise take ones); the batched products take the f32 path
 * (packed_matmul_avx2.c), and the three-term exact form is kept for the tests and for completeness.
 *
 * Q8_0's codes are signed and vpmaddubsw wants u8: |w| times x with w's sign (vpsignb), which stays
 * within int16 (2 x 128 x 127); the +128 offset of the AVX-512 kernel would saturate here. */
#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
#include "kernels/packed_avx2.h"
#include "kernels/quant_x86.h"

/* dot[k][0 / 1] (rows lo / hi) += the integer dots of the tile's codes with term k of the input, k < terms,
 * the int16 sums of columns (2g, 2g + 1) and (2g + 16, 2g + 17) weighed by the int16 pairs of wt[h] (ones, or
 * Q6_K's two 16-column scales per row) */
GM_AI void tile_dots8(gm_pack_kind K, const uint8_t *t, const int32_t *x, int terms, const __m256i wt[2],
                      __m256i dot[3][2]) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        __m256i a, b;
        int sg;
        tile_bytes(K, t, g, &a, &b, &sg);
        /* per row 4 bytes: its 2 codes of pair g, then its 2 of pair g + 8 */
        __m256i u[2] = {_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b)}, mag[2];
        if (K == GM_PK_D16) mag[0] = _mm256_abs_epi8(u[0]), mag[1] = _mm256_abs_epi8(u[1]);
#pragma GCC unroll 3
        for (int k = 0; k < terms; k++) {
            __m256i xb = _mm256_set1_epi32(x[8 * k + g]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i p = K == GM_PK_D16 ? _mm256_maddubs_epi16(mag[h], _mm256_sign_epi8(xb, u[h]))
                                           : _mm256_maddubs_epi16(u[h], xb);
                dot[k][h] = _mm256_add_epi32(dot[k][h], _mm256_madd_epi16(p, wt[h]));
            }
        }
    }
}

/* Q6_K's scale codes of a tile (i8 sc[2][16], packed.h) as the int16 pairs (sc[0][r], sc[1][r]) of rows
 * {0-3, 8-11} (w[0]) and {4-7, 12-15} (w[1]): the rows tile_dots8's halves hold */
GM_AI void q6_scale_pairs(const uint8_t *sc, __m256i w[2]) {
    __m128i c0 = _mm_loadu_si128((const __m128i *)sc), c1 = _mm_loadu_si128((const __m128i *)(sc + 16));
    __m256i a = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(c0, c1)), b = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(c0, c1));
    w[0] = _mm256_permute2x128_si256(a, b, 0x20);
    w[1] = _mm256_permute2x128_si256(a, b, 0x31);
}

/* Input t0 against panel p, with `terms` (1: --precision fast, 3: f32 accuracy) of the int8 inputs; with
 * `bound` (D16 or N6C, one term: gm_packed_screen) also sum |d| eb per row there */
GM_AI void matmul8_one(gm_pack_kind K, int terms, const gm_packed *P, size_t p, size_t r0, size_t r1,
                       const gm_xq *xq, size_t t0, float *y, const float *eb, float *bound) {
    const size_t tiles = P->cols / 32, tb = gm_pack_tile_bytes(K);
    const int off = K == GM_PK_N5D ? 16 : 0; /* Q5_0's codes are q + 16 */
    const uint8_t *panel = P->data + p * P->panel_bytes, *t = panel;
    const gm_prefetch pf = gm_packed_prefetch(K); /* as matvec_k */
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, bacc[2] = {acc[0], acc[1]};
    __m256 kd[4] = {acc[0], acc[0], acc[0], acc[0]}; /* the block's scales (N4K), converted once per 8 tiles */
    __m256 d6[2] = {acc[0], acc[0]}, d6abs[2] = {acc[0], acc[0]}; /* N6C: kd's row scales mixed as the dots */
    const __m256i ones = _mm256_set1_epi16(1);
    k_leads lead = panel_leads(K, P, panel, tb, pf);
    for (size_t b = 0; b < tiles; b++, t += tb) {
        prefetch_panel(K, P, panel, b, tb, pf, tb, &lead);
        if (gm_pack_kind_compact(K) && b % 8 == 0) {
            k_block8(K, gm_packed_sb(P, panel, b), kd);
            if (K == GM_PK_N6C) {
                rows_mixed(kd[0], kd[1], &d6[0], &d6[1]);
                for (int h = 0; h < 2; h++) d6abs[h] = _mm256_and_ps(d6[h], absmask);
            }
        }
        const size_t o = t0 * xq->ldd + b;
        const int32_t *S = xq->s8 + GM_X8_SUMS * o;
        const int8_t *xb = xq->b8 + t0 * xq->ld8 + 96 * b;
        __m256i dot[3][2], wt[2] = {ones, ones};
        if (K == GM_PK_N6C) q6_scale_pairs(gm_packed_sc(P, panel, b), wt);
        for (int k = 0; k < terms; k++) dot[k][0] = dot[k][1] = _mm256_setzero_si256();
        tile_dots8(K, t, (const int32_t *)xb, terms, wt, dot);
        const float e = xq->e8[o];
        __m256 F[2], s[2], m[2];
        for (int h = 0; h < 2; h++) {
            __m256i v[3]; /* each term's dot less the codes' offset times its sum */
            for (int k = 0; k < terms; k++) {
                /* the offset: Q5_0 16 S, Q6_K 32 (sc0 S0 + sc1 S1) */
                __m256i o = K == GM_PK_N6C ? _mm256_slli_epi32(_mm256_madd_epi16(wt[h], _mm256_set1_epi32(S[3 + k])), 5)
                                           : _mm256_set1_epi32(off * S[k]);
                v[k] = _mm256_sub_epi32(dot[k][h], o);
            }
            F[h] = _mm256_cvtepi32_ps(v[0]);
            if (terms == 3)
                F[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v[2]), _mm256_set1_ps(1.0f / 64516.0f),
                                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(v[1]), _mm256_set1_ps(1.0f / 254.0f), F[h]));
        }
        if (K == GM_PK_N6C) { /* w = d (sc q - 32 sc): sc is in the dots; the bound takes d max(|sc0|, |sc1|) */
            for (int h = 0; h < 2; h++) {
                acc[h] = _mm256_fmadd_ps(F[h], _mm256_mul_ps(d6[h], _mm256_set1_ps(e)), acc[h]);
                if (!bound) continue;
                __m256i a = _mm256_abs_epi16(wt[h]);
                __m256i mx = _mm256_max_epi16(_mm256_and_si256(a, _mm256_set1_epi32(0xffff)), _mm256_srli_epi32(a, 16));
                __m256 dmax = _mm256_mul_ps(d6abs[h], _mm256_cvtepi32_ps(mx)); /* |d| max(|sc0|, |sc1|) */
                bacc[h] = _mm256_fmadd_ps(dmax, _mm256_set1_ps(eb[b]), bacc[h]);
            }
        } else if (K == GM_PK_D16 || K == GM_PK_N5D) {
            const __m128i *sp = (const __m128i *)(t + (K == GM_PK_D16 ? 512 : 320));
            rows_mixed(_mm256_cvtph_ps(_mm_load_si128(sp)), _mm256_cvtph_ps(_mm_load_si128(sp + 1)), &s[0], &s[1]);
            for (int h = 0; h < 2; h++) acc[h] = _mm256_fmadd_ps(F[h], _mm256_mul_ps(s[h], _mm256_set1_ps(e)), acc[h]);
            if (bound)
                for (int h = 0; h < 2; h++) bacc[h] = _mm256_fmadd_ps(_mm256_and_ps(s[h], absmask), _mm256_set1_ps(eb[b]), bacc[h]);
        } else { /* w = s q + m: the m part needs the block sum of x */
            float sx = terms == 1 ? e * (float)S[0]
                                  : e * ((float)S[0] + (float)S[1] * (1.0f / 254.0f) + (float)S[2] * (1.0f / 64516.0f));
            __m256 sl, sh, ml, mh; /* rows 0-7, 8-15 */
            if (K == GM_PK_N4K) {
                k_tile8(K, gm_packed_sc(P, panel, b), kd, 0, &sl, &ml);
                k_tile8(K, gm_packed_sc(P, panel, b), kd, 1, &sh, &mh);
            } else {
                const float *sm = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256));
                sl = _mm256_load_ps(sm), sh = _mm256_load_ps(sm + 8);
                ml = _mm256_load_ps(sm + 16), mh = _mm256_load_ps(sm + 24);
            }
            rows_mixed(sl, sh, &s[0], &s[1]);
            rows_mixed(ml, mh, &m[0], &m[1]);
            for (int h = 0; h < 2; h++) {
                acc[h] = _mm256_fmadd_ps(m[h], _mm256_set1_ps(sx), acc[h]);
                acc[h] = _mm256_fmadd_ps(F[h], _mm256_mul_ps(s[h], _mm256_set1_ps(e)), acc[h]);
            }
        }
    }
    __m256 lo, hi; /* back to rows 0-7, 8-15 */
    rows_mixed(acc[0], acc[1], &lo, &hi);
    store_rows(y, lo, hi, p, r0, r1);
    if (!bound) return;
    rows_mixed(bacc[0], bacc[1], &lo, &hi);
    store_rows(bound, lo, hi, p, r0, r1);
}

GM_AI void matmul8_kind(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                        size_t ldy) {
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++)
        for (size_t t = 0; t < T; t++) {
            if (xq->fast) matmul8_one(K, 1, P, p, r0, r1, xq, t, Y + t * ldy, NULL, NULL);
            else matmul8_one(K, 3, P, p, r0, r1, xq, t, Y + t * ldy, NULL, NULL);
        }
}

void gm_packed_matmul8_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    if (r1 <= r0) return;
    switch (P->kind) {
    case GM_PK_D16: matmul8_kind(GM_PK_D16, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_SM32: matmul8_kind(GM_PK_SM32, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4SM: matmul8_kind(GM_PK_N4SM, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4K: matmul8_kind(GM_PK_N4K, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N5D: matmul8_kind(GM_PK_N5D, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N6C: matmul8_kind(GM_PK_N6C, P, r0, r1, xq, T, Y, ldy); return;
    default: gm_packed_avx2.matmul(P, r0, r1, xq, T, Y, ldy); return; /* N6 (AVX-512's Q6_K): the int16 terms */
    }
}

void gm_packed_screen_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y,
                           float *bound) {
    if (r1 <= r0 || (P->kind != GM_PK_D16 && P->kind != GM_PK_N6C)) return;
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++)
        if (P->kind == GM_PK_D16) matmul8_one(GM_PK_D16, 1, P, p, r0, r1, xq, 0, y, eb, bound);
        else matmul8_one(GM_PK_N6C, 1, P, p, r0, r1, xq, 0, y, eb, bound);
}
