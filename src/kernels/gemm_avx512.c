/* AVX-512 GEMM micro-kernel: a 12 x 32 tile in 24 zmm accumulators; per k, two loads of B and 12
 * broadcasts of A feed 24 FMAs. Partial tiles use lane masks. */
#include <immintrin.h>

#include "kernels/gemm.h"

#define GEMM_MR 12
#define GEMM_NR 32
#define GEMM_NAME gm_sgemm_avx512

static inline __attribute__((always_inline)) void store_row(float *c, __m512 v0, __m512 v1, __m512 va, __m512 vb,
                                                            __mmask16 m0, __mmask16 m1) {
    /* va = alpha, vb = beta (beta == 0: C not read) */
    if (_mm512_cvtss_f32(vb) == 0.0f) {
        _mm512_mask_storeu_ps(c, m0, _mm512_mul_ps(v0, va));
        _mm512_mask_storeu_ps(c + 16, m1, _mm512_mul_ps(v1, va));
    } else {
        _mm512_mask_storeu_ps(c, m0, _mm512_fmadd_ps(v0, va, _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, c), vb)));
        _mm512_mask_storeu_ps(c + 16, m1,
                              _mm512_fmadd_ps(v1, va, _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, c + 16), vb)));
    }
}

static void ukernel(size_t kc, const float *a, const float *b, float *C, size_t ldc, float alpha, float beta, int m,
                    int n) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    __m512 c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
    __m512 c80 = c00, c81 = c00, c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00;
    for (size_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        __m512 x;
#define ROW(i, r0, r1)                                                                                                 \
    x = _mm512_set1_ps(a[i]);                                                                                          \
    r0 = _mm512_fmadd_ps(x, b0, r0);                                                                                   \
    r1 = _mm512_fmadd_ps(x, b1, r1);
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
        ROW(6, c60, c61) ROW(7, c70, c71) ROW(8, c80, c81) ROW(9, c90, c91) ROW(10, ca0, ca1) ROW(11, cb0, cb1)
#undef ROW
        a += GEMM_MR;
        b += GEMM_NR;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
    __m512 rows[GEMM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                               {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {ca0, ca1}, {cb0, cb1}};
    for (int i = 0; i < m; i++) store_row(C + (size_t)i * ldc, rows[i][0], rows[i][1], va, vb, m0, m1);
}

/* ---- packing with 16 x 16 register transposes (the scalar loops of gemm_blocked.h spent as long
 * as the micro-kernel on the big head GEMMs) ---- */

/* r[i] (16 rows of 16) -> r[j] = column j */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16], u[16], v[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* per 128-bit lane: 4 rows x one element each */
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* u[4g + e] lane L = rows 4g..4g+3, element 4L + e */
    for (int e = 0; e < 4; e++) {
        v[e] = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88);      /* lanes 0,2 of rows 0-3, 4-7 */
        v[4 + e] = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xDD);  /* lanes 1,3 */
        v[8 + e] = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
        v[12 + e] = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xDD);
    }
    for (int e = 0; e < 4; e++) {
        r[e] = _mm512_shuffle_f32x4(v[e], v[8 + e], 0x88);          /* element e */
        r[8 + e] = _mm512_shuffle_f32x4(v[e], v[8 + e], 0xDD);      /* element 8 + e */
        r[4 + e] = _mm512_shuffle_f32x4(v[4 + e], v[12 + e], 0x88); /* element 4 + e */
        r[12 + e] = _mm512_shuffle_f32x4(v[4 + e], v[12 + e], 0xDD);/* element 12 + e */
    }
}

#define GEMM_CUSTOM_PACK
static inline size_t pk_min(size_t a, size_t b) { return a < b ? a : b; }

/* A[ic.., pc..] (mc x kc of op(A)) -> panels of MR rows: Ap[p * MR * kc + k * MR + i] */
static void pack_a(bool ta, const float *A, size_t lda, size_t ic, size_t pc, size_t mc, size_t kc, float *Ap) {
    for (size_t p = 0; p < mc; p += GEMM_MR) {
        size_t mr = pk_min(GEMM_MR, mc - p);
        float *dst = Ap + p * kc;
        __mmask16 m = (__mmask16)((1u << mr) - 1);
        if (ta) { /* rows of A^T are contiguous: 12 floats per k */
            for (size_t k = 0; k < kc; k++)
                _mm512_mask_storeu_ps(dst + k * GEMM_MR, 0x0fff, _mm512_maskz_loadu_ps(m, A + (pc + k) * lda + ic + p));
            continue;
        }
        size_t k = 0;
        for (; k + 16 <= kc; k += 16) {
            __m512 r[16];
            for (size_t i = 0; i < 16; i++)
                r[i] = i < mr ? _mm512_loadu_ps(A + (ic + p + i) * lda + pc + k) : _mm512_setzero_ps();
            transpose16(r);
            for (int e = 0; e < 16; e++) _mm512_mask_storeu_ps(dst + (k + (size_t)e) * GEMM_MR, 0x0fff, r[e]);
        }
        for (; k < kc; k++)
            for (size_t i = 0; i < GEMM_MR; i++) dst[k * GEMM_MR + i] = i < mr ? A[(ic + p + i) * lda + pc + k] : 0.0f;
    }
}

/* B[pc.., jc..] (kc x nc of op(B)) -> panels of NR columns: Bp[q * NR * kc + k * NR + j] */
static void pack_b(bool tb, const float *B, size_t ldb, size_t pc, size_t jc, size_t kc, size_t nc, float *Bp) {
    for (size_t q = 0; q < nc; q += GEMM_NR) {
        size_t nr = pk_min(GEMM_NR, nc - q);
        float *dst = Bp + q * kc;
        if (!tb) { /* rows of B are contiguous */
            __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
            __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
            for (size_t k = 0; k < kc; k++) {
                const float *src = B + (pc + k) * ldb + jc + q;
                _mm512_store_ps(dst + k * GEMM_NR, _mm512_maskz_loadu_ps(m0, src));
                _mm512_store_ps(dst + k * GEMM_NR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
            }
            continue;
        }
        size_t k = 0;
        for (; k + 16 <= kc; k += 16)
            for (size_t h = 0; h < GEMM_NR; h += 16) { /* two 16 x 16 blocks of columns */
                __m512 r[16];
                for (size_t j = 0; j < 16; j++)
                    r[j] = h + j < nr ? _mm512_loadu_ps(B + (jc + q + h + j) * ldb + pc + k) : _mm512_setzero_ps();
                transpose16(r);
                for (int e = 0; e < 16; e++) _mm512_store_ps(dst + (k + (size_t)e) * GEMM_NR + h, r[e]);
            }
        for (; k < kc; k++)
            for (size_t j = 0; j < GEMM_NR; j++) dst[k * GEMM_NR + j] = j < nr ? B[(jc + q + j) * ldb + pc + k] : 0.0f;
    }
}

/* packed panels must be 64-byte aligned for the aligned loads: every panel offset is a multiple of
 * NR * kc floats and the workspace is 64-byte aligned. */
#include "kernels/gemm_blocked.h"
