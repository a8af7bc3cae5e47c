#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "plot/logits_plot.h"

typedef struct {
    double prob;
    size_t at;
} ranked;

static int by_prob_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->prob != y->prob) return x->prob < y->prob ? 1 : -1;
    return (x->at > y->at) - (x->at < y->at); /* stable: input order */
}

gm_status gm_plot_select(const int32_t *ids, const char *const *labels, const double *probs, size_t n,
                         gm_plot_bar *bars, size_t *n_bars) {
    *n_bars = 0;
    if (!ids || !probs) return gm_fail(GM_ERR_ARG, "logits plot: ids and probs must not be NULL");
    if (n == 0) return gm_fail(GM_ERR_ARG, "logits plot: nothing to plot (n = 0)");
    for (size_t i = 0; i < n; i++)
        if (!(probs[i] >= 0.0 && probs[i] <= 1.0))
            return gm_fail(GM_ERR_ARG, "logits plot: probs[%zu] = %g is not a probability", i, probs[i]);
    ranked *r = malloc(n * sizeof *r);
    if (!r) return gm_fail(GM_ERR_NOMEM, "logits plot: %zu entries", n);
    for (size_t i = 0; i < n; i++) r[i] = (ranked){probs[i], i};
    qsort(r, n, sizeof *r, by_prob_desc);
    size_t m = n < GM_PLOT_MAX_BARS ? n : GM_PLOT_MAX_BARS;
    for (size_t j = 0; j < m; j++) {
        size_t i = r[j].at;
        bars[j].id = ids[i];
        bars[j].prob = probs[i];
        if (labels && labels[i])
            gm_token_repr(labels[i], bars[j].label, sizeof bars[j].label);
        else
            snprintf(bars[j].label, sizeof bars[j].label, "#%d", (int)ids[i]);
    }
    free(r);
    *n_bars = m;
    return GM_OK;
}

static int is_wide(uint32_t c) {
    return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) || (c >= 0xAC00 && c <= 0xD7A3) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
           (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) || (c >= 0x1F900 && c <= 0x1F9FF) ||
           (c >= 0x20000 && c <= 0x3FFFD);
}

/* Length of the UTF-8 sequence at p and its code point (lenient: labels are already repr()-escaped). */
static size_t next_char(const unsigned char *p, uint32_t *cp) {
    size_t n = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : 2;
    uint32_t v = n == 1 ? *p : *p & (0x3F >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return i;
        }
        v = (v << 6) | (p[i] & 0x3F);
    }
    *cp = v;
    return n;
}

size_t gm_plot_columns(const char *s) {
    size_t cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp;
        p += next_char(p, &cp);
        cols += is_wide(cp) ? 2 : 1;
    }
    return cols;
}

void gm_plot_short_label(const char *s, size_t max_cols, char *out, size_t cap) {
    size_t at = 0, cols = 0, total = gm_plot_columns(s);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp;
        size_t n = next_char(p, &cp), w = is_wide(cp) ? 2 : 1;
        /* when cutting, keep one column for the ellipsis */
        if ((total > max_cols && cols + w > max_cols - 1) || at + n + 4 > cap) {
            memcpy(out + at, "\xe2\x80\xa6", 3);
            at += 3;
            break;
        }
        memcpy(out + at, p, n);
        at += n, cols += w, p += n;
    }
    out[at] = 0;
}
