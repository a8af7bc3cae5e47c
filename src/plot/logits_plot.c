/* PNG bar chart of token probabilities with cairo, laid out like plotly's px.bar (which the seed
 * uses): light plot area with white grid lines, blue bars, the title top left. */
#include "plot/logits_plot.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"

/* Plot area in pixels; the bottom margin holds the rotated token labels and the axis title. */
enum { PLOT_X0 = 110, PLOT_X1 = GM_PLOT_WIDTH - 40, PLOT_Y0 = 80, PLOT_Y1 = GM_PLOT_HEIGHT - 210 };
#define LABEL_MAX_COLS 26 /* longer token labels are cut with an ellipsis */
#define FONT "DejaVu Sans"
#define PI 3.14159265358979323846

static void rgb(cairo_t *cr, unsigned hex) {
    cairo_set_source_rgb(cr, ((hex >> 16) & 0xFF) / 255.0, ((hex >> 8) & 0xFF) / 255.0, (hex & 0xFF) / 255.0);
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about 5 to 10 intervals up to top. */
static double tick_step(double top) {
    double raw = top / 6.0, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double halign, double valign) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - e.width * halign, y - e.y_bearing - e.height * valign);
    cairo_show_text(cr, s);
}

static void draw(cairo_t *cr, const gm_plot_bar *bars, size_t nb, const char *title) {
    rgb(cr, 0xFFFFFF);
    cairo_paint(cr);
    rgb(cr, 0xE5ECF6);
    cairo_rectangle(cr, PLOT_X0, PLOT_Y0, PLOT_X1 - PLOT_X0, PLOT_Y1 - PLOT_Y0);
    cairo_fill(cr);

    /* y axis: 0 .. a tick-aligned top a little above the largest bar */
    double step = tick_step(bars[0].prob > 0 ? bars[0].prob : 1.0);
    double ymax = ceil(bars[0].prob / step) * step;
    if (ymax <= 0) ymax = step;
    if (ymax < bars[0].prob * 1.04) ymax += step;
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    double scale = (PLOT_Y1 - PLOT_Y0) / ymax;
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 14);
    cairo_set_line_width(cr, 1.0);
    for (int t = 0; t * step <= ymax + step * 1e-6; t++) {
        double v = t * step, y = floor(PLOT_Y1 - v * scale) + 0.5;
        rgb(cr, 0xFFFFFF);
        cairo_move_to(cr, PLOT_X0, y);
        cairo_line_to(cr, PLOT_X1, y);
        cairo_stroke(cr);
        char tick[32];
        snprintf(tick, sizeof tick, "%.*f", decimals, v);
        rgb(cr, 0x2A3F5F);
        text_at(cr, PLOT_X0 - 8, y, tick, 1.0, 0.5);
    }

    /* bars: 80% of each slot (plotly's default gap), whole pixels so edges stay crisp */
    double slot = (double)(PLOT_X1 - PLOT_X0) / GM_PLOT_MAX_BARS;
    if (nb < 10) slot = (double)(PLOT_X1 - PLOT_X0) / 10;
    double x_start = PLOT_X0 + ((PLOT_X1 - PLOT_X0) - slot * (double)nb) / 2;
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    rgb(cr, GM_PLOT_BAR_RGB);
    for (size_t j = 0; j < nb; j++) {
        double left = round(x_start + slot * (double)j + slot * 0.1), right = round(x_start + slot * (double)(j + 1) - slot * 0.1);
        double top = round(PLOT_Y1 - bars[j].prob * scale);
        if (top < PLOT_Y1) {
            cairo_rectangle(cr, left, top, right - left, PLOT_Y1 - top);
            cairo_fill(cr);
        }
    }
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);

    /* token labels, rotated 45 degrees, ending under the bar centre */
    cairo_set_font_size(cr, 14);
    rgb(cr, 0x2A3F5F);
    for (size_t j = 0; j < nb; j++) {
        char lab[160];
        gm_plot_short_label(bars[j].label, LABEL_MAX_COLS, lab, sizeof lab);
        cairo_text_extents_t e;
        cairo_text_extents(cr, lab, &e);
        double cx = x_start + slot * ((double)j + 0.5);
        cairo_save(cr);
        cairo_translate(cr, cx + 4, PLOT_Y1 + 10);
        cairo_rotate(cr, -PI / 4);
        cairo_move_to(cr, -e.x_advance, 0);
        cairo_show_text(cr, lab);
        cairo_restore(cr);
    }

    /* axis titles and the title */
    cairo_set_font_size(cr, 16);
    text_at(cr, (PLOT_X0 + PLOT_X1) / 2.0, GM_PLOT_HEIGHT - 22, "Tokens", 0.5, 0.5);
    cairo_save(cr);
    cairo_translate(cr, 30, (PLOT_Y0 + PLOT_Y1) / 2.0);
    cairo_rotate(cr, -PI / 2);
    text_at(cr, 0, 0, "Probability", 0.5, 0.5);
    cairo_restore(cr);
    cairo_set_font_size(cr, 22);
    text_at(cr, PLOT_X0, 38, title, 0.0, 0.5);
}

gm_status gm_plot_logits_png(const char *path, const int32_t *ids, const char *const *labels, const double *probs,
                             size_t n, const char *title) {
    if (!path) return gm_fail(GM_ERR_ARG, "gm_plot_logits_png: path is NULL");
    gm_plot_bar bars[GM_PLOT_MAX_BARS];
    size_t nb = 0;
    GM_TRY(gm_plot_select(ids, labels, probs, n, bars, &nb));
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, GM_PLOT_WIDTH, GM_PLOT_HEIGHT);
    if (cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
        gm_status st = gm_fail(GM_ERR_NOMEM, "%s: cairo surface: %s", path, cairo_status_to_string(cairo_surface_status(surf)));
        cairo_surface_destroy(surf);
        return st;
    }
    cairo_t *cr = cairo_create(surf);
    draw(cr, bars, nb, title ? title : GM_PLOT_DEFAULT_TITLE);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_write_to_png(surf, path);
    cairo_surface_destroy(surf);
    if (cs != CAIRO_STATUS_SUCCESS)
        return gm_fail(cs == CAIRO_STATUS_NO_MEMORY ? GM_ERR_NOMEM : GM_ERR_IO, "%s: writing the PNG failed: %s", path,
                       cairo_status_to_string(cs));
    return GM_OK;
}
