/* AVX-512 versions of rmsnorm, geglu and the attention rows (ops.h). */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/ops.h"
#include "kernels/attention_x86.h"
#include "kernels/quant_x86.h"

/* e^x to about 1 ulp (Cephes expf: x = n ln2 + r, degree-6 polynomial, 2^n by scalef);
 * underflows to 0 below about -104, overflows to inf above 88.7, NaN stays NaN. */
GM_AI __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(88.72283f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static void rmsnorm_avx512(float *out, const float *x, const float *w, size_t n, float eps) {
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512d a = _mm512_cvtps_pd(_mm256_loadu_ps(x + i)), b = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
        s0 = _mm512_fmadd_pd(a, a, s0);
        s1 = _mm512_fmadd_pd(b, b, s1);
    }
    double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    __m512 v = _mm512_set1_ps(inv);
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), v), _mm512_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* gelu_tanh(g) * up = g * up / (1 + e^(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3): the same function
 * as 0.5 g (1 + tanh u) up, without its cancellation for negative u */
GM_AI __m512 geglu16(__m512 g, __m512 up) {
    __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g3, g));
    __m512 e = exp16(_mm512_mul_ps(u, _mm512_set1_ps(-2.0f)));
    return _mm512_div_ps(_mm512_mul_ps(g, up), _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
}

static void geglu_avx512(float *out, const float *gate, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, geglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, m, geglu16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
    }
}

/* [sum a, sum b, sum c, sum d] */
GM_AI __m128 hsum16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
#define H8(v) _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1))
#define H4(v) _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))
    __m128 a4 = H4(H8(a)), b4 = H4(H8(b)), c4 = H4(H8(c)), d4 = H4(H8(d));
#undef H8
#undef H4
    return _mm_hadd_ps(_mm_hadd_ps(a4, b4), _mm_hadd_ps(c4, d4));
}

/* 16 cache values from element j of a row, as f32 */
GM_AI __m512 kv16(const void *row, size_t j, const bool f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + j)))
               : _mm512_loadu_ps((const float *)row + j);
}

/* The rows of a call share each key and value read from L3 or memory: scores in tiles of 4 rows x 4
 * positions, softmax per row, then the value sums in blocks of positions with a group's accumulators in
 * registers (docs/BENCHMARKS.md, "Prefill attention: tokens share the keys and values"). Decode reads the
 * cache cold (a token's weights stream through the caches between layers), so the scores ask for the
 * key rows a few positions later (the hardware prefetcher alone left 120 us per 512-position layer,
 * `bench_attention`; with the keys and values asked for ahead 76-100 us; 270M decode +4 % at 512
 * positions, +5-9 % at 2048), and the value sums for the next block's values: into L1 KEY_AHEAD positions
 * ahead, or on Zen 4 (gm_attn_prefetch_l2) into L2 KEY_AHEAD_L2 ahead, where requests into L1 held the
 * stream to 9 GB/s (117 -> 72 us per 512-position layer; 270M decode at 512 positions +14 %). */
enum { KEY_AHEAD = 4, KEY_AHEAD_L2 = 8, VALUE_BLOCK = 32 };

/* Ask for the `bytes` at p into L2 (l2) or L1 */
GM_AI void kv_prefetch(const char *p, size_t bytes, bool l2) {
    if (l2) prefetch_lines_l2(p, bytes);
    else prefetch_lines_l1(p, bytes);
}

enum { QS = 256 }; /* row stride of the queries' copy: head_dim <= QS (attention_rows_avx512) */

/* Scores of the 4 rows of group g (queries qb + 4 g QS ..) at 4 positions (key rows k[0..3]): a 4 x 4 tile
 * of 16-lane sums, so that each query and key load feeds 4 FMAs; the same sums, in the same order, as
 * one position at a time. */
GM_AI void attn_tile4(const float *qb, int g, const char *const *k, size_t H, int n, float *scores, size_t len,
                      size_t at, const bool f16) {
    __m512 c[4][4];
    for (int r = 0; r < 4; r++)
        for (int p = 0; p < 4; p++) c[r][p] = _mm512_setzero_ps();
    const float *q = qb + (size_t)(4 * g) * QS;
    for (size_t j = 0; j < H; j += 16) {
        __m512 k0 = kv16(k[0], j, f16), k1 = kv16(k[1], j, f16), k2 = kv16(k[2], j, f16), k3 = kv16(k[3], j, f16);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512 qv = _mm512_load_ps(q + (size_t)r * QS + j);
            c[r][0] = _mm512_fmadd_ps(qv, k0, c[r][0]);
            c[r][1] = _mm512_fmadd_ps(qv, k1, c[r][1]);
            c[r][2] = _mm512_fmadd_ps(qv, k2, c[r][2]);
            c[r][3] = _mm512_fmadd_ps(qv, k3, c[r][3]);
        }
    }
    for (int r = 0; r < 4 && 4 * g + r < n; r++)
        _mm_storeu_ps(scores + (size_t)(4 * g + r) * len + at, hsum16x4(c[r][0], c[r][1], c[r][2], c[r][3]));
}

/* The scores of ng groups of 4 rows at positions [lo, hi], 4 positions at a time (their key rows stay in L1
 * for every group), the last few one at a time. One group (decode: a token's heads on their kv head) goes
 * a position at a time throughout: the keys one stream, not four rows interleaved, which Zen 4 read at half
 * the pace (`bench_attention --positions 600 --layers 18 --heads 4`: 75-90 -> 60-65 us per layer). The same
 * sums in the same order either way. */
GM_AI void attn_scores(int ng, const float *qb, const char *K, size_t stride, int slots, size_t H, int lo, int hi,
                       size_t len, int n, float *scores, const bool f16, bool l2) {
    const size_t es = f16 ? 2 : 4;
    /* slot = s % slots, stepped without a division */
    size_t slot = (size_t)lo % (size_t)slots, ahead = ((size_t)lo + (l2 ? KEY_AHEAD_L2 : KEY_AHEAD)) % (size_t)slots;
    int s = lo;
    for (; ng > 1 && s + 3 <= hi; s += 4) {
        const char *k[4];
        for (int p = 0; p < 4; p++) {
            k[p] = K + slot * stride * es;
            kv_prefetch(K + ahead * stride * es, H * es, l2);
            slot = next_slot(slot, slots), ahead = next_slot(ahead, slots);
        }
#pragma GCC unroll 4
        for (int g = 0; g < ng; g++) attn_tile4(qb, g, k, H, n, scores, len, (size_t)(s - lo), f16);
    }
    for (; s <= hi; s++, slot = next_slot(slot, slots)) { /* one group, or the last 0-3 positions: a group at a time */
        const char *k = K + slot * stride * es;
        kv_prefetch(K + ahead * stride * es, H * es, l2);
        ahead = next_slot(ahead, slots);
        for (int g = 0; g < ng; g++) {
            __m512 c[4];
            for (int r = 0; r < 4; r++) c[r] = _mm512_setzero_ps();
            for (size_t j = 0; j < H; j += 16) {
                __m512 kv = kv16(k, j, f16);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    c[r] = _mm512_fmadd_ps(_mm512_load_ps(qb + (size_t)(4 * g + r) * QS + j), kv, c[r]);
            }
            float d[4];
            _mm_storeu_ps(d, hsum16x4(c[0], c[1], c[2], c[3]));
            for (int i = 4 * g; i < n && i < 4 * g + 4; i++) scores[(size_t)i * len + (size_t)(s - lo)] = d[i - 4 * g];
        }
    }
}

GM_AI void attention_rows_t(const gm_attn_rows *a, const void *Kv, const void *Vv, size_t stride, int slots, size_t H,
                            float softcap, float *scores, const bool f16) {
    const size_t es = f16 ? 2 : 4; /* bytes per cache element */
    const char *K = Kv, *V = Vv;
    const int n = a->n, ng = (n + 3) / 4;
    int lo, hi;
    if (!attn_span(a, H, &lo, &hi)) return;
    const size_t len = (size_t)(hi - lo + 1);
    _Alignas(64) float qb[GM_ATTN_ROWS_MAX * QS];
    attn_copy_queries(a, H, qb, QS);
    /* scores: sc[i][s - lo] */
    const bool l2 = gm_attn_prefetch_l2();
    attn_scores(ng, qb, K, stride, slots, H, lo, hi, len, n, scores, f16, l2);
    /* softmax per row over its own positions; zero probability outside them */
    for (int i = 0; i < n; i++) {
        float *sc = scores + (size_t)i * len;
        size_t f, l;
        float mx;
        if (!attn_row_start(a, i, sc, len, lo, softcap, &f, &l, &mx)) continue;
        __m512 m = _mm512_set1_ps(mx);
        __m512d sum = _mm512_setzero_pd();
        size_t s = f;
        for (; s + 16 <= l + 1; s += 16) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(sc + s), m));
            _mm512_storeu_ps(sc + s, e);
            sum = _mm512_add_pd(sum, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e)),
                                                   _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1))));
        }
        if (s <= l) {
            __mmask16 mk = (__mmask16)((1u << (l + 1 - s)) - 1);
            __m512 e = _mm512_maskz_mov_ps(mk, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, sc + s), m)));
            _mm512_mask_storeu_ps(sc + s, mk, e);
            sum = _mm512_add_pd(sum, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e)),
                                                   _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1))));
        }
        double total = _mm512_reduce_add_pd(sum);
        attn_row_finish(a, i, sc, len, f, l, mx, total);
    }
    /* out[i] = sum_s p_i[s] v_s in blocks of VALUE_BLOCK positions: in a block, each group of 4 rows over
     * its own positions, 64 columns at a time, the sums kept in out between blocks (the same additions in
     * the same order as one pass over all positions). A block's values (VALUE_BLOCK x H) come from L3 or
     * memory once for all groups and columns; while the first group sums a block, the same columns of
     * the next one are fetched. */
    attn_zero_empty_groups(a, H);
    for (int sb = lo; sb <= hi; sb += VALUE_BLOCK) {
        const int se = hi - sb < VALUE_BLOCK ? hi : sb + VALUE_BLOCK - 1;
        bool first_group = true;
        for (int g = 0; g < ng; g++) {
            const int i0 = 4 * g, rn = attn_group_rows(n, g);
            int s0, s1;
            bool fresh;
            if (!attn_group_in_block(a, g, sb, se, &s0, &s1, &fresh)) continue;
            const bool fetch = first_group;
            first_group = false;
            for (size_t c = 0; c < H; c += 64) {
                __m512 acc[4][4];
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
                for (int i = 0; !fresh && i < rn; i++) /* the sums of the blocks before */
                    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_loadu_ps(a->out[i0 + i] + c + 16 * j);
                size_t vslot = (size_t)s0 % (size_t)slots, vahead = ((size_t)s0 + VALUE_BLOCK) % (size_t)slots;
                for (int s = s0; s <= s1; s++, vslot = next_slot(vslot, slots), vahead = next_slot(vahead, slots)) {
                    const char *v = V + vslot * stride * es;
                    if (fetch) kv_prefetch(V + vahead * stride * es + c * es, 64 * es, l2);
                    __m512 v0 = kv16(v, c, f16), v1 = kv16(v, c + 16, f16), v2 = kv16(v, c + 32, f16),
                           v3 = kv16(v, c + 48, f16);
                    const float *p = scores + (size_t)i0 * len + (size_t)(s - lo);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++) {
                        if (i >= rn) break;
                        __m512 pi = _mm512_set1_ps(p[(size_t)i * len]);
                        acc[i][0] = _mm512_fmadd_ps(pi, v0, acc[i][0]);
                        acc[i][1] = _mm512_fmadd_ps(pi, v1, acc[i][1]);
                        acc[i][2] = _mm512_fmadd_ps(pi, v2, acc[i][2]);
                        acc[i][3] = _mm512_fmadd_ps(pi, v3, acc[i][3]);
                    }
                }
                for (int i = 0; i < rn; i++)
                    for (int j = 0; j < 4; j++) _mm512_storeu_ps(a->out[i0 + i] + c + 16 * j, acc[i][j]);
            }
        }
    }
}

static void attention_rows_avx512(const gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots,
                                  size_t H, float softcap, float *scores) {
    if (H % 64 || H > QS || a->n > GM_ATTN_ROWS_MAX) gm_attention_rows_ref(a, K, V, stride, slots, H, softcap, scores);
    else if (a->kv_f16) attention_rows_t(a, K, V, stride, slots, H, softcap, scores, true);
    else attention_rows_t(a, K, V, stride, slots, H, softcap, scores, false);
}

/* Two passes: the largest value (vmaxps keeps the running maximum when x is NaN, so NaNs are skipped),
 * then the first index holding it; the vocabulary's 1 MiB stays in L2 between them. */
static size_t argmax_avx512(const float *x, size_t n) {
    if (n < 32 || x[0] != x[0]) return gm_argmax_f32_ref(x, n);
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
    }
    float m = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    __m512 mv = _mm512_set1_ps(m);
    for (i = 0; i + 16 <= n; i += 16) {
        __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), mv, _CMP_EQ_OQ);
        if (hit) return i + (size_t)__builtin_ctz(hit);
    }
    for (; i < n; i++)
        if (x[i] == m) break;
    return i < n ? i : 0; /* not reached: m is one of the values */
}

/* e^y in f64 for y <= 0 to about 1 ulp: y = k ln2 + r with |r| <= ln2/2 (ln2 in two parts, fdlibm's),
 * e^r by its Taylor polynomial of degree 12 (remainder below 2e-16), 2^k by scalef; 0 below -746
 * (so for -inf too). */
GM_AI __m512d exp8_nonpositive(__m512d y) {
    y = _mm512_max_pd(y, _mm512_set1_pd(-746.0));
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(y, _mm512_set1_pd(1.4426950408889634)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(6.93147180369123816490e-01), y);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.90821492927058770002e-10), r);
    double c = 1.0 / 479001600.0; /* 1/12! */
    __m512d p = _mm512_set1_pd(c);
    for (int d = 11; d >= 0; d--) {
        c *= (double)(d + 1); /* 1/d! */
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
    }
    return _mm512_scalef_pd(p, k);
}

/* All GM_EXP_SUMS_MAX bands every time (unused floors +inf), so the accumulators stay in registers;
 * the tail is loaded as -inf, which adds 0. */
static void exp_sums_avx512(const float *x, size_t n, float max, const float *floors, int nf, double *sums) {
    if (nf > GM_EXP_SUMS_MAX) { /* outside the contract: the reference takes any count */
        gm_exp_sums_f32_ref(x, n, max, floors, nf, sums);
        return;
    }
    __m512 fl[GM_EXP_SUMS_MAX];
    __m512d band[GM_EXP_SUMS_MAX], all0 = _mm512_setzero_pd(), all1 = all0;
    for (int j = 0; j < GM_EXP_SUMS_MAX; j++) {
        fl[j] = _mm512_set1_ps(j < nf ? floors[j] : INFINITY);
        band[j] = _mm512_setzero_pd();
    }
    __m512d mx = _mm512_set1_pd((double)max);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), live, x + i);
        __m512d e0 = exp8_nonpositive(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), mx));
        __m512d e1 = exp8_nonpositive(
            _mm512_sub_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), mx));
        all0 = _mm512_add_pd(all0, e0);
        all1 = _mm512_add_pd(all1, e1);
        for (int j = 0; j < GM_EXP_SUMS_MAX; j++) {
            __mmask16 in = _mm512_cmp_ps_mask(v, fl[j], _CMP_GE_OQ);
            band[j] = _mm512_mask_add_pd(band[j], (__mmask8)in, band[j], e0);
            band[j] = _mm512_mask_add_pd(band[j], (__mmask8)(in >> 8), band[j], e1);
        }
    }
    for (int j = 0; j < nf; j++) sums[j] = _mm512_reduce_add_pd(band[j]);
    sums[nf] = _mm512_reduce_add_pd(_mm512_add_pd(all0, all1));
}

/* A panel's 16 rows as f64 lanes: vmaxpd returns its second operand when one is NaN, so a NaN bound never
 * replaces the running maximum (from -inf), and the lanes' maxima, NaN-free, reduce in any order to what
 * the reference's loop gives. One chain of dependent maxsd per row held the 270M's 262144 rows to ~0.28 ms
 * a token on one thread. */
static void panel_bounds_avx512(const float *y, const float *bound, size_t panels, double *lo, double *hi) {
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    for (size_t p = 0; p < panels; p++, y += GM_PANEL_ROWS, bound += GM_PANEL_ROWS) {
        __m512 v = _mm512_loadu_ps(y), d = _mm512_loadu_ps(bound);
        __m512d v0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v)), v1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
        __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(d)), d1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(d, 1));
        __m512d up0 = _mm512_add_pd(v0, d0), up1 = _mm512_add_pd(v1, d1);
        __m512d m = _mm512_max_pd(_mm512_sub_pd(v1, d1), _mm512_max_pd(_mm512_sub_pd(v0, d0), ninf));
        __m512d u = _mm512_max_pd(up1, _mm512_max_pd(up0, ninf));
        __mmask8 nan = _mm512_cmp_pd_mask(up0, up0, _CMP_UNORD_Q) | _mm512_cmp_pd_mask(up1, up1, _CMP_UNORD_Q);
        lo[p] = _mm512_reduce_max_pd(m);
        hi[p] = nan ? INFINITY : _mm512_reduce_max_pd(u);
    }
}

const gm_vec_ops gm_vec_avx512 = {rmsnorm_avx512, geglu_avx512, attention_rows_avx512, argmax_avx512,
                                  exp_sums_avx512, panel_bounds_avx512};
