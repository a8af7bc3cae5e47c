/* PNG line chart of a training run with cairo (plotly-like look, as logits_plot.c): training loss per
 * step (blue line) and evaluation loss (orange line with dots), steps on x, loss on y from 0. */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"

enum { W = 1000, H = 600, X0 = 90, X1 = W - 30, Y0 = 70, Y1 = H - 80 };
#define FONT "DejaVu Sans"

static void rgb(cairo_t *cr, unsigned hex) {
    cairo_set_source_rgb(cr, ((hex >> 16) & 0xFF) / 255.0, ((hex >> 8) & 0xFF) / 255.0, (hex & 0xFF) / 255.0);
}

static double nice_step(double span, double intervals) {
    double raw = span / intervals, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double ha, double va) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - e.width * ha, y - e.y_bearing - e.height * va);
    cairo_show_text(cr, s);
}

gm_status gm_plot_loss_png(const char *path, const int64_t *steps, const double *loss, size_t n,
                           const int64_t *eval_steps, const double *eval_loss, size_t n_eval, const char *title) {
    if (!path || (n && (!steps || !loss)) || (n_eval && (!eval_steps || !eval_loss)) || n + n_eval == 0)
        return gm_fail(GM_ERR_ARG, "loss plot: nothing to draw");
    double xmax = 1, ymax = 0;
    for (size_t i = 0; i < n; i++) {
        if ((double)steps[i] > xmax) xmax = (double)steps[i];
        if (isfinite(loss[i]) && loss[i] > ymax) ymax = loss[i];
    }
    for (size_t i = 0; i < n_eval; i++) {
        if ((double)eval_steps[i] > xmax) xmax = (double)eval_steps[i];
        if (isfinite(eval_loss[i]) && eval_loss[i] > ymax) ymax = eval_loss[i];
    }
    double ys = nice_step(ymax > 0 ? ymax : 1, 6), xs = nice_step(xmax, 8);
    ymax = ceil((ymax > 0 ? ymax : 1) / ys) * ys;
    xmax = ceil(xmax / xs) * xs;
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *cr = cairo_create(surf);
    rgb(cr, 0xFFFFFF);
    cairo_paint(cr);
    rgb(cr, 0xE5ECF6);
    cairo_rectangle(cr, X0, Y0, X1 - X0, Y1 - Y0);
    cairo_fill(cr);
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 14);
    cairo_set_line_width(cr, 1.0);
#define PX(s) (X0 + (double)(s) / xmax * (X1 - X0))
#define PY(v) (Y1 - (v) / ymax * (Y1 - Y0))
    char lab[32];
    for (double v = 0; v <= ymax + ys * 1e-6; v += ys) {
        rgb(cr, 0xFFFFFF);
        cairo_move_to(cr, X0, floor(PY(v)) + 0.5), cairo_line_to(cr, X1, floor(PY(v)) + 0.5), cairo_stroke(cr);
        snprintf(lab, sizeof lab, ys >= 1 ? "%.0f" : ys >= 0.1 ? "%.1f" : "%.2f", v);
        rgb(cr, 0x2A3F5F);
        text_at(cr, X0 - 8, PY(v), lab, 1.0, 0.5);
    }
    for (double s = 0; s <= xmax + xs * 1e-6; s += xs) {
        rgb(cr, 0xFFFFFF);
        cairo_move_to(cr, floor(PX(s)) + 0.5, Y0), cairo_line_to(cr, floor(PX(s)) + 0.5, Y1), cairo_stroke(cr);
        snprintf(lab, sizeof lab, "%.0f", s);
        rgb(cr, 0x2A3F5F);
        text_at(cr, PX(s), Y1 + 8, lab, 0.5, 0.0);
    }
    cairo_set_line_width(cr, 2.0);
    if (n) {
        rgb(cr, 0x636EFA);
        for (size_t i = 0; i < n; i++)
            if (i == 0) cairo_move_to(cr, PX(steps[i]), PY(loss[i]));
            else cairo_line_to(cr, PX(steps[i]), PY(loss[i]));
        cairo_stroke(cr);
    }
    if (n_eval) {
        rgb(cr, 0xEF553B);
        for (size_t i = 0; i < n_eval; i++)
            if (i == 0) cairo_move_to(cr, PX(eval_steps[i]), PY(eval_loss[i]));
            else cairo_line_to(cr, PX(eval_steps[i]), PY(eval_loss[i]));
        cairo_stroke(cr);
        for (size_t i = 0; i < n_eval; i++) {
            cairo_arc(cr, PX(eval_steps[i]), PY(eval_loss[i]), 5, 0, 2 * 3.14159265358979);
            cairo_fill(cr);
        }
    }
    /* legend, axis titles, title */
    cairo_set_font_size(cr, 15);
    double lx = X1 - 230, ly = Y0 + 20;
    if (n) {
        rgb(cr, 0x636EFA);
        cairo_move_to(cr, lx, ly), cairo_line_to(cr, lx + 30, ly), cairo_stroke(cr);
        rgb(cr, 0x2A3F5F);
        text_at(cr, lx + 40, ly, "training loss (batch)", 0, 0.5);
        ly += 24;
    }
    if (n_eval) {
        rgb(cr, 0xEF553B);
        cairo_move_to(cr, lx, ly), cairo_line_to(cr, lx + 30, ly), cairo_stroke(cr);
        cairo_arc(cr, lx + 15, ly, 5, 0, 2 * 3.14159265358979), cairo_fill(cr);
        rgb(cr, 0x2A3F5F);
        text_at(cr, lx + 40, ly, "evaluation loss", 0, 0.5);
    }
    cairo_set_font_size(cr, 16);
    text_at(cr, (X0 + X1) / 2.0, H - 30, "step", 0.5, 0.5);
    cairo_save(cr);
    cairo_translate(cr, 28, (Y0 + Y1) / 2.0);
    cairo_rotate(cr, -3.14159265358979 / 2);
    text_at(cr, 0, 0, "loss (mean cross-entropy, nats)", 0.5, 0.5);
    cairo_restore(cr);
    cairo_set_font_size(cr, 20);
    text_at(cr, X0, 30, title ? title : "Training loss", 0, 0.5);
#undef PX
#undef PY
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_write_to_png(surf, path);
    cairo_surface_destroy(surf);
    if (cs != CAIRO_STATUS_SUCCESS) return gm_fail(GM_ERR_IO, "%s: cannot write the PNG: %s", path, cairo_status_to_string(cs));
    return GM_OK;
}
