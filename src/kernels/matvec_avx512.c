/* AVX-512 (F, BW, VL, DQ) kernels: fused dequantize-and-dot matvec over 4 rows at a time, SIMD
 * dequantization, and a matmul that dequantizes a 4-row panel once into an f32 tile and runs a
 * 4 x 4 (rows x inputs) register-tiled GEMM over it. All arithmetic is f32 (no int8 activations). */
#include "kernels/quant_x86.h"

/* ---- reductions ---- */

GM_AI float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }

/* [sum a, sum b, sum c, sum d] */
GM_AI __m128 hsum16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
#define H8(v) _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1))
#define H4(v) _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))
    __m128 a4 = H4(H8(a)), b4 = H4(H8(b)), c4 = H4(H8(c)), d4 = H4(H8(d));
#undef H8
#undef H4
    return _mm_hadd_ps(_mm_hadd_ps(a4, b4), _mm_hadd_ps(c4, d4));
}

/* ---- float storage types ---- */

/* 16 weights at element i of a float-typed row (mask selects lanes for the tail). */
GM_AI __m512 fload(gm_dtype t, const uint8_t *row, size_t i, __mmask16 m) {
    switch (t) {
    case GM_F32: return _mm512_maskz_loadu_ps(m, (const float *)row + i);
    case GM_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + i));
    default: /* GM_BF16 */
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + i)), 16));
    }
}

GM_AI void float_rows(gm_dtype t, const uint8_t *w, size_t rb, size_t cols, const float *x, float *y, int R) {
    __m512 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= cols; i += 32) {
        __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            prefetch_span(w + r * rb + gm_kernels_bytes_of(t, i), GM_ROW_PREFETCH_BYTES, gm_kernels_bytes_of(t, 32));
            acc[r][0] = _mm512_fmadd_ps(fload(t, w + r * rb, i, 0xffff), x0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(fload(t, w + r * rb, i + 16, 0xffff), x1, acc[r][1]);
        }
    }
    for (; i < cols; i += 16) {
        __mmask16 m = cols - i >= 16 ? 0xffff : (__mmask16)((1u << (cols - i)) - 1);
        __m512 x0 = _mm512_maskz_loadu_ps(m, x + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[r][0] = _mm512_fmadd_ps(fload(t, w + r * rb, i, m), x0, acc[r][0]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = hsum16(_mm512_add_ps(acc[r][0], acc[r][1]));
}

/* ---- quantized types ---- */

/* Chunk k of a block as 2 x 16 f32 weights. */
GM_AI void qweights(gm_dtype t, const uint8_t *b, const qstate *st, int k, __m512 *lo, __m512 *hi) {
    __m256i q = qdecode(t, b, k);
    __m512 fl = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    __m512 fh = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
    __m512 sl = _mm512_set1_ps(qscale_lo(t, st, k)), sh = _mm512_set1_ps(qscale_hi(t, st, k));
    if (qtype_has_min(t)) {
        __m512 o = _mm512_set1_ps(qoffset(t, st, k));
        *lo = _mm512_fmadd_ps(fl, sl, o);
        *hi = _mm512_fmadd_ps(fh, sh, o);
    } else {
        *lo = _mm512_mul_ps(fl, sl);
        *hi = _mm512_mul_ps(fh, sh);
    }
}

/* y[0..R) = dot(row r, x) for R (1 or 4) rows rb bytes apart. */
GM_AI void quant_rows(gm_dtype t, const uint8_t *w, size_t rb, size_t cols, const float *x, float *y, int R) {
    const int blk = qtype_block(t), bytes = qtype_bytes(t);
    const size_t nb = cols / (size_t)blk;
    __m512 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
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
            __m512 x0 = _mm512_loadu_ps(xb + 32 * k), x1 = _mm512_loadu_ps(xb + 32 * k + 16);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                if (qtype_block(t) == 32 && !qtype_has_min(t)) {
                    /* one scale per block: d * (q . x) saves a multiply per 16 values */
                    __m256i q = qdecode(t, w + r * rb + i * bytes, k);
                    __m512 c = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), x0);
                    c = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), x1, c);
                    acc[r][i & 1] = _mm512_fmadd_ps(c, _mm512_set1_ps(st[r].s[0]), acc[r][i & 1]);
                    continue;
                }
                __m512 lo, hi;
                qweights(t, w + r * rb + i * bytes, &st[r], k, &lo, &hi);
                acc[r][0] = _mm512_fmadd_ps(lo, x0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(hi, x1, acc[r][1]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = hsum16(_mm512_add_ps(acc[r][0], acc[r][1]));
}

/* ---- dequantization ---- */

GM_AI void dequant_t(gm_dtype t, const uint8_t *row, float *out, size_t n) {
    if (t == GM_F32 || t == GM_F16 || t == GM_BF16) {
        for (size_t i = 0; i < n; i += 16) {
            __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
            _mm512_mask_storeu_ps(out + i, m, fload(t, row, i, m));
        }
        return;
    }
    const int blk = qtype_block(t), bytes = qtype_bytes(t);
    for (size_t i = 0; i < n / (size_t)blk; i++) {
        const uint8_t *b = row + i * bytes;
        qstate st;
        qprep(t, b, &st);
#pragma GCC unroll 8
        for (int k = 0; k < blk / 32; k++) {
            __m512 lo, hi;
            qweights(t, b, &st, k, &lo, &hi);
            _mm512_storeu_ps(out + i * blk + 32 * k, lo);
            _mm512_storeu_ps(out + i * blk + 32 * k + 16, hi);
        }
    }
}

/* ---- matmul: dequantize a panel of RB rows x KC columns once, reuse it for every input ---- */

enum { RB = 4, TB = 4, KC = 1024 }; /* KC: a multiple of 256 (every block size); the tile is 16 KiB */

/* Y[t][r0 .. r0+nr) (+)= tile . X[t][k0 .. k0+kc) for all T inputs. Tile rows >= nr are zero. */
static void panel_gemm(const float *tile, size_t kc, const float *X, size_t cols, size_t T, float *Y, size_t ldy,
                       int nr, int accumulate) {
    const size_t kv = kc / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (kc - kv)) - 1);
    int nt;
    for (size_t t = 0; t < T; t += (size_t)nt) {
        nt = T - t >= TB ? TB : 1; /* 4 inputs at a time, then one by one */
        __m512 acc[RB][TB];
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
            for (int j = 0; j < TB; j++) acc[r][j] = _mm512_setzero_ps();
        const float *x0 = X + t * cols;
        if (nt == TB) {
            for (size_t k = 0; k < kv; k += 16) {
                __m512 w[RB];
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++) w[r] = _mm512_load_ps(tile + r * KC + k);
#pragma GCC unroll 4
                for (int j = 0; j < TB; j++) {
                    __m512 xv = _mm512_loadu_ps(x0 + j * cols + k);
#pragma GCC unroll 4
                    for (int r = 0; r < RB; r++) acc[r][j] = _mm512_fmadd_ps(w[r], xv, acc[r][j]);
                }
            }
            if (tail) {
#pragma GCC unroll 4
                for (int j = 0; j < TB; j++) {
                    __m512 xv = _mm512_maskz_loadu_ps(tail, x0 + j * cols + kv);
#pragma GCC unroll 4
                    for (int r = 0; r < RB; r++)
                        acc[r][j] = _mm512_fmadd_ps(_mm512_load_ps(tile + r * KC + kv), xv, acc[r][j]);
                }
            }
        } else {
            for (size_t k = 0; k < kv; k += 16) {
                __m512 xv = _mm512_loadu_ps(x0 + k);
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++) acc[r][0] = _mm512_fmadd_ps(_mm512_load_ps(tile + r * KC + k), xv, acc[r][0]);
            }
            if (tail) {
                __m512 xv = _mm512_maskz_loadu_ps(tail, x0 + kv);
#pragma GCC unroll 4
                for (int r = 0; r < RB; r++)
                    acc[r][0] = _mm512_fmadd_ps(_mm512_load_ps(tile + r * KC + kv), xv, acc[r][0]);
            }
        }
        for (int j = 0; j < nt; j++) {
            float s[4];
            _mm_storeu_ps(s, hsum16x4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]));
            float *yt = Y + (t + j) * ldy;
            for (int r = 0; r < nr; r++) yt[r] = accumulate ? yt[r] + s[r] : s[r];
        }
    }
}

enum { MATVEC_LANES = 16 };
#include "kernels/matvec_types_x86.h"

const gm_kernel_ops gm_kernels_avx512 = {"avx512", dequant_by_type, matvec_by_type, matmul_by_type};
