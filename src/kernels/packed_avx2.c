/* AVX2 kernels for packed weights (layout in packed.h): a panel's 16 rows live in two 256-bit
 * registers of int32 dots; vpmaddwd multiplies 8 rows x 2 columns of codes (widened to int16) by one
 * broadcast int16 input pair. Same arithmetic as the AVX-512 VNNI path.
 *
 * The one-token matvec takes its broadcast input pairs from xq->xb, written once per input by
 * quantize_x, as vpmaddwd's memory operand: a load instead of a vpbroadcastd, which on Zen 1 is two
 * more operations on the vector pipes that the matvec saturates (Q8_0 6.8 -> 7.4 GB/s, Q6_K, Q4_K and
 * Q5_0 4-6 % faster on one core; docs/BENCHMARKS.md). */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
#include "kernels/packed_avx2.h"
#include "kernels/quant_x86.h"

GM_AI float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

GM_AI int32_t hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static void quantize_x_avx2(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    const size_t nb = cols / GM_XQ_BLOCK;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), lim = _mm256_set1_ps(32767.0f);
    const __m256 nlim = _mm256_set1_ps(-32767.0f);
    enum { rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* an immediate: a const int is not one in C (clang) */
    xq->cols = cols;
    xq->ldq = cols;
    xq->ldd = nb;
    for (size_t t = 0; t < T; t++) {
        const float *xt = x + t * ldx;
        int16_t *q = xq->q + t * cols, *q2 = xq->q2 + t * cols;
        for (size_t b = 0; b < nb; b++) {
            const float *v = xt + GM_XQ_BLOCK * b;
            __m256 vv[4] = {_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), _mm256_loadu_ps(v + 16), _mm256_loadu_ps(v + 24)};
            __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(vv[0], absmask), _mm256_and_ps(vv[1], absmask)),
                                      _mm256_max_ps(_mm256_and_ps(vv[2], absmask), _mm256_and_ps(vv[3], absmask)));
            float amax = hmax8(mx);
            __m256 un = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(vv[0], vv[0], _CMP_UNORD_Q), _mm256_cmp_ps(vv[1], vv[1], _CMP_UNORD_Q)),
                                     _mm256_or_ps(_mm256_cmp_ps(vv[2], vv[2], _CMP_UNORD_Q), _mm256_cmp_ps(vv[3], vv[3], _CMP_UNORD_Q)));
            size_t o = GM_XQ_BLOCK * b, k = t * nb + b;
            if (_mm256_movemask_ps(un) || !(amax <= 3.4028235e38f) || amax < 1e-30f) {
                gm_xq_block_finish(v, amax, q + o, q2 + o, &xq->d[k], &xq->s[k], &xq->qs[4 * k]);
                continue;
            }
            float inv = 32767.0f / amax, dd = amax / 32767.0f;
            __m256 iv = _mm256_set1_ps(inv), iv2 = _mm256_set1_ps(inv * 32768.0f), d = _mm256_set1_ps(dd);
            __m256i i1[4], i2[4];
            for (int j = 0; j < 4; j++) {
                __m256 a = _mm256_round_ps(_mm256_mul_ps(vv[j], iv), rne);
                __m256 c = _mm256_round_ps(_mm256_mul_ps(_mm256_fnmadd_ps(d, a, vv[j]), iv2), rne);
                c = _mm256_max_ps(_mm256_min_ps(c, lim), nlim);
                i1[j] = _mm256_cvtps_epi32(a);
                i2[j] = _mm256_cvtps_epi32(c);
            }
            /* packs interleave 128-bit lanes: fix the order with a 64-bit permute */
            _mm256_storeu_si256((__m256i *)(q + o), _mm256_permute4x64_epi64(_mm256_packs_epi32(i1[0], i1[1]), 0xd8));
            _mm256_storeu_si256((__m256i *)(q + o + 16), _mm256_permute4x64_epi64(_mm256_packs_epi32(i1[2], i1[3]), 0xd8));
            _mm256_storeu_si256((__m256i *)(q2 + o), _mm256_permute4x64_epi64(_mm256_packs_epi32(i2[0], i2[1]), 0xd8));
            _mm256_storeu_si256((__m256i *)(q2 + o + 16), _mm256_permute4x64_epi64(_mm256_packs_epi32(i2[2], i2[3]), 0xd8));
            int32_t s0 = hsum8i(_mm256_add_epi32(i1[0], i1[1])), s1 = hsum8i(_mm256_add_epi32(i1[2], i1[3]));
            int32_t s2 = hsum8i(_mm256_add_epi32(i2[0], i2[1])), s3 = hsum8i(_mm256_add_epi32(i2[2], i2[3]));
            xq->d[k] = dd;
            xq->s[k] = dd * ((float)(s0 + s1) + (float)(s2 + s3) * 0x1p-15f);
            xq->qs[4 * k] = s0, xq->qs[4 * k + 1] = s1, xq->qs[4 * k + 2] = s2, xq->qs[4 * k + 3] = s3;
        }
    }
    xq->has_xb = T == 1 && xq->xb;
    if (!xq->has_xb) return;
    const int32_t *p1 = (const int32_t *)xq->q, *p2 = (const int32_t *)xq->q2; /* (q, q') pairs */
    for (size_t c = 0; c < cols / 2; c++) {
        _mm256_store_si256((__m256i *)(xq->xb + 16 * c), _mm256_set1_epi32(p1[c]));
        _mm256_store_si256((__m256i *)(xq->xb + 16 * c + 8), _mm256_set1_epi32(p2[c]));
    }
}

/* Whether kind K's dots come out with their rows mixed (rows_mixed: {0-3, 8-11}, {4-7, 12-15}): the nibble
 * kinds, whose unsigned codes are widened in their 128-bit lanes. One vpunpck{l,h}bw with zero each, where
 * vextracti128 and two vpmovzxbw, all on the shuffle pipes, took as long as the 8 vpmaddwd they feed (Zen 3,
 * docs/BENCHMARKS.md). The 8-bit kinds widen as they load (vpmovsxbw from memory), in row order. */
GM_AI int rows_are_mixed(gm_pack_kind K) { return K != GM_PK_D16 && K != GM_PK_SM32; }

/* 32 unsigned byte codes -> int16 pairs of rows {0-3, 8-11} (lo) and {4-7, 12-15} (hi) */
GM_AI void widen_mixed(__m256i v, __m256i *lo, __m256i *hi) {
    *lo = _mm256_unpacklo_epi8(v, _mm256_setzero_si256());
    *hi = _mm256_unpackhi_epi8(v, _mm256_setzero_si256());
}

/* The input pair of column pair g (0-15) of a tile, term 1 or 2: from the tile's 16 x 2 x 8 words of xb
 * (pre, a constant after inlining) or broadcast from the terms x1 / x2. */
GM_AI __m256i x_pair(int pre, const int32_t *xb, const int32_t *x1, const int32_t *x2, int g, int term) {
    if (pre) return _mm256_load_si256((const __m256i *)(xb + 16 * g + 8 * (term - 1)));
    return _mm256_set1_epi32(term == 1 ? x1[g] : x2[g]);
}

/* Integer dots of the tile with both input terms in one pass over its codes (each code widened once, then
 * multiplied by the term-1 and the term-2 pair): rows 0-7 / 8-15 (mixed: rows_are_mixed) of term k in
 * dk[0] / dk[1] summed over the tile's 32 columns, or for N6 / N6C (whose scales change at column 16) the
 * first 16 columns in dk[0] / dk[1] and the last 16 in dk[2] / dk[3]. */
GM_AI void tile_dots(gm_pack_kind K, int pre, const uint8_t *t, const int32_t *xb, const int32_t *x1,
                     const int32_t *x2, __m256i d1[4], __m256i d2[4]) {
    const int split = gm_pack_kind_q6(K);
    __m256i l1 = _mm256_setzero_si256(), h1 = l1, l2 = l1, h2 = l1, bl1 = l1, bh1 = l1, bl2 = l1, bh2 = l1;
    for (int g = 0; g < 8; g++) {
        __m256i a, b, w0, w1, v0, v1; /* w: the codes of pair g (columns 2g, 2g + 1), v: of pair g + 8 */
        int sg;
        if (K == GM_PK_D16 || K == GM_PK_SM32) { /* bytes in memory: widened as they are loaded */
            const __m128i *c = (const __m128i *)(t + 32 * g);
            w0 = _mm256_cvtepi8_epi16(_mm_load_si128(c)), w1 = _mm256_cvtepi8_epi16(_mm_load_si128(c + 1));
            v0 = _mm256_cvtepi8_epi16(_mm_load_si128(c + 16)), v1 = _mm256_cvtepi8_epi16(_mm_load_si128(c + 17));
        } else {
            tile_bytes(K, t, g, &a, &b, &sg); /* unsigned */
            widen_mixed(a, &w0, &w1);
            widen_mixed(b, &v0, &v1);
        }
        __m256i xg1 = x_pair(pre, xb, x1, x2, g, 1), xg2 = x_pair(pre, xb, x1, x2, g, 2);
        l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(w0, xg1));
        h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(w1, xg1));
        l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(w0, xg2));
        h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(w1, xg2));
        __m256i xh1 = x_pair(pre, xb, x1, x2, g + 8, 1), xh2 = x_pair(pre, xb, x1, x2, g + 8, 2);
        if (split) {
            bl1 = _mm256_add_epi32(bl1, _mm256_madd_epi16(v0, xh1));
            bh1 = _mm256_add_epi32(bh1, _mm256_madd_epi16(v1, xh1));
            bl2 = _mm256_add_epi32(bl2, _mm256_madd_epi16(v0, xh2));
            bh2 = _mm256_add_epi32(bh2, _mm256_madd_epi16(v1, xh2));
        } else {
            l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v0, xh1));
            h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, xh1));
            l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v0, xh2));
            h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v1, xh2));
        }
    }
    d1[0] = l1, d1[1] = h1, d1[2] = bl1, d1[3] = bh1;
    d2[0] = l2, d2[1] = h2, d2[2] = bl2, d2[3] = bh2;
}

/* (v1 - o1) + (v2 - o2) / 32768 as f32 */
GM_AI __m256 two_terms(__m256i v1, int32_t o1, __m256i v2, int32_t o2) {
    __m256 f1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(v1, _mm256_set1_epi32(o1)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v2, _mm256_set1_epi32(o2))), _mm256_set1_ps(0x1p-15f), f1);
}

/* lo / hi (rows 0-7 / 8-15) += the contribution of tile t (its codes) for one input (both terms); sc, kd:
 * the compact kinds' scale codes (gm_packed_sc) and block scales (k_block8) */
GM_AI void tile_apply(gm_pack_kind K, int pre, const uint8_t *t, const uint8_t *sc, const __m256 kd[4],
                      const int32_t *xb, const int32_t *x1, const int32_t *x2, float dx, float xs, const int32_t *qs,
                      __m256 *lo, __m256 *hi) {
    __m256i d1[4], d2[4];
    tile_dots(K, pre, t, xb, x1, x2, d1, d2);
    __m256 dv = _mm256_set1_ps(dx);
    switch (K) {
    case GM_PK_D16: case GM_PK_N5D: {
        size_t so = K == GM_PK_D16 ? 512 : 320;
        int32_t o1 = K == GM_PK_N5D ? 16 * (qs[0] + qs[1]) : 0, o2 = K == GM_PK_N5D ? 16 * (qs[2] + qs[3]) : 0;
        __m256 sl = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(t + so)));
        __m256 sh = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(t + so + 16)));
        if (rows_are_mixed(K)) rows_mixed(sl, sh, &sl, &sh);
        *lo = _mm256_fmadd_ps(two_terms(d1[0], o1, d2[0], o2), _mm256_mul_ps(sl, dv), *lo);
        *hi = _mm256_fmadd_ps(two_terms(d1[1], o1, d2[1], o2), _mm256_mul_ps(sh, dv), *hi);
        return;
    }
    case GM_PK_N6C: { /* s[h][0]: rows 8h .. 8h + 7, columns 0-15; s[h][1]: columns 16-31 */
        __m256 s[2][2];
        k_tile8(K, sc, kd, 0, &s[0][0], &s[0][1]);
        k_tile8(K, sc, kd, 1, &s[1][0], &s[1][1]);
        rows_mixed(s[0][0], s[1][0], &s[0][0], &s[1][0]); /* a nibble kind: rows mixed */
        rows_mixed(s[0][1], s[1][1], &s[0][1], &s[1][1]);
        *lo = _mm256_fmadd_ps(two_terms(d1[0], 32 * qs[0], d2[0], 32 * qs[2]), _mm256_mul_ps(s[0][0], dv), *lo);
        *hi = _mm256_fmadd_ps(two_terms(d1[1], 32 * qs[0], d2[1], 32 * qs[2]), _mm256_mul_ps(s[1][0], dv), *hi);
        *lo = _mm256_fmadd_ps(two_terms(d1[2], 32 * qs[1], d2[2], 32 * qs[3]), _mm256_mul_ps(s[0][1], dv), *lo);
        *hi = _mm256_fmadd_ps(two_terms(d1[3], 32 * qs[1], d2[3], 32 * qs[3]), _mm256_mul_ps(s[1][1], dv), *hi);
        return;
    }
    default: { /* SM32, N4SM, N4K: w = s q + m, s and m from the tile or (N4K) formed from its scale codes */
        const float *sm = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256));
        __m256 sl, ml, sh, mh, x = _mm256_set1_ps(xs);
        if (K == GM_PK_N4K) {
            k_tile8(K, sc, kd, 0, &sl, &ml);
            k_tile8(K, sc, kd, 1, &sh, &mh);
        } else {
            sl = _mm256_load_ps(sm), sh = _mm256_load_ps(sm + 8);
            ml = _mm256_load_ps(sm + 16), mh = _mm256_load_ps(sm + 24);
        }
        if (rows_are_mixed(K)) {
            rows_mixed(sl, sh, &sl, &sh);
            rows_mixed(ml, mh, &ml, &mh);
        }
        *lo = _mm256_fmadd_ps(ml, x, *lo);
        *hi = _mm256_fmadd_ps(mh, x, *hi);
        *lo = _mm256_fmadd_ps(two_terms(d1[0], 0, d2[0], 0), _mm256_mul_ps(sl, dv), *lo);
        *hi = _mm256_fmadd_ps(two_terms(d1[1], 0, d2[1], 0), _mm256_mul_ps(sh, dv), *hi);
        return;
    }
    }
}

/* pre: the input pairs from xq->xb (xq->has_xb), else broadcast from q / q2 */
GM_AI void matvec_k(gm_pack_kind K, int pre, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    const size_t tiles = P->cols / 32, tb = gm_pack_tile_bytes(K);
    const int32_t *x1 = (const int32_t *)xq->q, *x2 = (const int32_t *)xq->q2;
    const gm_prefetch pf = gm_packed_prefetch(K); /* as the AVX-512 matvec */
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *panel = P->data + p * P->panel_bytes, *t = panel;
        __m256 lo = _mm256_setzero_ps(), hi = lo, kd[4] = {lo, lo, lo, lo};
        k_leads lead = panel_leads(K, P, panel, tb, pf);
        for (size_t b = 0; b < tiles; b++, t += tb) {
            prefetch_panel(K, P, panel, b, tb, pf, tb, &lead);
            if (gm_pack_kind_compact(K) && b % 8 == 0) k_block8(K, gm_packed_sb(P, panel, b), kd); /* 8 tiles' */
            tile_apply(K, pre, t, gm_packed_sc(P, panel, b), kd, pre ? xq->xb + 256 * b : NULL, x1 + 16 * b,
                       x2 + 16 * b, xq->d[b], xq->s[b], xq->qs + 4 * b, &lo, &hi);
        }
        if (rows_are_mixed(K)) rows_mixed(lo, hi, &lo, &hi); /* back to rows 0-7, 8-15 */
        store_rows(y, lo, hi, p, r0, r1);
    }
}

static void matvec_bf16(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    const size_t tiles = P->cols / 32;
    const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
    const gm_prefetch pf = {0, gm_packed_prefetch(GM_PK_BF16).l2}; /* as the AVX-512 BF16 matvec */
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *t = P->data + p * P->panel_bytes;
        __m256 l0 = _mm256_setzero_ps(), l1 = l0, h0 = l0, h1 = l0;
        for (size_t b = 0; b < tiles; b++, t += 1024) {
            prefetch_stream(t, pf, 1024);
            const float *x = xq->x + 32 * b;
            for (int q = 0; q < 16; q++) {
                __m256i lo = _mm256_load_si256((const __m256i *)(t + 64 * q)), hi = _mm256_load_si256((const __m256i *)(t + 64 * q + 32));
                __m256 xe = _mm256_set1_ps(x[2 * q]), xo = _mm256_set1_ps(x[2 * q + 1]);
                l0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), xe, l0);
                l1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(lo, hi16)), xo, l1);
                h0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(hi, 16)), xe, h0);
                h1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(hi, hi16)), xo, h1);
            }
        }
        store_rows(y, _mm256_add_ps(l0, l1), _mm256_add_ps(h0, h1), p, r0, r1);
    }
}

static void packed_matvec_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    if (r1 <= r0) return;
    switch (P->kind) {
    case GM_PK_BF16: matvec_bf16(P, r0, r1, xq, y); return;
#define KIND(k) \
    case k: if (xq->has_xb) matvec_k(k, 1, P, r0, r1, xq, y); else matvec_k(k, 0, P, r0, r1, xq, y); return;
    KIND(GM_PK_D16) KIND(GM_PK_SM32) KIND(GM_PK_N4SM) KIND(GM_PK_N4K) KIND(GM_PK_N5D) KIND(GM_PK_N6C)
#undef KIND
    default: return;
    }
}

/* matmul: each input in turn over the panel (the panel stays in L1/L2 across inputs) */
static void packed_matmul_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                               size_t ldy) {
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        size_t a = p * GM_PANEL_ROWS < r0 ? r0 : p * GM_PANEL_ROWS;
        size_t b = (p + 1) * GM_PANEL_ROWS > r1 ? r1 : (p + 1) * GM_PANEL_ROWS;
        for (size_t t = 0; t < T; t++) {
            gm_xq one = *xq;
            one.has_xb = false; /* xb would hold one input at most */
            if (P->kind == GM_PK_BF16) one.x = xq->x + t * xq->ldx;
            else {
                one.q = xq->q + t * xq->ldq, one.q2 = xq->q2 + t * xq->ldq;
                one.d = xq->d + t * xq->ldd, one.s = xq->s + t * xq->ldd;
                one.qs = xq->qs + 4 * t * xq->ldd;
            }
            packed_matvec_avx2(P, a, b, &one, Y + t * ldy + (a - r0));
        }
    }
}

const gm_packed_ops gm_packed_avx2 = {quantize_x_avx2,    gm_split_bf16_ref,      packed_matvec_avx2,
                                      packed_matmul_avx2, gm_packed_matmul8_avx2, gm_quantize_x8_ref,
                                      gm_packed_matmul_f32_avx2, true, true, true, false,
                                      gm_packed_screen_avx2};
