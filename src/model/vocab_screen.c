#include "model/vocab_screen.h"

#include <math.h>
#include <stdbool.h>

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

/* A min-heap of the `top` largest values offered (NaN never offered), filled as they come. */
typedef struct top_heap {
    double *v;
    int top, n;
} top_heap;

static void heap_offer(top_heap *h, double x) {
    if (h->n < h->top) {
        h->v[h->n++] = x;
        if (h->n == h->top)
            for (int i = h->top / 2 - 1; i >= 0; i--) sift_down(h->v, h->top, i);
    } else if (x > h->v[0]) {
        h->v[0] = x;
        sift_down(h->v, h->top, 0);
    }
}

double gm_screen_threshold(const float *y, const float *bound, size_t r0, size_t r1, const double *lo, int top,
                           double *heap) {
    if (top < 1 || r1 < r0 + (size_t)top) return -INFINITY;
    const size_t p0 = r0 / GM_PANEL_ROWS, p1 = (r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
    /* the top-th largest panel maximum: -inf when there are fewer panels than top */
    top_heap h = {heap, top, 0};
    for (size_t p = p0; p < p1; p++) heap_offer(&h, lo[p - p0]);
    const double t0 = h.n == top ? heap[0] : -INFINITY;
    h.n = 0;
    for (size_t p = p0; p < p1; p++) {
        if (lo[p - p0] < t0) continue; /* every row below t0, so below the answer */
        size_t s, e;
        gm_panel_rows(p, r0, r1, &s, &e);
        for (size_t r = s; r < e; r++) {
            double v = (double)y[r - r0] - (double)bound[r - r0];
            heap_offer(&h, v == v ? v : -INFINITY);
        }
    }
    return heap[0];
}

size_t gm_screen_recompute(const gm_packed *P, size_t a, size_t b, const gm_xq *xq, float *y, const double *hi,
                           double tau) {
    size_t done = 0;
    for (size_t p = a / GM_PANEL_ROWS; p * GM_PANEL_ROWS < b; p++) {
        if (hi[p - a / GM_PANEL_ROWS] < tau) continue;
        size_t s, e;
        gm_panel_rows(p, a, b, &s, &e);
        gm_packed_matvec(P, s, e, xq, y + (s - a));
        done += e - s;
    }
    return done;
}
