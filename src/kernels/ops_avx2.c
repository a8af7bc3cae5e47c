/* AVX2 versions of rmsnorm, geglu, the attention rows, argmax and the sampler's exp sums (ops.h), for CPUs
 * without AVX-512. */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/ops.h"
#include "kernels/attention_x86.h"
#include "kernels/quant_x86.h"

/* 2^n for integer-valued n in [-150, 128], as the product of two normal powers so that results in the
 * subnormal range come out as they should (AVX2 has no vscalefps) */
GM_AI __m256 pow2_8(__m256 n) {
    __m256i k = _mm256_cvtps_epi32(n), k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
    __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    __m256 b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(a, b);
}

/* e^x to about 1 ulp, the AVX-512 exp16's polynomial (Cephes expf); 0 below about -104, inf above
 * 88.7, NaN stays NaN (vmaxps / vminps return their second operand when one is NaN) */
GM_AI __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(88.72283f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    return _mm256_mul_ps(p, pow2_8(n));
}

GM_AI double hsum4d(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static void rmsnorm_avx2(float *out, const float *x, const float *w, size_t n, float eps) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        s0 = _mm256_fmadd_pd(a, a, s0);
        s1 = _mm256_fmadd_pd(b, b, s1);
    }
    double ss = hsum4d(_mm256_add_pd(s0, s1));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    __m256 v = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), v), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* gelu_tanh(g) * up = g * up / (1 + e^(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3), as geglu16 */
GM_AI __m256 geglu8(__m256 g, __m256 up) {
    __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
    __m256 e = exp8(_mm256_mul_ps(u, _mm256_set1_ps(-2.0f)));
    return _mm256_div_ps(_mm256_mul_ps(g, up), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
}

static void geglu_avx2(float *out, const float *gate, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, geglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) { /* the tail through a zero-padded block */
        float g[8] = {0}, u[8] = {0}, o[8];
        for (size_t j = i; j < n; j++) g[j - i] = gate[j], u[j - i] = up[j];
        _mm256_storeu_ps(o, geglu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        for (size_t j = i; j < n; j++) out[j] = o[j - i];
    }
}

/* [sum a, sum b, sum c, sum d] */
GM_AI __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
#define H4(v) _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))
    __m128 a4 = H4(a), b4 = H4(b), c4 = H4(c), d4 = H4(d);
#undef H4
    return _mm_hadd_ps(_mm_hadd_ps(a4, b4), _mm_hadd_ps(c4, d4));
}

/* 8 cache values from element j of a row, as f32 */
GM_AI __m256 kv8(const void *row, size_t j, const bool f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + j)))
               : _mm256_loadu_ps((const float *)row + j);
}

enum { KEY_AHEAD = 4, VALUE_BLOCK = 32, QS = 256 }; /* as the AVX-512 kernel (ops_avx512.c) */

/* Scores of rows r and r + 1 (queries qb + r QS ..) at 4 positions (key rows k[0..3]): a 2 x 4 tile of 8-lane
 * sums (8 accumulators, 4 keys and a query in the 16 registers); the same sums, in the same order, as one
 * position at a time. */
GM_AI void attn_tile2x4(const float *qb, int r, const char *const *k, size_t H, int n, float *scores, size_t len,
                        size_t at, const bool f16) {
    __m256 c[2][4];
    for (int i = 0; i < 2; i++)
        for (int p = 0; p < 4; p++) c[i][p] = _mm256_setzero_ps();
    const float *q = qb + (size_t)r * QS;
    for (size_t j = 0; j < H; j += 8) {
        __m256 k0 = kv8(k[0], j, f16), k1 = kv8(k[1], j, f16), k2 = kv8(k[2], j, f16), k3 = kv8(k[3], j, f16);
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++) {
            __m256 qv = _mm256_load_ps(q + (size_t)i * QS + j);
            c[i][0] = _mm256_fmadd_ps(qv, k0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(qv, k1, c[i][1]);
            c[i][2] = _mm256_fmadd_ps(qv, k2, c[i][2]);
            c[i][3] = _mm256_fmadd_ps(qv, k3, c[i][3]);
        }
    }
    for (int i = 0; i < 2 && r + i < n; i++)
        _mm_storeu_ps(scores + (size_t)(r + i) * len + at, hsum8x4(c[i][0], c[i][1], c[i][2], c[i][3]));
}

/* The scores of n rows (queries qb, rows up to a multiple of 4 zero) at positions [lo, hi], 4 positions at a
 * time (their key rows stay in L1 for every pair of rows), the last few one at a time; up to 4 rows (decode)
 * a position at a time throughout, the keys one stream (as ops_avx512.c; with these kernels on the Zen 4
 * guest `bench_attention --positions 600 --layers 18 --heads 4` 151 -> 113 us per layer). */
GM_AI void attn_scores(const float *qb, const char *K, size_t stride, int slots, size_t H, int lo, int hi, size_t len,
                       int n, float *scores, const bool f16) {
    const size_t es = f16 ? 2 : 4;
    size_t slot = (size_t)lo % (size_t)slots, ahead = ((size_t)lo + KEY_AHEAD) % (size_t)slots;
    int s = lo;
    for (; n > 4 && s + 3 <= hi; s += 4) {
        const char *k[4];
        for (int p = 0; p < 4; p++) {
            k[p] = K + slot * stride * es;
            prefetch_lines_l1(K + ahead * stride * es, H * es);
            slot = next_slot(slot, slots), ahead = next_slot(ahead, slots);
        }
        for (int r = 0; r < n; r += 2) attn_tile2x4(qb, r, k, H, n, scores, len, (size_t)(s - lo), f16);
    }
    for (; s <= hi; s++, slot = next_slot(slot, slots)) { /* up to 4 rows, or the last 0-3 positions */
        const char *k = K + slot * stride * es;
        prefetch_lines_l1(K + ahead * stride * es, H * es);
        ahead = next_slot(ahead, slots);
        for (int g = 0; 4 * g < n; g++) {
            __m256 c[4];
            for (int r = 0; r < 4; r++) c[r] = _mm256_setzero_ps();
            for (size_t j = 0; j < H; j += 8) {
                __m256 kv = kv8(k, j, f16);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    c[r] = _mm256_fmadd_ps(_mm256_load_ps(qb + (size_t)(4 * g + r) * QS + j), kv, c[r]);
            }
            float d[4];
            _mm_storeu_ps(d, hsum8x4(c[0], c[1], c[2], c[3]));
            for (int i = 4 * g; i < n && i < 4 * g + 4; i++) scores[(size_t)i * len + (size_t)(s - lo)] = d[i - 4 * g];
        }
    }
}

/* The AVX-512 kernel's plan (ops_avx512.c): the queries side by side, scores in tiles, softmax per row over
 * its own positions, then the value sums in blocks of VALUE_BLOCK positions, 16 columns at a time. */
GM_AI void attention_rows_t(const gm_attn_rows *a, const void *Kv, const void *Vv, size_t stride, int slots, size_t H,
                            float softcap, float *scores, const bool f16) {
    const size_t es = f16 ? 2 : 4;
    const char *K = Kv, *V = Vv;
    const int n = a->n, ng = (n + 3) / 4;
    int lo, hi;
    if (!attn_span(a, H, &lo, &hi)) return;
    const size_t len = (size_t)(hi - lo + 1);
    _Alignas(32) float qb[GM_ATTN_ROWS_MAX * QS];
    attn_copy_queries(a, H, qb, QS);
    attn_scores(qb, K, stride, slots, H, lo, hi, len, n, scores, f16);
    for (int i = 0; i < n; i++) {
        float *sc = scores + (size_t)i * len;
        size_t f, l;
        float mx;
        if (!attn_row_start(a, i, sc, len, lo, softcap, &f, &l, &mx)) continue;
        __m256 m = _mm256_set1_ps(mx);
        __m256d sum = _mm256_setzero_pd();
        size_t s = f;
        for (; s + 8 <= l + 1; s += 8) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + s), m));
            _mm256_storeu_ps(sc + s, e);
            sum = _mm256_add_pd(sum, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)),
                                                   _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1))));
        }
        double total = hsum4d(sum);
        for (; s <= l; s++) { /* the tail: the same exp, one lane at a time */
            float e = _mm256_cvtss_f32(exp8(_mm256_set1_ps(sc[s] - mx)));
            sc[s] = e;
            total += (double)e;
        }
        attn_row_finish(a, i, sc, len, f, l, mx, total);
    }
    attn_zero_empty_groups(a, H);
    /* value sums as the AVX-512 kernel's: a block's values once for every group and column */
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
            for (size_t c = 0; c < H; c += 16) { /* 4 rows x 2 accumulators and the values fit in 16 registers */
                __m256 acc[4][2];
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 2; j++) acc[i][j] = _mm256_setzero_ps();
                for (int i = 0; !fresh && i < rn; i++) /* the sums of the blocks before */
                    for (int j = 0; j < 2; j++) acc[i][j] = _mm256_loadu_ps(a->out[i0 + i] + c + 8 * j);
                size_t vslot = (size_t)s0 % (size_t)slots, vahead = ((size_t)s0 + VALUE_BLOCK) % (size_t)slots;
                for (int s = s0; s <= s1; s++, vslot = next_slot(vslot, slots), vahead = next_slot(vahead, slots)) {
                    const char *v = V + vslot * stride * es;
                    if (fetch) prefetch_lines_l1(V + vahead * stride * es + c * es, 16 * es);
                    __m256 v0 = kv8(v, c, f16), v1 = kv8(v, c + 8, f16);
                    const float *p = scores + (size_t)i0 * len + (size_t)(s - lo);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++) {
                        if (i >= rn) break;
                        __m256 pi = _mm256_set1_ps(p[(size_t)i * len]);
                        acc[i][0] = _mm256_fmadd_ps(pi, v0, acc[i][0]);
                        acc[i][1] = _mm256_fmadd_ps(pi, v1, acc[i][1]);
                    }
                }
                for (int i = 0; i < rn; i++) {
                    _mm256_storeu_ps(a->out[i0 + i] + c, acc[i][0]);
                    _mm256_storeu_ps(a->out[i0 + i] + c + 8, acc[i][1]);
                }
            }
        }
    }
}

static void attention_rows_avx2(const gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots,
                                size_t H, float softcap, float *scores) {
    if (H % 16 || H > QS || a->n > GM_ATTN_ROWS_MAX) gm_attention_rows_ref(a, K, V, stride, slots, H, softcap, scores);
    else if (a->kv_f16) attention_rows_t(a, K, V, stride, slots, H, softcap, scores, true);
    else attention_rows_t(a, K, V, stride, slots, H, softcap, scores, false);
}

/* Two passes as argmax_avx512: the largest value (NaNs skipped), then the first index holding it. */
static size_t argmax_avx2(const float *x, size_t n) {
    if (n < 16 || x[0] != x[0]) return gm_argmax_f32_ref(x, n);
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    }
    float v[8], m = -INFINITY;
    _mm256_storeu_ps(v, _mm256_max_ps(m0, m1));
    for (int j = 0; j < 8; j++) m = v[j] > m ? v[j] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    __m256 mv = _mm256_set1_ps(m);
    for (i = 0; i + 8 <= n; i += 8) {
        int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
        if (hit) return i + (size_t)__builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == m) break;
    return i < n ? i : 0;
}

/* 2^k for integer-valued k in [-1076, 0] as the product of two normal powers (no vscalefpd on AVX2), so
 * that subnormal results come out right and the smallest ones round to 0 */
GM_AI __m256d pow2_4d(__m256d k) {
    __m128i ki = _mm256_cvtpd_epi32(k), k1 = _mm_srai_epi32(ki, 1), k2 = _mm_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi64x(1023);
    __m256d a = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k1), bias), 52));
    __m256d b = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k2), bias), 52));
    return _mm256_mul_pd(a, b);
}

/* e^y in f64 for y <= 0 to about 1 ulp, as ops_avx512.c's exp8_nonpositive: y = k ln2 + r with |r| <= ln2/2
 * (ln2 in two parts, fdlibm's), e^r by its Taylor polynomial of degree 12, 0 below -746 (-inf too). The
 * polynomial in Estrin's form: a Horner chain of 12 dependent FMAs made the loop wait on their latency. */
GM_AI __m256d exp4d_nonpositive(__m256d y) {
#define C(k) _mm256_set1_pd(1.0 / (k))
    y = _mm256_max_pd(y, _mm256_set1_pd(-746.0));
    __m256d k = _mm256_round_pd(_mm256_mul_pd(y, _mm256_set1_pd(1.4426950408889634)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), y);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);
    __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2), r8 = _mm256_mul_pd(r4, r4);
    /* c_i = 1 / i!: pairs c_i + c_{i+1} r, then pairs of pairs by r^2, r^4, r^8 */
    __m256d p01 = _mm256_fmadd_pd(r, C(1.0), _mm256_set1_pd(1.0)), p23 = _mm256_fmadd_pd(r, C(6.0), C(2.0));
    __m256d p45 = _mm256_fmadd_pd(r, C(120.0), C(24.0)), p67 = _mm256_fmadd_pd(r, C(5040.0), C(720.0));
    __m256d p89 = _mm256_fmadd_pd(r, C(362880.0), C(40320.0)), p1011 = _mm256_fmadd_pd(r, C(39916800.0), C(3628800.0));
    __m256d p03 = _mm256_fmadd_pd(r2, p23, p01), p47 = _mm256_fmadd_pd(r2, p67, p45);
    __m256d p811 = _mm256_fmadd_pd(r2, p1011, p89), p812 = _mm256_fmadd_pd(r4, C(479001600.0), p811);
    __m256d p = _mm256_fmadd_pd(r8, p812, _mm256_fmadd_pd(r4, p47, p03));
    return _mm256_mul_pd(p, pow2_4d(k));
#undef C
}

/* Eight values a step, in two f64 vectors; GM_EXP_SUMS_MAX bands (unused floors +inf, so they take
 * nothing), and the tail padded with -inf, which adds 0. */
static void exp_sums_avx2(const float *x, size_t n, float max, const float *floors, int nf, double *sums) {
    if (nf > GM_EXP_SUMS_MAX) { /* outside the contract: the reference takes any count */
        gm_exp_sums_f32_ref(x, n, max, floors, nf, sums);
        return;
    }
    __m256d fl[GM_EXP_SUMS_MAX], band[GM_EXP_SUMS_MAX], all0 = _mm256_setzero_pd(), all1 = all0;
    __m256 flf[GM_EXP_SUMS_MAX];
    for (int j = 0; j < GM_EXP_SUMS_MAX; j++) {
        flf[j] = _mm256_set1_ps(j < nf ? floors[j] : INFINITY);
        fl[j] = _mm256_set1_pd(j < nf ? (double)floors[j] : INFINITY);
        band[j] = _mm256_setzero_pd();
    }
    __m256d mx = _mm256_set1_pd((double)max);
    for (size_t i = 0; i < n; i += 8) {
        __m256 v;
        if (n - i >= 8) {
            v = _mm256_loadu_ps(x + i);
        } else {
            float t[8];
            for (size_t j = 0; j < 8; j++) t[j] = i + j < n ? x[i + j] : -INFINITY;
            v = _mm256_loadu_ps(t);
        }
        __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        __m256d e0 = exp4d_nonpositive(_mm256_sub_pd(x0, mx)), e1 = exp4d_nonpositive(_mm256_sub_pd(x1, mx));
        all0 = _mm256_add_pd(all0, e0);
        all1 = _mm256_add_pd(all1, e1);
        /* a band that holds none of the 8 values is skipped, one that holds all adds their sum */
        __m256d both = _mm256_add_pd(e0, e1);
        for (int j = 0; j < GM_EXP_SUMS_MAX; j++) {
            int in = _mm256_movemask_ps(_mm256_cmp_ps(v, flf[j], _CMP_GE_OQ));
            if (in == 0) continue;
            if (in == 0xff) {
                band[j] = _mm256_add_pd(band[j], both);
                continue;
            }
            __m256d in0 = _mm256_and_pd(_mm256_cmp_pd(x0, fl[j], _CMP_GE_OQ), e0);
            __m256d in1 = _mm256_and_pd(_mm256_cmp_pd(x1, fl[j], _CMP_GE_OQ), e1);
            band[j] = _mm256_add_pd(band[j], _mm256_add_pd(in0, in1));
        }
    }
    for (int j = 0; j < nf; j++) sums[j] = hsum4d(band[j]);
    sums[nf] = hsum4d(_mm256_add_pd(all0, all1));
}

/* As panel_bounds_avx512, 4 rows per vector */
static void panel_bounds_avx2(const float *y, const float *bound, size_t panels, double *lo, double *hi) {
    const __m256d ninf = _mm256_set1_pd(-INFINITY);
    for (size_t p = 0; p < panels; p++, y += GM_PANEL_ROWS, bound += GM_PANEL_ROWS) {
        __m256d m = ninf, u = ninf;
        int nan = 0;
        for (int k = 0; k < GM_PANEL_ROWS; k += 4) {
            __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(y + k)), d = _mm256_cvtps_pd(_mm_loadu_ps(bound + k));
            __m256d up = _mm256_add_pd(v, d);
            m = _mm256_max_pd(_mm256_sub_pd(v, d), m);
            u = _mm256_max_pd(up, u);
            nan |= _mm256_movemask_pd(_mm256_cmp_pd(up, up, _CMP_UNORD_Q));
        }
        __m128d m2 = _mm_max_pd(_mm256_castpd256_pd128(m), _mm256_extractf128_pd(m, 1));
        __m128d u2 = _mm_max_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1));
        lo[p] = _mm_cvtsd_f64(_mm_max_sd(m2, _mm_unpackhi_pd(m2, m2)));
        hi[p] = nan ? INFINITY : _mm_cvtsd_f64(_mm_max_sd(u2, _mm_unpackhi_pd(u2, u2)));
    }
}

const gm_vec_ops gm_vec_avx2 = {rmsnorm_avx2, geglu_avx2, attention_rows_avx2, argmax_avx2, exp_sums_avx2,
                                panel_bounds_avx2};
