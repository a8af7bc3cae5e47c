/* Terminal rendering of the top token probabilities: "  ' Mary'  0.1234 ██████". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "plot/logits_plot.h"

#define LABEL_MAX_COLS 32 /* longer token labels are cut with an ellipsis */

gm_status gm_plot_logits_text(const int32_t *ids, const char *const *labels, const double *probs, size_t n,
                              int bar_width, char **text) {
    if (!text) return gm_fail(GM_ERR_ARG, "gm_plot_logits_text: text is NULL");
    *text = NULL;
    if (bar_width < 1 || bar_width > 1000) return gm_fail(GM_ERR_ARG, "bar_width must be in [1, 1000] (got %d)", bar_width);
    gm_plot_bar bars[GM_PLOT_MAX_BARS];
    size_t nb = 0;
    GM_TRY(gm_plot_select(ids, labels, probs, n, bars, &nb));
    size_t width = 0;
    for (size_t j = 0; j < nb; j++) {
        char cut[sizeof bars[j].label];
        gm_plot_short_label(bars[j].label, LABEL_MAX_COLS, cut, sizeof cut);
        memcpy(bars[j].label, cut, sizeof cut);
        size_t w = gm_plot_columns(bars[j].label);
        if (w > width) width = w;
    }
    /* Per line: 2 + label bytes + padding + "  0.1234 " + bar (3 bytes per block) + newline. */
    size_t cap = nb * (2 + sizeof bars[0].label + width + 16 + 3 * (size_t)bar_width + 2) + 1;
    char *out = malloc(cap);
    if (!out) return gm_fail(GM_ERR_NOMEM, "gm_plot_logits_text: %zu bytes", cap);
    /* Eighth blocks: index k draws k/8 of a column. */
    static const char *const eighths[9] = {"", "\u258F", "\u258E", "\u258D", "\u258C", "\u258B", "\u258A", "\u2589", "\u2588"};
    size_t at = 0;
    double top = bars[0].prob;
    for (size_t j = 0; j < nb; j++) {
        at += (size_t)snprintf(out + at, cap - at, "  %s%*s  %.4f ", bars[j].label,
                               (int)(width - gm_plot_columns(bars[j].label)), "", bars[j].prob);
        long units = top > 0 ? (long)(bars[j].prob / top * bar_width * 8 + 0.5) : 0;
        for (long u = units; u > 0; u -= 8) at += (size_t)snprintf(out + at, cap - at, "%s", eighths[u >= 8 ? 8 : u]);
        out[at++] = '\n';
    }
    out[at] = 0;
    *text = out;
    return GM_OK;
}
