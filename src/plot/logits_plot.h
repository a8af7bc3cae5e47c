/* The seed's tokenizer.plot_logits (a bar chart of the top 30 token probabilities) as a PNG (cairo)
 * and as terminal text; public entry points in gemma.h. */
#ifndef GM_PLOT_LOGITS_PLOT_H
#define GM_PLOT_LOGITS_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "gemma.h"

#define GM_PLOT_MAX_BARS 30
#define GM_PLOT_WIDTH 1200  /* PNG size in pixels */
#define GM_PLOT_HEIGHT 720
#define GM_PLOT_BAR_RGB 0x636EFAu /* plotly's first trace colour, as px.bar draws it */
#define GM_PLOT_DEFAULT_TITLE "Probability Distribution of Tokens"

typedef struct gm_plot_bar {
    int32_t id;
    double prob;
    char label[160]; /* gm_token_repr of the label, or "#id" */
} gm_plot_bar;

/* Checks the inputs (ids and probs non-NULL, n > 0, each prob finite and in [0, 1]) and keeps the
 * GM_PLOT_MAX_BARS most probable entries, descending (equal probabilities keep input order).
 * bars has room for GM_PLOT_MAX_BARS. */
gm_status gm_plot_select(const int32_t *ids, const char *const *labels, const double *probs, size_t n,
                         gm_plot_bar *bars, size_t *n_bars);

/* Terminal columns of UTF-8 text: 2 for East Asian wide characters and emoji, 1 otherwise. */
size_t gm_plot_columns(const char *s);
/* Copy s into out[cap], cut to at most max_cols columns with a trailing "…" when cut. */
void gm_plot_short_label(const char *s, size_t max_cols, char *out, size_t cap);

#endif
