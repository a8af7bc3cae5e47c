/* Tokenizer throughput on one core: encodes a large mixed text (the fixture corpus of
 * tests/fixtures/tokenizer_parity.jsonl joined with '\n' and repeated to --mb MiB, or --text FILE)
 * and prints tokens/s. bench/bench_tokenizer_hf.py times HF `tokenizers` on the same text.
 * usage: bench_tokenizer -m MODEL [--mb 8] [--text FILE] [--fixtures DIR] [--reps 3] */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "gemma.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    *len = (size_t)n;
    return b;
}

/* The corpus: every "text" field of the fixture, joined with '\n'. */
static char *corpus(const char *fixtures, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer_parity.jsonl", fixtures);
    size_t n;
    char *raw = slurp(path, &n);
    if (!raw) return NULL;
    char *out = malloc(n + 1);
    size_t m = 0;
    int lineno = 0;
    for (char *line = raw; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *j = lineno++ ? cJSON_Parse(line) : NULL;
        const cJSON *t = j ? cJSON_GetObjectItem(j, "text") : NULL;
        if (cJSON_IsString(t) && !cJSON_IsTrue(cJSON_GetObjectItem(j, "no_gguf"))) { /* (not in the GGUF) */
            size_t l = strlen(t->valuestring);
            if (m) out[m++] = '\n';
            memcpy(out + m, t->valuestring, l);
            m += l;
        }
        cJSON_Delete(j);
        line = nl ? nl + 1 : NULL;
    }
    free(raw);
    *len = m;
    return out;
}

int main(int argc, char **argv) {
    const char *model = getenv("GM_TEST_MODEL"), *text_path = NULL, *fixtures = "tests/fixtures";
    double mb = 8;
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) text_path = argv[++i];
        else if (!strcmp(argv[i], "--fixtures") && i + 1 < argc) fixtures = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_tokenizer -m MODEL [--mb 8] [--text FILE] [--fixtures DIR] [--reps 3]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "bench_tokenizer: no model (-m or GM_TEST_MODEL)\n");
        return 2;
    }
    size_t unit_len;
    char *unit = text_path ? slurp(text_path, &unit_len) : corpus(fixtures, &unit_len);
    if (!unit || !unit_len) {
        fprintf(stderr, "bench_tokenizer: cannot read the text (%s)\n", text_path ? text_path : fixtures);
        return 1;
    }
    size_t want = (size_t)(mb * 1048576.0), len = 0;
    if (text_path) want = unit_len;
    char *text = malloc(want + unit_len + 1);
    while (len < want) {
        if (len) text[len++] = '\n';
        memcpy(text + len, unit, unit_len);
        len += unit_len;
    }
    gm_tokenizer *tok;
    double t0 = gm_now_seconds();
    if (gm_tokenizer_load(model, &tok) != GM_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", gm_last_error());
        return 1;
    }
    double t_load = gm_now_seconds() - t0, best = 1e30;
    size_t n = 0;
    for (int r = 0; r < reps; r++) {
        int32_t *ids;
        t0 = gm_now_seconds();
        if (gm_tokenizer_encode(tok, text, len, false, &ids, &n) != GM_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", gm_last_error());
            return 1;
        }
        double dt = gm_now_seconds() - t0;
        if (dt < best) best = dt;
        gm_free(ids);
    }
    printf("load %.3f s; text %zu bytes -> %zu tokens; best of %d: %.3f s = %.2f M tokens/s, %.1f MB/s\n", t_load, len,
           n, reps, best, n / best / 1e6, len / best / 1e6);
    gm_tokenizer_free(tok);
    free(text);
    free(unit);
    return 0;
}
