/* Public tokenizer API: loading (GGUF file, or a folder with tokenizer.json / tokenizer.model),
 * encode (added-token cut, ' ' -> U+2581, BPE; see tokenizer_internal.h) and decode. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text/tokenizer_internal.h"

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

gm_status gm_tokenizer_load(const char *model_path, gm_tokenizer **out) {
    if (!out) return gm_fail(GM_ERR_ARG, "gm_tokenizer_load: out is NULL");
    *out = NULL;
    if (!model_path) return gm_fail(GM_ERR_ARG, "gm_tokenizer_load: path is NULL");
    struct stat st;
    if (stat(model_path, &st) != 0) return gm_fail(GM_ERR_IO, "%s: cannot open: %s", model_path, strerror(errno));
    gm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gm_fail(GM_ERR_NOMEM, "gm_tokenizer_load: out of memory");
    gm_status s;
    if (S_ISDIR(st.st_mode)) {
        size_t n = strlen(model_path) + 32;
        char *p = malloc(n);
        if (!p) {
            free(t);
            return gm_fail(GM_ERR_NOMEM, "gm_tokenizer_load: out of memory");
        }
        snprintf(p, n, "%s/tokenizer.json", model_path);
        if (file_exists(p)) {
            s = gm_vocab_load_hf_json(t, p);
        } else {
            snprintf(p, n, "%s/tokenizer.model", model_path);
            if (file_exists(p))
                s = gm_vocab_load_spm(t, p);
            else
                s = gm_fail(GM_ERR_IO, "%s: the folder has neither tokenizer.json nor tokenizer.model", model_path);
        }
        free(p);
    } else {
        char magic[4] = {0};
        FILE *f = fopen(model_path, "rb");
        size_t got = f ? fread(magic, 1, 4, f) : 0;
        if (f) fclose(f);
        if (!f) s = gm_fail(GM_ERR_IO, "%s: cannot open", model_path);
        else if (got == 4 && !memcmp(magic, "GGUF", 4)) s = gm_vocab_load_gguf(t, model_path);
        else if (has_suffix(model_path, ".json")) s = gm_vocab_load_hf_json(t, model_path);
        else if (has_suffix(model_path, ".model")) s = gm_vocab_load_spm(t, model_path);
        else s = gm_fail(GM_ERR_FORMAT, "%s: not a GGUF file, tokenizer.json or tokenizer.model", model_path);
    }
    if (s != GM_OK) {
        gm_tok_release(t);
        free(t);
        return s;
    }
    *out = t;
    return GM_OK;
}

void gm_tokenizer_free(gm_tokenizer *tok) {
    if (!tok) return;
    gm_tok_release(tok);
    free(tok);
}

int gm_tokenizer_vocab_size(const gm_tokenizer *tok) { return tok ? tok->n : 0; }

const char *gm_tokenizer_piece(const gm_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n) return NULL;
    return gm_tok_text(tok, id);
}

int32_t gm_tokenizer_find(const gm_tokenizer *tok, const char *piece) {
    if (!tok || !piece) return -1;
    return gm_piece_map_find(&tok->map, piece, strlen(piece));
}

int32_t gm_tokenizer_bos_id(const gm_tokenizer *tok) { return tok ? tok->bos_id : -1; }
int32_t gm_tokenizer_eos_id(const gm_tokenizer *tok) { return tok ? tok->eos_id : -1; }

const char *gm_tokenizer_token_bytes(const gm_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->n) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok->dec_len[id];
    return tok->dec_blob + tok->dec_off[id];
}

bool gm_tokenizer_is_control(const gm_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n && (tok->flags[id] & GM_PF_SKIP_DECODE);
}

/* ' ' -> U+2581 into buf (capacity >= 3 * n). */
static size_t normalize(const uint8_t *s, size_t n, uint8_t *buf) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            buf[m++] = 0xE2;
            buf[m++] = 0x96;
            buf[m++] = 0x81;
        } else {
            buf[m++] = s[i];
        }
    }
    return m;
}

static gm_status push_id(int32_t **out, size_t *n, size_t *cap, int32_t id) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        int32_t *no = realloc(*out, nc * sizeof *no);
        if (!no) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %zu ids", nc);
        *out = no;
        *cap = nc;
    }
    (*out)[(*n)++] = id;
    return GM_OK;
}

gm_status gm_tokenizer_encode(const gm_tokenizer *tok, const char *text, size_t len, bool add_bos, int32_t **ids,
                              size_t *n_ids) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!tok || !ids || !n_ids) return gm_fail(GM_ERR_ARG, "gm_tokenizer_encode: NULL tokenizer or output");
    if (!text && len) return gm_fail(GM_ERR_ARG, "gm_tokenizer_encode: text is NULL but len is %zu", len);
    if (len > GM_TOK_MAX_TEXT)
        return gm_fail(GM_ERR_RANGE, "gm_tokenizer_encode: text of %zu bytes exceeds the %zu-byte limit", len,
                       GM_TOK_MAX_TEXT);
    if (add_bos && tok->bos_id < 0) return gm_fail(GM_ERR_STATE, "gm_tokenizer_encode: this vocabulary has no <bos>");
    const uint8_t *s = (const uint8_t *)text;
    int32_t *out = NULL;
    size_t n = 0, cap = 0;
    gm_status st = GM_OK;
    uint8_t *norm = NULL;
    size_t norm_cap = 0;
    gm_bpe_work *w = gm_bpe_work_new();
    if (!w) return gm_fail(GM_ERR_NOMEM, "gm_tokenizer_encode: out of memory");
    if (add_bos) st = push_id(&out, &n, &cap, tok->bos_id);
    size_t seg = 0; /* start of the pending non-added segment */
    for (size_t p = 0; st == GM_OK && p <= len;) {
        size_t mlen = 0;
        int32_t id = -1;
        if (p < len && tok->trie.nodes && tok->trie.root[s[p]] >= 0) id = gm_trie_longest(&tok->trie, s + p, len - p, &mlen);
        if (id < 0 && p < len) {
            p++;
            continue;
        }
        if (p > seg) { /* BPE the text before this added token (or before the end) */
            size_t need = (p - seg) * 3;
            if (need > norm_cap) {
                free(norm);
                norm_cap = need;
                norm = malloc(norm_cap);
                if (!norm) {
                    st = gm_fail(GM_ERR_NOMEM, "gm_tokenizer_encode: out of memory for %zu bytes", need);
                    break;
                }
            }
            size_t m = normalize(s + seg, p - seg, norm);
            st = gm_bpe_segment(tok, w, norm, m, &out, &n, &cap);
            if (st != GM_OK) break;
        }
        if (p == len) break;
        st = push_id(&out, &n, &cap, id);
        p += mlen;
        seg = p;
    }
    free(norm);
    gm_bpe_work_free(w);
    if (st != GM_OK) {
        free(out);
        return st;
    }
    if (!out) out = malloc(sizeof *out); /* empty result: still a freeable pointer */
    if (!out) return gm_fail(GM_ERR_NOMEM, "gm_tokenizer_encode: out of memory");
    *ids = out;
    *n_ids = n;
    return GM_OK;
}

/* HF decode: pieces with U+2581 -> ' '; runs of byte pieces become their bytes when the run is valid
 * UTF-8, else one U+FFFD per byte (ByteFallback decoder); control/special pieces are skipped. */
gm_status gm_tokenizer_decode_len(const gm_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text,
                                  size_t *text_len) {
    if (text) *text = NULL;
    if (text_len) *text_len = 0;
    if (!tok || !text) return gm_fail(GM_ERR_ARG, "gm_tokenizer_decode: NULL tokenizer or output");
    if (!ids && n_ids) return gm_fail(GM_ERR_ARG, "gm_tokenizer_decode: ids is NULL but n_ids is %zu", n_ids);
    size_t cap = 1;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n)
            return gm_fail(GM_ERR_RANGE, "gm_tokenizer_decode: id %d at position %zu is outside the vocabulary (size %d)",
                           ids[i], i, tok->n);
        cap += tok->dec_len[ids[i]] * (size_t)3 + 3; /* a byte may become U+FFFD (3 bytes) */
    }
    char *buf = malloc(cap);
    if (!buf) return gm_fail(GM_ERR_NOMEM, "gm_tokenizer_decode: out of memory for %zu bytes", cap);
    size_t m = 0, run = 0; /* run: bytes of the pending byte-piece group, at buf + m - run */
    for (size_t i = 0; i <= n_ids; i++) {
        int32_t id = i < n_ids ? ids[i] : -1;
        if (id >= 0 && (tok->flags[id] & GM_PF_SKIP_DECODE)) continue;
        if (id >= 0 && (tok->flags[id] & GM_PF_BYTE)) {
            buf[m++] = (char)tok->dec_byte[id];
            run++;
            continue;
        }
        if (run) { /* close the group: keep it if valid UTF-8, else U+FFFD per byte */
            const uint8_t *g = (const uint8_t *)buf + m - run;
            size_t k = 0;
            while (k < run) {
                size_t l = gm_utf8_valid_len(g + k, run - k);
                if (!l) break;
                k += l;
            }
            if (k < run) {
                m -= run;
                for (size_t r = 0; r < run; r++) {
                    buf[m++] = (char)0xEF;
                    buf[m++] = (char)0xBF;
                    buf[m++] = (char)0xBD;
                }
            }
            run = 0;
        }
        if (id < 0) break;
        memcpy(buf + m, tok->dec_blob + tok->dec_off[id], tok->dec_len[id]);
        m += tok->dec_len[id];
    }
    buf[m] = 0;
    *text = buf;
    if (text_len) *text_len = m;
    return GM_OK;
}

gm_status gm_tokenizer_decode(const gm_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text) {
    return gm_tokenizer_decode_len(tok, ids, n_ids, text, NULL);
}
