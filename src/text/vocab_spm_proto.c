/* Tokenizer vocabulary from a SentencePiece tokenizer.model (protobuf ModelProto), read with a small
 * bounds-checked wire-format reader: pieces {piece = 1, score = 2, type = 3}, trainer_spec
 * {model_type = 3, byte_fallback = 35}, normalizer_spec {precompiled_charsmap = 2, add_dummy_prefix = 3,
 * remove_extra_whitespaces = 4}. Only Gemma's configuration (BPE, byte fallback, identity
 * normalization, no dummy prefix, whitespace kept) is accepted. Merge ranks are derived from the
 * scores exactly as for GGUF (tokenizer_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "text/tokenizer_internal.h"

#define MAX_MODEL_BYTES ((uint64_t)1 << 30)

typedef struct pb {
    const uint8_t *p, *end;
    const uint8_t *base; /* start of the file, for offsets in messages */
    const char *path;
} pb;

static gm_status pb_varint(pb *b, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return gm_fail(GM_ERR_FORMAT, "%s: offset %td: truncated varint", b->path, b->p - b->base);
        uint8_t c = *b->p++;
        r |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return GM_OK;
        }
    }
    return gm_fail(GM_ERR_FORMAT, "%s: offset %td: varint longer than 10 bytes", b->path, b->p - b->base);
}

/* Read one field header; for length-delimited fields *sub is the payload (bounds-checked). */
static gm_status pb_field(pb *b, uint32_t *field, uint32_t *wire, pb *sub, uint64_t *num) {
    uint64_t key;
    GM_TRY(pb_varint(b, &key));
    *field = (uint32_t)(key >> 3);
    *wire = (uint32_t)(key & 7);
    switch (*wire) {
    case 0:
        return pb_varint(b, num);
    case 1:
        if (b->end - b->p < 8) break;
        memcpy(num, b->p, 8);
        b->p += 8;
        return GM_OK;
    case 5: {
        if (b->end - b->p < 4) break;
        uint32_t v;
        memcpy(&v, b->p, 4);
        *num = v;
        b->p += 4;
        return GM_OK;
    }
    case 2: {
        uint64_t len;
        GM_TRY(pb_varint(b, &len));
        if (len > (uint64_t)(b->end - b->p))
            return gm_fail(GM_ERR_FORMAT, "%s: offset %td: field %u of %llu bytes runs past its message", b->path,
                           b->p - b->base, *field, (unsigned long long)len);
        *sub = (pb){b->p, b->p + len, b->base, b->path};
        b->p += len;
        return GM_OK;
    }
    default:
        return gm_fail(GM_ERR_FORMAT, "%s: offset %td: unsupported protobuf wire type %u", b->path, b->p - b->base,
                       *wire);
    }
    return gm_fail(GM_ERR_FORMAT, "%s: offset %td: truncated field %u", b->path, b->p - b->base, *field);
}

static gm_status check_specs(pb trainer, pb norm, bool have_trainer, bool have_norm, const char *path) {
    uint32_t f, w;
    pb sub;
    uint64_t v;
    int model_type = 1; /* UNIGRAM by default */
    bool byte_fallback = false;
    while (have_trainer && trainer.p < trainer.end) {
        GM_TRY(pb_field(&trainer, &f, &w, &sub, &v));
        if (f == 3 && w == 0) model_type = (int)v;
        if (f == 35 && w == 0) byte_fallback = v != 0;
    }
    if (model_type != 2)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: trainer_spec.model_type is %d; only BPE (2) is supported", path,
                       model_type);
    if (!byte_fallback)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: trainer_spec.byte_fallback is off (only byte-fallback BPE is supported)",
                       path);
    bool dummy = true, remove_ws = true; /* protobuf defaults */
    size_t charsmap = 0;
    while (have_norm && norm.p < norm.end) {
        GM_TRY(pb_field(&norm, &f, &w, &sub, &v));
        if (f == 2 && w == 2) charsmap = (size_t)(sub.end - sub.p);
        if (f == 3 && w == 0) dummy = v != 0;
        if (f == 4 && w == 0) remove_ws = v != 0;
    }
    if (dummy || remove_ws || charsmap)
        return gm_fail(GM_ERR_UNSUPPORTED,
                       "%s: normalizer_spec has %s%s%s; only Gemma's identity normalization without dummy prefix is "
                       "supported",
                       path, dummy ? "add_dummy_prefix " : "", remove_ws ? "remove_extra_whitespaces " : "",
                       charsmap ? "a precompiled charsmap" : "");
    return GM_OK;
}

static gm_status load(gm_tokenizer *t, const uint8_t *data, size_t len, const char *path) {
    pb b = {data, data + len, data, path};
    pb trainer = {0}, norm = {0}, sub;
    bool have_trainer = false, have_norm = false;
    uint64_t n = 0, bytes = 0, v;
    uint32_t f, w;
    /* pass 1: count pieces, find the specs */
    while (b.p < b.end) {
        GM_TRY(pb_field(&b, &f, &w, &sub, &v));
        if (f == 1 && w == 2) {
            n++;
            bytes += (uint64_t)(sub.end - sub.p);
        } else if (f == 2 && w == 2) {
            trainer = sub;
            have_trainer = true;
        } else if (f == 3 && w == 2) {
            norm = sub;
            have_norm = true;
        }
    }
    if (n == 0 || n > GM_TOK_MAX_VOCAB)
        return gm_fail(GM_ERR_FORMAT, "%s: %llu pieces (expected 1 .. %d)", path, (unsigned long long)n,
                       GM_TOK_MAX_VOCAB);
    GM_TRY(check_specs(trainer, norm, have_trainer, have_norm, path));
    GM_TRY(gm_tok_alloc(t, (int32_t)n, bytes, path));
    /* pass 2: the pieces */
    b = (pb){data, data + len, data, path};
    int32_t id = 0;
    while (b.p < b.end) {
        GM_TRY(pb_field(&b, &f, &w, &sub, &v));
        if (!(f == 1 && w == 2)) continue;
        const uint8_t *text = NULL;
        size_t tlen = 0;
        float score = 0.0f;
        int type = GM_PIECE_NORMAL;
        pb fld;
        while (sub.p < sub.end) {
            GM_TRY(pb_field(&sub, &f, &w, &fld, &v));
            if (f == 1 && w == 2) {
                text = fld.p;
                tlen = (size_t)(fld.end - fld.p);
            } else if (f == 2 && w == 5) {
                uint32_t u = (uint32_t)v;
                memcpy(&score, &u, 4);
            } else if (f == 3 && w == 0) {
                type = (int)v;
            }
        }
        if (!text) return gm_fail(GM_ERR_FORMAT, "%s: piece %d has no text", path, id);
        if (type < GM_PIECE_NORMAL || type > GM_PIECE_BYTE)
            return gm_fail(GM_ERR_FORMAT, "%s: piece %d has type %d (expected 1 .. 6)", path, id, type);
        GM_TRY(gm_tok_set_piece(t, id, (const char *)text, tlen, path));
        t->type[id] = (uint8_t)type;
        t->score[id] = score;
        t->flags[id] = GM_PF_IN_MODEL;
        if (type == GM_PIECE_CONTROL || type == GM_PIECE_UNKNOWN || type == GM_PIECE_USER_DEFINED)
            t->flags[id] |= GM_PF_ADDED;
        if (type == GM_PIECE_CONTROL || type == GM_PIECE_UNKNOWN) t->flags[id] |= GM_PF_SKIP_DECODE;
        id++;
    }
    t->has_merges = false;
    snprintf(t->source, sizeof t->source, "tokenizer.model");
    return gm_tok_finish(t, path);
}

gm_status gm_vocab_load_spm(gm_tokenizer *t, const char *path) {
    char *data;
    uint64_t len;
    GM_TRY(gm_file_slurp(path, MAX_MODEL_BYTES, &data, &len));
    gm_status st = load(t, (const uint8_t *)data, (size_t)len, path);
    free(data);
    return st;
}
