/* The logits bar chart: the PNG decodes to the expected size, its bars (counted by colour) have
 * heights proportional to the probabilities in descending order and there is text around them; the
 * terminal rendering has one sorted, labelled line per token; bad input is refused. */
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemma.h"
#include "plot/logits_plot.h"
#include "test_util.h"

#define N 40

static const char *PIECES[N] = {
    "\xe2\x96\x81" "Mary", "\xe2\x96\x81" "John", "\n", "'", "\xe2\x96\x81" "the", "\xe2\x96\x81" "a", "\"",
    "\xe2\x96\x81" "Sarah", "<0x0A>", "\xe2\x96\x81" "very\xe2\x96\x81long\xe2\x96\x81token\xe2\x96\x81label\xe2\x96\x81here",
};

static int32_t ids[N];
static double probs[N];

/* Unsorted input: entry i gets weight 0.7^rank(i) with ranks shuffled by a fixed permutation. */
static void make_probs(void) {
    double sum = 0;
    for (int i = 0; i < N; i++) {
        int rank = (i * 3) % N; /* a permutation; the labelled entries rank in the top 30 */
        ids[i] = 1000 + i;
        probs[i] = pow(0.8, rank);
        sum += probs[i];
    }
    for (int i = 0; i < N; i++) probs[i] /= sum;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static void test_png(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/gm_test_logits_%d.png", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    unlink(path);
    CHECK(gm_plot_logits_png(path, ids, PIECES, probs, N, NULL) == GM_OK, "png: %s", gm_last_error());

    FILE *f = fopen(path, "rb");
    unsigned char sig[8] = {0};
    CHECK(f && fread(sig, 1, 8, f) == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0, "PNG signature");
    if (f) fclose(f);

    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS, "decode: %s", cairo_status_to_string(cairo_surface_status(s)));
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    CHECK(w == GM_PLOT_WIDTH && h == GM_PLOT_HEIGHT, "size %dx%d", w, h);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS || w != GM_PLOT_WIDTH || h != GM_PLOT_HEIGHT) {
        cairo_surface_destroy(s);
        return;
    }
    cairo_surface_flush(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);

    /* Bar-coloured pixels per column, then runs of columns = bars (left to right). */
    int heights[64], nbars = 0, run = 0, text_px = 0;
    for (int x = 0; x < w; x++) {
        int count = 0;
        for (int y = 0; y < h; y++) {
            uint32_t px = *(const uint32_t *)(data + (size_t)y * (size_t)stride + (size_t)x * 4) & 0xFFFFFFu;
            count += px == GM_PLOT_BAR_RGB;
            /* dark text pixels (labels, ticks, titles) */
            text_px += ((px >> 16) & 0xFF) < 0x80 && ((px >> 8) & 0xFF) < 0x80 && (px & 0xFF) < 0xA0;
        }
        if (count > 0) {
            if (!run && nbars < 64) heights[nbars++] = 0;
            if (count > heights[nbars - 1]) heights[nbars - 1] = count;
            run = 1;
        } else {
            run = 0;
        }
    }
    double sorted[N];
    memcpy(sorted, probs, sizeof sorted);
    qsort(sorted, N, sizeof sorted[0], cmp_desc);
    int expect_bars = 0; /* bars at least one pixel high */
    for (int j = 0; j < GM_PLOT_MAX_BARS; j++) expect_bars += sorted[j] / sorted[0] * heights[0] >= 1.0;
    CHECK(nbars >= expect_bars - 1 && nbars <= GM_PLOT_MAX_BARS, "%d bars found, about %d expected", nbars, expect_bars);
    CHECK(heights[0] > 200, "tallest bar is %d px", heights[0]);
    for (int j = 1; j < nbars; j++) {
        double want = sorted[j] / sorted[0] * heights[0];
        CHECK(fabs(heights[j] - want) <= 2.0, "bar %d: %d px, expected %.1f (prob %.4f)", j, heights[j], want, sorted[j]);
        CHECK(heights[j] <= heights[j - 1], "bars descend: %d then %d", heights[j - 1], heights[j]);
    }
    CHECK(text_px > 3000, "only %d text pixels", text_px);
    cairo_surface_destroy(s);
    unlink(path);

    /* a single entry with probability 1 and a custom title */
    double one = 1.0;
    int32_t id = 7;
    CHECK(gm_plot_logits_png(path, &id, NULL, &one, 1, "custom") == GM_OK, "single bar: %s", gm_last_error());
    unlink(path);
}

static void test_text(void) {
    char *t = NULL;
    CHECK(gm_plot_logits_text(ids, PIECES, probs, N, 40, &t) == GM_OK && t, "text: %s", gm_last_error());
    if (!t) return;
    CHECK(strstr(t, "  ' Mary'") != NULL, "label ' Mary' in:\n%s", t);
    CHECK(strstr(t, "'\\n'") != NULL && strstr(t, "\"'\"") != NULL && strstr(t, "'\"'") != NULL, "escaped labels");
    int lines = 0; /* the loop below cuts t into lines */
    double prev = 2.0;
    for (char *line = t; *line;) {
        char *nl = strchr(line, '\n');
        CHECK(nl != NULL, "lines end with a newline");
        if (!nl) break;
        *nl = 0;
        CHECK(strncmp(line, "  ", 2) == 0, "indented: %s", line);
        /* probability column: the number after the label */
        char *num = strstr(line, "  0.");
        double p = num ? atof(num + 2) : -1;
        CHECK(num && p <= prev + 1e-12, "descending probabilities: %s", line);
        prev = p;
        size_t blocks = 0;
        for (char *c = line; (c = strstr(c, "\xe2\x96\x88")); c += 3) blocks++;
        if (lines == 0) CHECK(blocks == 40, "top bar spans the width: %zu", blocks);
        lines++;
        line = nl + 1;
    }
    CHECK(lines == GM_PLOT_MAX_BARS, "%d lines", lines);
    gm_free(t);

    double p2[2] = {0.25, 0.75};
    int32_t i2[2] = {5, 9};
    CHECK(gm_plot_logits_text(i2, NULL, p2, 2, 8, &t) == GM_OK, "text without labels");
    CHECK(t && strncmp(t, "  #9  0.7500 \xe2\x96\x88", 16) == 0 && strstr(t, "  #5  0.2500 \xe2\x96\x88\xe2\x96\x88\xe2\x96\x8b\n"),
          "fallback labels and eighth blocks:\n%s", t ? t : "");
    gm_free(t);
}

static void test_errors(void) {
    char *t = (char *)1;
    double bad[2] = {0.5, NAN};
    int32_t i2[2] = {1, 2};
    CHECK(gm_plot_logits_png("/nonexistent-dir/x.png", ids, PIECES, probs, N, NULL) == GM_ERR_IO &&
              strstr(gm_last_error(), "/nonexistent-dir/x.png"),
          "unwritable path: %s", gm_last_error());
    CHECK(gm_plot_logits_png(NULL, ids, PIECES, probs, N, NULL) == GM_ERR_ARG, "NULL path");
    CHECK(gm_plot_logits_png("/tmp/x.png", NULL, PIECES, probs, N, NULL) == GM_ERR_ARG, "NULL ids");
    CHECK(gm_plot_logits_png("/tmp/x.png", ids, PIECES, probs, 0, NULL) == GM_ERR_ARG, "n = 0");
    CHECK(gm_plot_logits_png("/tmp/x.png", i2, NULL, bad, 2, NULL) == GM_ERR_ARG && strstr(gm_last_error(), "probs[1]"),
          "NaN prob: %s", gm_last_error());
    bad[1] = 1.5;
    CHECK(gm_plot_logits_text(i2, NULL, bad, 2, 10, &t) == GM_ERR_ARG && t == NULL, "prob > 1");
    bad[1] = -0.1;
    CHECK(gm_plot_logits_text(i2, NULL, bad, 2, 10, &t) == GM_ERR_ARG, "prob < 0");
    CHECK(gm_plot_logits_text(ids, NULL, probs, N, 0, &t) == GM_ERR_ARG && strstr(gm_last_error(), "bar_width"),
          "bar_width 0");
    CHECK(gm_plot_logits_text(ids, NULL, probs, N, 10, NULL) == GM_ERR_ARG, "NULL out");
}

int main(void) {
    make_probs();
    test_png();
    test_text();
    test_errors();
    /* Release cairo's and fontconfig's process-wide font caches so LeakSanitizer sees only our leaks. */
    cairo_debug_reset_static_data();
    FcFini();
    return gm_test_finish();
}
