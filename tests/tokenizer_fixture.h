/* Reader for the tokenizer reference fixtures (tests/fixtures/tokenizer_*.jsonl, made by
 * tests/reference/gen_tokenizer_fixtures.py with HF `tokenizers`): line 1 is a header object, then one
 * case per line: {"cat", "text" | "hex", "ids", "dec"?, "dec_hex"?, "no_gguf"?}. */
#ifndef GM_TESTS_TOKENIZER_FIXTURE_H
#define GM_TESTS_TOKENIZER_FIXTURE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tf_case {
    char cat[32];
    char *text;       /* raw bytes (NUL-terminated copy), len bytes */
    size_t len;
    bool has_text;
    int32_t *ids;
    size_t n_ids;
    char *dec;        /* HF decode(ids, skip_special_tokens=True), or NULL */
    size_t dec_len;
    bool no_gguf;
} tf_case;

typedef struct tf_file {
    cJSON *header;
    tf_case *cases;
    size_t n;
} tf_file;

static inline char *tf_strdup(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    memcpy(d, s, n + 1);
    return d;
}

static inline char *tf_unhex(const char *h, size_t *len) {
    size_t n = strlen(h) / 2;
    char *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[n] = 0;
    *len = n;
    return out;
}

static inline int tf_load(const char *path, tf_file *f) {
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "cannot open fixture %s\n", path);
        return -1;
    }
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    if (fread(buf, 1, (size_t)sz, fp) != (size_t)sz) {
        fclose(fp);
        free(buf);
        return -1;
    }
    fclose(fp);
    buf[sz] = 0;
    size_t cap = 1024;
    f->cases = calloc(cap, sizeof *f->cases);
    char *line = buf;
    int lineno = 0;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (!j) {
            fprintf(stderr, "%s:%d: bad JSON\n", path, lineno + 1);
            free(buf);
            return -1;
        }
        if (lineno++ == 0) {
            f->header = j;
        } else {
            if (f->n == cap) f->cases = realloc(f->cases, (cap *= 2) * sizeof *f->cases);
            tf_case *c = &f->cases[f->n++];
            memset(c, 0, sizeof *c);
            const cJSON *cat = cJSON_GetObjectItem(j, "cat"), *text = cJSON_GetObjectItem(j, "text"),
                        *hex = cJSON_GetObjectItem(j, "hex"), *ids = cJSON_GetObjectItem(j, "ids"),
                        *dec = cJSON_GetObjectItem(j, "dec"), *dec_hex = cJSON_GetObjectItem(j, "dec_hex");
            snprintf(c->cat, sizeof c->cat, "%s", cJSON_IsString(cat) ? cat->valuestring : "-");
            if (cJSON_IsString(text)) {
                c->len = strlen(text->valuestring);
                c->text = tf_strdup(text->valuestring);
                c->has_text = true;
            } else if (cJSON_IsString(hex)) {
                c->text = tf_unhex(hex->valuestring, &c->len);
                c->has_text = true;
            }
            c->n_ids = (size_t)cJSON_GetArraySize(ids);
            c->ids = malloc((c->n_ids + 1) * sizeof *c->ids);
            for (size_t i = 0; i < c->n_ids; i++) c->ids[i] = (int32_t)cJSON_GetArrayItem(ids, (int)i)->valuedouble;
            if (cJSON_IsString(dec)) {
                c->dec = tf_strdup(dec->valuestring);
                c->dec_len = strlen(c->dec);
            } else if (cJSON_IsString(dec_hex)) {
                c->dec = tf_unhex(dec_hex->valuestring, &c->dec_len);
            }
            c->no_gguf = cJSON_IsTrue(cJSON_GetObjectItem(j, "no_gguf"));
            cJSON_Delete(j);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    return 0;
}

static inline bool tf_header_has_id(const tf_file *f, const char *key, int32_t id) {
    const cJSON *arr = cJSON_GetObjectItem(f->header, key), *it;
    cJSON_ArrayForEach(it, arr) if ((int32_t)it->valuedouble == id) return true;
    return false;
}

static inline void tf_free(tf_file *f) {
    for (size_t i = 0; i < f->n; i++) {
        free(f->cases[i].text);
        free(f->cases[i].ids);
        free(f->cases[i].dec);
    }
    free(f->cases);
    cJSON_Delete(f->header);
    memset(f, 0, sizeof *f);
}

/* Print the first difference of two id lists. */
static inline void tf_print_diff(const char *what, const int32_t *got, size_t ng, const int32_t *want, size_t nw) {
    size_t i = 0;
    while (i < ng && i < nw && got[i] == want[i]) i++;
    fprintf(stderr, "  %s: %zu ids vs %zu expected; first difference at %zu: got", what, ng, nw, i);
    for (size_t k = i; k < ng && k < i + 6; k++) fprintf(stderr, " %d", got[k]);
    fprintf(stderr, " / want");
    for (size_t k = i; k < nw && k < i + 6; k++) fprintf(stderr, " %d", want[k]);
    fputc('\n', stderr);
}

#endif
