/* Every SIMD kernel path this CPU runs against the scalar reference, on random weights of every
 * type and random non-zero inputs: dequantization bit for bit, matvec and matmul (several input
 * counts, odd row counts, row strides with padding, column counts that cross the matmul's K chunk)
 * within 1e-5 relative to sum |w_i x_i|, and no writes outside the outputs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "test_util.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* uniform in [-1, 1), never exactly 0 */
static float rnd_nonzero(void) {
    float f = ((float)(rnd() & 0xffffff) + 0.5f) / 8388608.0f - 1.0f;
    return f;
}

/* f16 scale fields (byte offsets in a block) of each quantized type */
static int scale_fields(gm_dtype t, int off[2]) {
    switch (t) {
    case GM_Q4_0: case GM_Q5_0: case GM_Q8_0: off[0] = 0; return 1;
    case GM_Q4_1: case GM_Q5_1: case GM_Q4_K: case GM_Q5_K: off[0] = 0; off[1] = 2; return 2;
    case GM_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* rows x cols weights, rows `rb` bytes apart (rb >= the packed row size; padding is random too).
 * sane: scale fields hold moderate f16 values (otherwise they are random bits, NaN/inf included). */
static uint8_t *random_weights(gm_dtype t, size_t rows, size_t cols, size_t rb, int sane) {
    uint8_t *w = malloc(rows * rb);
    for (size_t i = 0; i < rows * rb; i++) w[i] = (uint8_t)rnd();
    const gm_dtype_info *di = gm_dtype_get(t);
    for (size_t r = 0; r < rows; r++) {
        uint8_t *row = w + r * rb;
        if (t == GM_F32 || t == GM_F16 || t == GM_BF16) {
            for (size_t c = 0; c < cols; c++) {
                float v = rnd_nonzero() * 2.0f;
                if (t == GM_F32) memcpy(row + 4 * c, &v, 4);
                else {
                    uint16_t h = t == GM_F16 ? gm_f32_to_f16(v) : gm_f32_to_bf16(v);
                    memcpy(row + 2 * c, &h, 2);
                }
            }
            continue;
        }
        if (!sane) continue;
        int off[2], n = scale_fields(t, off);
        for (size_t b = 0; b < cols / di->block; b++)
            for (int j = 0; j < n; j++) {
                float s = ldexpf(1.0f + (float)(rnd() & 1023) / 1024.0f, -(int)(rnd() % 10) - 4);
                uint16_t h = gm_f32_to_f16(rnd() & 7 ? s : -s);
                memcpy(row + b * di->bytes + off[j], &h, 2);
            }
    }
    return w;
}

static int same_float(float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub || (isnan(a) && isnan(b));
}

/* sum_c |W[r][c] * x[c]|, from the reference dequantization */
static double abs_dot(gm_dtype t, const uint8_t *row, size_t cols, const float *x) {
    float *w = malloc(cols * sizeof *w);
    gm_dequant_row_ref(t, row, w, cols);
    double s = 0;
    for (size_t c = 0; c < cols; c++) s += fabs((double)w[c] * x[c]);
    free(w);
    return s;
}

static int close_enough(float got, float want, double scale) {
    return isfinite(got) && fabs((double)got - want) <= 1e-5 * scale + 1e-30;
}

static void test_dequant(const gm_kernel_ops *ops, gm_dtype t, size_t cols) {
    for (int sane = 0; sane < 2; sane++) {
        size_t rb = gm_kernels_bytes_of(t, cols);
        uint8_t *w = random_weights(t, 1, cols, rb, sane);
        float *a = malloc((cols + 16) * sizeof *a), *b = malloc((cols + 16) * sizeof *b);
        for (size_t i = 0; i < cols + 16; i++) a[i] = b[i] = -777.0f;
        gm_dequant_row_ref(t, w, a, cols);
        ops->dequant_row(t, w, b, cols);
        int bad = 0;
        for (size_t i = 0; i < cols + 16; i++) bad += !same_float(a[i], b[i]);
        CHECK(bad == 0, "%s dequant %s cols %zu (%s scales): %d values differ from the reference", ops->name,
              gm_dtype_get(t)->name, cols, sane ? "sane" : "random", bad);
        free(w);
        free(a);
        free(b);
    }
}

static void test_matvec(const gm_kernel_ops *ops, gm_dtype t, size_t rows, size_t cols, size_t pad) {
    size_t rb = gm_kernels_bytes_of(t, cols) + pad;
    uint8_t *w = random_weights(t, rows, cols, rb, 1);
    float *x = malloc(cols * sizeof *x);
    for (size_t c = 0; c < cols; c++) x[c] = rnd_nonzero();
    float *ref = malloc(rows * sizeof *ref), *got = malloc((rows + 8) * sizeof *got);
    for (size_t r = 0; r < rows + 8; r++) got[r] = -777.0f;
    gm_matvec_ref(t, w, rb, rows, cols, x, ref);
    ops->matvec(t, w, rb, rows, cols, x, got);
    int bad = 0;
    for (size_t r = 0; r < rows; r++) {
        double scale = abs_dot(t, w + r * rb, cols, x);
        if (!close_enough(got[r], ref[r], scale) && bad++ < 3)
            fprintf(stderr, "  %s matvec %s row %zu: got %.9g want %.9g (sum|wx| %.6g)\n", ops->name,
                    gm_dtype_get(t)->name, r, got[r], ref[r], scale);
    }
    for (size_t r = rows; r < rows + 8; r++) bad += got[r] != -777.0f;
    CHECK(bad == 0, "%s matvec %s %zux%zu pad %zu: %d rows wrong", ops->name, gm_dtype_get(t)->name, rows, cols, pad,
          bad);
    free(w);
    free(x);
    free(ref);
    free(got);
}

static void test_matmul(const gm_kernel_ops *ops, gm_dtype t, size_t rows, size_t cols, size_t T) {
    size_t rb = gm_kernels_bytes_of(t, cols), ldy = rows + 3;
    uint8_t *w = random_weights(t, rows, cols, rb, 1);
    float *X = malloc(T * cols * sizeof *X);
    for (size_t i = 0; i < T * cols; i++) X[i] = rnd_nonzero();
    float *ref = malloc(T * ldy * sizeof *ref), *got = malloc(T * ldy * sizeof *got);
    for (size_t i = 0; i < T * ldy; i++) ref[i] = got[i] = -777.0f;
    gm_matmul_ref(t, w, rb, rows, cols, X, T, ref, ldy);
    ops->matmul(t, w, rb, rows, cols, X, T, got, ldy);
    int bad = 0;
    for (size_t tt = 0; tt < T; tt++) {
        for (size_t r = 0; r < ldy; r++) {
            size_t i = tt * ldy + r;
            if (r >= rows) {
                bad += got[i] != -777.0f;
                continue;
            }
            double scale = abs_dot(t, w + r * rb, cols, X + tt * cols);
            if (!close_enough(got[i], ref[i], scale) && bad++ < 3)
                fprintf(stderr, "  %s matmul %s t %zu row %zu: got %.9g want %.9g (sum|wx| %.6g)\n", ops->name,
                        gm_dtype_get(t)->name, tt, r, got[i], ref[i], scale);
        }
    }
    CHECK(bad == 0, "%s matmul %s %zux%zu T %zu: %d outputs wrong", ops->name, gm_dtype_get(t)->name, rows, cols, T,
          bad);
    free(w);
    free(X);
    free(ref);
    free(got);
}

/* the reference itself: matmul column t equals matvec of input t, bit for bit */
static void test_ref_consistency(gm_dtype t) {
    size_t rows = 5, cols = gm_dtype_get(t)->block == 256 ? 512 : 96, T = 3, rb = gm_kernels_bytes_of(t, cols);
    uint8_t *w = random_weights(t, rows, cols, rb, 1);
    float X[3 * 512], Y[3 * 5], y[5];
    for (size_t i = 0; i < T * cols; i++) X[i] = rnd_nonzero();
    gm_matmul_ref(t, w, rb, rows, cols, X, T, Y, rows);
    int bad = 0;
    for (size_t tt = 0; tt < T; tt++) {
        gm_matvec_ref(t, w, rb, rows, cols, X + tt * cols, y);
        for (size_t r = 0; r < rows; r++) bad += !same_float(y[r], Y[tt * rows + r]);
    }
    CHECK(bad == 0, "reference matmul and matvec disagree for %s", gm_dtype_get(t)->name);
    free(w);
}

/* empty shapes: cols = 0 gives zeros, rows = 0 or T = 0 writes nothing */
static void test_empty(const gm_kernel_ops *ops) {
    float x[4] = {1, 2, 3, 4}, y[8];
    uint8_t w[64] = {0};
    for (int i = 0; i < 8; i++) y[i] = -777.0f;
    ops->matvec(GM_F32, w, 0, 3, 0, x, y);
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == -777.0f, "%s: matvec with 0 columns", ops->name);
    for (int i = 0; i < 8; i++) y[i] = -777.0f;
    ops->matmul(GM_F32, w, 0, 3, 0, x, 2, y, 4);
    CHECK(y[0] == 0 && y[2] == 0 && y[3] == -777.0f && y[4] == 0 && y[6] == 0 && y[7] == -777.0f,
          "%s: matmul with 0 columns", ops->name);
    for (int i = 0; i < 8; i++) y[i] = -777.0f;
    ops->matvec(GM_Q8_0, w, 34, 0, 32, x, y);
    ops->matmul(GM_Q8_0, w, 34, 0, 32, x, 1, y, 1);
    ops->matmul(GM_Q8_0, w, 34, 1, 32, x, 0, y, 1);
    int untouched = 1;
    for (int i = 0; i < 8; i++) untouched &= y[i] == -777.0f;
    CHECK(untouched, "%s: 0 rows or 0 inputs wrote output", ops->name);
}

int main(void) {
    static const gm_dtype types[] = {GM_F32,  GM_F16,  GM_BF16, GM_Q4_0, GM_Q4_1, GM_Q5_0,
                                     GM_Q5_1, GM_Q8_0, GM_Q4_K, GM_Q5_K, GM_Q6_K};
    static const size_t row_counts[] = {1, 2, 3, 4, 5, 7, 13};
    static const size_t float_cols[] = {1, 5, 16, 17, 31, 33, 100, 1025, 2051};
    static const size_t q32_cols[] = {32, 64, 96, 1056, 2304};
    static const size_t qk_cols[] = {256, 512, 768, 2304};
    static const size_t Ts[] = {1, 2, 3, 4, 5, 7, 8, 17};
    const char *isas[] = {"avx2", "avx512"};
    int ran = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) test_ref_consistency(types[ti]);
    test_empty(&gm_kernels_scalar);
    for (int ii = 0; ii < 2; ii++) {
        const gm_kernel_ops *ops = gm_kernels_lookup(isas[ii]);
        if (!ops) {
            printf("%s: not supported by this CPU, skipped\n", isas[ii]);
            continue;
        }
        ran++;
        test_empty(ops);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            gm_dtype t = types[ti];
            const gm_dtype_info *di = gm_dtype_get(t);
            const size_t *cols = di->block == 1 ? float_cols : di->block == 32 ? q32_cols : qk_cols;
            size_t ncols = di->block == 1 ? 9 : di->block == 32 ? 5 : 4;
            for (size_t ci = 0; ci < ncols; ci++) {
                test_dequant(ops, t, cols[ci]);
                for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++)
                    test_matvec(ops, t, row_counts[ri], cols[ci], ri % 3 == 2 ? 64 : 0);
                for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++)
                    test_matmul(ops, t, row_counts[(ci + k) % 7], cols[ci], Ts[k]);
            }
        }
    }
    printf("SIMD paths tested: %d (dispatcher chose %s)\n", ran, gm_kernels_isa());
    return gm_test_finish();
}
