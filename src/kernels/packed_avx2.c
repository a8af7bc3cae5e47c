/* AVX2 kernels for packed weights (layout in packed.h): a panel's 16 rows live in two 256-bit
 * registers of int32 dots; vpmaddwd multiplies 8 rows x 2 columns of codes (sign-extended to int16)
 * by one broadcast int16 input pair. Same arithmetic as the AVX-512 VNNI path. */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
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
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    xq->cols = cols;
    xq->ldq = cols;
    xq->ldd = nb;
    for (size_t t = 0; t < T; t++) {
        const float *xt = x + t * ldx;
        int16_t *q = xq->q + t * cols;
        for (size_t b = 0; b < nb; b++) {
            const float *v = xt + GM_XQ_BLOCK * b;
            __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8), v2 = _mm256_loadu_ps(v + 16),
                   v3 = _mm256_loadu_ps(v + 24);
            __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, absmask), _mm256_and_ps(v1, absmask)),
                                      _mm256_max_ps(_mm256_and_ps(v2, absmask), _mm256_and_ps(v3, absmask)));
            float amax = hmax8(mx);
            __m256 un = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)),
                                     _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q), _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q)));
            if (_mm256_movemask_ps(un) || !(amax <= 3.4028235e38f) || amax < 1e-30f) {
                gm_xq_block_finish(v, amax, q + GM_XQ_BLOCK * b, &xq->d[t * nb + b], &xq->s[t * nb + b],
                                   &xq->qs[2 * (t * nb + b)]);
                continue;
            }
            __m256 inv = _mm256_set1_ps(32767.0f / amax);
            __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, inv)), q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, inv));
            __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, inv)), q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, inv));
            /* packs interleave 128-bit lanes: fix the order with a 64-bit permute */
            __m256i a = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xd8);
            __m256i c = _mm256_permute4x64_epi64(_mm256_packs_epi32(q2, q3), 0xd8);
            _mm256_storeu_si256((__m256i *)(q + GM_XQ_BLOCK * b), a);
            _mm256_storeu_si256((__m256i *)(q + GM_XQ_BLOCK * b + 16), c);
            float d = amax / 32767.0f;
            xq->d[t * nb + b] = d;
            int32_t s0 = hsum8i(_mm256_add_epi32(q0, q1)), s1 = hsum8i(_mm256_add_epi32(q2, q3));
            xq->s[t * nb + b] = d * (float)(s0 + s1);
            xq->qs[2 * (t * nb + b)] = s0;
            xq->qs[2 * (t * nb + b) + 1] = s1;
        }
    }
}

/* The codes of pairs g and g + 8 (g < 8) of tile t as bytes (32 lanes = 16 rows x 2 columns each). */
GM_AI void tile_bytes(gm_pack_kind K, const uint8_t *t, int g, __m256i *a, __m256i *b, int *is_signed) {
    if (K == GM_PK_D16 || K == GM_PK_SM32) {
        *a = _mm256_load_si256((const __m256i *)(t + 32 * g));
        *b = _mm256_load_si256((const __m256i *)(t + 32 * g + 256));
        *is_signed = 1;
        return;
    }
    *is_signed = 0;
    __m256i v = _mm256_load_si256((const __m256i *)(t + 32 * g)), m4 = _mm256_set1_epi8(15);
    __m256i x = _mm256_and_si256(v, m4), y = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (K == GM_PK_N5D || K == GM_PK_N6) {
        x = _mm256_or_si256(x, _mm256_and_si256(bits_to_bytes(t + 256 + 4 * g), _mm256_set1_epi8(16)));
        y = _mm256_or_si256(y, _mm256_and_si256(bits_to_bytes(t + 256 + 4 * (g + 8)), _mm256_set1_epi8(16)));
    }
    if (K == GM_PK_N6) {
        x = _mm256_or_si256(x, _mm256_and_si256(bits_to_bytes(t + 320 + 4 * g), _mm256_set1_epi8(32)));
        y = _mm256_or_si256(y, _mm256_and_si256(bits_to_bytes(t + 320 + 4 * (g + 8)), _mm256_set1_epi8(32)));
    }
    *a = x;
    *b = y;
}

/* 32 byte codes -> rows 0-7 and rows 8-15 as int16 pairs */
GM_AI void widen(__m256i v, int is_signed, __m256i *lo, __m256i *hi) {
    __m128i l = _mm256_castsi256_si128(v), h = _mm256_extracti128_si256(v, 1);
    *lo = is_signed ? _mm256_cvtepi8_epi16(l) : _mm256_cvtepu8_epi16(l);
    *hi = is_signed ? _mm256_cvtepi8_epi16(h) : _mm256_cvtepu8_epi16(h);
}

/* Integer dots of the tile's first (a) and last (b) 16 columns with one input, rows 0-7 / 8-15. */
GM_AI void tile_dots(gm_pack_kind K, const uint8_t *t, const int32_t *xp, __m256i d[4]) {
    __m256i al = _mm256_setzero_si256(), ah = al, bl = al, bh = al;
    for (int g = 0; g < 8; g++) {
        __m256i a, b, w0, w1;
        int sg;
        tile_bytes(K, t, g, &a, &b, &sg);
        __m256i xa = _mm256_set1_epi32(xp[g]), xb = _mm256_set1_epi32(xp[g + 8]);
        widen(a, sg, &w0, &w1);
        al = _mm256_add_epi32(al, _mm256_madd_epi16(w0, xa));
        ah = _mm256_add_epi32(ah, _mm256_madd_epi16(w1, xa));
        widen(b, sg, &w0, &w1);
        bl = _mm256_add_epi32(bl, _mm256_madd_epi16(w0, xb));
        bh = _mm256_add_epi32(bh, _mm256_madd_epi16(w1, xb));
    }
    d[0] = al, d[1] = ah, d[2] = bl, d[3] = bh;
}

/* lo / hi (rows 0-7 / 8-15) += the tile's contribution for one input */
GM_AI void tile_apply(gm_pack_kind K, const uint8_t *t, const int32_t *xp, float dx, float xs, const int32_t *qs,
                      __m256 *lo, __m256 *hi) {
    __m256i d[4];
    tile_dots(K, t, xp, d);
    __m256 dv = _mm256_set1_ps(dx);
    switch (K) {
    case GM_PK_D16: case GM_PK_N5D: {
        size_t so = K == GM_PK_D16 ? 512 : 320;
        __m256i off = _mm256_set1_epi32(K == GM_PK_N5D ? 16 * (qs[0] + qs[1]) : 0);
        __m256 sl = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(t + so)));
        __m256 sh = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(t + so + 16)));
        *lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_add_epi32(d[0], d[2]), off)), _mm256_mul_ps(sl, dv), *lo);
        *hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_add_epi32(d[1], d[3]), off)), _mm256_mul_ps(sh, dv), *hi);
        return;
    }
    case GM_PK_N6: {
        const float *s = (const float *)(t + 384);
        __m256i oa = _mm256_set1_epi32(32 * qs[0]), ob = _mm256_set1_epi32(32 * qs[1]);
        *lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d[0], oa)), _mm256_mul_ps(_mm256_load_ps(s), dv), *lo);
        *hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d[1], oa)), _mm256_mul_ps(_mm256_load_ps(s + 8), dv), *hi);
        *lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d[2], ob)), _mm256_mul_ps(_mm256_load_ps(s + 16), dv), *lo);
        *hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d[3], ob)), _mm256_mul_ps(_mm256_load_ps(s + 24), dv), *hi);
        return;
    }
    default: { /* SM32, N4SM */
        const float *s = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256)), *m = s + 16;
        __m256 x = _mm256_set1_ps(xs);
        *lo = _mm256_fmadd_ps(_mm256_load_ps(m), x, *lo);
        *hi = _mm256_fmadd_ps(_mm256_load_ps(m + 8), x, *hi);
        *lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(d[0], d[2])), _mm256_mul_ps(_mm256_load_ps(s), dv), *lo);
        *hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(d[1], d[3])), _mm256_mul_ps(_mm256_load_ps(s + 8), dv), *hi);
        return;
    }
    }
}

/* Rows [r0, r1) of panel p's 16 results into y (y[0] = row r0). */
GM_AI void store_rows(float *y, __m256 lo, __m256 hi, size_t p, size_t r0, size_t r1) {
    size_t a = p * GM_PANEL_ROWS;
    if (a >= r0 && a + GM_PANEL_ROWS <= r1) {
        _mm256_storeu_ps(y + (a - r0), lo);
        _mm256_storeu_ps(y + (a - r0) + 8, hi);
        return;
    }
    float v[16];
    _mm256_storeu_ps(v, lo);
    _mm256_storeu_ps(v + 8, hi);
    for (size_t i = 0; i < GM_PANEL_ROWS; i++)
        if (a + i >= r0 && a + i < r1) y[a + i - r0] = v[i];
}

GM_AI void matvec_k(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    const size_t tiles = P->cols / 32, tb = P->tile_bytes;
    const int32_t *xp = (const int32_t *)xq->q;
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *t = P->data + p * P->panel_bytes;
        __m256 lo = _mm256_setzero_ps(), hi = lo;
        for (size_t b = 0; b < tiles; b++, t += tb) {
            prefetch_ahead(t, (int)tb);
            tile_apply(K, t, xp + 16 * b, xq->d[b], xq->s[b], xq->qs + 2 * b, &lo, &hi);
        }
        store_rows(y, lo, hi, p, r0, r1);
    }
}

static void matvec_bf16(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    const size_t tiles = P->cols / 32;
    const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *t = P->data + p * P->panel_bytes;
        __m256 l0 = _mm256_setzero_ps(), l1 = l0, h0 = l0, h1 = l0;
        for (size_t b = 0; b < tiles; b++, t += 1024) {
            prefetch_ahead(t, 1024);
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
    case GM_PK_D16: matvec_k(GM_PK_D16, P, r0, r1, xq, y); return;
    case GM_PK_SM32: matvec_k(GM_PK_SM32, P, r0, r1, xq, y); return;
    case GM_PK_N4SM: matvec_k(GM_PK_N4SM, P, r0, r1, xq, y); return;
    case GM_PK_N5D: matvec_k(GM_PK_N5D, P, r0, r1, xq, y); return;
    case GM_PK_N6: matvec_k(GM_PK_N6, P, r0, r1, xq, y); return;
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
            if (P->kind == GM_PK_BF16) one.x = xq->x + t * xq->ldx;
            else {
                one.q = xq->q + t * xq->ldq, one.d = xq->d + t * xq->ldd, one.s = xq->s + t * xq->ldd;
                one.qs = xq->qs + 2 * t * xq->ldd;
            }
            packed_matvec_avx2(P, a, b, &one, Y + t * ldy + (a - r0));
        }
    }
}

const gm_packed_ops gm_packed_avx2 = {quantize_x_avx2, packed_matvec_avx2, packed_matmul_avx2};
