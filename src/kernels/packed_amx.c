/* AMX-BF16 matmul for packed BF16 weights: a packed tile ([16 pairs][16 rows][2] bf16) is exactly a
 * TDPBF16PS B operand, the inputs are the A operand (16 tokens x 32 columns), split x ~ hi + lo so
 * that two products give 16 significant bits of x with f32 accumulation. 2 x 2 output tiles
 * (32 tokens x 32 rows) at a time: per 32 columns, 2 B loads and 4 A loads feed 8 products.
 * Everything else (matvec, other kinds, no split) is the AVX-512 code. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"

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

static void matmul_amx(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    if (P->kind != GM_PK_BF16 || !xq->split || T < 2) {
        gm_packed_matmul_avx512(P, r0, r1, xq, T, Y, ldy);
        return;
    }
    if (r1 <= r0) return;
    _Alignas(64) float tmp[256];
    configure();
    const size_t tiles = P->cols / 32, lda = xq->ldq * sizeof(uint16_t), nblk = (T + 15) / 16;
    const size_t p1 = (r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
    for (size_t p = r0 / GM_PANEL_ROWS; p < p1; p += 2) {
        const int two_p = p + 1 < p1;
        const uint8_t *B0 = P->data + p * P->panel_bytes, *B1 = B0 + P->panel_bytes;
        for (size_t tb = 0; tb < nblk; tb += 2) {
            const int two_t = tb + 1 < nblk;
            const uint16_t *h0 = xq->hi + 16 * tb * xq->ldq, *l0 = xq->lo + 16 * tb * xq->ldq;
            const uint16_t *h1 = h0 + 16 * xq->ldq, *l1 = l0 + 16 * xq->ldq;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (size_t k = 0; k < tiles; k++) {
                _tile_loadd(6, B0 + 1024 * k, 64);
                if (two_p) _tile_loadd(7, B1 + 1024 * k, 64);
                _tile_loadd(4, h0 + 32 * k, (long)lda);
                if (two_t) _tile_loadd(5, h1 + 32 * k, (long)lda);
                _tile_dpbf16ps(0, 4, 6);
                if (two_p) _tile_dpbf16ps(1, 4, 7);
                if (two_t) _tile_dpbf16ps(2, 5, 6);
                if (two_t && two_p) _tile_dpbf16ps(3, 5, 7);
                _tile_loadd(4, l0 + 32 * k, (long)lda);
                if (two_t) _tile_loadd(5, l1 + 32 * k, (long)lda);
                _tile_dpbf16ps(0, 4, 6);
                if (two_p) _tile_dpbf16ps(1, 4, 7);
                if (two_t) _tile_dpbf16ps(2, 5, 6);
                if (two_t && two_p) _tile_dpbf16ps(3, 5, 7);
            }
            STORE(0, 0, 0);
            if (two_p) STORE(1, 0, 1);
            if (two_t) STORE(2, 1, 0);
            if (two_t && two_p) STORE(3, 1, 1);
        }
    }
    _tile_release();
}

const gm_packed_ops gm_packed_amx = {gm_quantize_x_avx512, gm_packed_matvec_avx512, matmul_amx};
