/* Tokenizer vocabulary from a GGUF file: tokenizer.ggml.tokens / scores / token_type (SentencePiece
 * model "llama"; no merges are stored, so merge ranks are derived from the scores, see
 * tokenizer_internal.h). llama.cpp writes the user-defined runs of spaces with real spaces ("  ");
 * Gemma's tokenizer.json has them as U+2581 runs, so every ' ' in a piece is read as U+2581. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "text/tokenizer_internal.h"
#include "text/tokenizer_gguf.h"

static gm_status array_of(const gm_gguf *g, const char *key, uint32_t want, uint64_t n, const gguf_kv **out) {
    const gguf_kv *kv = gm_gguf_find(g, key);
    if (!kv) return gm_fail(GM_ERR_FORMAT, "%s: no %s", g->file.path, key);
    if (kv->type != GGUF_ARRAY || kv->arr_type != want)
        return gm_fail(GM_ERR_FORMAT, "%s: %s must be an array of %s (found %s of %s)", g->file.path, key,
                       gm_gguf_type_name(want), gm_gguf_type_name(kv->type),
                       kv->type == GGUF_ARRAY ? gm_gguf_type_name(kv->arr_type) : "-");
    if (n != UINT64_MAX && kv->arr_count != n)
        return gm_fail(GM_ERR_FORMAT, "%s: %s has %llu entries but tokenizer.ggml.tokens has %llu", g->file.path, key,
                       (unsigned long long)kv->arr_count, (unsigned long long)n);
    *out = kv;
    return GM_OK;
}

static gm_status special_id(const gm_gguf *g, const char *key, int32_t n, int32_t *out) {
    int64_t v;
    gm_status st = gm_gguf_get_int(g, key, &v);
    if (st == GM_ERR_RANGE) return GM_OK; /* absent: keep the default */
    if (st != GM_OK) return st;
    if (v < 0 || v >= n)
        return gm_fail(GM_ERR_FORMAT, "%s: %s = %lld is outside the vocabulary (size %d)", g->file.path, key,
                       (long long)v, n);
    *out = (int32_t)v;
    return GM_OK;
}

/* The vocabulary from the three arrays (n pieces each, types checked by load). */
static gm_status fill(gm_tokenizer *t, const gm_gguf *g, const gm_gguf_array *toks, const gm_gguf_array *scores,
                      const gm_gguf_array *types) {
    const char *path = g->file.path;
    uint64_t n = toks->count;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = toks->strs[i];
        uint32_t len = toks->lens[i];
        bytes += len;
        for (const char *sp = len ? memchr(s, ' ', len) : NULL; sp; sp = memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s))) bytes += 2;
    }
    GM_TRY(gm_tok_alloc(t, (int32_t)n, bytes, path));
    char *buf = NULL;
    size_t buf_cap = 0;
    for (int32_t i = 0; i < (int32_t)n; i++) {
        const char *s = toks->strs[i];
        uint32_t len = toks->lens[i];
        const char *text = s;
        size_t m = len;
        if (len && memchr(s, ' ', len)) { /* spaces become U+2581 */
            if ((size_t)len * 3 > buf_cap) {
                buf_cap = (size_t)len * 3 + 64;
                char *nb = realloc(buf, buf_cap);
                if (!nb) {
                    free(buf);
                    return gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
                }
                buf = nb;
            }
            m = 0;
            for (uint32_t k = 0; k < len; k++) {
                if (s[k] == ' ') {
                    buf[m++] = (char)0xE2;
                    buf[m++] = (char)0x96;
                    buf[m++] = (char)0x81;
                } else {
                    buf[m++] = s[k];
                }
            }
            text = buf;
        }
        gm_status st = gm_tok_set_piece(t, i, text, m, path);
        if (st != GM_OK) {
            free(buf);
            return st;
        }
        int32_t ty;
        float sc;
        memcpy(&ty, (const char *)types->data + 4 * (size_t)i, 4);
        memcpy(&sc, (const char *)scores->data + 4 * (size_t)i, 4);
        if (ty < GM_PIECE_NORMAL || ty > GM_PIECE_BYTE) {
            free(buf);
            return gm_fail(GM_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%d] = %d (expected 1 .. 6)", path, i, ty);
        }
        t->type[i] = (uint8_t)ty;
        t->score[i] = sc;
        t->flags[i] = GM_PF_IN_MODEL;
        /* control, unknown and user-defined pieces are HF "added tokens": cut out of raw text first */
        if (ty == GM_PIECE_CONTROL || ty == GM_PIECE_UNKNOWN || ty == GM_PIECE_USER_DEFINED) t->flags[i] |= GM_PF_ADDED;
        if (ty == GM_PIECE_CONTROL || ty == GM_PIECE_UNKNOWN) t->flags[i] |= GM_PF_SKIP_DECODE;
    }
    free(buf);
    GM_TRY(special_id(g, "tokenizer.ggml.bos_token_id", t->n, &t->bos_id));
    GM_TRY(special_id(g, "tokenizer.ggml.eos_token_id", t->n, &t->eos_id));
    GM_TRY(special_id(g, "tokenizer.ggml.unknown_token_id", t->n, &t->unk_id));
    t->has_merges = false;
    snprintf(t->source, sizeof t->source, "gguf");
    return gm_tok_finish(t, path);
}

static gm_status load(gm_tokenizer *t, const gm_gguf *g) {
    const char *path = g->file.path;
    const char *model = gm_gguf_get_str(g, "tokenizer.ggml.model");
    if (!model) return gm_fail(GM_ERR_FORMAT, "%s: no tokenizer.ggml.model (no tokenizer in this file)", path);
    if (strcmp(model, "llama") != 0)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model is '%s'; only SentencePiece BPE ('llama') is supported",
                       path, model);
    const gguf_kv *tk, *sk, *yk;
    GM_TRY(array_of(g, "tokenizer.ggml.tokens", GGUF_STRING, UINT64_MAX, &tk));
    uint64_t n = tk->arr_count;
    if (n == 0 || n > GM_TOK_MAX_VOCAB)
        return gm_fail(GM_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (expected 1 .. %d)", path,
                       (unsigned long long)n, GM_TOK_MAX_VOCAB);
    GM_TRY(array_of(g, "tokenizer.ggml.scores", GGUF_F32, n, &sk));
    GM_TRY(array_of(g, "tokenizer.ggml.token_type", GGUF_I32, n, &yk));
    /* the arrays are read here, on the tokenizer's thread (the model loader's parse leaves them in the file) */
    gm_gguf_array arrays[3];
    memset(arrays, 0, sizeof arrays);
    gm_status st = gm_gguf_read_array(g, tk, &arrays[0]);
    if (st == GM_OK) st = gm_gguf_read_array(g, sk, &arrays[1]);
    if (st == GM_OK) st = gm_gguf_read_array(g, yk, &arrays[2]);
    if (st == GM_OK) st = fill(t, g, &arrays[0], &arrays[1], &arrays[2]);
    for (int i = 0; i < 3; i++) gm_gguf_array_free(&arrays[i]);
    return st;
}

gm_status gm_vocab_load_gguf(gm_tokenizer *t, const char *path) {
    gm_gguf g;
    GM_TRY(gm_gguf_open(&g, path));
    gm_status st = load(t, &g);
    gm_gguf_close(&g);
    return st;
}

gm_status gm_tokenizer_from_gguf(const gm_gguf *g, gm_tokenizer **out) {
    *out = NULL;
    gm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gm_fail(GM_ERR_NOMEM, "%s: out of memory for the tokenizer", g->file.path);
    gm_status st = load(t, g);
    if (st != GM_OK) {
        gm_tok_release(t);
        free(t);
        return st;
    }
    *out = t;
    return GM_OK;
}
