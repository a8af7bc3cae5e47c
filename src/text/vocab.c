/* Vocabulary scaffold shared by the loaders: storage for pieces, then gm_tok_finish() derives the
 * lookup tables (piece map, ASCII and byte tables, added-token trie, decode strings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "text/tokenizer_internal.h"

gm_status gm_tok_alloc(gm_tokenizer *t, int32_t n, uint64_t blob_bytes, const char *what) {
    if (n <= 0 || n > GM_TOK_MAX_VOCAB)
        return gm_fail(GM_ERR_FORMAT, "%s: vocabulary size %d is out of range (1 .. %d)", what, n, GM_TOK_MAX_VOCAB);
    if (blob_bytes > UINT32_MAX / 2)
        return gm_fail(GM_ERR_FORMAT, "%s: %llu bytes of piece text is too much", what,
                       (unsigned long long)blob_bytes);
    t->n = n;
    t->unk_id = t->bos_id = t->eos_id = -1;
    t->off = malloc((size_t)n * sizeof *t->off);
    t->len = calloc((size_t)n, sizeof *t->len);
    t->nchars = calloc((size_t)n, sizeof *t->nchars);
    t->type = calloc((size_t)n, 1);
    t->flags = calloc((size_t)n, 1);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->dec_byte = calloc((size_t)n, 1);
    size_t cap = (size_t)blob_bytes + (size_t)n + 16;
    t->blob = malloc(cap);
    if (!t->off || !t->len || !t->nchars || !t->type || !t->flags || !t->score || !t->dec_byte || !t->blob)
        return gm_fail(GM_ERR_NOMEM, "%s: out of memory for %d pieces", what, n);
    memset(t->off, 0xFF, (size_t)n * sizeof *t->off);
    t->blob_cap = cap;
    t->blob_fill = 0;
    return GM_OK;
}

gm_status gm_tok_set_piece(gm_tokenizer *t, int32_t id, const char *text, size_t len, const char *what) {
    if (id < 0 || id >= t->n)
        return gm_fail(GM_ERR_FORMAT, "%s: piece id %d is outside the vocabulary (size %d)", what, id, t->n);
    if (t->off[id] != UINT32_MAX) return gm_fail(GM_ERR_FORMAT, "%s: id %d is given twice", what, id);
    if (len > GM_TOK_MAX_PIECE_BYTES)
        return gm_fail(GM_ERR_FORMAT, "%s: piece %d is %zu bytes long (limit %d)", what, id, len,
                       GM_TOK_MAX_PIECE_BYTES);
    size_t cap = t->blob_cap, fill = t->blob_fill;
    if (fill + len + 1 > cap) {
        size_t ncap = cap * 2 + len + 1;
        if (ncap > UINT32_MAX)
            return gm_fail(GM_ERR_FORMAT, "%s: piece text exceeds 4 GiB", what);
        char *nb = realloc(t->blob, ncap);
        if (!nb) return gm_fail(GM_ERR_NOMEM, "%s: out of memory for piece text", what);
        t->blob = nb;
        cap = ncap;
    }
    memcpy(t->blob + fill, text, len);
    t->blob[fill + len] = 0;
    t->off[id] = (uint32_t)fill;
    t->len[id] = (uint32_t)len;
    fill += len + 1;
    t->blob_cap = cap;
    t->blob_fill = fill;
    return GM_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t count_chars(const uint8_t *s, size_t n) {
    size_t a = 0;
    while (a < n && s[a] < 0x80) a++; /* ASCII: one character per byte */
    size_t c = a;
    for (size_t i = a; i < n;) {
        size_t l = gm_utf8_valid_len(s + i, n - i);
        i += l ? l : 1;
        c++;
    }
    return c;
}

gm_status gm_tok_finish(gm_tokenizer *t, const char *what) {
    size_t fill = t->blob_fill;
    for (int32_t id = 0; id < t->n; id++)
        if (t->off[id] == UINT32_MAX) return gm_fail(GM_ERR_FORMAT, "%s: id %d has no piece", what, id);
    /* per-piece properties */
    t->max_piece_len = 0;
    for (int32_t id = 0; id < t->n; id++) {
        const char *p = gm_tok_text(t, id);
        size_t nc = count_chars((const uint8_t *)p, t->len[id]);
        t->nchars[id] = (uint16_t)(nc > 0xFFFF ? 0xFFFF : nc);
        if (t->len[id] == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>' && hexval(p[3]) >= 0 &&
            hexval(p[4]) >= 0) {
            t->flags[id] |= GM_PF_BYTE;
            t->dec_byte[id] = (uint8_t)(hexval(p[3]) * 16 + hexval(p[4]));
        }
        if (!t->has_merges && (t->flags[id] & GM_PF_IN_MODEL) &&
            (t->type[id] == GM_PIECE_NORMAL || t->type[id] == GM_PIECE_USER_DEFINED)) {
            t->flags[id] |= GM_PF_MERGE_TARGET;
            /* SentencePiece stores user-defined pieces with score 0 (llama.cpp's GGUF writes -1000); the
             * HF converter ranks merges by the SentencePiece score. */
            if (t->type[id] == GM_PIECE_USER_DEFINED) t->score[id] = 0.0f;
            if (t->len[id] > t->max_piece_len) t->max_piece_len = t->len[id];
        }
    }
    if (t->max_piece_len > GM_TOK_MAX_MERGED_BYTES)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: a mergeable piece is %u bytes long (limit %d)", what, t->max_piece_len,
                       GM_TOK_MAX_MERGED_BYTES);
    /* piece map: model pieces first, so BPE lookups find the model's id for a text */
    GM_TRY(gm_piece_map_init(&t->map, t->blob, t->off, t->len, t->n));
    int32_t *order = malloc((size_t)t->n * sizeof *order);
    if (!order) return gm_fail(GM_ERR_NOMEM, "%s: out of memory", what);
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t id = 0; id < t->n; id++)
            if (((t->flags[id] & GM_PF_IN_MODEL) != 0) == (pass == 0)) order[k++] = id;
    gm_piece_map_insert_ids(&t->map, order, k);
    free(order);
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        int32_t id = gm_piece_map_find(&t->map, &ch, 1);
        t->ascii_id[c] = (id >= 0 && (t->flags[id] & GM_PF_IN_MODEL)) ? id : -1;
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = gm_piece_map_find(&t->map, name, 6);
        if (id < 0 || !(t->flags[id] & GM_PF_IN_MODEL))
            return gm_fail(GM_ERR_UNSUPPORTED, "%s: the vocabulary has no byte piece %s (byte fallback needs all 256)",
                           what, name);
        t->byte_id[b] = id;
    }
    /* added pieces: cut out of raw text before BPE */
    for (int32_t id = 0; id < t->n; id++)
        if (t->flags[id] & GM_PF_ADDED) GM_TRY(gm_trie_add(&t->trie, gm_tok_text(t, id), t->len[id], id));
    /* decode strings: U+2581 -> ' ', byte pieces -> their byte, skipped pieces -> "" */
    t->dec_off = malloc((size_t)t->n * sizeof *t->dec_off);
    t->dec_len = malloc((size_t)t->n * sizeof *t->dec_len);
    t->dec_blob = malloc(fill + 1);
    if (!t->dec_off || !t->dec_len || !t->dec_blob) return gm_fail(GM_ERR_NOMEM, "%s: out of memory", what);
    size_t d = 0;
    for (int32_t id = 0; id < t->n; id++) {
        t->dec_off[id] = (uint32_t)d;
        if (t->flags[id] & GM_PF_SKIP_DECODE) {
        } else if (t->flags[id] & GM_PF_BYTE) {
            t->dec_blob[d++] = (char)t->dec_byte[id];
        } else {
            const char *p = gm_tok_text(t, id);
            uint32_t len = t->len[id];
            char *out = t->dec_blob;
            if (!memchr(p, 0xE2, len)) { /* most pieces: copied as they are */
                memcpy(out + d, p, len);
                d += len;
            } else {
                for (uint32_t i = 0; i < len;) {
                    if (i + 3 <= len && (uint8_t)p[i] == 0xE2 && (uint8_t)p[i + 1] == 0x96 && (uint8_t)p[i + 2] == 0x81) {
                        out[d++] = ' ';
                        i += 3;
                    } else {
                        out[d++] = p[i++];
                    }
                }
            }
        }
        t->dec_len[id] = (uint32_t)(d - t->dec_off[id]);
    }
    if (t->bos_id < 0) t->bos_id = gm_piece_map_find(&t->map, "<bos>", 5);
    if (t->eos_id < 0) t->eos_id = gm_piece_map_find(&t->map, "<eos>", 5);
    if (t->unk_id < 0) t->unk_id = gm_piece_map_find(&t->map, "<unk>", 5);
    return GM_OK;
}

void gm_tok_release(gm_tokenizer *t) {
    if (!t) return;
    if (t->cache_map) {
        munmap(t->cache_map, t->cache_map_bytes);
        memset(t, 0, sizeof *t);
        return;
    }
    free(t->blob);
    free(t->off);
    free(t->len);
    free(t->nchars);
    free(t->type);
    free(t->flags);
    free(t->score);
    free(t->dec_byte);
    free(t->dec_blob);
    free(t->dec_off);
    free(t->dec_len);
    gm_piece_map_free(&t->map);
    gm_trie_free(&t->trie);
    gm_pair_map_free(&t->pairs);
    memset(t, 0, sizeof *t);
}
