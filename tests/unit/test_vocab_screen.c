/* The screen's bookkeeping (model/vocab_screen.c) against plain rules written here, on random rows with
 * ties, NaN values and NaN bounds, row ranges that start and end inside a panel, and summaries taken in
 * chunks of whole panels as the device's threads take them:
 *  - gm_screen_threshold is the top-th largest lower bound y - bound (f64, NaN as -inf) of all rows, found
 *    by sorting them all (-inf with fewer rows than top);
 *  - a panel is recomputed (its summary's upper bound reaches tau) exactly where one of its rows has
 *    !(y + bound < tau), for tau the threshold and other values;
 *  - gm_screen_recompute writes the exact matvec's values into the panels that reach tau, and nothing else. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matvec.h"
#include "kernels/ops.h"
#include "kernels/packed.h"
#include "model/vocab_screen.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* rows [r0, r1) summarized in chunks of whole panels (cut at r0, r1), `chunks` of them */
static void summarize_in_chunks(size_t r0, size_t r1, const float *y, const float *bound, double *lo, double *hi,
                                int chunks) {
    size_t p0 = r0 / GM_PANEL_ROWS, p1 = (r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
    for (int c = 0; c < chunks; c++) {
        size_t a = (p0 + (p1 - p0) * (size_t)c / (size_t)chunks) * GM_PANEL_ROWS;
        size_t b = (p0 + (p1 - p0) * (size_t)(c + 1) / (size_t)chunks) * GM_PANEL_ROWS;
        a = a < r0 ? r0 : a, b = b > r1 ? r1 : b;
        if (b <= a) continue;
        size_t pa = a / GM_PANEL_ROWS - p0;
        gm_panel_bounds(a, b, y + (a - r0), bound + (a - r0), lo + pa, hi + pa);
    }
}

static void test_threshold(size_t r0, size_t r1, int nan_every, bool ties, int chunks) {
    size_t n = r1 - r0, panels = (r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS - r0 / GM_PANEL_ROWS;
    float *y = malloc(n * sizeof *y), *bound = malloc(n * sizeof *bound);
    double *lo = malloc(panels * sizeof *lo), *hi = malloc(panels * sizeof *hi), *all = malloc(n * sizeof *all);
    double heap[GM_SCREEN_TOP_MAX];
    for (size_t i = 0; i < n; i++) {
        y[i] = ties ? (float)(rnd() % 9) : ((float)rnd() / 4294967296.0f * 40.0f - 20.0f) * (rnd() % 50 ? 1.0f : 0.01f);
        bound[i] = ties ? (float)(rnd() % 3) : (float)rnd() / 4294967296.0f * 2.0f;
        if (nan_every && rnd() % (uint32_t)nan_every == 0) {
            if (rnd() & 1) y[i] = NAN;
            else bound[i] = NAN;
        }
    }
    summarize_in_chunks(r0, r1, y, bound, lo, hi, chunks);
    for (size_t i = 0; i < n; i++) {
        double v = (double)y[i] - (double)bound[i];
        all[i] = v == v ? v : -INFINITY;
    }
    qsort(all, n, sizeof *all, cmp_desc);
    const int tops[] = {1, 2, 3, 16, 17, 64, 1024};
    for (size_t k = 0; k < sizeof tops / sizeof tops[0]; k++) {
        int top = tops[k];
        double want = (size_t)top <= n ? all[top - 1] : -INFINITY;
        double got = gm_screen_threshold(y, bound, r0, r1, lo, top, heap);
        CHECK(memcmp(&got, &want, sizeof got) == 0 || got == want,
              "rows [%zu, %zu) top %d (NaN every %d%s): threshold %.17g, the sorted rows say %.17g", r0, r1, top,
              nan_every, ties ? ", ties" : "", got, want);
        /* which panels the exact pass takes: by the summary, and by the rule over every row */
        double taus[] = {want, got, 0.5, -INFINITY, INFINITY};
        int bad = 0;
        for (size_t ti = 0; ti < sizeof taus / sizeof taus[0]; ti++)
            for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
                bool rule = false;
                for (size_t r = p * GM_PANEL_ROWS; r < (p + 1) * GM_PANEL_ROWS; r++)
                    if (r >= r0 && r < r1) rule |= !((double)y[r - r0] + (double)bound[r - r0] < taus[ti]);
                bad += rule != !(hi[p - r0 / GM_PANEL_ROWS] < taus[ti]);
            }
        CHECK(bad == 0, "rows [%zu, %zu) top %d: %d panels chosen for the exact pass against the row rule", r0, r1,
              top, bad);
    }
    free(y), free(bound), free(lo), free(hi), free(all);
}

/* gm_screen_recompute on a random Q8_0 matrix: the panels whose summary reaches tau get the matvec's values */
static void test_recompute(void) {
    const size_t rows = 100, cols = 64, rb = cols / 32 * 34, r0 = 5, r1 = 93;
    uint8_t *w = malloc(rows * rb);
    for (size_t i = 0; i < rows * rb; i++) w[i] = (uint8_t)rnd();
    for (size_t b = 0; b < rows * cols / 32; b++) {
        uint16_t h = gm_f32_to_f16(ldexpf(1.0f + (float)(rnd() % 1024) / 1024.0f, -6));
        memcpy(w + 34 * b, &h, 2);
    }
    gm_packed P;
    gm_pack_describe_as(gm_pack_kind_of(GM_Q8_0), GM_Q8_0, rows, cols, &P);
    P.data = aligned_alloc(64, (gm_packed_size(&P) + 63) / 64 * 64);
    gm_pack_rows(&P, w, rb, 0, rows);
    float x[64];
    for (int c = 0; c < 64; c++) x[c] = (float)rnd() / 4294967296.0f - 0.5f;
    gm_xq xq;
    memset(&xq, 0, sizeof xq);
    xq.q = aligned_alloc(64, 256), xq.q2 = aligned_alloc(64, 256);
    xq.d = malloc(16), xq.s = malloc(16), xq.qs = malloc(64);
    xq.xb = aligned_alloc(64, gm_xq_xb_bytes(cols)); /* where the chosen matvec reads its pairs from here */
    gm_quantize_x(x, cols, 1, cols, &xq);
    float exact[100], y[100];
    gm_packed_matvec(&P, r0, r1, &xq, exact);
    /* panels of rows [5, 93): 0 (cut), 1, ..., 5 (cut); those marked reach tau = 1 */
    const bool reach[6] = {true, false, true, false, false, true};
    double hi[6];
    for (int p = 0; p < 6; p++) hi[p] = reach[p] ? 1.0 : 0.25;
    for (size_t i = 0; i < r1 - r0; i++) y[i] = -777.0f;
    size_t done = gm_screen_recompute(&P, r0, r1, &xq, y, hi, 1.0);
    int bad = 0;
    size_t want = 0;
    for (size_t r = r0; r < r1; r++) {
        bool in = reach[r / GM_PANEL_ROWS];
        want += in;
        bad += in ? memcmp(&y[r - r0], &exact[r - r0], sizeof(float)) != 0 : y[r - r0] != -777.0f;
    }
    CHECK(bad == 0 && done == want, "recompute: %d rows wrong, %zu rows reported for %zu", bad, done, want);
    free(w), free(P.data), free(xq.q), free(xq.q2), free(xq.d), free(xq.s), free(xq.qs), free(xq.xb);
}

int main(void) {
    const size_t ranges[][2] = {{0, 16}, {0, 1}, {5, 37}, {3, 2051}, {16, 4096}, {7, 20000}, {0, 70000}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        for (int nan_every = 0; nan_every <= 40; nan_every += 20)
            for (int ties = 0; ties < 2; ties++)
                test_threshold(ranges[i][0], ranges[i][1], nan_every, ties, 1 + (int)(i % 3));
    test_threshold(0, 4096, 1, false, 2); /* every row NaN: no lower bound at all */
    test_recompute();
    return gm_test_finish();
}
