/* Packed weights and int16 activations (kernels/packed.h), on random weights of every quantized type
 * and BF16, and random non-zero inputs:
 *  - packing is lossless: every packed row reads back bit for bit as the reference dequantizer's row,
 *    and packing in two row ranges (as threads do) gives the same bytes as packing at once;
 *  - activation quantization is bit-identical on every path, q1 within half a step of x and the
 *    two terms within 2^-31 of the block's largest value;
 *  - every path's packed matvec / matmul matches the scalar packed reference (1e-6 of sum |w xhat|),
 *    for row ranges that cut panels, several input counts, without writing outside its outputs;
 *  - the packed product is within 1e-6 of sum |w x| of the exact f32 reference product (two int16
 *    terms per input keep f32 accuracy);
 *  - BF16: matvec and the AMX matmul (x split in three bf16 terms) are the exact f32 product (1e-6);
 *  - the int8-term inputs of batched products (gm_quantize_x8): each value within 2^-23 of its block's
 *    largest; every path with an int8 matmul matches the int8 scalar reference (1e-6 of sum |w xhat|) and
 *    the exact f32 product (1e-6 of sum |w x|), on row ranges that cut panels, several input counts,
 *    a column view, without writing outside its outputs; NaN and zero blocks;
 *  - --precision fast: the int8 products on the first term alone and the BF16 matmul on bf16 inputs
 *    match their scalar reference and stay within the rounding's bound of the f32 product;
 *  - the f32 batched product (AVX2) is within 1e-6 of sum |w x| of the f32 product;
 *  - all-zero inputs give zeros, a NaN input gives NaN;
 *  - the decode prefetch's leads step through the panels' streams where the direct formula puts them;
 *  - rows quantized through row views (threads sharing a batch) are those of one call over all rows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"
#include "test_util.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rnd_nonzero(void) { return ((float)(rnd() & 0xffffff) + 0.5f) / 8388608.0f - 1.0f; }

/* A weight type and the kind it is packed as (GM_PK_NONE: gm_pack_kind_of's choice). Q5_0, Q4_K and Q6_K run
 * as all of their kinds whatever the machine's kernels prefer (N6C, N6, N5R, N4R on the kernels that handle
 * them). */
typedef struct pcase {
    gm_dtype t;
    gm_pack_kind k;
    const char *name; /* NULL: the type's name */
} pcase;

static const pcase cases[] = {{GM_Q4_0, GM_PK_NONE, NULL}, {GM_Q4_1, GM_PK_NONE, NULL},
                              {GM_Q5_0, GM_PK_N5D, "Q5_0 as N5D"}, {GM_Q5_0, GM_PK_D16, "Q5_0 as D16"},
                              {GM_Q5_0, GM_PK_N5R, "Q5_0 as N5R"},
                              {GM_Q5_1, GM_PK_NONE, NULL}, {GM_Q8_0, GM_PK_NONE, NULL},
                              {GM_Q4_K, GM_PK_N4K, "Q4_K as N4K"}, {GM_Q4_K, GM_PK_N4R, "Q4_K as N4R"},
                              {GM_Q5_K, GM_PK_NONE, NULL},
                              {GM_Q6_K, GM_PK_N6, "Q6_K as N6"}, {GM_Q6_K, GM_PK_N6C, "Q6_K as N6C"},
                              {GM_Q6_K, GM_PK_N6H, "Q6_K as N6H"},
                              {GM_BF16, GM_PK_NONE, NULL}};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static pcase of_type(gm_dtype t) { return (pcase){t, GM_PK_NONE, NULL}; }
static gm_pack_kind kind_of(pcase c) { return c.k != GM_PK_NONE ? c.k : gm_pack_kind_of(c.t); }
/* whether the kernels `ops` take case c's packed kind */
static bool runs(const gm_packed_ops *ops, pcase c) { return gm_packed_ops_handles(ops, kind_of(c)); }
static const char *cname(pcase c) { return c.name ? c.name : gm_dtype_get(c.t)->name; }

/* random blocks with moderate f16 scale fields (K types: d and dmin; Q6_K: d) */
static uint8_t *random_weights(gm_dtype t, size_t rows, size_t cols, size_t *rb) {
    const gm_dtype_info *di = gm_dtype_get(t);
    *rb = cols / di->block * di->bytes;
    uint8_t *w = malloc(rows * *rb);
    for (size_t i = 0; i < rows * *rb; i++) w[i] = (uint8_t)rnd();
    if (t == GM_BF16) {
        for (size_t i = 0; i < rows * cols; i++) {
            uint16_t h = gm_f32_to_bf16(rnd_nonzero() * 0.1f);
            memcpy(w + 2 * i, &h, 2);
        }
        return w;
    }
    int off[2] = {-1, -1};
    switch (t) {
    case GM_Q4_0: case GM_Q5_0: case GM_Q8_0: off[0] = 0; break;
    case GM_Q6_K: off[0] = 208; break;
    default: off[0] = 0; off[1] = 2; break;
    }
    for (size_t b = 0; b < rows * *rb / di->bytes; b++)
        for (int j = 0; j < 2; j++)
            if (off[j] >= 0) {
                float s = ldexpf(1.0f + (float)(rnd() & 1023) / 1024.0f, -(int)(rnd() % 8) - 4);
                uint16_t h = gm_f32_to_f16(rnd() & 3 ? s : -s);
                memcpy(w + b * di->bytes + off[j], &h, 2);
            }
    return w;
}

static gm_packed pack_all(pcase c, const uint8_t *w, size_t rb, size_t rows, size_t cols) {
    gm_packed P;
    gm_pack_describe_as(kind_of(c), c.t, rows, cols, &P);
    P.data = aligned_alloc(64, (gm_packed_size(&P) + 63) / 64 * 64);
    gm_pack_rows(&P, w, rb, 0, rows);
    return P;
}

static void xq_alloc(gm_xq *xq, size_t T, size_t cols) {
    memset(xq, 0, sizeof *xq);
    size_t tpad = (T + 15) / 16 * 16;
    xq->q = aligned_alloc(64, (T * cols * sizeof *xq->q + 63) / 64 * 64 + 64);
    xq->q2 = aligned_alloc(64, (T * cols * sizeof *xq->q2 + 63) / 64 * 64 + 64);
    xq->d = malloc(T * cols / 32 * sizeof *xq->d + 4);
    xq->s = malloc(T * cols / 32 * sizeof *xq->s + 4);
    xq->qs = malloc(T * cols / 8 * sizeof *xq->qs + 16);
    xq->hi = aligned_alloc(64, (tpad * cols * 2 + 63) / 64 * 64);
    xq->mid = aligned_alloc(64, (tpad * cols * 2 + 63) / 64 * 64);
    xq->lo = aligned_alloc(64, (tpad * cols * 2 + 63) / 64 * 64);
    xq->cols = cols;
}

static void xq8_alloc(gm_xq *xq, size_t T, size_t cols) {
    xq->b8 = aligned_alloc(64, (3 * T * cols + 63) / 64 * 64);
    xq->b8n = aligned_alloc(64, (3 * T * cols + 63) / 64 * 64); /* column order: N6H's int8 products */
    xq->e8 = malloc(T * cols / 32 * sizeof *xq->e8 + 4);
    xq->s8 = malloc(GM_X8_SUMS * T * cols / 32 * sizeof *xq->s8 + 4);
}

/* room for the int16 and the int8 terms */
static void xq_alloc_both(gm_xq *xq, size_t T, size_t cols) {
    xq_alloc(xq, T, cols);
    xq8_alloc(xq, T, cols);
}

static void xq_free(gm_xq *xq) {
    free(xq->b8);
    free(xq->b8n);
    free(xq->e8);
    free(xq->s8);
    free(xq->q);
    free(xq->q2);
    free(xq->d);
    free(xq->s);
    free(xq->qs);
    free(xq->hi);
    free(xq->mid);
    free(xq->lo);
}

/* the inputs the kernels see: quantized, or f32 (+ bf16 split for the AMX matmul) for BF16 */
static void prepare(const gm_packed_ops *ops, gm_dtype t, const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    bool amx = ops == gm_packed_lookup("amx") && T > 1;
    if (t == GM_BF16 || amx) gm_prepare_x_bf16(x, ldx, T, cols, amx, xq);
    else gm_quantize_x_ref(x, ldx, T, cols, xq);
}

/* xhat_c of input t as the kernels see it */
static double xhat(const gm_packed *P, const gm_xq *xq, size_t t, size_t c) {
    if (P->kind == GM_PK_BF16 || xq->split)
        return xq->split ? (double)gm_bf16_to_f32(xq->hi[t * xq->ldq + c]) + gm_bf16_to_f32(xq->mid[t * xq->ldq + c]) +
                               gm_bf16_to_f32(xq->lo[t * xq->ldq + c])
                         : (double)xq->x[t * xq->ldx + c];
    return (double)xq->d[t * xq->ldd + c / 32] * (xq->q[t * xq->ldq + c] + xq->q2[t * xq->ldq + c] / 32768.0);
}

static int same_float(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }

static void test_pack_lossless(pcase pc, size_t rows, size_t cols) {
    const gm_dtype t = pc.t;
    const char *tn = cname(pc);
    size_t rb;
    uint8_t *w = random_weights(t, rows, cols, &rb);
    gm_packed P = pack_all(pc, w, rb, rows, cols);
    float *a = malloc(cols * sizeof *a), *b = malloc(cols * sizeof *b);
    int bad = 0;
    for (size_t r = 0; r < rows; r++) {
        gm_dequant_row_ref(t, w + r * rb, a, cols);
        gm_packed_row(&P, r, b);
        for (size_t c = 0; c < cols; c++) bad += !same_float(a[c], b[c]);
    }
    CHECK(bad == 0, "pack %s %zux%zu: %d values differ from the reference dequantization", tn, rows,
          cols, bad);
    /* two row ranges (split at a panel boundary) give the same bytes */
    gm_packed Q = P;
    size_t bytes = gm_packed_size(&P);
    Q.data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    memset(Q.data, 0xa5, bytes);
    size_t mid = rows / 2 / 16 * 16;
    gm_pack_rows(&Q, w + mid * rb, rb, mid, rows);
    gm_pack_rows(&Q, w, rb, 0, mid);
    CHECK(memcmp(P.data, Q.data, bytes) == 0, "pack %s %zux%zu in two ranges differs", tn, rows, cols);
    /* the type's fast packing path gives the generic path's bytes */
    memset(Q.data, 0x5a, bytes);
    gm_pack_rows_ref(&Q, w, rb, 0, rows);
    CHECK(memcmp(P.data, Q.data, bytes) == 0, "pack %s %zux%zu differs from the generic path", tn, rows,
          cols);
    free(Q.data);
    free(P.data);
    free(w);
    free(a);
    free(b);
}

static void test_quantize(const gm_packed_ops *ops, const char *name) {
    const size_t T = 3, cols = 160, ldx = 170;
    float *x = malloc(T * ldx * sizeof *x);
    for (size_t i = 0; i < T * ldx; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 20) - 10);
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f; /* an all-zero block */
    gm_xq a, b;
    xq_alloc(&a, T, cols);
    xq_alloc(&b, T, cols);
    gm_quantize_x_ref(x, ldx, T, cols, &a);
    ops->quantize_x(x, ldx, T, cols, &b);
    int bad = memcmp(a.q, b.q, T * cols * 2) != 0 || memcmp(a.q2, b.q2, T * cols * 2) != 0 ||
              memcmp(a.qs, b.qs, T * cols / 8 * 4) != 0;
    for (size_t i = 0; i < T * cols / 32; i++) bad += !same_float(a.d[i], b.d[i]) + !same_float(a.s[i], b.s[i]);
    CHECK(bad == 0, "%s quantize_x differs from the reference (%d)", name, bad);
    /* |x - d q1| <= d / 2 (and d = max|x| / 32767); with q2 half a step of d / 32768, about 2^-31 of the
     * block's largest, up to one more step where q2's f32 rounding lands on a tie: 2^-30 */
    int far = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < cols; c++) {
            float d = a.d[t * cols / 32 + c / 32];
            double xv = x[t * ldx + c], one = (double)d * a.q[t * cols + c];
            double two = one + (double)d * a.q2[t * cols + c] / 32768.0;
            far += fabs(xv - one) > 0.51 * d || fabs(xv - two) > 32767.0 * d * 0x1p-30;
        }
    CHECK(far == 0, "%s: %d quantized inputs off by more than half a step (q1) or 2^-30 of the block max (q1, q2)",
          name, far);
    CHECK(a.d[2] == 0 && a.s[2] == 0, "a zero block has scale %g", a.d[2]);
    xq_free(&a);
    xq_free(&b);
    free(x);
}

/* Rows quantized through views (gm_xq_rows, as the device's threads quantize a prefill's rows) give the
 * bytes of one call over all rows, int16 and int8 terms alike, and the closing calls with no rows leave the
 * layout of that call. */
static void test_row_views(void) {
    const size_t T = 7, cols = 96;
    const size_t cuts[] = {0, 1, 4, 7}; /* runs of 1, 3 and 3 rows */
    float *x = malloc(T * cols * sizeof *x);
    for (size_t i = 0; i < T * cols; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 12) - 6);
    gm_xq a, b;
    xq_alloc_both(&a, T, cols);
    xq_alloc_both(&b, T, cols);
    gm_quantize_x(x, cols, T, cols, &a);
    gm_quantize_x8(x, cols, T, cols, &a);
    for (int r = 0; r < 3; r++) { /* the last run first: each view writes its own rows only */
        size_t t0 = cuts[2 - r], t1 = cuts[3 - r];
        gm_xq v = gm_xq_rows(&b, cols, t0);
        gm_quantize_x(x + t0 * cols, cols, t1 - t0, cols, &v);
        gm_quantize_x8(x + t0 * cols, cols, t1 - t0, cols, &v);
    }
    gm_quantize_x(x, cols, 0, cols, &b);
    gm_quantize_x8(x, cols, 0, cols, &b);
    size_t nb = T * cols / 32;
    CHECK(memcmp(a.q, b.q, T * cols * 2) == 0 && memcmp(a.q2, b.q2, T * cols * 2) == 0 &&
              memcmp(a.d, b.d, nb * sizeof *a.d) == 0 && memcmp(a.s, b.s, nb * sizeof *a.s) == 0 &&
              memcmp(a.qs, b.qs, 4 * nb * sizeof *a.qs) == 0,
          "int16 terms quantized through row views differ from one call's");
    CHECK(memcmp(a.b8, b.b8, 3 * T * cols) == 0 && memcmp(a.e8, b.e8, nb * sizeof *a.e8) == 0 &&
              memcmp(a.s8, b.s8, GM_X8_SUMS * nb * sizeof *a.s8) == 0,
          "int8 terms quantized through row views differ from one call's");
    CHECK(b.cols == cols && b.ldq == cols && b.ldd == cols / 32 && b.ld8 == 3 * cols && b.has8 && !b.has_xb,
          "the layout after the closing calls: cols %zu, ldq %zu, ldd %zu, ld8 %zu, has8 %d", b.cols, b.ldq, b.ldd,
          b.ld8, (int)b.has8);
    xq_free(&a);
    xq_free(&b);
    free(x);
}

/* the bf16 split of every path is the reference's, and hi + mid + lo is x exactly */
static void test_split(const gm_packed_ops *ops, const char *name) {
    const size_t T = 19, cols = 96, ldx = 101;
    float *x = malloc(T * ldx * sizeof *x);
    for (size_t i = 0; i < T * ldx; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 30) - 15);
    gm_xq a, b;
    xq_alloc(&a, T, cols);
    xq_alloc(&b, T, cols);
    gm_split_bf16_ref(x, ldx, T, cols, &a);
    ops->split_bf16(x, ldx, T, cols, &b);
    size_t n = (T + 15) / 16 * 16 * cols;
    int bad = memcmp(a.hi, b.hi, n * 2) != 0 || memcmp(a.mid, b.mid, n * 2) != 0 || memcmp(a.lo, b.lo, n * 2) != 0 ||
              memcmp(a.s, b.s, T * cols / 32 * 4) != 0;
    CHECK(!bad, "%s: bf16 split differs from the reference", name);
    int inexact = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < cols; c++) {
            size_t o = t * cols + c;
            double sum = (double)gm_bf16_to_f32(a.hi[o]) + gm_bf16_to_f32(a.mid[o]) + gm_bf16_to_f32(a.lo[o]);
            inexact += sum != (double)x[t * ldx + c];
        }
    CHECK(inexact == 0, "%s: %d values are not hi + mid + lo exactly", name, inexact);
    xq_free(&a);
    xq_free(&b);
    free(x);
}

/* sum_c |w_rc xhat_c| for the tolerance */
static double abs_dot(const gm_packed *P, size_t r, const gm_xq *xq, size_t t) {
    float *w = malloc(P->cols * sizeof *w);
    gm_packed_row(P, r, w);
    double s = 0;
    for (size_t c = 0; c < P->cols; c++) s += fabs((double)w[c] * xhat(P, xq, t, c));
    free(w);
    return s;
}

static void test_products_T(const gm_packed_ops *ops, const char *name, pcase pc, size_t rows, size_t cols,
                            const size_t *Ts, size_t nT) {
    const gm_dtype t = pc.t;
    const char *tn = cname(pc);
    size_t rb;
    uint8_t *w = random_weights(t, rows, cols, &rb);
    gm_packed P = pack_all(pc, w, rb, rows, cols);
    for (size_t k = 0; k < nT; k++) {
        size_t T = Ts[k], ldy = rows + 5;
        float *x = malloc(T * cols * sizeof *x);
        for (size_t i = 0; i < T * cols; i++) x[i] = rnd_nonzero();
        gm_xq xq;
        xq_alloc(&xq, T, cols);
        prepare(ops, t, x, cols, T, cols, &xq);
        /* a row range that cuts panels on both sides when the matrix is big enough */
        size_t r0 = rows > 20 ? 3 : 0, r1 = rows > 40 ? rows - 7 : rows, n = r1 - r0;
        float *ref = malloc(T * ldy * sizeof *ref), *got = malloc((T * ldy + 8) * sizeof *got);
        for (size_t i = 0; i < T * ldy + 8; i++) got[i] = -777.0f;
        gm_packed_matmul_ref(&P, r0, r1, &xq, T, ref, ldy);
        if (T == 1) ops->matvec(&P, r0, r1, &xq, got);
        else ops->matmul(&P, r0, r1, &xq, T, got, ldy);
        int bad = 0;
        for (size_t tt = 0; tt < T; tt++)
            for (size_t i = 0; i < (T == 1 ? n + 8 : ldy); i++) {
                float g = got[tt * ldy + i];
                if (i >= n) {
                    bad += g != -777.0f; /* nothing written past the range */
                    continue;
                }
                double scale = abs_dot(&P, r0 + i, &xq, tt);
                if (!(fabs((double)g - ref[tt * ldy + i]) <= 1e-6 * scale + 1e-30) && bad++ < 3)
                    fprintf(stderr, "  %s %s %zux%zu T %zu row %zu: got %.9g want %.9g (sum|w xhat| %g)\n", name,
                            tn, rows, cols, tt, r0 + i, g, ref[tt * ldy + i], scale);
            }
        CHECK(bad == 0, "%s packed %s %zux%zu rows [%zu,%zu) T %zu: %d outputs wrong", name, tn, rows,
              cols, r0, r1, T, bad);
        if (T == 1 && t != GM_BF16) {
            /* the same input quantized by the path itself with room for xb: kernels that read their input
             * pairs from it (the AVX2 matvec) must fill it, and give the same outputs */
            xq.xb = aligned_alloc(64, (gm_xq_xb_bytes(cols) + 63) / 64 * 64);
            ops->quantize_x(x, cols, 1, cols, &xq);
            CHECK(xq.has_xb == ops->matvec_xb, "%s quantize_x: has_xb %d", name, xq.has_xb);
            for (size_t i = 0; i < n + 8; i++) got[i] = -777.0f;
            ops->matvec(&P, r0, r1, &xq, got);
            int bad_xb = 0;
            for (size_t i = 0; i < n + 8; i++)
                bad_xb += i < n ? !(fabs((double)got[i] - ref[i]) <= 1e-6 * abs_dot(&P, r0 + i, &xq, 0) + 1e-30)
                                : got[i] != -777.0f;
            CHECK(bad_xb == 0, "%s packed %s %zux%zu T 1 with xb: %d outputs wrong", name, tn, rows,
                  cols, bad_xb);
            free(xq.xb);
            xq.xb = NULL;
        }
        if (t == GM_BF16 && (T == 1 || xq.split)) {
            /* the exact f32 product (T = 1) or within 2^-16 of it (hi + lo) */
            float *exact = malloc(rows * sizeof *exact), *wr = malloc(cols * sizeof *wr);
            int off = 0;
            for (size_t tt = 0; tt < T; tt++) {
                gm_matvec_ref(t, w, rb, rows, cols, x + tt * cols, exact);
                for (size_t i = 0; i < n; i++) {
                    gm_packed_row(&P, r0 + i, wr);
                    double mag = 0;
                    for (size_t c = 0; c < cols; c++) mag += fabs((double)wr[c] * x[tt * cols + c]);
                    off += fabs((double)got[tt * ldy + i] - exact[r0 + i]) > 1e-6 * mag;
                }
            }
            CHECK(off == 0, "%s BF16 %zux%zu T %zu: %d outputs too far from the f32 product", name, rows, cols, T, off);
            free(exact);
            free(wr);
        }
        if (T == 2 && t != GM_BF16) {
            /* against the exact f32 product: the two-term inputs keep f32 accuracy, so within 1e-6 of
             * sum |w x| (one int16 term alone misses this by ~10x) */
            float *exact = malloc(rows * sizeof *exact), *wr = malloc(cols * sizeof *wr);
            int off = 0;
            for (size_t tt = 0; tt < T; tt++) {
                gm_matvec_ref(t, w, rb, rows, cols, x + tt * cols, exact);
                for (size_t i = 0; i < n; i++) {
                    gm_packed_row(&P, r0 + i, wr);
                    double mag = 0;
                    for (size_t c = 0; c < cols; c++) mag += fabs((double)wr[c] * x[tt * cols + c]);
                    off += fabs((double)got[tt * ldy + i] - exact[r0 + i]) > 1e-6 * mag;
                }
            }
            CHECK(off == 0, "%s packed %s %zux%zu: %d outputs further than 1e-6 sum|wx| from the f32 product", name,
                  tn, rows, cols, off);
            free(exact);
            free(wr);
        }
        xq_free(&xq);
        free(x);
        free(ref);
        free(got);
    }
    free(P.data);
    free(w);
}

static void test_products(const gm_packed_ops *ops, const char *name, pcase pc, size_t rows, size_t cols) {
    static const size_t Ts[] = {1, 2, 5, 6, 8, 13};
    test_products_T(ops, name, pc, rows, cols, Ts, sizeof Ts / sizeof Ts[0]);
}

/* x as the int8 terms give it back */
static double xhat8(const gm_xq *xq, size_t t, size_t c) {
    const int8_t *q = xq->b8 + t * xq->ld8 + 96 * (c / 32);
    int p = gm_x8_pos((int)(c % 32));
    return (double)xq->e8[t * xq->ldd + c / 32] * (q[p] + q[32 + p] / 254.0 + q[64 + p] / 64516.0);
}

/* every path's int8 terms are the reference's, bit for bit */
static void test_quantize8_same(const gm_packed_ops *ops, const char *name) {
    const size_t T = 4, cols = 192, ldx = 200;
    float *x = malloc(T * ldx * sizeof *x);
    for (size_t i = 0; i < T * ldx; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 40) - 20);
    for (int i = 0; i < 32; i++) x[32 + i] = 0.0f;
    x[ldx + 70] = NAN;
    x[2 * ldx + 3] = INFINITY;
    gm_xq a, b;
    xq_alloc_both(&a, T, cols);
    xq_alloc_both(&b, T, cols);
    gm_quantize_x8_ref(x, ldx, T, cols, &a);
    ops->quantize_x8(x, ldx, T, cols, &b);
    int bad = memcmp(a.b8, b.b8, 3 * T * cols) != 0 || !b.has8 ||
              memcmp(a.s8, b.s8, GM_X8_SUMS * T * cols / 32 * sizeof *a.s8) != 0 ||
              memcmp(a.b8n, b.b8n, 3 * T * cols) != 0;
    for (size_t i = 0; i < T * cols / 32; i++) bad += !same_float(a.e8[i], b.e8[i]);
    CHECK(bad == 0, "%s quantize_x8 differs from the reference (%d)", name, bad);
    /* b8n holds each block's terms in column order: byte 32 k + c of a block is term k's column c, which lane
     * order keeps at gm_x8_pos(c) */
    int moved = 0;
    for (size_t blk = 0; blk < T * cols / 32; blk++)
        for (int k = 0; k < 3; k++)
            for (int c = 0; c < 32; c++)
                moved += b.b8n[96 * blk + 32 * (size_t)k + (size_t)c] !=
                         b.b8[96 * blk + 32 * (size_t)k + (size_t)gm_x8_pos(c)];
    CHECK(moved == 0, "%s quantize_x8: %d int8 terms out of column order in b8n", name, moved);
    xq_free(&a);
    xq_free(&b);
    free(x);
}

static void test_quantize8(void) {
    const size_t T = 3, cols = 160, ldx = 170;
    float *x = malloc(T * ldx * sizeof *x);
    for (size_t i = 0; i < T * ldx; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 20) - 10);
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f; /* an all-zero block */
    x[ldx + 100] = NAN;                            /* a bad block */
    gm_xq a;
    xq_alloc_both(&a, T, cols);
    a.ldd = cols / 32;
    gm_quantize_x8_ref(x, ldx, T, cols, &a);
    int far = 0, sums = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t b = 0; b < cols / 32; b++) {
            float amax = 0;
            int bad = 0;
            for (int i = 0; i < 32; i++) {
                amax = fmaxf(amax, fabsf(x[t * ldx + 32 * b + (size_t)i]));
                bad |= isnan(x[t * ldx + 32 * b + (size_t)i]);
            }
            if (bad) {
                far += !isnan(a.e8[t * 5 + b]);
                continue;
            }
            int32_t s[3] = {0, 0, 0}, h[3][2] = {{0, 0}, {0, 0}, {0, 0}};
            for (int i = 0; i < 32; i++) {
                size_t c = 32 * b + (size_t)i;
                far += fabs(xhat8(&a, t, c) - x[t * ldx + c]) > 0x1p-23 * amax;
                int p = gm_x8_pos(i);
                const int8_t *q = a.b8 + t * a.ld8 + 96 * b;
                s[0] += q[p], s[1] += q[32 + p], s[2] += q[64 + p];
                for (int k = 0; k < 3; k++) h[k][i / 16] += q[32 * k + p];
            }
            const int32_t *S = a.s8 + GM_X8_SUMS * (t * 5 + b);
            sums += memcmp(s, S, sizeof s) != 0;
            /* the half sums as two int16, the low one columns 0-15 (what vpmaddwd / vpdpwssd read) */
            for (int k = 0; k < 3; k++)
                sums += (int16_t)(S[3 + k] & 0xffff) != h[k][0] || (int16_t)((uint32_t)S[3 + k] >> 16) != h[k][1];
        }
    CHECK(far == 0, "quantize_x8: %d values further than 2^-23 of their block's largest (or a NaN block not NaN)", far);
    CHECK(sums == 0, "quantize_x8: %d block sums wrong", sums);
    CHECK(a.e8[2] == 0 && a.has8, "quantize_x8: a zero block has scale %g", a.e8[2]);
    xq_free(&a);
    free(x);
}

/* The int8-term matmul (exact: the three terms; `fast`, --precision fast: the first term alone, also for
 * T = 1, the decode path) and, with `fast`, the BF16 matmul on the bf16 rounding of x: every path matches
 * the scalar reference (1e-6 of sum |w xhat|) on row ranges that cut panels, several input counts, without
 * writing outside its outputs; exact stays within 1e-6 of sum |w x| of the f32 product, fast within what its
 * rounding allows: each x moves by at most half its block's int8 step (e8 / 2) or 2^-9 of itself (bf16). */
static void test_products8(const gm_packed_ops *ops, const char *name, pcase pc, size_t rows, size_t cols,
                           bool fast) {
    const gm_dtype t = pc.t;
    const char *tn = cname(pc);
    size_t rb;
    uint8_t *w = random_weights(t, rows, cols, &rb);
    gm_packed P = pack_all(pc, w, rb, rows, cols);
    bool bf16 = t == GM_BF16;
    /* N6H's exact products take the int8 terms for one input alone (its matvec; batched, the int16 terms) */
    bool n6h_exact = !fast && P.kind == GM_PK_N6H;
    if (!(gm_packed_kind_int8(P.kind, fast) || (fast && bf16) || n6h_exact)) {
        free(P.data);
        free(w);
        return;
    }
    static const size_t exact_Ts[] = {1, 2, 3, 4, 5, 7, 13}, fast_Ts[] = {1, 2, 5, 13, 14};
    const size_t *Ts = fast ? fast_Ts : exact_Ts;
    const size_t nT = fast ? sizeof fast_Ts / sizeof fast_Ts[0] : sizeof exact_Ts / sizeof exact_Ts[0];
    for (size_t k = 0; k < nT; k++) {
        size_t T = Ts[k], ldy = rows + 5;
        /* BF16 single tokens stay exact (matvec); N6H's exact product with the int8 terms is its matvec */
        if ((bf16 && T == 1) || (n6h_exact && T != 1)) continue;
        float *x = malloc(T * cols * sizeof *x);
        for (size_t i = 0; i < T * cols; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 8) - 4);
        gm_xq xq;
        xq_alloc_both(&xq, T, cols);
        if (bf16) {
            gm_prepare_x_bf16(x, cols, T, cols, true, &xq);
        } else {
            gm_quantize_x_ref(x, cols, T, cols, &xq);
            ops->quantize_x8(x, cols, T, cols, &xq);
        }
        xq.fast = fast;
        size_t r0 = rows > 20 ? 3 : 0, r1 = rows > 40 ? rows - 7 : rows, n = r1 - r0;
        float *ref = malloc(T * ldy * sizeof *ref), *got = malloc((T * ldy + 8) * sizeof *got);
        float *exact = malloc(rows * sizeof *exact), *wr = malloc(cols * sizeof *wr);
        for (size_t i = 0; i < T * ldy + 8; i++) got[i] = -777.0f;
        if (bf16) {
            gm_packed_matmul_ref(&P, r0, r1, &xq, T, ref, ldy);
            ops->matmul(&P, r0, r1, &xq, T, got, ldy);
        } else {
            gm_packed_matmul8_ref(&P, r0, r1, &xq, T, ref, ldy);
            if (n6h_exact) ops->matvec(&P, r0, r1, &xq, got); /* has8: the int8 terms */
            else ops->matmul8(&P, r0, r1, &xq, T, got, ldy);
        }
        if (T == 1 && !fast && (P.kind == GM_PK_N5R || P.kind == GM_PK_N4R)) {
            /* the row-form kinds' exact matvec takes the int8 terms where has8 says they are there: the same
             * sums as the int8 matmul of one input, nothing written past its rows */
            float *mv = malloc((n + 8) * sizeof *mv);
            for (size_t i = 0; i < n + 8; i++) mv[i] = -777.0f;
            ops->matvec(&P, r0, r1, &xq, mv);
            int diff = 0;
            for (size_t i = 0; i < n + 8; i++) diff += i < n ? !same_float(mv[i], got[i]) : mv[i] != -777.0f;
            CHECK(diff == 0, "%s %zux%zu: the matvec with the int8 terms differs from matmul8 in %d outputs", name,
                  rows, cols, diff);
            free(mv);
        }
        int bad = 0, off = 0;
        for (size_t tt = 0; tt < T; tt++) {
            gm_matvec_ref(t, w, rb, rows, cols, x + tt * cols, exact);
            for (size_t i = 0; i < ldy; i++) {
                float g = got[tt * ldy + i];
                if (i >= n) {
                    bad += g != -777.0f;
                    continue;
                }
                gm_packed_row(&P, r0 + i, wr);
                /* sum |w xhat|, sum |w x|, and the most the fast rounding of x can move the product */
                double mag8 = 0, mag = 0, bound = 0;
                for (size_t c = 0; c < cols; c++) {
                    size_t o = tt * cols + c;
                    double e = bf16 ? 0 : xq.e8[tt * xq.ldd + c / 32];
                    double xh = !fast ? xhat8(&xq, tt, c)
                                : bf16 ? (double)gm_bf16_to_f32(xq.hi[o])
                                       : e * xq.b8[tt * xq.ld8 + 96 * (c / 32) + gm_x8_pos((int)(c % 32))];
                    mag8 += fabs((double)wr[c] * xh);
                    mag += fabs((double)wr[c] * x[o]);
                    bound += fabs((double)wr[c]) * (bf16 ? fabs((double)x[o]) / 512.0 : e / 2.0);
                }
                if (!(fabs((double)g - ref[tt * ldy + i]) <= 1e-6 * mag8 + 1e-30) && bad++ < 3)
                    fprintf(stderr, "  %s %s %s %zux%zu T %zu row %zu: got %.9g want %.9g\n", name, fast ? "fast" : "int8",
                            tn, rows, cols, tt, r0 + i, g, ref[tt * ldy + i]);
                double err = fabs((double)g - exact[r0 + i]);
                off += fast ? err > bound * (1 + 1e-5) + 1e-6 * mag8 : err > 1e-6 * mag;
            }
        }
        CHECK(bad == 0, "%s %s matmul %s %zux%zu rows [%zu,%zu) T %zu: %d outputs differ from the reference", name,
              fast ? "fast" : "int8", tn, rows, cols, r0, r1, T, bad);
        CHECK(off == 0, "%s %s matmul %s %zux%zu T %zu: %d outputs too far from the f32 product", name,
              fast ? "fast" : "int8", tn, rows, cols, T, off);
        xq_free(&xq);
        free(x);
        free(ref);
        free(got);
        free(exact);
        free(wr);
    }
    free(P.data);
    free(w);
}

/* The f32 batched product (xq->f32: decoded weights times x as it is, matmul_f32): within 1e-6 of sum |w x|
 * of the f32 product on the file's layout, on row ranges that cut panels, input counts around the 6-input
 * tile, columns past one decoded chunk, without writing outside its outputs; a NaN input gives NaN for
 * that input's outputs alone; an input's outputs are bitwise the same in any batch (its sums in the same
 * order, whichever tile it falls in). */
static void test_products_f32(const gm_packed_ops *ops, const char *name, pcase pc, size_t rows, size_t cols) {
    const gm_dtype t = pc.t;
    const char *tn = cname(pc);
    size_t rb;
    uint8_t *w = random_weights(t, rows, cols, &rb);
    gm_packed P = pack_all(pc, w, rb, rows, cols);
    static const size_t Ts[] = {2, 4, 5, 6, 7, 10, 13, 16};
    float *exact = malloc(rows * sizeof *exact), *wr = malloc(cols * sizeof *wr);
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        size_t T = Ts[k], ldy = rows + 5;
        float *x = malloc(T * cols * sizeof *x);
        for (size_t i = 0; i < T * cols; i++) x[i] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 8) - 4);
        if (T == 7) x[3 * cols + cols / 2] = NAN;  /* input 3: in the first tile */
        if (T == 10) x[8 * cols + cols / 3] = NAN; /* input 8: in the last, short one */
        gm_xq xq;
        xq_alloc(&xq, T, cols);
        gm_prepare_x_bf16(x, cols, T, cols, false, &xq);
        xq.f32 = true;
        size_t r0 = rows > 20 ? 3 : 0, r1 = rows > 40 ? rows - 7 : rows, n = r1 - r0;
        float *got = malloc((T * ldy + 8) * sizeof *got);
        for (size_t i = 0; i < T * ldy + 8; i++) got[i] = -777.0f;
        ops->matmul_f32(&P, r0, r1, &xq, T, got, ldy);
        int bad = 0, outside = 0;
        for (size_t tt = 0; tt < T; tt++) {
            gm_matvec_ref(t, w, rb, rows, cols, x + tt * cols, exact);
            for (size_t i = 0; i < ldy; i++) {
                float g = got[tt * ldy + i];
                if (i >= n) {
                    outside += g != -777.0f;
                    continue;
                }
                if ((T == 7 && tt == 3) || (T == 10 && tt == 8)) {
                    bad += !isnan(g);
                    continue;
                }
                gm_packed_row(&P, r0 + i, wr);
                double mag = 0;
                for (size_t c = 0; c < cols; c++) mag += fabs((double)wr[c] * x[tt * cols + c]);
                if (!(fabs((double)g - exact[r0 + i]) <= 1e-6 * mag + 1e-30) && bad++ < 3)
                    fprintf(stderr, "  %s f32 %s %zux%zu T %zu row %zu: got %.9g want %.9g (sum|w x| %g)\n", name,
                            tn, rows, cols, tt, r0 + i, g, exact[r0 + i], mag);
            }
        }
        CHECK(bad == 0, "%s f32 matmul %s %zux%zu rows [%zu,%zu) T %zu: %d outputs wrong", name, tn,
              rows, cols, r0, r1, T, bad);
        CHECK(outside == 0, "%s f32 matmul %s %zux%zu T %zu: %d values written outside the outputs", name,
              tn, rows, cols, T, outside);
        for (size_t tt = 0; T == 16 && tt < T; tt += 5) { /* inputs 0, 5, 10 (full tiles), 15 (the short one) */
            gm_xq x1;
            xq_alloc(&x1, 1, cols);
            gm_prepare_x_bf16(x + tt * cols, cols, 1, cols, false, &x1);
            x1.f32 = true;
            float *alone = malloc(n * sizeof *alone);
            ops->matmul_f32(&P, r0, r1, &x1, 1, alone, n);
            CHECK(memcmp(alone, got + tt * ldy, n * sizeof *alone) == 0,
                  "%s f32 matmul %s %zux%zu: input %zu of 16 differs from the same input alone", name, tn, rows, cols, tt);
            free(alone);
            xq_free(&x1);
        }
        xq_free(&xq);
        free(x);
        free(got);
    }
    free(exact);
    free(wr);
    free(P.data);
    free(w);
}

/* N6H's int8 products read the int8 terms in column order as well (xq->b8n). An xq whose int8 terms have no
 * column-order copy (gm_xq_int8_for false) gets the int16 terms' products: the matvec and the fast matmul
 * the same bits as the int16 matvec and matmul, nothing written past their rows; the screen (through
 * gm_packed_screen, where these are the chosen kernels) the reference's values and bounds. */
static void test_n6h_without_columns(const gm_packed_ops *ops, const char *name) {
    const pcase pc = {GM_Q6_K, GM_PK_N6H, "Q6_K as N6H"};
    if (!runs(ops, pc) || ops == gm_packed_lookup("scalar")) return;
    const size_t rows = 37, cols = 512, r0 = 3, r1 = 30, n = r1 - r0;
    size_t rb;
    uint8_t *w = random_weights(GM_Q6_K, rows, cols, &rb);
    gm_packed P = pack_all(pc, w, rb, rows, cols);
    float *x = malloc(cols * sizeof *x), *eb = malloc(cols / 32 * sizeof *eb);
    for (size_t c = 0; c < cols; c++) x[c] = rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 8) - 4);
    gm_xq xq;
    xq_alloc_both(&xq, 1, cols);
    free(xq.b8n);
    xq.b8n = NULL;
    gm_quantize_x_ref(x, cols, 1, cols, &xq);
    ops->quantize_x8(x, cols, 1, cols, &xq);
    CHECK(xq.has8 && !gm_xq_int8_for(&xq, GM_PK_N6H) && gm_xq_int8_for(&xq, GM_PK_N4R),
          "%s: int8 terms without the column-order copy serve N4R, not N6H", name);
    float *y16 = malloc((n + 8) * sizeof *y16), *y = malloc((n + 8) * sizeof *y);
    float *b = malloc((n + 8) * sizeof *b), *yr = malloc(n * sizeof *yr), *br = malloc(n * sizeof *br);
    int diff = 0;
    for (int fast = 0; fast < 2; fast++) {
        for (size_t i = 0; i < n + 8; i++) y16[i] = y[i] = -777.0f;
        xq.has8 = false, xq.fast = false;
        if (fast) ops->matmul(&P, r0, r1, &xq, 1, y16, n); /* the int16 terms' matmul */
        else ops->matvec(&P, r0, r1, &xq, y16);
        xq.has8 = true, xq.fast = fast;
        if (fast) ops->matmul8(&P, r0, r1, &xq, 1, y, n);
        else ops->matvec(&P, r0, r1, &xq, y);
        for (size_t i = 0; i < n + 8; i++) diff += i < n ? !same_float(y[i], y16[i]) : y[i] != -777.0f;
    }
    CHECK(diff == 0, "%s N6H without b8n: %d outputs differ from the int16 terms' products", name, diff);
    xq.fast = false;
    if (gm_packed_ops_chosen() == ops && gm_packed_can_screen(GM_PK_N6H)) {
        for (size_t i = 0; i < n + 8; i++) y[i] = b[i] = -777.0f;
        gm_packed_screen_errors(&P, x, &xq, eb, false);
        gm_packed_screen(&P, r0, r1, &xq, eb, y, b);
        gm_packed_screen_ref(&P, r0, r1, &xq, eb, yr, br);
        int off = 0;
        for (size_t i = 0; i < n + 8; i++)
            off += i < n ? !same_float(y[i], yr[i]) || !same_float(b[i], br[i]) : y[i] != -777.0f || b[i] != -777.0f;
        CHECK(off == 0, "%s N6H screen without b8n: %d values differ from the reference's", name, off);
    }
    xq_free(&xq);
    free(x), free(eb), free(y16), free(y), free(b), free(yr), free(br), free(P.data), free(w);
}

/* the int8 matmul on a column view of a wider batch equals quantizing those columns alone */
static void test_view8(const gm_packed_ops *ops, const char *name) {
    size_t rows = 37, cols = 96, wide = cols + 64, T = 7, rb;
    uint8_t *w = random_weights(GM_Q5_0, rows, cols, &rb);
    gm_packed P = pack_all((pcase){GM_Q5_0, GM_PK_N5D, NULL}, w, rb, rows, cols);
    float *x = malloc(T * wide * sizeof *x), *a = malloc(T * rows * sizeof *a), *b = malloc(T * rows * sizeof *b);
    for (size_t i = 0; i < T * wide; i++) x[i] = rnd_nonzero();
    gm_xq full, part;
    xq_alloc_both(&full, T, wide);
    xq_alloc_both(&part, T, cols);
    gm_quantize_x_ref(x, wide, T, wide, &full);
    ops->quantize_x8(x, wide, T, wide, &full);
    gm_quantize_x_ref(x + 32, wide, T, cols, &part);
    ops->quantize_x8(x + 32, wide, T, cols, &part);
    gm_xq view = full;
    view.b8 += 96, view.e8 += 1, view.s8 += GM_X8_SUMS, view.cols = cols;
    ops->matmul8(&P, 0, rows, &view, T, a, rows);
    ops->matmul8(&P, 0, rows, &part, T, b, rows);
    CHECK(memcmp(a, b, T * rows * sizeof *a) == 0, "%s: int8 matmul on a column view gives other outputs", name);
    /* a NaN input gives NaN rows for that input only; a zero input zeros */
    for (size_t c = 0; c < cols; c++) x[c] = 0.0f;
    x[wide + 5] = NAN;
    gm_quantize_x_ref(x, wide, T, cols, &part);
    ops->quantize_x8(x, wide, T, cols, &part);
    ops->matmul8(&P, 0, rows, &part, T, a, rows);
    int wrong = 0;
    for (size_t r = 0; r < rows; r++) wrong += a[r] != 0.0f || !isnan(a[rows + r]) || isnan(a[2 * rows + r]);
    CHECK(wrong == 0, "%s: int8 matmul with a zero and a NaN input: %d rows wrong", name, wrong);
    xq_free(&full);
    xq_free(&part);
    free(x);
    free(a);
    free(b);
    free(P.data);
    free(w);
}

/* a column view (ldq, ldd > cols) of a wider quantized batch gives the same outputs, bit for bit, as
 * quantizing those columns alone */
static void test_view(const gm_packed_ops *ops, const char *name) {
    size_t rows = 37, cols = 96, wide = cols + 64, T = 6, rb;
    uint8_t *w = random_weights(GM_Q5_1, rows, cols, &rb);
    gm_packed P = pack_all(of_type(GM_Q5_1), w, rb, rows, cols);
    float *x = malloc(T * wide * sizeof *x), *a = malloc(T * rows * sizeof *a), *b = malloc(T * rows * sizeof *b);
    for (size_t i = 0; i < T * wide; i++) x[i] = rnd_nonzero();
    gm_xq full, part;
    xq_alloc(&full, T, wide);
    xq_alloc(&part, T, cols);
    ops->quantize_x(x, wide, T, wide, &full);
    ops->quantize_x(x + 32, wide, T, cols, &part);
    gm_xq view = full;
    view.q += 32, view.q2 += 32, view.d += 1, view.s += 1, view.qs += 4, view.cols = cols;
    ops->matmul(&P, 0, rows, &view, T, a, rows);
    ops->matmul(&P, 0, rows, &part, T, b, rows);
    CHECK(memcmp(a, b, T * rows * sizeof *a) == 0, "%s: a column view of a wider batch gives other outputs", name);
    ops->matvec(&P, 0, rows, &view, a);
    ops->matvec(&P, 0, rows, &part, b);
    CHECK(memcmp(a, b, rows * sizeof *a) == 0, "%s: matvec on a column view gives other outputs", name);
    xq_free(&full);
    xq_free(&part);
    free(x);
    free(a);
    free(b);
    free(P.data);
    free(w);
}

static void test_special_inputs(const gm_packed_ops *ops, const char *name) {
    size_t rows = 16, cols = 64, rb;
    uint8_t *w = random_weights(GM_Q8_0, rows, cols, &rb);
    gm_packed P = pack_all(of_type(GM_Q8_0), w, rb, rows, cols);
    float x[64] = {0}, y[16];
    gm_xq xq;
    xq_alloc(&xq, 1, cols);
    ops->quantize_x(x, cols, 1, cols, &xq);
    ops->matvec(&P, 0, rows, &xq, y);
    int zeros = 1;
    for (size_t r = 0; r < rows; r++) zeros &= y[r] == 0.0f;
    CHECK(zeros, "%s: zero input does not give zero outputs", name);
    x[40] = NAN;
    ops->quantize_x(x, cols, 1, cols, &xq);
    ops->matvec(&P, 0, rows, &xq, y);
    int nans = 1;
    for (size_t r = 0; r < rows; r++) nans &= isnan(y[r]);
    CHECK(nans, "%s: a NaN input does not give NaN outputs", name);
    xq_free(&xq);
    free(P.data);
    free(w);
}

/* The screened product (gm_packed_screen; GM_PK_D16: Q8_0, Q4_0, Q5_0 as 8-bit tiles; Q6_K as the kernels
 * pack it, N6C or N6): y matches the f64 reference; every row's bound holds against the exact matvec's
 * value of that row (the path's own gm_packed_matvec, which the engine recomputes candidates with); rows
 * outside [r0, r1) are not written.
 * `worst`: every code at its largest magnitude and x just under half a step past a rounding point in
 * every column, so all of x's rounding errors push the product the same way: the bound must hold there
 * and be within 1.1x of the error (a loose bound would send too many rows to the exact product). */
static void test_screen(const gm_packed_ops *ops, const char *name, pcase pc, size_t rows, size_t cols, bool worst) {
    const char *tn = cname(pc);
    size_t rb;
    uint8_t *w = random_weights(pc.t, rows, cols, &rb);
    const gm_dtype_info *di = gm_dtype_get(pc.t);
    /* worst: codes Q8_0 -128, Q4_0 / Q5_0 / Q6_K 0 (q - 8 = -8, q - 16 = -16, q - 32 = -32: the high bits
     * cleared); one scale everywhere (Q6_K's 16-column scales all 1): no block's error offsets another's */
    uint16_t h = gm_f32_to_f16(0.015625f);
    for (size_t b = 0; worst && b < rows * rb / di->bytes; b++) {
        uint8_t *blk = w + b * di->bytes;
        if (pc.t == GM_Q6_K) { /* ql[128], qh[64], i8 scales[16], f16 d */
            memset(blk, 0, 192);
            memset(blk + 192, 1, 16);
            memcpy(blk + 208, &h, 2);
            continue;
        }
        memcpy(blk, &h, 2);
        memset(blk + 2, pc.t == GM_Q8_0 ? 0x80 : 0, di->bytes - 2);
    }
    gm_packed P = pack_all(pc, w, rb, rows, cols);
    float *x = malloc(cols * sizeof *x);
    for (size_t c = 0; c < cols; c++) {
        float step = ldexpf(1.0f, -(int)(c / 32 % 5)) / 127.0f; /* e8 of the block: its largest is 127 steps */
        x[c] = !worst ? rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 8) - 4)
               : c % 32 == 0 ? -127.0f * step : -(float)(rnd() % 120 + 3) * step - 0.4999f * step;
    }
    gm_xq xq;
    xq_alloc_both(&xq, 1, cols);
    gm_quantize_x_ref(x, cols, 1, cols, &xq);
    gm_quantize_x8_ref(x, cols, 1, cols, &xq);
    size_t r0 = rows > 20 ? 3 : 0, r1 = rows > 40 ? rows - 7 : rows, n = r1 - r0;
    float *y = malloc((n + 8) * sizeof *y), *b = malloc((n + 8) * sizeof *b), *yr = malloc(n * sizeof *yr);
    float *br = malloc(n * sizeof *br), *exact = malloc(n * sizeof *exact), *eb = malloc(cols / 32 * sizeof *eb);
    for (size_t i = 0; i < n + 8; i++) y[i] = b[i] = -777.0f;
    gm_packed_screen_errors(&P, x, &xq, eb, false);
    ops->screen(&P, r0, r1, &xq, eb, y, b);
    gm_packed_screen_ref(&P, r0, r1, &xq, eb, yr, br);
    ops->matvec(&P, r0, r1, &xq, exact);
    int bad = 0, loose = 0, off = 0;
    double worst_ratio = 1e30;
    for (size_t i = 0; i < n + 8; i++) {
        if (i >= n) {
            off += y[i] != -777.0f || b[i] != -777.0f;
            continue;
        }
        double err = fabs((double)y[i] - exact[i]), mag = abs_dot(&P, r0 + i, &xq, 0);
        if (!(fabs((double)y[i] - yr[i]) <= 1e-6 * mag + 1e-30 && fabs((double)b[i] - br[i]) <= 1e-6 * br[i]) && bad++ < 3)
            fprintf(stderr, "  %s screen %s row %zu: y %.9g bound %.9g, reference %.9g %.9g\n", name, tn, r0 + i, y[i], b[i],
                    yr[i], br[i]);
        if (!(err <= b[i]) && loose++ < 3)
            fprintf(stderr, "  %s screen %s row %zu: |y - exact| %.9g over the bound %.9g\n", name, tn, r0 + i, err, b[i]);
        if (err / b[i] < worst_ratio) worst_ratio = err / b[i];
    }
    CHECK(bad == 0, "%s screen %s %zux%zu: %d rows differ from the reference", name, tn, rows, cols, bad);
    CHECK(loose == 0, "%s screen %s %zux%zu%s: %d rows outside their bound", name, tn, rows, cols, worst ? " (worst case)" : "",
          loose);
    CHECK(off == 0, "%s screen %s: %d values written outside rows [%zu, %zu)", name, tn, off, r0, r1);
    if (worst)
        CHECK(worst_ratio >= 0.9, "%s screen %s %zux%zu: the worst case's error is only %.3f of the bound", name, tn, rows, cols,
              worst_ratio);
    xq_free(&xq);
    free(x), free(y), free(b), free(yr), free(br), free(exact), free(eb), free(P.data), free(w);
}

/* The screening copy of a BF16 matrix (gm_pack_screen_copy): each value within half its row's scale of the
 * BF16 one, the scale at least max |w| / 127, and the screen on the copy within its bound (eb with `copy`)
 * of the exact BF16 product. In the worst case (every value but each block's largest half a code step from
 * its code, rounded the same way, against positive inputs exact in int8) the error reaches 0.9 of the bound:
 * the copy's term is what holds it, and it is not loose. A non-finite value: no copy. */
static void test_screen_copy(const gm_packed_ops *ops, const char *name, size_t rows, size_t cols, bool worst) {
    size_t rb;
    uint8_t *w = random_weights(GM_BF16, rows, cols, &rb);
    for (size_t i = 0; worst && i < rows * cols; i++) { /* d = 2^-6: 127 d first, then (2k + 0.5) d, k < 63 */
        float v = i % 32 == 0 ? 127.0f / 64 : (2.0f * (float)(rnd() % 63) + 0.5f) / 64;
        uint16_t h = gm_f32_to_bf16(v);
        memcpy(w + 2 * i, &h, 2);
    }
    gm_packed P = pack_all(of_type(GM_BF16), w, rb, rows, cols), C;
    gm_pack_describe_as(GM_PK_D16, GM_Q8_0, rows, cols, &C);
    C.data = aligned_alloc(64, (gm_packed_size(&C) + 63) / 64 * 64);
    bool made = gm_pack_screen_copy(&P, &C, 0, rows);
    int far = 0;
    float *wr = malloc(cols * sizeof *wr), *wc = malloc(cols * sizeof *wc);
    for (size_t r = 0; r < rows && made; r++) {
        gm_packed_row(&P, r, wr);
        gm_packed_row(&C, r, wc);
        const uint8_t *panel = C.data + r / 16 * C.panel_bytes;
        for (size_t c = 0; c < cols; c++) {
            float d = gm_f16_to_f32(gm_kernels_le16(panel + c / 32 * C.tile_bytes + 512 + 2 * (r % 16))), amax = 0;
            for (size_t k = c / 32 * 32; k < c / 32 * 32 + 32; k++) amax = fmaxf(amax, fabsf(wr[k]));
            far += !(fabsf(wr[c] - wc[c]) <= 0.5f * d * (1.0f + 0x1p-12f)) || !(d * 127.0f >= amax);
        }
    }
    CHECK(made && far == 0, "%s screening copy %zux%zu: %d values further than half a scale (made: %d)", name, rows,
          cols, far, made);
    float *x = malloc(cols * sizeof *x);
    for (size_t c = 0; c < cols; c++) x[c] = worst ? 1.0f : rnd_nonzero() * ldexpf(1.0f, (int)(rnd() % 8) - 4);
    gm_xq xq;
    xq_alloc_both(&xq, 1, cols);
    gm_quantize_x8_ref(x, cols, 1, cols, &xq);
    float *y = malloc(rows * sizeof *y), *b = malloc(rows * sizeof *b), *eb = malloc(cols / 32 * sizeof *eb);
    gm_packed_screen_errors(&C, x, &xq, eb, true);
    ops->screen(&C, 0, rows, &xq, eb, y, b);
    int loose = 0;
    double worst_ratio = 1e30;
    for (size_t r = 0; r < rows; r++) {
        gm_packed_row(&P, r, wr);
        double exact = 0;
        for (size_t c = 0; c < cols; c++) exact += (double)wr[c] * x[c];
        double err = fabs((double)y[r] - exact);
        if (!(err <= b[r]) && loose++ < 3)
            fprintf(stderr, "  %s screening copy row %zu: |y - exact| %.9g over the bound %.9g\n", name, r, err, b[r]);
        if (err / b[r] < worst_ratio) worst_ratio = err / b[r];
    }
    CHECK(loose == 0, "%s screening copy %zux%zu%s: %d rows outside their bound", name, rows, cols,
          worst ? " (worst case)" : "", loose);
    if (worst)
        CHECK(worst_ratio >= 0.9, "%s screening copy %zux%zu: the worst case's error is only %.3f of the bound", name,
              rows, cols, worst_ratio);
    const float odd[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        uint16_t h = gm_f32_to_bf16(odd[k]);
        memcpy(w + rb * (rows - 1) + 2 * (cols - 1 - 40 * (size_t)k), &h, 2);
        gm_pack_rows(&P, w, rb, 0, rows);
        CHECK(!gm_pack_screen_copy(&P, &C, 0, rows), "%s screening copy: a value %g gave a copy", name, odd[k]);
    }
    xq_free(&xq);
    free(x), free(y), free(b), free(eb), free(wr), free(wc), free(P.data), free(C.data), free(w);
}

/* The decode prefetch's leads (gm_lead, packed.h), stepped as the kernels step them from each panel's
 * start, stand where the direct formula puts them: unit u of the stream lies in panel u / per, at u % per,
 * for leads shorter and longer than a panel and steps that cross panels. */
static void test_leads(void) {
    static const size_t aheads[] = {0, 64, 500, 3072, 8192, 40000};
    const gm_pack_kind kinds[] = {GM_PK_N4K, GM_PK_N6};
    const gm_dtype types[] = {GM_Q4_K, GM_Q6_K};
    for (int k = 0; k < 2; k++)
        for (size_t cols = 256; cols <= 2560; cols += 2304) {
            gm_packed P;
            gm_pack_describe_as(kinds[k], types[k], 80, cols, &P);
            P.data = (uint8_t *)(uintptr_t)4096; /* addresses only: nothing is read */
            const size_t tiles = cols / 32, tb = P.tile_bytes, codes = tiles * tb;
            for (size_t ai = 0; ai < sizeof aheads / sizeof aheads[0]; ai++)
                for (size_t step = 1; step <= 2; step++) /* tiles per step: AVX2 and int8 kernels 1, AVX-512 2 */
                    for (size_t p = 0; p < 5; p++) {
                        const uint8_t *panel = P.data + p * P.panel_bytes;
                        gm_lead c = gm_lead_start(&P, panel, codes, aheads[ai]);
                        gm_lead t = gm_lead_start(&P, panel, tiles, aheads[ai] / tb);
                        for (size_t b = 0; b < tiles; b += step) {
                            size_t ut = p * tiles + b + aheads[ai] / tb;
                            CHECK(t.panel == P.data + ut / tiles * P.panel_bytes && t.at == ut % tiles,
                                  "kind %d, %zu columns, lead %zu: the scales' lead at tile %zu of panel %zu",
                                  (int)kinds[k], cols, aheads[ai], b, p);
                            for (size_t l = 0; l < step * tb; l += 64) {
                                size_t u = p * codes + b * tb + l + aheads[ai];
                                CHECK(c.panel == P.data + u / codes * P.panel_bytes && c.at == u % codes,
                                      "kind %d, %zu columns, lead %zu: the codes' lead at byte %zu of tile %zu, "
                                      "panel %zu", (int)kinds[k], cols, aheads[ai], l, b, p);
                                gm_lead_step(&c, &P, codes, 64);
                            }
                            gm_lead_step(&t, &P, tiles, step);
                        }
                    }
        }
}

int main(void) {
    static const size_t rows_list[] = {1, 16, 37, 70};
    for (size_t ci = 0; ci < N_CASES; ci++) {
        gm_dtype t = cases[ci].t;
        size_t blk = gm_dtype_get(t)->block == 1 ? 32 : gm_dtype_get(t)->block;
        test_pack_lossless(cases[ci], 37, blk == 256 ? 512 : 96);
        test_pack_lossless(cases[ci], 64, blk == 256 ? 256 : 640);
        CHECK(gm_packed_bytes(t, 16, blk + 32) == 0 || blk == 32, "%s: a partial block must not pack", gm_dtype_get(t)->name);
    }
    CHECK(gm_packed_bytes(GM_F32, 16, 64) == 0 && gm_packed_bytes(GM_F16, 16, 64) == 0, "F32 / F16 are not packed");
    CHECK(gm_packed_bytes(GM_BF16, 16, 48) == 0, "BF16 with columns not a multiple of 32 is not packed");
    /* Q5_0 packs as 8-bit tiles exactly where the AVX2 kernels are the chosen ones, Q5_0 and Q4_K in row form
     * where AVX-512 VNNI's (not AMX's) are */
    bool avx2 = gm_packed_ops_chosen() == gm_packed_lookup("avx2");
    bool avx512 = gm_packed_lookup("avx512") && gm_packed_ops_chosen() == gm_packed_lookup("avx512");
    CHECK(gm_pack_kind_of(GM_Q5_0) == (avx2 ? GM_PK_D16 : avx512 ? GM_PK_N5R : GM_PK_N5D),
          "Q5_0 packs as kind %d on %s kernels", (int)gm_pack_kind_of(GM_Q5_0),
          avx2 ? "AVX2" : avx512 ? "AVX-512" : "other");
    CHECK(gm_pack_kind_of(GM_Q4_K) == (avx512 ? GM_PK_N4R : GM_PK_N4K), "Q4_K packs as kind %d on %s kernels",
          (int)gm_pack_kind_of(GM_Q4_K), avx512 ? "AVX-512" : "other");
    const char *int16_env = getenv("GM_INT16_MATMUL"); /* gm_packed_int8_matmul's switch */
    bool decode8 = avx512 && !(int16_env && *int16_env == '1');
    CHECK(gm_packed_decode_int8(GM_PK_N5R) == decode8 && gm_packed_decode_int8(GM_PK_N4R) == decode8 &&
              gm_packed_decode_int8(GM_PK_N6H) == decode8 && !gm_packed_decode_int8(GM_PK_N5D) &&
              !gm_packed_decode_int8(GM_PK_N4K) && !gm_packed_decode_int8(GM_PK_N6) &&
              !gm_packed_decode_int8(GM_PK_D16),
          "gm_packed_decode_int8: the row-form kinds' single-token products read the int8 terms on AVX-512 alone");
    static const gm_pack_kind row_kinds[] = {GM_PK_N5R, GM_PK_N4R, GM_PK_N6H};
    for (int k = 0; k < 3; k++) {
        gm_pack_kind rk = row_kinds[k];
        CHECK(gm_packed_ops_handles(gm_packed_lookup("scalar"), rk) &&
                  (!gm_packed_lookup("avx512") || gm_packed_ops_handles(gm_packed_lookup("avx512"), rk)) &&
                  (!gm_packed_lookup("avx2") || !gm_packed_ops_handles(gm_packed_lookup("avx2"), rk)) &&
                  (!gm_packed_lookup("amx") || !gm_packed_ops_handles(gm_packed_lookup("amx"), rk)),
              "gm_packed_ops_handles: row-form kind %d on the reference and AVX-512 VNNI alone", (int)rk);
    }
    CHECK(gm_packed_bytes(GM_Q5_0, 16, 64) == (avx2 ? 2 * 544u : 2 * 352u), "Q5_0 16 x 64 packs to %zu bytes",
          gm_packed_bytes(GM_Q5_0, 16, 64));
    /* Q4_K and Q6_K keep the file's compact scales (packed.h): 16 rows x 256 columns are 2304 / 3360 bytes
     * in a GGUF; packed, 8 tiles of codes, 8 x 32 bytes of scale codes, one f16 record, 64-byte padding */
    CHECK(gm_packed_bytes(GM_Q4_K, 16, 256) == 8 * 256 + 256 + 64 && gm_packed_bytes(GM_Q6_K, 16, 256) == 3392 &&
              gm_packed_bytes(GM_Q6_K, 16, 512) == 16 * 384 + 512 + 64 && gm_packed_bytes(GM_Q4_K, 17, 512) == 2 * 4736,
          "K-quant packed sizes: Q4_K %zu, Q6_K %zu / %zu", gm_packed_bytes(GM_Q4_K, 16, 256),
          gm_packed_bytes(GM_Q6_K, 16, 256), gm_packed_bytes(GM_Q6_K, 16, 512));
    /* and Q6_K keeps its high bits in 2-bit crumbs there (GM_PK_N6C), in row form by halves on AVX-512 VNNI,
     * in row form elsewhere */
    CHECK(gm_pack_kind_of(GM_Q6_K) == (avx2 ? GM_PK_N6C : avx512 ? GM_PK_N6H : GM_PK_N6),
          "Q6_K packs as kind %d on %s kernels", (int)gm_pack_kind_of(GM_Q6_K),
          avx2 ? "AVX2" : avx512 ? "AVX-512" : "other");
    CHECK(gm_packed_ops_handles(gm_packed_lookup("scalar"), GM_PK_N6C) &&
              gm_packed_ops_handles(gm_packed_lookup("scalar"), GM_PK_N6) &&
              gm_packed_ops_handles(gm_packed_ops_chosen(), gm_pack_kind_of(GM_Q6_K)) &&
              (!gm_packed_lookup("avx512") || !gm_packed_ops_handles(gm_packed_lookup("avx512"), GM_PK_N6C)) &&
              (!gm_packed_lookup("avx2") || !gm_packed_ops_handles(gm_packed_lookup("avx2"), GM_PK_N6)),
          "gm_packed_ops_handles: each Q6_K kind on the reference and on the kernels that pack it alone");
    CHECK(gm_pack_kind_of(GM_Q8_0) == GM_PK_D16 && gm_pack_kind_of(GM_Q4_1) == GM_PK_N4SM,
          "the other types keep their kinds");
    CHECK(gm_pack_kind_holds(GM_PK_D16, GM_Q5_0) && gm_pack_kind_holds(GM_PK_N5D, GM_Q5_0) &&
              gm_pack_kind_holds(GM_PK_N5R, GM_Q5_0) && !gm_pack_kind_holds(GM_PK_N5R, GM_Q8_0) &&
              !gm_pack_kind_holds(GM_PK_N5D, GM_Q8_0) && !gm_pack_kind_holds(GM_PK_D16, GM_Q4_K) &&
              !gm_pack_kind_holds(GM_PK_SM32, GM_Q5_0) && !gm_pack_kind_holds(GM_PK_NONE, GM_F32) &&
              gm_pack_kind_holds(GM_PK_N6C, GM_Q6_K) && gm_pack_kind_holds(GM_PK_N6, GM_Q6_K) &&
              !gm_pack_kind_holds(GM_PK_N6C, GM_Q4_K) && gm_pack_kind_holds(GM_PK_N4R, GM_Q4_K) &&
              gm_pack_kind_holds(GM_PK_N4K, GM_Q4_K) && !gm_pack_kind_holds(GM_PK_N4R, GM_Q5_0) &&
              gm_pack_kind_holds(GM_PK_N6H, GM_Q6_K) && !gm_pack_kind_holds(GM_PK_N6H, GM_Q4_K),
          "gm_pack_kind_holds");
    gm_packed bad;
    gm_pack_describe_as(GM_PK_N5D, GM_Q8_0, 16, 64, &bad);
    CHECK(bad.kind == GM_PK_NONE && bad.tile_bytes == 0, "a kind that cannot hold the type describes nothing");
    test_quantize8();
    test_leads();
    test_row_views();
    const char *isas[] = {"scalar", "avx2", "avx512", "amx"};
    int ran = 0;
    for (int ii = 0; ii < 4; ii++) {
        const gm_packed_ops *ops = gm_packed_lookup(isas[ii]);
        if (!ops) {
            printf("%s: not supported by this CPU, skipped\n", isas[ii]);
            continue;
        }
        ran++;
        test_quantize(ops, isas[ii]);
        test_special_inputs(ops, isas[ii]);
        test_view(ops, isas[ii]);
        test_split(ops, isas[ii]);
        test_quantize8_same(ops, isas[ii]);
        if (ops->matmul8) {
            test_view8(ops, isas[ii]);
            test_n6h_without_columns(ops, isas[ii]);
            for (size_t ci = 0; ci < N_CASES; ci++) {
                size_t blk = gm_dtype_get(cases[ci].t)->block;
                for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0] && runs(ops, cases[ci]); ri++)
                    test_products8(ops, isas[ii], cases[ci], rows_list[ri], blk == 256 ? (ri & 1 ? 512 : 256) : (ri & 1 ? 96 : 640),
                                   false);
            }
            printf("%s: int8-term matmul tested\n", isas[ii]);
        }
        if (ops->matmul_f32) {
            for (size_t ci = 0; ci < N_CASES; ci++) {
                size_t blk = gm_dtype_get(cases[ci].t)->block;
                for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0] && runs(ops, cases[ci]); ri++)
                    test_products_f32(ops, isas[ii], cases[ci], rows_list[ri], blk == 256 ? (ri & 1 ? 768 : 256) : (ri & 1 ? 96 : 640));
            }
            printf("%s: f32 matmul tested\n", isas[ii]);
        }
        /* fast: the int8 products wherever they exist; the bf16 rounding where the BF16 matmul has it
         * (AVX-512 with AVX512_BF16, and the reference; AVX2 has no bf16 products, AVX-512 without
         * AVX512_BF16 (GM_NO_BF16=1 here) and AMX stay exact) */
        bool fast_bf16 = ii == 0 || (ii == 2 && gm_cpu_bf16());
        for (size_t ci = 0; ci < N_CASES; ci++) {
            gm_dtype t = cases[ci].t;
            /* Q6_K's int8 product on the kind these kernels pack it as (AVX2: N6C, AVX-512: N6) */
            bool int8 = gm_packed_ops_int8(ops, kind_of(cases[ci]), true) && runs(ops, cases[ci]);
            if (!(t == GM_BF16 ? fast_bf16 : int8)) continue;
            size_t blk = gm_dtype_get(t)->block;
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
                test_products8(ops, isas[ii], cases[ci], rows_list[ri], blk == 256 ? (ri & 1 ? 512 : 256) : (ri & 1 ? 96 : 640),
                               true);
        }
        if (ops->screen) {
            /* Q6_K in each kind these kernels screen: the one they pack it as, and N6 (AMX's) where they read it */
            const pcase sc[] = {of_type(GM_Q8_0), of_type(GM_Q4_0), {GM_Q5_0, GM_PK_D16, "Q5_0 as D16"},
                                {GM_Q6_K, GM_PK_N6C, "Q6_K as N6C"}, {GM_Q6_K, GM_PK_N6H, "Q6_K as N6H"},
                                {GM_Q6_K, GM_PK_N6, "Q6_K as N6"}};
            for (int ci = 0; ci < 6; ci++) {
                if (sc[ci].t == GM_Q6_K && (!runs(ops, sc[ci]) || (ops->q6_k_as_n6c != (sc[ci].k == GM_PK_N6C))))
                    continue;
                for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
                    size_t cols = sc[ci].t == GM_Q6_K ? (ri & 1 ? 256 : 1280) : ri & 1 ? 96 : 1152;
                    test_screen(ops, isas[ii], sc[ci], rows_list[ri], cols, false);
                    test_screen(ops, isas[ii], sc[ci], rows_list[ri], cols, true);
                }
            }
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
                test_screen_copy(ops, isas[ii], rows_list[ri], ri & 1 ? 96 : 1152, false);
                test_screen_copy(ops, isas[ii], rows_list[ri], ri & 1 ? 96 : 1152, true);
            }
            printf("%s: screened product tested\n", isas[ii]);
        }
        for (size_t ci = 0; ci < N_CASES; ci++) {
            size_t blk = gm_dtype_get(cases[ci].t)->block;
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0] && runs(ops, cases[ci]); ri++)
                test_products(ops, isas[ii], cases[ci], rows_list[ri], blk == 256 ? (ri & 1 ? 512 : 256) : (ri & 1 ? 96 : 640));
        }
    }
    /* AMX's quantized matmul walks panels in groups of 16 and tokens in passes of 128: 19 panels (a group and a
     * short one of 3, ending in a lone panel) and 150 tokens (a second, partial pass) */
    const gm_packed_ops *amx = gm_packed_lookup("amx");
    if (amx) {
        static const size_t Tbig[] = {150};
        const pcase big[] = {of_type(GM_Q4_K), of_type(GM_Q6_K), of_type(GM_Q8_0)};
        for (int ci = 0; ci < 3; ci++) test_products_T(amx, "amx", big[ci], 300, 256, Tbig, 1);
        printf("amx: panel groups and token passes tested\n");
    }
    printf("packed paths tested: %d\n", ran);
    return gm_test_finish();
}
