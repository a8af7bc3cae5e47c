/* SentencePiece tokenizer.model loader: a small BPE model trained by `sentencepiece` (Gemma's settings)
 * in tests/fixtures/tokenizer_spm_tiny, vs HF `tokenizers` running the tokenizer.json that the fixture
 * script builds from it the way Google's Gemma 3 tokenizer.json is built (tokenizer_spm_tiny_parity.jsonl);
 * then malformed protobuf files (truncated, bad lengths, bad varints, unsupported trainer settings). */
#define _GNU_SOURCE /* memmem */
#include <unistd.h>

#include "gemma.h"
#include "test_util.h"
#include "tokenizer_fixture.h"

static void expect(const unsigned char *bytes, size_t n, gm_status want, const char *needle, const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/gm_tok_spm_%d_%s.model", (int)getpid(), name);
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
    gm_tokenizer *tok = (gm_tokenizer *)1;
    gm_status st = gm_tokenizer_load(path, &tok);
    CHECK(st == want && !tok, "%s: %s (want %s): %s", name, gm_status_name(st), gm_status_name(want), gm_last_error());
    CHECK(strstr(gm_last_error(), needle) != NULL, "%s: '%s' lacks '%s'", name, gm_last_error(), needle);
    printf("  %-16s -> %s: %s\n", name, gm_status_name(st), gm_last_error());
    unlink(path);
}

int main(void) {
    char dir[1024], fx[1024];
    gm_test_fixture("tokenizer_spm_tiny", dir, sizeof dir);
    gm_tokenizer *tok;
    CHECK(gm_tokenizer_load(dir, &tok) == GM_OK, "load %s: %s", dir, gm_last_error());
    tf_file f;
    if (!tok || tf_load(gm_test_fixture("tokenizer_spm_tiny_parity.jsonl", fx, sizeof fx), &f) != 0) {
        CHECK(0, "cannot load the fixtures");
        return gm_test_finish();
    }
    int vs = (int)cJSON_GetObjectItem(f.header, "vocab_size")->valuedouble;
    CHECK(gm_tokenizer_vocab_size(tok) == vs, "vocab %d vs %d", gm_tokenizer_vocab_size(tok), vs);
    size_t bad = 0, dec_n = 0, dec_bad = 0;
    for (size_t k = 0; k < f.n; k++) {
        const tf_case *c = &f.cases[k];
        int32_t *ids;
        size_t n;
        if (gm_tokenizer_encode(tok, c->text, c->len, false, &ids, &n) != GM_OK) {
            CHECK(0, "case %zu: %s", k, gm_last_error());
            continue;
        }
        if (n != c->n_ids || memcmp(ids, c->ids, n * sizeof *ids)) {
            if (bad++ < 8) {
                fprintf(stderr, "spm mismatch case %zu [%s] \"%.60s\"\n", k, c->cat, c->text);
                tf_print_diff("ids", ids, n, c->ids, c->n_ids);
            }
        }
        gm_free(ids);
        if (c->dec) {
            char *text;
            size_t tl;
            dec_n++;
            if (gm_tokenizer_decode_len(tok, c->ids, c->n_ids, &text, &tl) != GM_OK || tl != c->dec_len ||
                memcmp(text, c->dec, tl))
                dec_bad++;
            gm_free(text);
        }
    }
    printf("tiny tokenizer.model: %zu cases, %zu id mismatches; %zu decodes, %zu mismatches\n", f.n, bad, dec_n, dec_bad);
    CHECK(f.n >= 400 && bad == 0, "%zu of %zu cases differ", bad, f.n);
    CHECK(dec_n >= 400 && dec_bad == 0, "%zu of %zu decodes differ", dec_bad, dec_n);
    tf_free(&f);

    /* random bytes (NULs, invalid UTF-8, fragments of added pieces): encode never fails, and the raw bytes of
     * the ids give the input back (the model's pieces hold no U+2581 that the input did not) */
    uint32_t x = 99;
    size_t rt_ok = 0, rt_n = 0;
    const char *frag[] = {"<h1>", "</h1>", "\n\n", "<start_of_turn>", "<bos>", "<h", "  ", "\xe2\x96", "\xff"};
    for (int it = 0; it < 3000; it++) {
        char s[256];
        size_t len = 0, want = (size_t)(x % 200);
        while (len < want) {
            x = x * 1664525u + 1013904223u;
            if ((x >> 28) < 3) {
                const char *fr = frag[(x >> 8) % 9];
                size_t fl = strlen(fr);
                if (len + fl > sizeof s) break;
                memcpy(s + len, fr, fl);
                len += fl;
            } else {
                s[len++] = (char)(x >> 20);
            }
        }
        int32_t *ids;
        size_t n;
        if (gm_tokenizer_encode(tok, s, len, it & 1, &ids, &n) != GM_OK) {
            CHECK(0, "random input %d: %s", it, gm_last_error());
            continue;
        }
        char out[2048];
        size_t m = 0;
        bool control = false;
        for (size_t i = 0; i < n; i++) {
            size_t l;
            const char *b = gm_tokenizer_token_bytes(tok, ids[i], &l);
            control |= gm_tokenizer_is_control(tok, ids[i]);
            if (m + l <= sizeof out) memcpy(out + m, b, l);
            m += l;
        }
        if (!control && !memmem(s, len, "\xe2\x96\x81", 3)) {
            rt_n++;
            rt_ok += m == len && !memcmp(out, s, len);
        }
        char *text;
        CHECK(gm_tokenizer_decode(tok, ids, n, &text) == GM_OK, "decode of random input %d", it);
        gm_free(text);
        gm_free(ids);
    }
    CHECK(rt_n > 1000 && rt_ok == rt_n, "raw round trip of random bytes: %zu/%zu", rt_ok, rt_n);
    gm_tokenizer_free(tok);

    /* mutated copies of the model file: load must fail cleanly or succeed, never crash */
    char mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/tokenizer.model", dir);
    FILE *mf = fopen(mpath, "rb");
    unsigned char *model = malloc(1 << 16);
    size_t msz = fread(model, 1, 1 << 16, mf);
    fclose(mf);
    char tpath[128];
    snprintf(tpath, sizeof tpath, "/tmp/gm_tok_spm_%d_mut.model", (int)getpid());
    int loaded = 0, refused = 0;
    for (int it = 0; it < 300; it++) {
        unsigned char *m2 = malloc(msz);
        memcpy(m2, model, msz);
        size_t len2 = msz;
        x = x * 1664525u + 1013904223u;
        if (it % 3 == 0) len2 = x % msz; /* truncate */
        for (int k = 0; k < 1 + it % 4; k++) {
            x = x * 1664525u + 1013904223u;
            m2[(x >> 8) % len2 ? (x >> 8) % len2 : 0] = (unsigned char)(x >> 24);
        }
        FILE *o = fopen(tpath, "wb");
        fwrite(m2, 1, len2, o);
        fclose(o);
        gm_tokenizer *t2;
        if (gm_tokenizer_load(tpath, &t2) == GM_OK) {
            loaded++;
            int32_t *ids;
            size_t n;
            CHECK(gm_tokenizer_encode(t2, "Hello <h1> world\xff", 18, true, &ids, &n) == GM_OK, "mutant encode");
            gm_free(ids);
            gm_tokenizer_free(t2);
        } else {
            refused++;
            CHECK(strlen(gm_last_error()) > 10, "mutant %d: empty message", it);
        }
        free(m2);
    }
    unlink(tpath);
    free(model);
    printf("mutated tokenizer.model: %d loaded, %d refused\n", loaded, refused);
    CHECK(refused > 0, "no mutant refused");

    /* malformed protobufs */
    const unsigned char truncated[] = {0x0A, 0x20, 0x0A, 0x03, 'a'};                 /* piece length past the end */
    expect(truncated, sizeof truncated, GM_ERR_FORMAT, "runs past", "truncated");
    const unsigned char varint[] = {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    expect(varint, sizeof varint, GM_ERR_FORMAT, "varint", "long_varint");
    const unsigned char group[] = {0x0B, 0x00};                                          /* wire type 3 */
    expect(group, sizeof group, GM_ERR_FORMAT, "wire type", "group");
    /* one piece "a", trainer_spec {model_type: UNIGRAM} */
    const unsigned char unigram[] = {0x0A, 0x03, 0x0A, 0x01, 'a', 0x12, 0x02, 0x18, 0x01};
    expect(unigram, sizeof unigram, GM_ERR_UNSUPPORTED, "model_type", "unigram");
    /* BPE + byte_fallback, but the normalizer spec left at its defaults (dummy prefix on) */
    const unsigned char dummy[] = {0x0A, 0x03, 0x0A, 0x01, 'a', 0x12, 0x05, 0x18, 0x02, 0x98, 0x02, 0x01};
    expect(dummy, sizeof dummy, GM_ERR_UNSUPPORTED, "add_dummy_prefix", "dummy_prefix");
    /* BPE + byte_fallback + Gemma's normalizer, but no byte pieces */
    const unsigned char nobytes[] = {0x0A, 0x03, 0x0A, 0x01, 'a', 0x12, 0x05, 0x18, 0x02, 0x98, 0x02, 0x01,
                                     0x1A, 0x04, 0x18, 0x00, 0x20, 0x00};
    expect(nobytes, sizeof nobytes, GM_ERR_UNSUPPORTED, "<0x00>", "no_byte_pieces");
    const unsigned char badtype[] = {0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x09, 0x12, 0x05, 0x18, 0x02, 0x98, 0x02, 0x01,
                                     0x1A, 0x04, 0x18, 0x00, 0x20, 0x00};
    expect(badtype, sizeof badtype, GM_ERR_FORMAT, "type 9", "bad_type");
    expect((const unsigned char *)"", 0, GM_ERR_FORMAT, "pieces", "empty");
    return gm_test_finish();
}
