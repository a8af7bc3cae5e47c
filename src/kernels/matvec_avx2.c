/* AVX2 + FMA + F16C kernels: fused dequantize-and-dot matvec over 4 rows at a time, SIMD
 * dequantization, and a matmul that dequantizes a 4-row panel once into an f32 tile and runs a
 * 4 x 2 (rows x inputs) register-tiled GEMM over it. All arithmetic is f32. */
#include "kernels/quant_x86.h"

/* ---- reductions ---- */

GM_AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* [sum a, sum b, sum c, sum d] */
GM_AI __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
#define H4(v) _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))
    __m128 a4 = H4(a), b4 = H4(b), c4 = H4(c), d4 = H4(d);
#undef H4
    return _mm_hadd_ps(_mm_hadd_ps(a4, b4), _mm_hadd_ps(c4, d4));
}

/* ---- float storage types ---- */

GM_AI __m256 fload(gm_dtype t, const uint8_t *row, size_t i) {
    switch (t) {
    case GM_F32: return _mm256_loadu_ps((const float *)row + i);
    case GM_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * i)));
    default: /* GM_BF16 */
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * i))), 16));
    }
}

GM_AI float fscalar(gm_dtype t, const uint8_t *row, size_t i) {
    float f;
    switch (t) {
    case GM_F32: memcpy(&f, row + 4 * i, 4); return f;
    case GM_F16: return f16_at(row + 2 * i);
    default: return gm_bf16_to_f32(gm_kernels_le16(row + 2 * i));
    }
}

GM_AI void float_rows(gm_dtype t, const uint8_t *w, size_t rb, size_t cols, const float *x, float *y, int R) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_span(w + r * rb + gm_kernels_bytes_of(t, i), GM_ROW_PREFETCH_BYTES, gm_kernels_bytes_of(t, 16));
            acc[r][0] = _mm256_fmadd_ps(fload(t, w + r * rb, i), x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(fload(t, w + r * rb, i + 8), x1, acc[r][1]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float s = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
        for (size_t j = i; j < cols; j++) s += fscalar(t, w + r * rb, j) * x[j];
        y[r] = s;
    }
}

/* ---- quantized types ---- */

/* Chunk k of a block as 4 x 8 f32 weights. */
GM_AI void qweights(gm_dtype t, const uint8_t *b, const qstate *st, int k, __m256 v[4]) {
    __m256i q = qdecode(t, b, k);
    __m128i ql = _mm256_castsi256_si128(q), qh = _mm256_extracti128_si256(q, 1);
    __m256 f[4] = {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ql)),
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(ql, 8))),
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qh)),
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qh, 8))),
    };
    __m256 sl = _mm256_set1_ps(qscale_lo(t, st, k)), sh = _mm256_set1_ps(qscale_hi(t, st, k));
    if (qtype_has_min(t)) {
        __m256 o = _mm256_set1_ps(qoffset(t, st, k));
        v[0] = _mm256_fmadd_ps(f[0], sl, o);
        v[1] = _mm256_fmadd_ps(f[1], sl, o);
        v[2] = _mm256_fmadd_ps(f[2], sh, o);
        v[3] = _mm256_fmadd_ps(f[3], sh, o);
    } else {
        v[0] = _mm256_mul_ps(f[0], sl);
        v[1] = _mm256_mul_ps(f[1], sl);
        v[2] = _mm256_mul_ps(f[2], sh);
        v[3] = _mm256_mul_ps(f[3], sh);
    }
}

/* y[0..R) = dot(row r, x) for R (1 or 4) rows rb bytes apart. */
GM_AI void quant_rows(gm_dtype t, const uint8_t *w, size_t rb, size_t cols, const float *x, float *y, int R) {
    const int blk = qtype_block(t), bytes = qtype_bytes(t);
    const size_t nb = cols / (size_t)blk;
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
        qstate st[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            qprep(t, w + r * rb + i * bytes, &st[r]);
            prefetch_span(w + r * rb + i * bytes, GM_ROW_PREFETCH_BYTES, bytes);
        }
        const float *xb = x + i * blk;
#pragma GCC unroll 8
        for (int k = 0; k < blk / 32; k++) {
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                if (qtype_block(t) == 32 && !qtype_has_min(t)) {
                    /* one scale per block: d * (q . x) saves multiplies */
                    __m256i q = qdecode(t, w + r * rb + i * bytes, k);
                    __m128i ql = _mm256_castsi256_si128(q), qh = _mm256_extracti128_si256(q, 1);
                    __m256 c0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ql)), _mm256_loadu_ps(xb));
                    __m256 c1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(ql, 8))),
                                              _mm256_loadu_ps(xb + 8));
                    c0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qh)), _mm256_loadu_ps(xb + 16), c0);
                    c1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(qh, 8))),
                                         _mm256_loadu_ps(xb + 24), c1);
                    __m256 d = _mm256_set1_ps(st[r].s[0]);
                    acc[r][0] = _mm256_fmadd_ps(c0, d, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(c1, d, acc[r][1]);
                    continue;
                }
                __m256 v[4];
                qweights(t, w + r * rb + i * bytes, &st[r], k, v);
                acc[r][0] = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(xb + 32 * k), acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(xb + 32 * k + 8), acc[r][1]);
                acc[r][0] = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(xb + 32 * k + 16), acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(xb + 32 * k + 24), acc[r][1]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
}

/* ---- dequantization ---- */

GM_AI void dequant_t(gm_dtype t, const uint8_t *row, float *out, size_t n) {
    if (t == GM_F32 || t == GM_F16 || t == GM_BF16) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, fload(t, row, i));
        for (; i < n; i++) out[i] = fscalar(t, row, i);
        return;
    }
    const int blk = qtype_block(t), bytes = qtype_bytes(t);
    for (size_t i = 0; i < n / (size_t)blk; i++) {
        const uint8_t *b = row + i * bytes;
        qstate st;
        qprep(t, b, &st);
#pragma GCC unroll 8
        for (int k = 0; k < blk / 32; k++) {
            __m256 v[4];
            qweights(t, b, &st, k, v);
            for (int j = 0; j < 4; j++) _mm256_storeu_ps(out + i * blk + 32 * k + 8 * j, v[j]);
        }
    }
}

/* ---- matmul: dequantize a panel of RB rows x KC columns once, reuse it for every input ---- */

enum { RB = 4, TB = 2, KC = 1024 }; /* KC: a multiple of 256 (every block size); the tile is 16 KiB */

/* Y[t][r0 .. r0+nr) (+)= tile . X[t][k0 .. k0+kc) for all T inputs. Tile rows are zero past kc
 * (rounded up to 8) and rows >= nr are all zero. */
static void panel_gemm(const float *tile, size_t kc, const float *X, size_t cols, size_t T, float *Y, size_t ldy,
                       int nr, int accumulate) {
    const size_t kv = kc / 8 * 8;
    const int rem = (int)(kc - kv);
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int nt;
    for (size_t t = 0; t < T; t += (size_t)nt) {
        nt = T - t >= TB ? TB : 1;
        __m256 acc[RB][TB];
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++)
#pragma GCC unroll 2
            for (int j = 0; j < TB; j++) acc[r][j] = _mm256_setzero_ps();
        const float *x0 = X + t * cols, *x1 = x0 + cols;
        if (nt == TB) {
            for (size_t k = 0; k < kv; k += 8) {
                __m256 a = _mm256_loadu_ps(x0 + k), b = _mm256_loadu_ps(x1 + k);
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++) {
                    __m256 w = _mm256_load_ps(tile + r * KC + k);
                    acc[r][0] = _mm256_fmadd_ps(w, a, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(w, b, acc[r][1]);
                }
            }
            if (rem) {
                __m256 a = _mm256_maskload_ps(x0 + kv, tail), b = _mm256_maskload_ps(x1 + kv, tail);
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++) {
                    __m256 w = _mm256_load_ps(tile + r * KC + kv);
                    acc[r][0] = _mm256_fmadd_ps(w, a, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(w, b, acc[r][1]);
                }
            }
        } else {
            for (size_t k = 0; k < kv; k += 8) {
                __m256 a = _mm256_loadu_ps(x0 + k);
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++) acc[r][0] = _mm256_fmadd_ps(_mm256_load_ps(tile + r * KC + k), a, acc[r][0]);
            }
            if (rem) {
                __m256 a = _mm256_maskload_ps(x0 + kv, tail);
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++)
                    acc[r][0] = _mm256_fmadd_ps(_mm256_load_ps(tile + r * KC + kv), a, acc[r][0]);
            }
        }
        for (int j = 0; j < nt; j++) {
            float s[4];
            _mm_storeu_ps(s, hsum8x4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]));
            float *yt = Y + (t + (size_t)j) * ldy;
            for (int r = 0; r < nr; r++) yt[r] = accumulate ? yt[r] + s[r] : s[r];
        }
    }
}

enum { MATVEC_LANES = 8 };
#include "kernels/matvec_types_x86.h"

const gm_kernel_ops gm_kernels_avx2 = {"avx2", dequant_by_type, matvec_by_type, matmul_by_type};
