/* Tokenizer from small hand-built GGUF files: a well-formed one (derived merge ranks: higher score
 * first, user-defined pieces at score 0 whatever the file says, as the HF converter ranks Gemma's
 * merges), then broken ones: arrays of mismatched lengths, wrong element types, absurd counts, bad
 * token types, missing keys, missing byte pieces, over-long pieces, out-of-range special ids. Each
 * must fail with a clear message, never crash. Runs without the real model. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <unistd.h>

#include "gemma.h"
#include "test_util.h"

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 1024;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void gstr(buf *b, const char *s, size_t n) {
    u64(b, n);
    put(b, s, n);
}
static void key(buf *b, const char *k, uint32_t type) {
    gstr(b, k, strlen(k));
    u32(b, type);
}

enum { T_U32 = 4, T_I32 = 5, T_F32 = 6, T_STRING = 8, T_ARRAY = 9 };

typedef struct vocab {
    const char *piece[300];
    size_t len[300];
    float score[300];
    int32_t type[300];
    int n;
} vocab;

static int add(vocab *v, const char *p, float score, int type) {
    v->piece[v->n] = p;
    v->len[v->n] = strlen(p);
    v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

static char g_bytes[256][8];

static void base_vocab(vocab *v) {
    memset(v, 0, sizeof *v);
    add(v, "<pad>", -1000, 3);
    add(v, "<eos>", -1000, 3);
    add(v, "<bos>", -1000, 3);
    for (int b = 0; b < 256; b++) {
        snprintf(g_bytes[b], sizeof g_bytes[b], "<0x%02X>", b);
        add(v, g_bytes[b], 0, 6);
    }
}

typedef struct opts {
    int n_scores, n_types;    /* entries written (default: the vocabulary size) */
    uint32_t types_type;      /* element type of token_type */
    const char *model;        /* tokenizer.ggml.model, NULL = absent */
    uint64_t tokens_count;    /* count written for the tokens array (0 = actual) */
    long bos;                 /* tokenizer.ggml.bos_token_id, -1 = absent */
    bool no_scores;
} opts;

static opts defaults(const vocab *v) { return (opts){v->n, v->n, T_I32, "llama", 0, 2, false}; }

static const char *write_gguf(const vocab *v, const opts *o, const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/gm_tok_gguf_%d_%s.gguf", (int)getpid(), name);
    buf b = {0};
    put(&b, "GGUF", 4);
    u32(&b, 3);
    u64(&b, 0); /* tensors */
    uint64_t n_kv = 3 + (o->model != NULL) + (o->no_scores ? 0 : 1) + (o->bos >= 0);
    u64(&b, n_kv); /* architecture, tokens, token_type + the optional ones */
    key(&b, "general.architecture", T_STRING);
    gstr(&b, "gemma3", 6);
    if (o->model) {
        key(&b, "tokenizer.ggml.model", T_STRING);
        gstr(&b, o->model, strlen(o->model));
    }
    key(&b, "tokenizer.ggml.tokens", T_ARRAY);
    u32(&b, T_STRING);
    u64(&b, o->tokens_count ? o->tokens_count : (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) gstr(&b, v->piece[i], v->len[i]);
    if (!o->no_scores) {
        key(&b, "tokenizer.ggml.scores", T_ARRAY);
        u32(&b, T_F32);
        u64(&b, (uint64_t)o->n_scores);
        for (int i = 0; i < o->n_scores; i++) put(&b, &v->score[i % v->n], 4);
    }
    key(&b, "tokenizer.ggml.token_type", T_ARRAY);
    u32(&b, o->types_type);
    u64(&b, (uint64_t)o->n_types);
    for (int i = 0; i < o->n_types; i++) {
        if (o->types_type == T_F32) {
            float f = (float)v->type[i % v->n];
            put(&b, &f, 4);
        } else {
            put(&b, &v->type[i % v->n], 4);
        }
    }
    if (o->bos >= 0) {
        key(&b, "tokenizer.ggml.bos_token_id", T_U32);
        u32(&b, (uint32_t)o->bos);
    }
    FILE *f = fopen(path, "wb");
    fwrite(b.p, 1, b.n, f);
    fclose(f);
    free(b.p);
    return path;
}

static void expect_fail(const vocab *v, const opts *o, const char *name, gm_status want, const char *needle) {
    const char *path = write_gguf(v, o, name);
    gm_tokenizer *tok = (gm_tokenizer *)1;
    gm_status st = gm_tokenizer_load(path, &tok);
    CHECK(st == want && tok == NULL, "%s: got %s, want %s (%s)", name, gm_status_name(st), gm_status_name(want),
          gm_last_error());
    CHECK(strstr(gm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", name, gm_last_error(), needle);
    printf("  %-18s -> %s: %s\n", name, gm_status_name(st), gm_last_error());
    if (getenv("KEEP")) return;
    unlink(path);
}

static void encode_is(const gm_tokenizer *tok, const char *text, const int32_t *want, size_t nw) {
    int32_t *ids;
    size_t n;
    CHECK(gm_tokenizer_encode(tok, text, strlen(text), false, &ids, &n) == GM_OK, "%s", gm_last_error());
    bool same = n == nw && !memcmp(ids, want, n * sizeof *ids);
    CHECK(same, "encode \"%s\": %zu ids (first %d), want %zu (first %d)", text, n, n ? ids[0] : -1, nw, want[0]);
    gm_free(ids);
}

int main(void) {
    vocab v;
    base_vocab(&v);
    int a = add(&v, "a", -10, 1), b = add(&v, "b", -11, 1), c = add(&v, "c", -12, 1);
    int ab = add(&v, "ab", -3, 1), bc = add(&v, "bc", -2, 1); /* "bc" outranks "ab" */
    int sp = add(&v, "\xe2\x96\x81", -4, 1);
    int sp2 = add(&v, "  ", -1000, 4); /* llama.cpp writes runs of spaces raw, with score -1000 */
    int spa = add(&v, "\xe2\x96\x81" "a", -1, 1);
    int h1 = add(&v, "<h1>", -1000, 4);
    opts o = defaults(&v);
    const char *path = write_gguf(&v, &o, "good");
    gm_tokenizer *tok;
    CHECK(gm_tokenizer_load(path, &tok) == GM_OK, "good: %s", gm_last_error());
    unlink(path);
    if (tok) {
        CHECK(gm_tokenizer_vocab_size(tok) == v.n, "vocab size");
        CHECK(!strcmp(gm_tokenizer_piece(tok, sp2), "\xe2\x96\x81\xe2\x96\x81"), "'  ' is read as U+2581 U+2581");
        encode_is(tok, "abc", (int32_t[]){a, bc}, 2);            /* bc (score -2) merges before ab (-3) */
        encode_is(tok, "ab", (int32_t[]){ab}, 1);
        encode_is(tok, "  a", (int32_t[]){sp2, a}, 2);           /* user-defined ranks at score 0, above ▁a */
        encode_is(tok, " a", (int32_t[]){spa}, 1);
        encode_is(tok, "<h1>ab", (int32_t[]){h1, ab}, 2);        /* added piece cut first */
        encode_is(tok, "x", (int32_t[]){3 + 'x'}, 1);            /* byte fallback */
        encode_is(tok, "c b", (int32_t[]){c, sp, b}, 3);
        char *text;
        int32_t ids[] = {2, h1, ab, sp2, 3 + 0xE4, 1};
        CHECK(gm_tokenizer_decode(tok, ids, 6, &text) == GM_OK && !strcmp(text, "<h1>ab  \xef\xbf\xbd"), "decode: %s",
              text);
        gm_free(text);
        gm_tokenizer_free(tok);
    }

    o = defaults(&v);
    o.n_scores = v.n - 1;
    expect_fail(&v, &o, "short_scores", GM_ERR_FORMAT, "scores has");
    o = defaults(&v);
    o.n_types = v.n + 5;
    expect_fail(&v, &o, "long_types", GM_ERR_FORMAT, "token_type has");
    o = defaults(&v);
    o.types_type = T_F32;
    expect_fail(&v, &o, "types_f32", GM_ERR_FORMAT, "array of i32");
    o = defaults(&v);
    o.no_scores = true;
    expect_fail(&v, &o, "no_scores", GM_ERR_FORMAT, "tokenizer.ggml.scores");
    o = defaults(&v);
    o.model = NULL;
    expect_fail(&v, &o, "no_model", GM_ERR_FORMAT, "tokenizer.ggml.model");
    o = defaults(&v);
    o.model = "gpt2";
    expect_fail(&v, &o, "gpt2", GM_ERR_UNSUPPORTED, "gpt2");
    o = defaults(&v);
    o.tokens_count = (uint64_t)1 << 40; /* absurd count: the reader must refuse before allocating */
    expect_fail(&v, &o, "absurd_count", GM_ERR_FORMAT, "tokenizer.ggml.tokens");
    o = defaults(&v);
    o.bos = v.n + 7;
    expect_fail(&v, &o, "bos_out_of_range", GM_ERR_FORMAT, "bos_token_id");
    vocab bad = v;
    bad.type[ab] = 9;
    o = defaults(&bad);
    expect_fail(&bad, &o, "bad_type", GM_ERR_FORMAT, "token_type[");
    bad = v;
    bad.piece[3 + 0x41] = "A"; /* <0x41> missing */
    bad.len[3 + 0x41] = 1;
    o = defaults(&bad);
    expect_fail(&bad, &o, "missing_byte", GM_ERR_UNSUPPORTED, "<0x41>");
    bad = v;
    char *longp = malloc(70000);
    memset(longp, 'z', 70000);
    bad.piece[c] = longp;
    bad.len[c] = 70000;
    o = defaults(&bad);
    expect_fail(&bad, &o, "long_piece", GM_ERR_FORMAT, "bytes long");
    free(longp);
    /* not a GGUF at all, and a truncated one */
    char p2[256];
    snprintf(p2, sizeof p2, "/tmp/gm_tok_gguf_%d_trunc.gguf", (int)getpid());
    FILE *f = fopen(p2, "wb");
    fwrite("GGUF\3\0\0\0\0", 1, 9, f);
    fclose(f);
    CHECK(gm_tokenizer_load(p2, &tok) == GM_ERR_FORMAT, "truncated GGUF: %s", gm_last_error());
    unlink(p2);
    return gm_test_finish();
}
