#include "model/vocab_screen.h"

#include <math.h>

/* heap[0 .. m) a min-heap: sift heap[i] down */
static void sift_down(double *heap, int m, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, s = i;
        if (l < m && heap[l] < heap[s]) s = l;
        if (r < m && heap[r] < heap[s]) s = r;
        if (s == i) return;
        double t = heap[i];
        heap[i] = heap[s];
        heap[s] = t;
        i = s;
    }
}

double gm_screen_threshold(const float *y, const float *bound, size_t n, int top, double *heap) {
    if (top < 1 || n < (size_t)top) return -INFINITY;
    /* the first `top` values make the heap; each later one larger than its root replaces the root */
    for (int i = 0; i < top; i++) heap[i] = (double)y[i] - (double)bound[i];
    for (int i = top / 2 - 1; i >= 0; i--) sift_down(heap, top, i);
    for (size_t i = (size_t)top; i < n; i++) {
        double v = (double)y[i] - (double)bound[i];
        if (v > heap[0]) {
            heap[0] = v;
            sift_down(heap, top, 0);
        }
    }
    /* NaN lower bounds never enter, and a NaN root would only lower the threshold: more rows exact */
    return heap[0] == heap[0] ? heap[0] : -INFINITY;
}

size_t gm_screen_recompute(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y, const float *bound,
                           double tau) {
    size_t done = 0;
    for (size_t p = r0 / GM_PANEL_ROWS; p * GM_PANEL_ROWS < r1; p++) {
        size_t a = p * GM_PANEL_ROWS < r0 ? r0 : p * GM_PANEL_ROWS;
        size_t b = (p + 1) * GM_PANEL_ROWS < r1 ? (p + 1) * GM_PANEL_ROWS : r1;
        bool reach = false;
        /* !(upper < tau): a NaN value or bound counts as reaching, so it is recomputed */
        for (size_t r = a; r < b; r++) reach |= !((double)y[r - r0] + (double)bound[r - r0] < tau);
        if (!reach) continue;
        gm_packed_matvec(P, a, b, xq, y + (a - r0));
        done += b - a;
    }
    return done;
}
