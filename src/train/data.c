/* Training data from JSONL (see gemma.h): one example per line, tokenized at load time. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

struct gm_dataset {
    gm_train_example *ex;
    size_t n, cap;
    int32_t **tok;     /* owned token arrays, parallel to ex */
    uint8_t **mask;
    gm_dataset_summary sum;
};

void gm_dataset_free(gm_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) free(d->tok[i]), free(d->mask[i]);
    free(d->ex), free(d->tok), free(d->mask);
    free(d);
}

size_t gm_dataset_size(const gm_dataset *d) { return d->n; }
const gm_train_example *gm_dataset_get(const gm_dataset *d, size_t i) { return i < d->n ? &d->ex[i] : NULL; }
gm_dataset_summary gm_dataset_summary_of(const gm_dataset *d) { return d->sum; }

static gm_status push(gm_dataset *d, int32_t *tok, uint8_t *mask, int n) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 256;
        gm_train_example *ex = realloc(d->ex, cap * sizeof *ex);
        if (ex) d->ex = ex;
        int32_t **t = realloc(d->tok, cap * sizeof *t);
        if (t) d->tok = t;
        uint8_t **m = realloc(d->mask, cap * sizeof *m);
        if (m) d->mask = m;
        if (!ex || !t || !m) return gm_fail(GM_ERR_NOMEM, "out of memory for the dataset");
        d->cap = cap;
    }
    d->tok[d->n] = tok, d->mask[d->n] = mask;
    d->ex[d->n] = (gm_train_example){tok, mask, n};
    d->n++;
    return GM_OK;
}

static gm_status encode(const gm_tokenizer *tok, const char *text, bool bos, int32_t **ids, size_t *n) {
    return gm_tokenizer_encode(tok, text, strlen(text), bos, ids, n);
}

static char *concat3(const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (!s) return NULL;
    memcpy(s, a, la), memcpy(s + la, b, lb), memcpy(s + la + lb, c, lc);
    s[la + lb + lc] = 0;
    return s;
}

/* One parsed line -> token ids and loss mask. A non-NULL *why means the line is malformed. */
static gm_status make_example(const gm_tokenizer *tok, const cJSON *obj, int32_t **ids_out, uint8_t **mask_out, int *n_out,
                              const char **why) {
    *why = NULL;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(obj, "text");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(obj, "prompt");
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(obj, "response");
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    if (text && (prompt || resp)) return *why = "has both \"text\" and \"prompt\"/\"response\"", GM_OK;
    if (text) {
        if (!cJSON_IsString(text)) return *why = "\"text\" is not a string", GM_OK;
        if (!text->valuestring[0]) return *why = "\"text\" is empty", GM_OK;
        GM_TRY(encode(tok, text->valuestring, true, &a, &na));
    } else if (prompt || resp) {
        if (!prompt || !resp) return *why = prompt ? "has \"prompt\" but no \"response\"" : "has \"response\" but no \"prompt\"", GM_OK;
        if (!cJSON_IsString(prompt)) return *why = "\"prompt\" is not a string", GM_OK;
        if (!cJSON_IsString(resp)) return *why = "\"response\" is not a string", GM_OK;
        char *p = concat3("<start_of_turn>user\n", prompt->valuestring, "<end_of_turn>\n<start_of_turn>model\n");
        char *r = concat3(resp->valuestring, "<end_of_turn>", "");
        gm_status st = p && r ? encode(tok, p, true, &a, &na) : gm_fail(GM_ERR_NOMEM, "out of memory");
        if (st == GM_OK) st = encode(tok, r, false, &b, &nb);
        free(p), free(r);
        if (st != GM_OK) {
            gm_free(a);
            return st;
        }
    } else {
        return *why = "has neither \"text\" nor \"prompt\" and \"response\"", GM_OK;
    }
    size_t n = na + nb;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    uint8_t *mask = malloc(n ? n : 1);
    if (!ids || !mask) {
        free(ids), free(mask), gm_free(a), gm_free(b);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    if (na) memcpy(ids, a, na * sizeof *ids);
    if (nb) memcpy(ids + na, b, nb * sizeof *ids);
    /* mask[i] is for predicting ids[i + 1]: the prompt's own tokens do not count (Seq2SeqTask) */
    for (size_t i = 0; i + 1 < n; i++) mask[i] = text ? 1 : (i + 1 >= na);
    gm_free(a), gm_free(b);
    *ids_out = ids, *mask_out = mask, *n_out = (int)n;
    return GM_OK;
}

gm_status gm_dataset_load(const char *path, const gm_tokenizer *tok, const gm_dataset_options *o_in, gm_dataset **out) {
    *out = NULL;
    gm_dataset_options o = {.seq_len = 512};
    if (o_in) o = *o_in;
    if (o.seq_len == 0) o.seq_len = 512;
    if (o.seq_len < 2) return gm_fail(GM_ERR_ARG, "sequence length %d: must be at least 2", o.seq_len);
    if (!tok) return gm_fail(GM_ERR_ARG, "%s: a tokenizer is needed to read text data", path);
    FILE *f = fopen(path, "rb");
    if (!f) return gm_fail(GM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    gm_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        fclose(f);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    gm_status st = GM_OK;
    while (st == GM_OK && (len = getline(&line, &cap, f)) >= 0) {
        d->sum.lines++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        size_t k = 0;
        while (line[k] == ' ' || line[k] == '\t') k++;
        if (!line[k]) {
            d->sum.blank++;
            continue;
        }
        char why_buf[160];
        const char *why = NULL;
        if ((size_t)len != strlen(line)) why = "contains a NUL byte";
        cJSON *j = why ? NULL : cJSON_ParseWithLength(line, (size_t)len);
        if (!why && !j) {
            const char *e = cJSON_GetErrorPtr();
            long col = e && e >= line && e <= line + len ? (long)(e - line) + 1 : 0;
            snprintf(why_buf, sizeof why_buf, "not valid JSON (at column %ld)", col);
            why = why_buf;
        } else if (!why && !cJSON_IsObject(j)) {
            why = "not a JSON object";
        }
        int32_t *ids = NULL;
        uint8_t *mask = NULL;
        int n = 0;
        if (!why) st = make_example(tok, j, &ids, &mask, &n, &why);
        cJSON_Delete(j);
        if (st != GM_OK) {
            st = gm_fail_context(st, "%s:%lld", path, (long long)d->sum.lines);
            break;
        }
        if (!why && n < 2) why = "tokenizes to fewer than 2 tokens";
        if (!why) {
            if (n > o.seq_len) {
                n = o.seq_len;
                d->sum.truncated++;
            }
            int64_t lt = 0;
            for (int i = 0; i < n - 1; i++) lt += mask[i];
            if (lt == 0) {
                free(ids), free(mask);
                d->sum.no_loss++;
                char msg[320];
                snprintf(msg, sizeof msg, "%s:%lld: skipped: no response token is left within the sequence length %d",
                         path, (long long)d->sum.lines, o.seq_len);
                if (o.warn) o.warn(o.user, msg);
                continue;
            } else {
                d->sum.tokens += n - 1, d->sum.loss_tokens += lt;
                st = push(d, ids, mask, n);
                if (st != GM_OK) free(ids), free(mask);
                else d->sum.examples++;
                continue;
            }
        }
        free(ids), free(mask);
        d->sum.malformed++;
        char msg[320];
        snprintf(msg, sizeof msg, "%s:%lld: %s", path, (long long)d->sum.lines, why);
        if (o.strict) st = gm_fail(GM_ERR_FORMAT, "%s (refused: strict mode)", msg);
        else if (o.warn) o.warn(o.user, msg);
    }
    if (st == GM_OK && ferror(f)) st = gm_fail(GM_ERR_IO, "%s: read error: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (st == GM_OK && d->n == 0)
        st = gm_fail(GM_ERR_FORMAT, "%s: no usable example (%lld lines, %lld malformed)", path, (long long)d->sum.lines,
                     (long long)d->sum.malformed);
    if (st != GM_OK) {
        gm_dataset_free(d);
        return st;
    }
    *out = d;
    return GM_OK;
}
