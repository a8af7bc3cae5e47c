/* AMX-BF16 matmuls for packed weights. BF16: a packed tile ([16 pairs][16 rows][2] bf16) is exactly a
 * TDPBF16PS B operand, the inputs are the A operand (16 tokens x 32 columns), split x = hi + mid + lo
 * so that three products use all of x's bits, with f32 accumulation. 2 x 2 output tiles
 * (32 tokens x 32 rows) at a time: per 32 columns, 2 B loads and 6 A loads feed 12 products.
 * Quantized kinds: each tile's codes become a bf16 B operand (small integers are exact in bf16), its
 * product with the three input terms is one f32 tile per 16 tokens, scaled by the tile's block
 * scales (and + min * sum(x) for the kinds with a min) into the panel's output rows. Matvec and
 * inputs without the split are the AVX-512 code. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
#include "kernels/packed_x86.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

bool gm_amx_enable(void) {
#ifdef SYS_arch_prctl
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* tiles 0-3: C (f32 16 x 16), 4-5: A (16 tokens x 32 bf16), 6-7: B (16 pairs x 16 rows x 2) */
static void configure(void) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.colsb[i] = 64, c.rows[i] = 16;
    _tile_loadconfig(&c);
}

/* C tile (tokens t0.., panel p) into Y, the valid part only */
static void store_tile(const float *c, size_t t0, size_t T, size_t p, size_t r0, size_t r1, float *Y, size_t ldy) {
    for (size_t m = 0; m < 16 && t0 + m < T; m++)
        for (size_t n = 0; n < 16; n++) {
            size_t r = p * GM_PANEL_ROWS + n;
            if (r >= r0 && r < r1) Y[(t0 + m) * ldy + (r - r0)] = c[16 * m + n];
        }
}

#define GM_AI static inline __attribute__((always_inline))

#define STORE(tile, i, j)                                                                                              \
    do {                                                                                                               \
        size_t t0_ = 16 * (tb + (i)), pp_ = p + (j);                                                                   \
        if (t0_ + 16 <= T && pp_ * 16 >= r0 && pp_ * 16 + 16 <= r1)                                                    \
            _tile_stored(tile, Y + t0_ * ldy + (pp_ * 16 - r0), (long)(ldy * sizeof(float)));                         \
        else {                                                                                                         \
            _tile_stored(tile, tmp, 64);                                                                               \
            store_tile(tmp, t0_, T, pp_, r0, r1, Y, ldy);                                                              \
        }                                                                                                              \
    } while (0)

static void matmul_bf16_amx(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    _Alignas(64) float tmp[256];
    configure();
    const size_t tiles = P->cols / 32, lda = xq->ldq * sizeof(uint16_t), nblk = (T + 15) / 16;
    const size_t p1 = (r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
    for (size_t p = r0 / GM_PANEL_ROWS; p < p1; p += 2) {
        const int two_p = p + 1 < p1;
        const uint8_t *B0 = P->data + p * P->panel_bytes, *B1 = B0 + P->panel_bytes;
        for (size_t tb = 0; tb < nblk; tb += 2) {
            const int two_t = tb + 1 < nblk;
            const uint16_t *terms[3] = {xq->hi + 16 * tb * xq->ldq, xq->mid + 16 * tb * xq->ldq, xq->lo + 16 * tb * xq->ldq};
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (size_t k = 0; k < tiles; k++) {
                _tile_loadd(6, B0 + 1024 * k, 64);
                if (two_p) _tile_loadd(7, B1 + 1024 * k, 64);
                for (int e = 0; e < 3; e++) {
                    _tile_loadd(4, terms[e] + 32 * k, (long)lda);
                    if (two_t) _tile_loadd(5, terms[e] + 16 * xq->ldq + 32 * k, (long)lda);
                    _tile_dpbf16ps(0, 4, 6);
                    if (two_p) _tile_dpbf16ps(1, 4, 7);
                    if (two_t) _tile_dpbf16ps(2, 5, 6);
                    if (two_t && two_p) _tile_dpbf16ps(3, 5, 7);
                }
            }
            STORE(0, 0, 0);
            if (two_p) STORE(1, 0, 1);
            if (two_t) STORE(2, 1, 0);
            if (two_t && two_p) STORE(3, 1, 1);
        }
    }
    _tile_release();
}

/* ---- quantized kinds: codes -> bf16 (exact: small integers), per-tile products, scaled on the way out ---- */

/* The B operand(s) of tile t: codes minus the kind's offset as bf16, [16 pairs][16 rows][2]. For Q6_K's
 * per-16-column scales, two operands: pairs 0-7 in b0 and 8-15 in b1, the rest zero. */
GM_AI void codes_bf16(gm_pack_kind K, const uint8_t *t, uint16_t *b0, uint16_t *b1) {
    const __m512i off = _mm512_set1_epi16((short)(K == GM_PK_N5D ? 16 : K == GM_PK_N6 ? 32 : 0));
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        __m512i w[2];
        tile_weights(K, t, g, &w[0], &w[1]);
        for (int h = 0; h < 2; h++) {
            __m512i v = _mm512_sub_epi16(w[h], off);
            __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(v)));
            __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(v, 1)));
            __m512i bf = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            int p = g + 8 * h;
            if (K == GM_PK_N6) {
                _mm512_store_si512((void *)(b0 + 32 * p), h == 0 ? bf : _mm512_setzero_si512());
                _mm512_store_si512((void *)(b1 + 32 * p), h == 1 ? bf : _mm512_setzero_si512());
            } else {
                _mm512_store_si512((void *)(b0 + 32 * p), bf);
            }
        }
    }
}

/* yacc[m] += C[m] * s (+ mv * xsum of token m) for the valid tokens of a stored C tile */
GM_AI void scale_out(const float *c, float *yacc, int n, __m512 s, int with_min, __m512 mv, const float *xs, size_t ldd) {
    for (int m = 0; m < n; m++) {
        __m512 y = _mm512_load_ps(yacc + 16 * m);
        y = _mm512_fmadd_ps(_mm512_load_ps(c + 16 * m), s, y);
        if (with_min) y = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[(size_t)m * ldd]), y);
        _mm512_store_ps(yacc + 16 * m, y);
    }
}

enum { TC = 128 }; /* tokens per pass over a panel */

/* per-tile scales of a quantized kind (tile b of a panel): s (first or only), s1 (Q6_K's second half), m (the
 * min) */
GM_AI void tile_scales(gm_pack_kind K, const gm_packed *P, const uint8_t *panel, size_t b, __m512 *s0, __m512 *s1,
                       __m512 *mv) {
    const uint8_t *t = panel + b * P->tile_bytes;
    *s1 = *mv = _mm512_setzero_ps();
    switch (K) {
    case GM_PK_D16: *s0 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + 512))); break;
    case GM_PK_N5D: *s0 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + 320))); break;
    case GM_PK_N6: k_scales(K, gm_packed_sc(P, panel, b), gm_packed_sb(P, panel, b), s0, s1); break;
    case GM_PK_N4K: k_scales(K, gm_packed_sc(P, panel, b), gm_packed_sb(P, panel, b), s0, mv); break;
    default: {
        const float *sm = (const float *)(t + (K == GM_PK_SM32 ? 512 : 256));
        *s0 = _mm512_load_ps(sm);
        *mv = _mm512_load_ps(sm + 16);
        break;
    }
    }
}

/* 2 x 2 blocking as for BF16: two B operands (two panels, or Q6_K's two halves of one panel) times two
 * 16-token blocks, 4 independent C tiles; per 32 columns, 2 conversions feed (token blocks / 2) x 12
 * products, and each C tile is scaled into the panel's accumulators.
 *
 * Panels go in groups of GP, tile by tile across the group: a tile's inputs (TC tokens x 32 columns x
 * 3 terms, 24 KiB) come from L3 once and then serve all GP panels from L1. Panel by panel, every pair
 * of panels re-read all TC rows of inputs (wider than L2 for the 4B's down projection, 7.5 MiB), and
 * `perf` found the products waiting on those loads (docs/BENCHMARKS.md, "Quantized AMX products in
 * panel groups"). Each output still sums its tiles' contributions in column order: the same bits. */
enum { GP = 16 }; /* panels per group: their accumulators, GP x TC x 16 f32, 128 KiB (8: 64 KiB, -8 % prefill) */

GM_AI void matmul_q_amx_k(gm_pack_kind K, const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                          size_t ldy) {
    const int halves = K == GM_PK_N6, with_min = K == GM_PK_SM32 || K == GM_PK_N4SM || K == GM_PK_N4K;
    const size_t tiles = P->cols / 32, lda = xq->ldq * sizeof(uint16_t), blk = 16 * xq->ldq;
    _Alignas(64) uint16_t bbuf[4][512];
    _Alignas(64) float cbuf[256];
    /* thread-local rather than on the stack: 128 KiB is more than a caller's thread may have to spare; a
     * thread that never multiplies on AMX never touches it */
    static _Thread_local _Alignas(64) float yacc[GP][TC * 16];
    const uint16_t *terms[3] = {xq->hi, xq->mid, xq->lo};
    const size_t p1 = (r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
    configure();
    for (size_t g0 = r0 / GM_PANEL_ROWS; g0 < p1; g0 += GP) {
        const size_t gn = p1 - g0 < GP ? p1 - g0 : GP; /* panels in this group */
        for (size_t tc = 0; tc < T; tc += TC) {
            const int nt = (int)(T - tc < TC ? T - tc : TC), nblk = (nt + 15) / 16;
            for (size_t j = 0; j < gn; j++) memset(yacc[j], 0, (size_t)nt * 16 * sizeof(float));
            for (size_t b = 0; b < tiles; b++) {
                for (size_t p = g0; p < g0 + gn; p += halves ? 1 : 2) {
                    const int np = halves || p + 1 >= g0 + gn ? 1 : 2; /* panels in this pass */
                    const int nbop = halves ? 2 : np;                   /* B operands */
                    const size_t pg = p - g0;                           /* the first panel's accumulators */
                    const uint8_t *pa = P->data + p * P->panel_bytes, *pb = pa + P->panel_bytes;
                    __m512 s[2][2], mv[2];
                    codes_bf16(K, pa + b * P->tile_bytes, bbuf[0], bbuf[1]);
                    tile_scales(K, P, pa, b, &s[0][0], &s[0][1], &mv[0]);
                    if (np == 2) {
                        codes_bf16(K, pb + b * P->tile_bytes, bbuf[1], bbuf[2]);
                        tile_scales(K, P, pb, b, &s[1][0], &s[1][1], &mv[1]);
                    }
                    _tile_loadd(6, bbuf[0], 64);
                    if (nbop == 2) _tile_loadd(7, bbuf[1], 64);
                    for (int tb = 0; tb < nblk; tb += 2) {
                        const int two = tb + 1 < nblk;
                        _tile_zero(0);
                        if (nbop == 2) _tile_zero(1);
                        if (two) _tile_zero(2);
                        if (two && nbop == 2) _tile_zero(3);
                        for (int e = 0; e < 3; e++) {
                            const uint16_t *a = terms[e] + (tc + 16 * (size_t)tb) * xq->ldq + 32 * b;
                            _tile_loadd(4, a, (long)lda);
                            if (two) _tile_loadd(5, a + blk, (long)lda);
                            _tile_dpbf16ps(0, 4, 6);
                            if (nbop == 2) _tile_dpbf16ps(1, 4, 7);
                            if (two) _tile_dpbf16ps(2, 5, 6);
                            if (two && nbop == 2) _tile_dpbf16ps(3, 5, 7);
                        }
                        /* C tile (token block i, operand j) -> panel (halves ? 0 : j), scale s[.][halves ? j : 0] */
                        for (int i = 0; i <= two; i++)
                            for (int j = 0; j < nbop; j++) {
                                int m0 = 16 * (tb + i), n = nt - m0 < 16 ? nt - m0 : 16, pj = halves ? 0 : j;
                                const float *xs = xq->s + (tc + (size_t)m0) * xq->ldd + b;
                                switch (2 * i + j) {
                                case 0: _tile_stored(0, cbuf, 64); break;
                                case 1: _tile_stored(1, cbuf, 64); break;
                                case 2: _tile_stored(2, cbuf, 64); break;
                                default: _tile_stored(3, cbuf, 64); break;
                                }
                                scale_out(cbuf, yacc[pg + (size_t)pj] + 16 * m0, n, s[pj][halves ? j : 0],
                                          with_min && (!halves || j == 0), mv[pj], xs, xq->ldd);
                            }
                    }
                }
            }
            /* the group's rows of Y */
            for (size_t j = 0; j < gn; j++) {
                size_t lo = (g0 + j) * GM_PANEL_ROWS, a = lo < r0 ? r0 - lo : 0;
                size_t e = lo + GM_PANEL_ROWS > r1 ? r1 - lo : GM_PANEL_ROWS;
                for (int m = 0; m < nt; m++)
                    for (size_t r = a; r < e; r++) Y[(tc + (size_t)m) * ldy + (lo + r - r0)] = yacc[j][16 * m + (int)r];
            }
        }
    }
    _tile_release();
}

static void matmul_amx(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    if (!xq->split || T < 2) {
        gm_packed_matmul_avx512(P, r0, r1, xq, T, Y, ldy);
        return;
    }
    if (r1 <= r0) return;
    switch (P->kind) {
    case GM_PK_BF16: matmul_bf16_amx(P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_D16: matmul_q_amx_k(GM_PK_D16, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_SM32: matmul_q_amx_k(GM_PK_SM32, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4SM: matmul_q_amx_k(GM_PK_N4SM, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N4K: matmul_q_amx_k(GM_PK_N4K, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N5D: matmul_q_amx_k(GM_PK_N5D, P, r0, r1, xq, T, Y, ldy); return;
    case GM_PK_N6: matmul_q_amx_k(GM_PK_N6, P, r0, r1, xq, T, Y, ldy); return;
    default: return;
    }
}

/* without the split (a few tokens: gm_packed_amx_min_tokens) the AVX-512 products, the int8 terms among them */
const gm_packed_ops gm_packed_amx = {gm_quantize_x_avx512, gm_split_bf16_avx512, gm_packed_matvec_avx512, matmul_amx,
                                     gm_packed_matmul8_avx512, gm_quantize_x8_avx512, NULL, false, false, false,
                                     false, gm_packed_screen_avx512};
