/* SentencePiece tokenizer.model writer (protobuf wire format, see vocab_spm_proto.c for the reader). */
#define _POSIX_C_SOURCE 200809L
#include "text/spm_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v) {
    uint8_t tmp[10];
    int k = 0;
    do {
        tmp[k] = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) tmp[k] |= 0x80;
        k++;
    } while (v);
    put(b, tmp, (size_t)k);
}

static void key(buf *b, uint32_t field, uint32_t wire) { varint(b, (uint64_t)field << 3 | wire); }
static void field_varint(buf *b, uint32_t f, uint64_t v) { key(b, f, 0), varint(b, v); }
static void field_bytes(buf *b, uint32_t f, const void *p, size_t n) { key(b, f, 2), varint(b, n), put(b, p, n); }
static void field_float(buf *b, uint32_t f, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    key(b, f, 5), put(b, le, 4);
}

gm_status gm_tokenizer_write_spm(const gm_tokenizer *t, const char *path) {
    if (t->has_merges)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: this tokenizer has an explicit merge list (tokenizer.json); a "
                                           "tokenizer.model cannot hold it", path);
    buf out = {0}, piece = {0}, spec = {0};
    for (int32_t id = 0; id < t->n && !out.oom && !piece.oom; id++) {
        piece.n = 0;
        field_bytes(&piece, 1, gm_tok_text(t, id), t->len[id]);
        field_float(&piece, 2, t->score[id]);
        field_varint(&piece, 3, t->type[id]);
        field_bytes(&out, 1, piece.p, piece.n);
    }
    /* trainer_spec: model_type = BPE (3), byte_fallback (35), unk_id (40), bos_id (41), eos_id (42) */
    field_varint(&spec, 3, 2);
    field_varint(&spec, 35, 1);
    if (t->unk_id >= 0) field_varint(&spec, 40, (uint64_t)t->unk_id);
    if (t->bos_id >= 0) field_varint(&spec, 41, (uint64_t)t->bos_id);
    if (t->eos_id >= 0) field_varint(&spec, 42, (uint64_t)t->eos_id);
    field_bytes(&out, 2, spec.p, spec.n);
    /* normalizer_spec: name "identity" (1), add_dummy_prefix false (3), remove_extra_whitespaces false (4) */
    spec.n = 0;
    field_bytes(&spec, 1, "identity", 8);
    field_varint(&spec, 3, 0);
    field_varint(&spec, 4, 0);
    field_bytes(&out, 3, spec.p, spec.n);
    gm_status st = GM_OK;
    if (out.oom || piece.oom || spec.oom) st = gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
    FILE *f = st == GM_OK ? fopen(path, "wb") : NULL;
    if (st == GM_OK && !f) st = gm_fail(GM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (f) {
        if (fwrite(out.p, 1, out.n, f) != out.n || fflush(f) != 0)
            st = gm_fail(GM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        if (fclose(f) != 0 && st == GM_OK) st = gm_fail(GM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        if (st != GM_OK) remove(path);
    }
    free(out.p), free(piece.p), free(spec.p);
    return st;
}
