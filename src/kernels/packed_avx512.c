/* AVX-512 VNNI kernels for packed weights (layout in packed.h): each 512-bit register holds 16 rows'
 * int32 dot products, vpdpwssd multiplies a 16-row x 2-column slice of codes (sign-extended to
 * int16) by one broadcast int16 input pair, and each tile's scale is applied once per 16 rows. */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
#include "kernels/packed_x86.h"
#include "kernels/quant_x86.h"

enum { NT = 8, NTQ = 6, NT_FAST = 12 }; /* inputs per matmul pass (BF16 f32, quantized: two int32 sums each;
                                         * fast BF16: one f32 accumulator each) */

/* ---- activation quantization ---- */

static void quantize_x_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    const size_t nb = cols / GM_XQ_BLOCK;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)), lim = _mm512_set1_ps(32767.0f);
    enum { rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* an immediate: a const int is not one in C (clang) */
    xq->cols = cols;
    xq->ldq = cols;
    xq->ldd = nb;
    xq->has_xb = false;
    for (size_t t = 0; t < T; t++) {
        const float *xt = x + t * ldx;
        int16_t *q = xq->q + t * cols, *q2 = xq->q2 + t * cols;
        for (size_t b = 0; b < nb; b++) {
            const float *v = xt + GM_XQ_BLOCK * b;
            __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
            __mmask16 nan = _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q);
            size_t o = GM_XQ_BLOCK * b, k = t * nb + b;
            if (nan || !(amax <= 3.4028235e38f) || amax < 1e-30f) {
                gm_xq_block_finish(v, amax, q + o, q2 + o, &xq->d[k], &xq->s[k], &xq->qs[4 * k]);
                continue;
            }
            float inv = 32767.0f / amax, dd = amax / 32767.0f;
            __m512 iv = _mm512_set1_ps(inv), iv2 = _mm512_set1_ps(inv * 32768.0f), d = _mm512_set1_ps(dd);
            __m512 a0 = _mm512_roundscale_ps(_mm512_mul_ps(v0, iv), rne), a1 = _mm512_roundscale_ps(_mm512_mul_ps(v1, iv), rne);
            __m512 b0 = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_fnmadd_ps(d, a0, v0), iv2), rne);
            __m512 b1 = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_fnmadd_ps(d, a1, v1), iv2), rne);
            b0 = _mm512_max_ps(_mm512_min_ps(b0, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
            b1 = _mm512_max_ps(_mm512_min_ps(b1, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
            __m512i i0 = _mm512_cvtps_epi32(a0), i1 = _mm512_cvtps_epi32(a1);
            __m512i j0 = _mm512_cvtps_epi32(b0), j1 = _mm512_cvtps_epi32(b1);
            _mm256_storeu_si256((__m256i *)(q + o), _mm512_cvtepi32_epi16(i0));
            _mm256_storeu_si256((__m256i *)(q + o + 16), _mm512_cvtepi32_epi16(i1));
            _mm256_storeu_si256((__m256i *)(q2 + o), _mm512_cvtepi32_epi16(j0));
            _mm256_storeu_si256((__m256i *)(q2 + o + 16), _mm512_cvtepi32_epi16(j1));
            int32_t s0 = _mm512_reduce_add_epi32(i0), s1 = _mm512_reduce_add_epi32(i1);
            int32_t s2 = _mm512_reduce_add_epi32(j0), s3 = _mm512_reduce_add_epi32(j1);
            xq->d[k] = dd;
            xq->s[k] = dd * ((float)(s0 + s1) + (float)(s2 + s3) * 0x1p-15f);
            xq->qs[4 * k] = s0, xq->qs[4 * k + 1] = s1, xq->qs[4 * k + 2] = s2, xq->qs[4 * k + 3] = s3;
        }
    }
}

/* The int8 terms (packed.h), as gm_x8_block_ref element by element. */
GM_AI __m256i x8_store_order(__m512 a, __m512 b) { /* 32 values as int8, pairs (2g, 2g+1), (2g+16, 2g+17) */
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(_mm512_cvtps_epi32(a))),
                                        _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(b)), 1);
    const __m256i idx = _mm256_setr_epi16(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    return _mm256_permutexvar_epi16(idx, v);
}

/* 32 values as int8 in column order (xq->b8n) */
GM_AI __m256i x8_columns(__m512 a, __m512 b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(_mm512_cvtps_epi32(a))),
                                   _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(b)), 1);
}

/* A term's sum and half sums (gm_xq.s8) from its columns 0-15 (a) and 16-31 (b), whole numbers in f32 */
GM_AI void sum_terms(__m512 a, __m512 b, int32_t *sum, int32_t *half) {
    int32_t sa = _mm512_reduce_add_epi32(_mm512_cvtps_epi32(a)), sb = _mm512_reduce_add_epi32(_mm512_cvtps_epi32(b));
    *sum = sa + sb, *half = gm_x8_half_pair(sa, sb);
}

static void quantize_x8_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    const size_t nb = cols / GM_XQ_BLOCK;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)), lim = _mm512_set1_ps(127.0f),
                 nlim = _mm512_set1_ps(-127.0f);
    enum { rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC };
    xq->cols = cols, xq->ldd = cols / GM_XQ_BLOCK, xq->ld8 = 3 * cols;
    for (size_t t = 0; t < T; t++)
        for (size_t b = 0; b < nb; b++) {
            const float *v = x + t * ldx + GM_XQ_BLOCK * b;
            int8_t *q = xq->b8 + t * xq->ld8 + 96 * b;
            size_t k = t * nb + b;
            __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
            __mmask16 nan = _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q);
            int8_t *qn = xq->b8n ? xq->b8n + t * xq->ld8 + 96 * b : NULL; /* column order (N6H) */
            if (nan || !(amax <= 3.4028235e38f) || amax < 1e-30f) {
                gm_x8_block_ref(v, amax, q, &xq->e8[k], &xq->s8[GM_X8_SUMS * k]);
                if (qn) gm_x8_to_columns(q, qn);
                continue;
            }
            float d = amax / 127.0f, inv = 127.0f / amax, d2 = d / 254.0f;
            float inv2 = inv * 254.0f, inv3 = inv2 * 254.0f;
            __m512 a1 = _mm512_roundscale_ps(_mm512_mul_ps(v0, _mm512_set1_ps(inv)), rne);
            __m512 b1 = _mm512_roundscale_ps(_mm512_mul_ps(v1, _mm512_set1_ps(inv)), rne);
            __m512 ra = _mm512_fnmadd_ps(_mm512_set1_ps(d), a1, v0), rb = _mm512_fnmadd_ps(_mm512_set1_ps(d), b1, v1);
            __m512 a2 = _mm512_roundscale_ps(_mm512_mul_ps(ra, _mm512_set1_ps(inv2)), rne);
            __m512 b2 = _mm512_roundscale_ps(_mm512_mul_ps(rb, _mm512_set1_ps(inv2)), rne);
            a2 = _mm512_max_ps(_mm512_min_ps(a2, lim), nlim), b2 = _mm512_max_ps(_mm512_min_ps(b2, lim), nlim);
            ra = _mm512_fnmadd_ps(_mm512_set1_ps(d2), a2, ra), rb = _mm512_fnmadd_ps(_mm512_set1_ps(d2), b2, rb);
            __m512 a3 = _mm512_roundscale_ps(_mm512_mul_ps(ra, _mm512_set1_ps(inv3)), rne);
            __m512 b3 = _mm512_roundscale_ps(_mm512_mul_ps(rb, _mm512_set1_ps(inv3)), rne);
            a3 = _mm512_max_ps(_mm512_min_ps(a3, lim), nlim), b3 = _mm512_max_ps(_mm512_min_ps(b3, lim), nlim);
            _mm256_storeu_si256((__m256i *)q, x8_store_order(a1, b1));
            _mm256_storeu_si256((__m256i *)(q + 32), x8_store_order(a2, b2));
            _mm256_storeu_si256((__m256i *)(q + 64), x8_store_order(a3, b3));
            if (qn) {
                _mm256_storeu_si256((__m256i *)qn, x8_columns(a1, b1));
                _mm256_storeu_si256((__m256i *)(qn + 32), x8_columns(a2, b2));
                _mm256_storeu_si256((__m256i *)(qn + 64), x8_columns(a3, b3));
            }
            xq->e8[k] = d;
            int32_t *S = xq->s8 + GM_X8_SUMS * k;
            sum_terms(a1, b1, &S[0], &S[3]), sum_terms(a2, b2, &S[1], &S[4]), sum_terms(a3, b3, &S[2], &S[5]);
        }
    xq->has8 = true;
}

/* x = hi + mid + lo in bf16 (round to nearest even, as gm_split_bf16_ref), and the 32-value sums */
void gm_split_bf16_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    if (!gm_cpu_bf16()) { /* vcvtneps2bf16 is AVX512_BF16 */
        gm_split_bf16_ref(x, ldx, T, cols, xq);
        return;
    }
    size_t Tpad = (T + 15) / 16 * 16;
    for (size_t t = 0; t < Tpad; t++) {
        uint16_t *hi = xq->hi + t * cols, *mid = xq->mid + t * cols, *lo = xq->lo + t * cols;
        if (t >= T) {
            memset(hi, 0, cols * 2), memset(mid, 0, cols * 2), memset(lo, 0, cols * 2);
            continue;
        }
        const float *xt = x + t * ldx;
        for (size_t c = 0; c < cols; c += 16) {
            __mmask16 m = cols - c >= 16 ? 0xffff : (__mmask16)((1u << (cols - c)) - 1);
            __m512 v = _mm512_maskz_loadu_ps(m, xt + c);
            __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
            __m512 r = _mm512_sub_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
            __m256i md = (__m256i)_mm512_cvtneps_pbh(r);
            __m512 r2 = _mm512_sub_ps(r, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(md), 16)));
            __m256i l = (__m256i)_mm512_cvtneps_pbh(r2);
            _mm256_mask_storeu_epi16(hi + c, m, h);
            _mm256_mask_storeu_epi16(mid + c, m, md);
            _mm256_mask_storeu_epi16(lo + c, m, l);
        }
        for (size_t b = 0; b < cols / 32; b++) {
            float sum = 0; /* sequential, as the reference */
            for (int i = 0; i < 32; i++) sum += xt[32 * b + (size_t)i];
            xq->s[t * (cols / 32) + b] = sum;
        }
    }
}

/* ---- one tile ---- */

/* acc + the u8 codes w times the 4 int8 terms at x (one int32) in every lane: vpdpbusd with its broadcast in
 * the memory operand ({1to16}). gcc 12 emits _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(*x)) as a
 * vpbroadcastd of its own before each product; on Zen 4 that held the products to ~0.84 a cycle where the
 * folded form runs 1 a cycle (a probe of 18 independent sums). */
GM_AI __m512i dpbusd_x(__m512i acc, __m512i w, const int32_t *x) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
    return acc;
}

/* The same for the int16 pairs w and the 2 int16 terms at x: vpdpwssd */
GM_AI __m512i dpwssd_x(__m512i acc, __m512i w, const int32_t *x) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
    return acc;
}

/* Integer dots of one tile with one input's two terms (x1, x2: the 16 pairs of each): i[0], i[1] the
 * first and last 16 columns with q1, i[2], i[3] with q2 (for kinds without per-half scales or
 * offsets, i[1] and i[3] are 0 and the halves are summed in i[0], i[2]). */
GM_AI void tile_dots(gm_pack_kind K, const uint8_t *t, const int32_t *x1, const int32_t *x2, __m512i i[4]) {
    const int halves = K == GM_PK_N6;
    __m512i a1 = _mm512_setzero_si512(), b1 = a1, a2 = a1, b2 = a1;
    if (K == GM_PK_N6H) { /* steps 0-3 hold columns 0-15 (pairs 2g, 2g + 1), steps 4-7 columns 16-31 */
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            __m512i wa, wb;
            tile_weights(K, t, g, &wa, &wb);
            if (g < 4) {
                a1 = dpwssd_x(dpwssd_x(a1, wa, &x1[2 * g]), wb, &x1[2 * g + 1]);
                a2 = dpwssd_x(dpwssd_x(a2, wa, &x2[2 * g]), wb, &x2[2 * g + 1]);
            } else {
                b1 = dpwssd_x(dpwssd_x(b1, wa, &x1[2 * g]), wb, &x1[2 * g + 1]);
                b2 = dpwssd_x(dpwssd_x(b2, wa, &x2[2 * g]), wb, &x2[2 * g + 1]);
            }
        }
        i[0] = a1, i[1] = b1, i[2] = a2, i[3] = b2;
        return;
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        __m512i wa, wb;
        tile_weights(K, t, g, &wa, &wb);
        a1 = dpwssd_x(a1, wa, &x1[g]);
        a2 = dpwssd_x(a2, wa, &x2[g]);
        b1 = dpwssd_x(b1, wb, &x1[g + 8]);
        b2 = dpwssd_x(b2, wb, &x2[g + 8]);
    }
    if (halves) {
        i[0] = a1, i[1] = b1, i[2] = a2, i[3] = b2;
    } else {
        i[0] = _mm512_add_epi32(a1, b1), i[2] = _mm512_add_epi32(a2, b2);
        i[1] = i[3] = _mm512_setzero_si512();
    }
}

/* q1 dot + q2 dot / 32768, as f32 */
GM_AI __m512 two_terms(__m512i v1, __m512i v2) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(v2), _mm512_set1_ps(0x1p-15f), _mm512_cvtepi32_ps(v1));
}

/* acc += the tile's contribution for one input with block scale dx, scaled block sum xs and code
 * sums qs[0..3]; ks: the compact kinds' scales (k_tile) */
GM_AI __m512 tile_finish(gm_pack_kind K, const uint8_t *t, const __m512 ks[2], const __m512i i[4], float dx, float xs,
                         const int32_t *qs, __m512 acc) {
    __m512 d = _mm512_set1_ps(dx);
    switch (K) {
    case GM_PK_D16: {
        __m512 s = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + 512)));
        return _mm512_fmadd_ps(two_terms(i[0], i[2]), _mm512_mul_ps(s, d), acc);
    }
    case GM_PK_N5D: case GM_PK_N5R: {
        __m512 s = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + 320)));
        __m512i v1 = _mm512_sub_epi32(i[0], _mm512_set1_epi32(16 * (qs[0] + qs[1])));
        __m512i v2 = _mm512_sub_epi32(i[2], _mm512_set1_epi32(16 * (qs[2] + qs[3])));
        return _mm512_fmadd_ps(two_terms(v1, v2), _mm512_mul_ps(s, d), acc);
    }
    case GM_PK_N6: case GM_PK_N6H: {
        __m512 s0 = ks[0], s1 = ks[1];
        __m512 fa = two_terms(_mm512_sub_epi32(i[0], _mm512_set1_epi32(32 * qs[0])),
                              _mm512_sub_epi32(i[2], _mm512_set1_epi32(32 * qs[2])));
        __m512 fb = two_terms(_mm512_sub_epi32(i[1], _mm512_set1_epi32(32 * qs[1])),
                              _mm512_sub_epi32(i[3], _mm512_set1_epi32(32 * qs[3])));
        acc = _mm512_fmadd_ps(fa, _mm512_mul_ps(s0, d), acc);
        return _mm512_fmadd_ps(fb, _mm512_mul_ps(s1, d), acc);
    }
    default: { /* SM32, N4SM, N4K: w = s q + m, s and m from the tile or (N4K) formed from its scale codes */
        const float *sm = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256));
        __m512 s = gm_pack_kind_q4k(K) ? ks[0] : _mm512_load_ps(sm);
        __m512 m = gm_pack_kind_q4k(K) ? ks[1] : _mm512_load_ps(sm + 16);
        acc = _mm512_fmadd_ps(m, _mm512_set1_ps(xs), acc);
        return _mm512_fmadd_ps(two_terms(i[0], i[2]), _mm512_mul_ps(s, d), acc);
    }
    }
}

/* tile b of a panel (t: its codes; kd: its block's scales, compact kinds) */
GM_AI __m512 tile_apply(gm_pack_kind K, const gm_packed *P, const uint8_t *panel, size_t b, const __m512 kd[2],
                        const uint8_t *t, const int32_t *x1, const int32_t *x2, float dx, float xs, const int32_t *qs,
                        __m512 acc) {
    __m512i i[4];
    __m512 ks[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    tile_dots(K, t, x1, x2, i);
    if (gm_pack_kind_compact(K)) k_tile(K, gm_packed_sc(P, panel, b), kd, &ks[0], &ks[1]);
    return tile_finish(K, t, ks, i, dx, xs, qs, acc);
}

/* Rows [r0, r1) of panel p's 16 results v into y (y[0] = row r0). */
GM_AI void store_rows(float *y, __m512 v, size_t p, size_t r0, size_t r1) {
    size_t lo = p * GM_PANEL_ROWS, hi = lo + GM_PANEL_ROWS;
    if (lo >= r0 && hi <= r1) {
        _mm512_storeu_ps(y + (lo - r0), v);
        return;
    }
    /* a panel cut by the row range: lanes [a, b), moved down to lane 0 */
    size_t a = lo < r0 ? r0 - lo : 0, b = hi > r1 ? r1 - lo : GM_PANEL_ROWS;
    __mmask16 m = (__mmask16)(((1u << b) - 1) & ~((1u << a) - 1));
    _mm512_mask_storeu_ps(y + (lo + a - r0), (__mmask16)((1u << (b - a)) - 1), _mm512_maskz_compress_ps(m, v));
}

/* ---- matvec ---- */

GM_AI void matvec_k(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    const size_t tiles = P->cols / 32, tb = gm_pack_tile_bytes(K);
    const int32_t *x1 = (const int32_t *)xq->q, *x2 = (const int32_t *)xq->q2;
    /* The panels are one contiguous stream. The hardware prefetcher alone leaves the loop waiting for
     * memory; a short lead to L1 helps (docs/BENCHMARKS.md "Prefetching the decode stream": +8-11 %
     * tokens/s at 512 bytes on the 270M and 1B Q8_0; a long one to L1 hurts, 4 KiB: -12-23 %), and a
     * longer one to L2 on top of it helps more (3 KiB: +16-21 %). */
    const gm_prefetch pf = gm_packed_prefetch(K);
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *panel = P->data + p * P->panel_bytes, *t = panel;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, kd[2] = {acc0, acc0};
        k_leads lead = panel_leads(K, P, panel, tb, pf);
        size_t b = 0;
        for (; b + 2 <= tiles; b += 2, t += 2 * tb) {
            prefetch_panel(K, P, panel, b, tb, pf, 2 * tb, &lead);
            if (gm_pack_kind_compact(K) && b % 8 == 0) k_block(K, gm_packed_sb(P, panel, b), kd); /* 8 tiles' */
            acc0 = tile_apply(K, P, panel, b, kd, t, x1 + 16 * b, x2 + 16 * b, xq->d[b], xq->s[b], xq->qs + 4 * b,
                              acc0);
            acc1 = tile_apply(K, P, panel, b + 1, kd, t + tb, x1 + 16 * (b + 1), x2 + 16 * (b + 1), xq->d[b + 1],
                              xq->s[b + 1], xq->qs + 4 * b + 4, acc1);
        }
        if (b < tiles) /* never a compact kind's: they have 8 tiles per block */
            acc0 = tile_apply(K, P, panel, b, kd, t, x1 + 16 * b, x2 + 16 * b, xq->d[b], xq->s[b], xq->qs + 4 * b,
                              acc0);
        store_rows(y, _mm512_add_ps(acc0, acc1), p, r0, r1);
    }
}

/* ---- BF16: f32 arithmetic on the exact weights ---- */

/* the 16 rows' weights at columns 2p (even) and 2p + 1 (odd) of a BF16 tile, as f32 */
GM_AI void bf16_pair(const uint8_t *t, int p, __m512 *even, __m512 *odd) {
    __m512i v = _mm512_load_si512((const void *)(t + 64 * p));
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

static void matvec_bf16(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    const size_t tiles = P->cols / 32;
    /* to L2 only: the L1 lead of the quantized kinds did not help here (docs/BENCHMARKS.md) */
    const gm_prefetch pf = {0, gm_packed_prefetch(GM_PK_BF16).l2};
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *t = P->data + p * P->panel_bytes;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t b = 0; b < tiles; b++, t += 1024) {
            prefetch_stream(t, pf, 1024);
            const float *x = xq->x + 32 * b;
#pragma GCC unroll 8
            for (int q = 0; q < 16; q += 2) {
                __m512 e0, o0, e1, o1;
                bf16_pair(t, q, &e0, &o0);
                bf16_pair(t, q + 1, &e1, &o1);
                a0 = _mm512_fmadd_ps(e0, _mm512_set1_ps(x[2 * q]), a0);
                a1 = _mm512_fmadd_ps(o0, _mm512_set1_ps(x[2 * q + 1]), a1);
                a2 = _mm512_fmadd_ps(e1, _mm512_set1_ps(x[2 * q + 2]), a2);
                a3 = _mm512_fmadd_ps(o1, _mm512_set1_ps(x[2 * q + 3]), a3);
            }
        }
        store_rows(y, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), p, r0, r1);
    }
}

/* nt inputs at a time share each converted pair: 2 * nt FMAs per 2 conversions */
GM_AI void matmul_bf16_k(int nt, const gm_packed *P, size_t p, size_t r0, size_t r1, const gm_xq *xq, size_t t0,
                         float *Y, size_t ldy) {
    const size_t tiles = P->cols / 32;
    const uint8_t *t = P->data + p * P->panel_bytes;
    __m512 acc[NT];
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
    for (size_t b = 0; b < tiles; b++, t += 1024) {
        const float *x = xq->x + t0 * xq->ldx + 32 * b;
#pragma GCC unroll 2
        for (int q = 0; q < 16; q++) {
            __m512 e, o;
            bf16_pair(t, q, &e, &o);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                acc[j] = _mm512_fmadd_ps(e, _mm512_set1_ps(x[(size_t)j * xq->ldx + 2 * q]), acc[j]);
                acc[j] = _mm512_fmadd_ps(o, _mm512_set1_ps(x[(size_t)j * xq->ldx + 2 * q + 1]), acc[j]);
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) store_rows(Y + (t0 + (size_t)j) * ldy, acc[j], p, r0, r1);
}

/* Fast BF16 (xq->fast): the inputs rounded to bf16 (the split's hi), 32 multiply-adds per vdpbf16ps on
 * the tile's column pairs as stored (lane r: row r's columns 2q, 2q + 1), as llama.cpp does */
GM_AI void matmul_bf16dp_k(int nt, const gm_packed *P, size_t p, size_t r0, size_t r1, const gm_xq *xq, size_t t0,
                           float *Y, size_t ldy) {
    const size_t tiles = P->cols / 32;
    const uint8_t *t = P->data + p * P->panel_bytes;
    __m512 acc[NT_FAST];
#pragma GCC unroll 12
    for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
    for (size_t b = 0; b < tiles; b++, t += 1024) {
#pragma GCC unroll 4
        for (int q = 0; q < 16; q++) {
            __m512bh w = (__m512bh)_mm512_load_si512((const void *)(t + 64 * q));
#pragma GCC unroll 12
            for (int j = 0; j < nt; j++) {
                uint32_t pair; /* hi[2q] | hi[2q + 1] << 16 */
                memcpy(&pair, xq->hi + (t0 + (size_t)j) * xq->ldq + 32 * b + 2 * q, 4);
                acc[j] = _mm512_dpbf16_ps(acc[j], w, (__m512bh)_mm512_set1_epi32((int)pair));
            }
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < nt; j++) store_rows(Y + (t0 + (size_t)j) * ldy, acc[j], p, r0, r1);
}

static void matmul_bf16_fma(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    if (xq->fast && xq->split && gm_cpu_bf16()) {
        for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
            size_t t = 0;
            for (; t + NT_FAST <= T; t += NT_FAST) matmul_bf16dp_k(NT_FAST, P, p, r0, r1, xq, t, Y, ldy);
            for (; t + 4 <= T; t += 4) matmul_bf16dp_k(4, P, p, r0, r1, xq, t, Y, ldy);
            for (; t < T; t++) matmul_bf16dp_k(1, P, p, r0, r1, xq, t, Y, ldy);
        }
        return;
    }
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        size_t t = 0;
        for (; t + NT <= T; t += NT) matmul_bf16_k(NT, P, p, r0, r1, xq, t, Y, ldy);
        for (; t + 4 <= T; t += 4) matmul_bf16_k(4, P, p, r0, r1, xq, t, Y, ldy);
        for (; t < T; t++) matmul_bf16_k(1, P, p, r0, r1, xq, t, Y, ldy);
    }
}

GM_AI void matvec8_rows(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y);

/* A row-form kind's exact single-token product: the three int8 terms where the caller gave all that K reads
 * (gm_packed_decode_int8, gm_xq_int8_for), else the int16 terms */
GM_AI void matvec_row_form(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    if (gm_xq_int8_for(xq, K)) matvec8_rows(K, P, r0, r1, xq, y);
    else matvec_k(K, P, r0, r1, xq, y);
}

static void packed_matvec_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    if (r1 <= r0) return;
    switch (P->kind) {
    case GM_PK_BF16: matvec_bf16(P, r0, r1, xq, y); return;
    case GM_PK_D16: matvec_k(GM_PK_D16, P, r0, r1, xq, y); return;
    case GM_PK_SM32: matvec_k(GM_PK_SM32, P, r0, r1, xq, y); return;
    case GM_PK_N4SM: matvec_k(GM_PK_N4SM, P, r0, r1, xq, y); return;
    case GM_PK_N4K: matvec_k(GM_PK_N4K, P, r0, r1, xq, y); return;
    case GM_PK_N5D: matvec_k(GM_PK_N5D, P, r0, r1, xq, y); return;
    case GM_PK_N4R: matvec_row_form(GM_PK_N4R, P, r0, r1, xq, y); return;
    case GM_PK_N5R: matvec_row_form(GM_PK_N5R, P, r0, r1, xq, y); return;
    case GM_PK_N6: matvec_k(GM_PK_N6, P, r0, r1, xq, y); return;
    case GM_PK_N6H: matvec_row_form(GM_PK_N6H, P, r0, r1, xq, y); return;
    default: return;
    }
}

/* ---- matmul: NT inputs share each converted code register ---- */

GM_AI void matmul_k(gm_pack_kind K, int nt, const gm_packed *P, size_t p, size_t r0, size_t r1, const gm_xq *xq,
                    size_t t0, float *Y, size_t ldy) {
    const size_t tiles = P->cols / 32, tb = gm_pack_tile_bytes(K), ldq = xq->ldq, ldd = xq->ldd;
    const int halves = K == GM_PK_N6;
    const uint8_t *panel = P->data + p * P->panel_bytes, *t = panel;
    __m512 acc[NTQ];
    const int32_t *x1[NTQ], *x2[NTQ];
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
    __m512 kd[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (size_t b = 0; b < tiles; b++, t += tb) {
        __m512i ia1[NTQ], ia2[NTQ], ib1[NTQ], ib2[NTQ];
        if (gm_pack_kind_compact(K) && b % 8 == 0) k_block(K, gm_packed_sb(P, panel, b), kd);
        __m512 ks[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}; /* the tile's scales, for all nt inputs */
        if (gm_pack_kind_compact(K)) k_tile(K, gm_packed_sc(P, panel, b), kd, &ks[0], &ks[1]);
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) {
            x1[j] = (const int32_t *)(xq->q + (t0 + (size_t)j) * ldq) + 16 * b;
            x2[j] = (const int32_t *)(xq->q2 + (t0 + (size_t)j) * ldq) + 16 * b;
            ia1[j] = ia2[j] = ib1[j] = ib2[j] = _mm512_setzero_si512();
        }
        /* each pair's codes are unpacked once and used by all nt inputs, both terms */
#pragma GCC unroll 8
        for (int g = 0; g < 8 && K == GM_PK_N6H; g++) { /* steps 0-3: columns 0-15, pairs 2g, 2g + 1 */
            __m512i wa, wb;
            tile_weights(K, t, g, &wa, &wb);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                const int32_t *x1g = &x1[j][2 * g], *x2g = &x2[j][2 * g];
                if (g < 4) {
                    ia1[j] = dpwssd_x(dpwssd_x(ia1[j], wa, x1g), wb, x1g + 1);
                    ia2[j] = dpwssd_x(dpwssd_x(ia2[j], wa, x2g), wb, x2g + 1);
                } else {
                    ib1[j] = dpwssd_x(dpwssd_x(ib1[j], wa, x1g), wb, x1g + 1);
                    ib2[j] = dpwssd_x(dpwssd_x(ib2[j], wa, x2g), wb, x2g + 1);
                }
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < 8 && K != GM_PK_N6H; g++) {
            __m512i wa, wb;
            tile_weights(K, t, g, &wa, &wb);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                ia1[j] = dpwssd_x(ia1[j], wa, &x1[j][g]);
                ia2[j] = dpwssd_x(ia2[j], wa, &x2[j][g]);
                if (halves) {
                    ib1[j] = dpwssd_x(ib1[j], wb, &x1[j][g + 8]);
                    ib2[j] = dpwssd_x(ib2[j], wb, &x2[j][g + 8]);
                } else {
                    ia1[j] = dpwssd_x(ia1[j], wb, &x1[j][g + 8]);
                    ia2[j] = dpwssd_x(ia2[j], wb, &x2[j][g + 8]);
                }
            }
        }
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) {
            size_t o = (t0 + (size_t)j) * ldd + b;
            __m512i i4[4] = {ia1[j], ib1[j], ia2[j], ib2[j]};
            acc[j] = tile_finish(K, t, ks, i4, xq->d[o], xq->s[o], xq->qs + 4 * o, acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) store_rows(Y + (t0 + (size_t)j) * ldy, acc[j], p, r0, r1);
}

GM_AI void matmul_kind(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                       size_t ldy) {
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        size_t t = 0;
        if (K != GM_PK_N6 && K != GM_PK_N6H) /* their two halves' sums: 4 inputs at most */
            for (; t + NTQ <= T; t += NTQ) matmul_k(K, NTQ, P, p, r0, r1, xq, t, Y, ldy);
        for (; t + 4 <= T; t += 4) matmul_k(K, 4, P, p, r0, r1, xq, t, Y, ldy);
        switch (T - t) { /* the last 1-3 inputs in one pass: each pass unpacks the panel's codes again */
        case 3: matmul_k(K, 3, P, p, r0, r1, xq, t, Y, ldy); break;
        case 2: matmul_k(K, 2, P, p, r0, r1, xq, t, Y, ldy); break;
        case 1: matmul_k(K, 1, P, p, r0, r1, xq, t, Y, ldy); break;
        default: break;
        }
    }
}

/* ---- matmul with the int8 input terms (packed.h): vpdpbusd, codes as u8, 4 columns per lane ---- */

enum { NT8 = 6, NT8_FAST = 12 }; /* inputs per pass: 3 int32 sums + 1 f32 accumulator each (fast: 1 + 1) */

/* The u8 codes of step g (columns 2g, 2g + 1, 2g + 16, 2g + 17 of each row, a 32-bit lane per row). */
GM_AI __m512i tile_u8(gm_pack_kind K, const uint8_t *t, int g) {
    if (gm_pack_kind_q6(K)) return n6_step_u8(t, g); /* N6, N6H */
    if (K == GM_PK_N5R) return n5r_step_u8(t, g);
    if (K == GM_PK_N4R) return n4r_step_u8(t, g);
    if (K == GM_PK_D16 || K == GM_PK_SM32) { /* pairs g and g + 8 side by side; D16's int8 + 128 */
        __m512i a = _mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)(t + 32 * g)));
        __m512i b = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)(t + 32 * g + 256))), 16);
        /* (a | b) ^ 0x80 per byte, or a | b */
        return K == GM_PK_D16 ? _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi32((int)0x80808080u), 0x56)
                              : _mm512_or_si512(a, b);
    }
    /* lane = byte 2r | byte 2r+1 << 8; (lane | lane << 12) & 0x0f0f0f0f = lo, lo, hi, hi nibbles */
    __m512i v = _mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)(t + 32 * g)));
    __m512i w = _mm512_ternarylogic_epi32(v, _mm512_slli_epi32(v, 12), _mm512_set1_epi32(0x0f0f0f0f), 0xa8);
    if (K == GM_PK_N5D) { /* bit 4: plane bits of pair g to bytes 0, 1 of each lane, pair g + 8 to 2, 3 */
        uint32_t pa, pb;
        memcpy(&pa, t + 256 + 4 * g, 4);
        memcpy(&pb, t + 256 + 4 * (g + 8), 4);
        __mmask64 m = _pdep_u64(pa, 0x3333333333333333ull) | _pdep_u64(pb, 0xccccccccccccccccull);
        w = _mm512_mask_add_epi8(w, m, w, _mm512_set1_epi8(16));
    }
    return w;
}

/* Q6_K's scale codes of a tile (i8 sc[2][16], packed.h) as the int16 pairs (sc[0][r], sc[1][r]) of its 16
 * rows: vpmaddubsw leaves a row's columns (2g, 2g + 1) and (2g + 16, 2g + 17) in separate int16 sums, and
 * vpdpwssd weighs them with these (N6's int8 product, one term: the screen, --precision fast) */
GM_AI __m512i q6_scale_pairs(const uint8_t *sc) {
    __m128i c0 = _mm_load_si128((const __m128i *)sc), c1 = _mm_load_si128((const __m128i *)(sc + 16));
    __m128i lo = _mm_unpacklo_epi8(c0, c1), hi = _mm_unpackhi_epi8(c0, c1); /* rows 0-7, 8-15 */
    return _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* The f32 block sum of one input's three int8 terms (the "+ m" part of w = s q + m): e (b1 + b2 / 254 + b3 / 254^2)
 * summed, from the terms' integer sums S */
GM_AI float x8_block_sum(float e, const int32_t *S) {
    return e * ((float)S[0] + (float)S[1] * (1.0f / 254.0f) + (float)S[2] * (1.0f / 64516.0f));
}

/* Half h's term k sum of a block (gm_xq.s8: the low int16 of S[3 + k] is columns 0-15's, the high 16-31's) */
GM_AI int32_t x8_half_sum(const int32_t *S, int k, int h) {
    return (int16_t)((uint32_t)S[3 + k] >> 16 * h);
}

/* The three terms' integer sums as one f32: v1 + v2 / 254 + v3 / 254^2 */
GM_AI __m512 x8_terms(__m512i v1, __m512i v2, __m512i v3) {
    __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v2), _mm512_set1_ps(1.0f / 254.0f), _mm512_cvtepi32_ps(v1));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(v3), _mm512_set1_ps(1.0f / 64516.0f), f);
}

/* One half's sums of N6H codes (q + 32) with the int8 terms (i1-i3), less the offset (32 x the terms' half
 * sums), as one f32 (x8_terms; `one`: b1 alone) */
GM_AI __m512 x8_half_terms(__m512i i1, __m512i i2, __m512i i3, const int32_t *S, int h, bool one) {
    __m512i v1 = _mm512_sub_epi32(i1, _mm512_set1_epi32(32 * x8_half_sum(S, 0, h)));
    if (one) return _mm512_cvtepi32_ps(v1);
    return x8_terms(v1, _mm512_sub_epi32(i2, _mm512_set1_epi32(32 * x8_half_sum(S, 1, h))),
                    _mm512_sub_epi32(i3, _mm512_set1_epi32(32 * x8_half_sum(S, 2, h))));
}

/* nt inputs t0 .. t0 + nt - 1 against panel p: with the three int8 terms (as accurate as f32), or with
 * `one`, the first term alone (xq->fast: llama.cpp's 8-bit rounding, a third of the dot products); with
 * `bound` (D16 or N6, one input, its first term: gm_packed_screen) also sum |d| eb per row there (N6: the
 * larger of the row's two scales d sc). N6 takes vpmaddubsw and vpdpwssd with its scale pairs per step
 * (q6_scale_pairs), twice the vpdpbusd of the other kinds and half the int16 matvec's vpdpwssd. N6H's steps
 * 0-3 (columns 0-15) go to one set of sums, 4-7 to another, each weighed by its half's scale; it reads the
 * terms in column order (xq->b8n). */
GM_AI void matmul8_k(gm_pack_kind K, int nt, bool one, const gm_packed *P, size_t p, size_t r0, size_t r1,
                     const gm_xq *xq, size_t t0, float *Y, size_t ldy, const float *eb, float *bound) {
    const size_t tiles = P->cols / 32, tb = gm_pack_tile_bytes(K), ldd = xq->ldd;
    const int off = K == GM_PK_D16 ? 128 : K == GM_PK_N5D || K == GM_PK_N5R ? 16 : 0;
    const uint8_t *panel = P->data + p * P->panel_bytes, *t = panel;
    __m512 acc[NT8_FAST], bacc = _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
    /* one token (fast decode, the screen): as matvec_k */
    const gm_prefetch pf = nt == 1 ? gm_packed_prefetch(K) : (gm_prefetch){0, 0};
    __m512 kd[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    k_leads lead = panel_leads(K, P, panel, tb, pf);
    for (size_t b = 0; b < tiles; b++, t += tb) {
        prefetch_panel(K, P, panel, b, tb, pf, tb, &lead);
        if (gm_pack_kind_compact(K) && b % 8 == 0) k_block(K, gm_packed_sb(P, panel, b), kd); /* 8 tiles' */
        /* i1-i3: each term's sums (N6H: of columns 0-15), h1-h3 N6H's of columns 16-31 */
        __m512i i1[NT8_FAST], i2[NT8_FAST], i3[NT8_FAST], h1[NT8_FAST], h2[NT8_FAST], h3[NT8_FAST];
        __m512i scp = _mm512_setzero_si512();
        if (K == GM_PK_N6) scp = q6_scale_pairs(gm_packed_sc(P, panel, b));
        const int8_t *xb = gm_pack_kind_reads_b8n(K) ? xq->b8n : xq->b8;
        const int32_t *x[NT8_FAST];
#pragma GCC unroll 12
        for (int j = 0; j < nt; j++) {
            x[j] = (const int32_t *)(xb + (t0 + (size_t)j) * xq->ld8 + 96 * b);
            i1[j] = i2[j] = i3[j] = h1[j] = h2[j] = h3[j] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            __m512i w = tile_u8(K, t, g);
#pragma GCC unroll 12
            for (int j = 0; j < nt; j++) {
                if (K == GM_PK_N6) { /* one term: the screen, --precision fast */
                    i1[j] = _mm512_dpwssd_epi32(i1[j], _mm512_maddubs_epi16(w, _mm512_set1_epi32(x[j][g])), scp);
                    continue;
                }
                if (K == GM_PK_N6H && g >= 4) {
                    h1[j] = dpbusd_x(h1[j], w, &x[j][g]);
                    if (one) continue;
                    h2[j] = dpbusd_x(h2[j], w, &x[j][8 + g]);
                    h3[j] = dpbusd_x(h3[j], w, &x[j][16 + g]);
                    continue;
                }
                i1[j] = dpbusd_x(i1[j], w, &x[j][g]);
                if (one) continue;
                i2[j] = dpbusd_x(i2[j], w, &x[j][8 + g]);
                i3[j] = dpbusd_x(i3[j], w, &x[j][16 + g]);
            }
        }
        __m512 ks = _mm512_setzero_ps(), km = ks; /* the kinds with a min: the tile's s and m; N6H its halves' s */
        if (gm_pack_kind_q4k(K) || K == GM_PK_N6H) k_tile(K, gm_packed_sc(P, panel, b), kd, &ks, &km);
        else if (K == GM_PK_SM32 || K == GM_PK_N4SM) {
            const float *sm = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256));
            ks = _mm512_load_ps(sm), km = _mm512_load_ps(sm + 16);
        }
#pragma GCC unroll 12
        for (int j = 0; j < nt; j++) {
            size_t o = (t0 + (size_t)j) * ldd + b;
            const int32_t *S = xq->s8 + GM_X8_SUMS * o;
            float e = xq->e8[o];
            if (K == GM_PK_N6H) { /* w = d sc (q - 32) per half: the offset through each term's half sums */
                __m512 F0 = x8_half_terms(i1[j], i2[j], i3[j], S, 0, one);
                __m512 F1 = x8_half_terms(h1[j], h2[j], h3[j], S, 1, one);
                acc[j] = _mm512_fmadd_ps(F0, _mm512_mul_ps(ks, _mm512_set1_ps(e)), acc[j]);
                acc[j] = _mm512_fmadd_ps(F1, _mm512_mul_ps(km, _mm512_set1_ps(e)), acc[j]);
                if (bound) /* |d| max(|sc0|, |sc1|) */
                    bacc = _mm512_fmadd_ps(_mm512_max_ps(_mm512_abs_ps(ks), _mm512_abs_ps(km)), _mm512_set1_ps(eb[b]),
                                           bacc);
                continue;
            }
            __m512i v1 = _mm512_sub_epi32(i1[j], _mm512_set1_epi32(off * S[0]));
            __m512 F = one ? _mm512_cvtepi32_ps(v1)
                           : x8_terms(v1, _mm512_sub_epi32(i2[j], _mm512_set1_epi32(off * S[1])),
                                      _mm512_sub_epi32(i3[j], _mm512_set1_epi32(off * S[2])));
            if (K == GM_PK_N6) { /* w = d (sc q - 32 sc): sc is in the dots, the offset through the half sums */
                __m512i o32 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), scp, _mm512_set1_epi32(S[3]));
                F = _mm512_cvtepi32_ps(_mm512_sub_epi32(i1[j], _mm512_slli_epi32(o32, 5)));
                acc[j] = _mm512_fmadd_ps(F, _mm512_mul_ps(kd[0], _mm512_set1_ps(e)), acc[j]);
                if (!bound) continue;
                __m512i a = _mm512_abs_epi16(scp);
                __m512i mx = _mm512_max_epi16(_mm512_and_si512(a, _mm512_set1_epi32(0xffff)), _mm512_srli_epi32(a, 16));
                __m512 dmax = _mm512_mul_ps(_mm512_abs_ps(kd[0]), _mm512_cvtepi32_ps(mx)); /* |d| max(|sc0|, |sc1|) */
                bacc = _mm512_fmadd_ps(dmax, _mm512_set1_ps(eb[b]), bacc);
            } else if (K == GM_PK_D16 || K == GM_PK_N5D || K == GM_PK_N5R) {
                __m512 s = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + (K == GM_PK_D16 ? 512 : 320))));
                acc[j] = _mm512_fmadd_ps(F, _mm512_mul_ps(s, _mm512_set1_ps(e)), acc[j]);
                if (bound) bacc = _mm512_fmadd_ps(_mm512_abs_ps(s), _mm512_set1_ps(eb[b]), bacc);
            } else { /* w = s q + m: the m part needs the block sum of x */
                float sx = one ? e * (float)S[0] : x8_block_sum(e, S);
                acc[j] = _mm512_fmadd_ps(km, _mm512_set1_ps(sx), acc[j]);
                acc[j] = _mm512_fmadd_ps(F, _mm512_mul_ps(ks, _mm512_set1_ps(e)), acc[j]);
            }
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < nt; j++) store_rows(Y + (t0 + (size_t)j) * ldy, acc[j], p, r0, r1);
    if (bound) store_rows(bound, bacc, p, r0, r1);
}

GM_AI void matmul8_kind(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                        size_t ldy) {
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        size_t t = 0;
        if (xq->fast) {
            if (K == GM_PK_N6H) /* two sums and an accumulator an input */
                for (; t + 8 <= T; t += 8) matmul8_k(K, 8, true, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL);
            for (; t + NT8_FAST <= T && K != GM_PK_N6H; t += NT8_FAST)
                matmul8_k(K, NT8_FAST, true, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL);
            for (; t + 4 <= T; t += 4) matmul8_k(K, 4, true, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL);
            for (; t < T; t++) matmul8_k(K, 1, true, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL);
            continue;
        }
        for (; t + NT8 <= T; t += NT8) matmul8_k(K, NT8, false, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL);
        switch (T - t) { /* the last 1-5 inputs in one pass: each pass unpacks the panel's codes again */
        case 5: matmul8_k(K, 5, false, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL); break;
        case 4: matmul8_k(K, 4, false, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL); break;
        case 3: matmul8_k(K, 3, false, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL); break;
        case 2: matmul8_k(K, 2, false, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL); break;
        case 1: matmul8_k(K, 1, false, P, p, r0, r1, xq, t, Y, ldy, NULL, NULL); break;
        default: break;
        }
    }
}

/* One input's exact product of a row-form matrix (N4R, N5R, N6H) with its three int8 terms, whatever xq->fast
 * says: matmul8_k's sums for one input in the same order (the same floats), with what depends on the input alone
 * worked out once instead of once per panel: the minimums' block sums (N4R), and the code offsets' part of the
 * integer sums (N5R, N6H), where those sums start. (N4R in L2: 25.0 GB/s through matmul8_k, 30.2 here.) */
GM_AI void matvec8_rows(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    enum { MAX_TILES = 1024 }; /* 32768 columns; wider ones take matmul8_k */
    const size_t tiles = P->cols / 32, tb = gm_pack_tile_bytes(K);
    if (tiles > MAX_TILES) {
        for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++)
            matmul8_k(K, 1, false, P, p, r0, r1, xq, 0, y, 0, NULL, NULL);
        return;
    }
    int32_t start[6 * MAX_TILES]; /* N5R: -16 x each term's block sum; N6H: -32 x each term's half sums */
    float xs[MAX_TILES];          /* N4R: the block sums */
    for (size_t b = 0; b < tiles; b++) {
        const int32_t *S = xq->s8 + GM_X8_SUMS * b;
        if (K == GM_PK_N4R) xs[b] = x8_block_sum(xq->e8[b], S);
        for (int k = 0; k < 3 && K == GM_PK_N5R; k++) start[3 * b + (size_t)k] = -16 * S[k];
        for (int k = 0; k < 6 && K == GM_PK_N6H; k++) start[6 * b + (size_t)k] = -32 * x8_half_sum(S, k % 3, k / 3);
    }
    const gm_prefetch pf = gm_packed_prefetch(K);
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        const uint8_t *panel = P->data + p * P->panel_bytes, *t = panel;
        __m512 acc = _mm512_setzero_ps(), kd[2] = {acc, acc};
        k_leads lead = panel_leads(K, P, panel, tb, pf);
        for (size_t b = 0; b < tiles; b++, t += tb) {
            prefetch_panel(K, P, panel, b, tb, pf, tb, &lead);
            if (K != GM_PK_N5R && b % 8 == 0) k_block(K, gm_packed_sb(P, panel, b), kd); /* 8 tiles' */
            const int32_t *x = (const int32_t *)((gm_pack_kind_reads_b8n(K) ? xq->b8n : xq->b8) + 96 * b);
            /* the terms' sums [3], of N6H's columns 0-15, and [3 + k] N6H's of columns 16-31 */
            __m512i i[6];
#pragma GCC unroll 6
            for (int k = 0; k < 6; k++)
                i[k] = K == GM_PK_N4R || (k >= 3 && K != GM_PK_N6H) ? _mm512_setzero_si512()
                       : _mm512_set1_epi32(start[(K == GM_PK_N6H ? 6 : 3) * b + (size_t)k]);
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                __m512i w = tile_u8(K, t, g);
                int h = K == GM_PK_N6H && g >= 4 ? 3 : 0;
                i[h] = dpbusd_x(i[h], w, &x[g]);
                i[h + 1] = dpbusd_x(i[h + 1], w, &x[8 + g]);
                i[h + 2] = dpbusd_x(i[h + 2], w, &x[16 + g]);
            }
            __m512 F = x8_terms(i[0], i[1], i[2]), e = _mm512_set1_ps(xq->e8[b]);
            if (K == GM_PK_N6H) {
                __m512 s0, s1;
                k_tile(K, gm_packed_sc(P, panel, b), kd, &s0, &s1);
                acc = _mm512_fmadd_ps(F, _mm512_mul_ps(s0, e), acc);
                acc = _mm512_fmadd_ps(x8_terms(i[3], i[4], i[5]), _mm512_mul_ps(s1, e), acc);
            } else if (K == GM_PK_N4R) {
                __m512 ks, km;
                k_tile(K, gm_packed_sc(P, panel, b), kd, &ks, &km);
                acc = _mm512_fmadd_ps(km, _mm512_set1_ps(xs[b]), acc);
                acc = _mm512_fmadd_ps(F, _mm512_mul_ps(ks, e), acc);
            } else {
                __m512 s = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + 320)));
                acc = _mm512_fmadd_ps(F, _mm512_mul_ps(s, e), acc);
            }
        }
        store_rows(y, acc, p, r0, r1);
    }
}

void gm_packed_matmul8_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                              size_t ldy) {
    if (r1 <= r0) return;
    switch (P->kind) {
    case GM_PK_D16: matmul8_kind(GM_PK_D16, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_SM32: matmul8_kind(GM_PK_SM32, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4SM: matmul8_kind(GM_PK_N4SM, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4K: matmul8_kind(GM_PK_N4K, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4R: matmul8_kind(GM_PK_N4R, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N5D: matmul8_kind(GM_PK_N5D, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N5R: matmul8_kind(GM_PK_N5R, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N6: /* one term only (gm_packed_kind_int8) */
        if (xq->fast) matmul8_kind(GM_PK_N6, P, r0, r1, xq, T, Y, ldy);
        else gm_packed_matmul_avx512(P, r0, r1, xq, T, Y, ldy);
        return;
    case GM_PK_N6H:
        if (xq->fast && gm_xq_int8_for(xq, GM_PK_N6H)) matmul8_kind(GM_PK_N6H, P, r0, r1, xq, T, Y, ldy);
        else gm_packed_matmul_avx512(P, r0, r1, xq, T, Y, ldy);
        return;
    default: gm_packed_matmul_avx512(P, r0, r1, xq, T, Y, ldy); return; /* int16 terms */
    }
}

/* The screened product (packed.h, gm_packed_screen): one input, its first int8 term alone, as fast decode
 * runs it, with the bound beside it: a quarter of the exact matvec's dot products (8 vpdpbusd per tile
 * against 32 vpdpwssd; Q6_K's N6 8 vpmaddubsw and 8 vpdpwssd), the same widenings. N6H reads the term in
 * column order (xq->b8n: gm_packed_screen gives a call without them to the reference). */
void gm_packed_screen_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y,
                             float *bound) {
    if (r1 <= r0 || (P->kind != GM_PK_D16 && P->kind != GM_PK_N6 && (P->kind != GM_PK_N6H || !xq->b8n))) return;
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++)
        if (P->kind == GM_PK_D16) matmul8_k(GM_PK_D16, 1, true, P, p, r0, r1, xq, 0, y, 0, eb, bound);
        else if (P->kind == GM_PK_N6H) matmul8_k(GM_PK_N6H, 1, true, P, p, r0, r1, xq, 0, y, 0, eb, bound);
        else matmul8_k(GM_PK_N6, 1, true, P, p, r0, r1, xq, 0, y, 0, eb, bound);
}

void gm_packed_matmul_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                             size_t ldy) {
    if (r1 <= r0) return;
    switch (P->kind) {
    case GM_PK_BF16: matmul_bf16_fma(P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_D16: matmul_kind(GM_PK_D16, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_SM32: matmul_kind(GM_PK_SM32, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4SM: matmul_kind(GM_PK_N4SM, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4K: matmul_kind(GM_PK_N4K, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4R: matmul_kind(GM_PK_N4R, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N5D: matmul_kind(GM_PK_N5D, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N5R: matmul_kind(GM_PK_N5R, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N6: matmul_kind(GM_PK_N6, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N6H: matmul_kind(GM_PK_N6H, P, r0, r1, xq, T, Y, ldy); return;
    default: return;
    }
}

void gm_packed_matvec_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    packed_matvec_avx512(P, r0, r1, xq, y);
}
void gm_quantize_x_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    quantize_x_avx512(x, ldx, T, cols, xq);
}
void gm_quantize_x8_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    quantize_x8_avx512(x, ldx, T, cols, xq);
}

const gm_packed_ops gm_packed_avx512 = {quantize_x_avx512, gm_split_bf16_avx512, packed_matvec_avx512,
                                        gm_packed_matmul_avx512, gm_packed_matmul8_avx512, quantize_x8_avx512, NULL,
                                        false, false, false, true, gm_packed_screen_avx512};
