/* Gemma 3 tokenizer from the real GGUF vs Hugging Face `tokenizers` on Google's tokenizer.json:
 * exact ids on the fixture corpus (tests/fixtures/tokenizer_parity.jsonl), HF decode of those ids and of
 * single pieces, raw byte round trips, linear time on 1 MB without spaces, and bad input; the same
 * checks (but timing) on the tokenizer written to a tokenizer cache file and mapped back.
 * Skipped (77) without the model. GM_TOKENIZER_JSON=<folder or tokenizer.json of the full Gemma 3
 * tokenizer> additionally runs the corpus through the tokenizer.json loader. */
#define _GNU_SOURCE /* memmem */
#include <time.h>

#include "gemma.h"
#include "test_util.h"
#include "tokcache_util.h"
#include "tokenizer_fixture.h"

/* time limits: sanitizer builds run several times slower */
#if defined(__SANITIZE_ADDRESS__)
#define SLOW 6.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLOW 6.0
#endif
#endif
#ifndef SLOW
#define SLOW 1.0
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool has_decode_disagreement(const gm_tokenizer *tok, const tf_file *f, const int32_t *ids, size_t n) {
    /* ids that this vocabulary marks control but HF does not mark special, or the reverse: decode
     * (skip control) and HF decode(skip_special_tokens=True) legitimately differ there */
    for (size_t i = 0; i < n; i++)
        if (gm_tokenizer_is_control(tok, ids[i]) != tf_header_has_id(f, "hf_special_ids", ids[i])) return true;
    return false;
}

static void parity(const gm_tokenizer *tok, const tf_file *f, bool gguf, const char *label) {
    size_t mismatches = 0, compared = 0, dec_compared = 0, dec_mismatch = 0, raw_ok = 0, raw_checked = 0, rt_ok = 0,
           rt_n = 0;
    for (size_t k = 0; k < f->n; k++) {
        const tf_case *c = &f->cases[k];
        if (gguf && c->no_gguf) continue;
        int32_t *ids;
        size_t n;
        gm_status st = gm_tokenizer_encode(tok, c->text, c->len, false, &ids, &n);
        CHECK(st == GM_OK, "%s case %zu: %s", label, k, gm_last_error());
        if (st != GM_OK) continue;
        compared++;
        if (n != c->n_ids || memcmp(ids, c->ids, n * sizeof *ids)) {
            if (mismatches++ < 8) {
                fprintf(stderr, "%s mismatch case %zu [%s] \"%.60s\"\n", label, k, c->cat, c->text);
                tf_print_diff("ids", ids, n, c->ids, c->n_ids);
            }
        }
        if (c->dec && !has_decode_disagreement(tok, f, c->ids, c->n_ids)) {
            char *text;
            size_t tl;
            dec_compared++;
            if (gm_tokenizer_decode_len(tok, c->ids, c->n_ids, &text, &tl) != GM_OK || tl != c->dec_len ||
                memcmp(text, c->dec, tl)) {
                if (dec_mismatch++ < 5) fprintf(stderr, "%s decode mismatch case %zu: \"%.60s\"\n", label, k, text);
            }
            gm_free(text);
        }
        /* decode(encode(s)) == s for valid UTF-8 (has "dec") without control tokens or a literal U+2581 */
        bool ctl = false;
        for (size_t i = 0; i < n; i++) ctl |= gm_tokenizer_is_control(tok, ids[i]);
        if (c->dec && !ctl && !memmem(c->text, c->len, "\xe2\x96\x81", 3)) {
            char *text;
            size_t tl;
            rt_n++;
            if (gm_tokenizer_decode_len(tok, ids, n, &text, &tl) == GM_OK && tl == c->len && !memcmp(text, c->text, tl))
                rt_ok++;
            else
                fprintf(stderr, "%s: decode(encode(s)) != s, case %zu\n", label, k);
            gm_free(text);
        }
        /* raw round trip through token_bytes (invalid UTF-8 and NUL included), when no control token */
        bool control = false;
        for (size_t i = 0; i < n; i++) control |= gm_tokenizer_is_control(tok, ids[i]);
        /* (a literal U+2581 in the text comes back as ' ', as in HF) */
        if (!control && !memmem(c->text, c->len, "\xe2\x96\x81", 3)) {
            raw_checked++;
            char *buf = malloc(c->len * 2 + 16);
            size_t m = 0;
            for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *b = gm_tokenizer_token_bytes(tok, ids[i], &l);
                if (m + l <= c->len * 2 + 16) memcpy(buf + m, b, l);
                m += l;
            }
            bool ok = m == c->len && !memcmp(buf, c->text, m);
            raw_ok += ok;
            if (!ok) fprintf(stderr, "%s raw round trip differs, case %zu [%s]\n", label, k, c->cat);
            free(buf);
        }
        gm_free(ids);
    }
    printf("%s: %zu cases compared, %zu id mismatches; %zu decodes compared, %zu mismatches; raw round trip %zu/%zu\n",
           label, compared, mismatches, dec_compared, dec_mismatch, raw_ok, raw_checked);
    CHECK(compared >= 400, "%s: only %zu cases", label, compared);
    CHECK(mismatches == 0, "%s: %zu of %zu cases differ from HF tokenizers", label, mismatches, compared);
    CHECK(dec_compared >= 300 && dec_mismatch == 0, "%s: decode: %zu mismatches of %zu", label, dec_mismatch,
          dec_compared);
    CHECK(raw_checked >= 400 && raw_ok == raw_checked, "%s: raw round trip %zu/%zu", label, raw_ok, raw_checked);
    printf("%s: decode(encode(s)) == s for %zu/%zu valid strings\n", label, rt_ok, rt_n);
    CHECK(rt_n >= 400 && rt_ok == rt_n, "%s: decode(encode(s)) == s for %zu/%zu", label, rt_ok, rt_n);
}

static void decode_pieces(const gm_tokenizer *tok) {
    char path[1024];
    tf_file f;
    if (tf_load(gm_test_fixture("tokenizer_decode_pieces.jsonl", path, sizeof path), &f) != 0) {
        CHECK(0, "cannot load %s", path);
        return;
    }
    size_t compared = 0, bad = 0;
    for (size_t k = 0; k < f.n; k++) {
        const tf_case *c = &f.cases[k];
        if (has_decode_disagreement(tok, &f, c->ids, c->n_ids)) continue;
        char *text;
        size_t tl;
        compared++;
        if (gm_tokenizer_decode_len(tok, c->ids, c->n_ids, &text, &tl) != GM_OK || tl != c->dec_len ||
            memcmp(text, c->dec, tl)) {
            if (bad++ < 5) fprintf(stderr, "decode pieces case %zu (id %d): got \"%s\" want \"%s\"\n", k, c->ids[0], text,
                                   c->dec);
        }
        gm_free(text);
    }
    printf("decode pieces: %zu compared, %zu mismatches\n", compared, bad);
    CHECK(compared > 900 && bad == 0, "decode pieces: %zu mismatches of %zu", bad, compared);
    tf_free(&f);
}

static double time_encode(const gm_tokenizer *tok, const char *s, size_t len, bool utf8, size_t *n_out) {
    int32_t *ids = NULL;
    size_t n = 0;
    double dt = 1e30;
    for (int rep = 0; rep < 2; rep++) { /* best of two: the machine is shared */
        gm_free(ids);
        double t0 = now_s();
        gm_status st = gm_tokenizer_encode(tok, s, len, false, &ids, &n);
        double t = now_s() - t0;
        if (t < dt) dt = t;
        CHECK(st == GM_OK, "encode of %zu bytes: %s", len, gm_last_error());
    }
    /* the result must still be the input */
    char *text;
    size_t tl;
    if (utf8) {
        CHECK(gm_tokenizer_decode_len(tok, ids, n, &text, &tl) == GM_OK && tl == len && !memcmp(text, s, len),
              "decode(encode(%zu bytes)) differs", len);
        gm_free(text);
    }
    gm_free(ids);
    *n_out = n;
    return dt;
}

static void linear_time(const gm_tokenizer *tok) {
    const size_t big = 1 << 20, small = big / 4;
    char *s = malloc(big);
    uint32_t x = 12345;
    /* letters without spaces (one giant BPE word), then one repeated letter, then CJK */
    for (size_t i = 0; i < big; i++) {
        x = x * 1103515245u + 12345u;
        s[i] = (char)('a' + (x >> 16) % 26);
    }
    size_t n1, n2;
    double t_small = time_encode(tok, s, small, true, &n1), t_big = time_encode(tok, s, big, true, &n2);
    printf("no-space letters: %zu bytes %.3f s (%zu ids), %zu bytes %.3f s (%zu ids)\n", small, t_small, n1, big, t_big,
           n2);
    CHECK(t_big < 3.0 * SLOW, "1 MB without spaces took %.2f s", t_big);
    /* linear: ~4x (x2 for cache effects); quadratic would be 16x */
    CHECK(t_big < 10 * t_small + 0.1, "not linear: %.3f s for 1 MB vs %.3f s for 256 KB", t_big, t_small);
    memset(s, 'a', big);
    double t_same = time_encode(tok, s, big, true, &n1);
    printf("1 MB of 'a': %.3f s (%zu ids)\n", t_same, n1);
    CHECK(t_same < 3.0 * SLOW, "1 MB of one letter took %.2f s", t_same);
    const char *han = "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97"; /* 中文字 */
    for (size_t i = 0; i + 9 <= big; i += 9) memcpy(s + i, han, 9);
    double t_cjk = time_encode(tok, s, big / 9 * 9, true, &n1);
    printf("1 MB of CJK: %.3f s (%zu ids)\n", t_cjk, n1);
    CHECK(t_cjk < 3.0 * SLOW, "1 MB of CJK took %.2f s", t_cjk);
    for (size_t i = 0; i < big; i++) s[i] = (char)(0x80 + i % 64); /* all invalid UTF-8 */
    double t_bad = time_encode(tok, s, big, false, &n1);
    CHECK(n1 == big, "1 MB of invalid bytes: %zu ids, want one per byte", n1);
    CHECK(t_bad < 3.0 * SLOW, "1 MB of invalid bytes took %.2f s", t_bad);
    free(s);
}

static void bad_input(const gm_tokenizer *tok) {
    int32_t *ids = (int32_t *)1;
    size_t n = 99;
    CHECK(gm_tokenizer_encode(tok, "", 0, false, &ids, &n) == GM_OK && n == 0 && ids, "empty string");
    gm_free(ids);
    CHECK(gm_tokenizer_encode(tok, NULL, 0, true, &ids, &n) == GM_OK && n == 1 && ids[0] == 2, "NULL text, len 0, bos");
    gm_free(ids);
    CHECK(gm_tokenizer_encode(tok, NULL, 5, false, &ids, &n) == GM_ERR_ARG && !ids && n == 0, "NULL text with len 5");
    CHECK(gm_tokenizer_encode(tok, "x", (size_t)1 << 40, false, &ids, &n) == GM_ERR_RANGE, "1 TiB length refused");
    CHECK(strstr(gm_last_error(), "limit") != NULL, "message: %s", gm_last_error());
    CHECK(gm_tokenizer_encode(NULL, "x", 1, false, &ids, &n) == GM_ERR_ARG, "NULL tokenizer");
    /* embedded NULs: byte fallback <0x00> = 238, never truncated */
    CHECK(gm_tokenizer_encode(tok, "a\0\0b", 4, false, &ids, &n) == GM_OK && n == 4 && ids[1] == 238 && ids[2] == 238,
          "embedded NULs");
    gm_free(ids);
    /* invalid UTF-8: one byte piece per invalid byte, never dropped */
    CHECK(gm_tokenizer_encode(tok, "\xff\xc3", 2, false, &ids, &n) == GM_OK && n == 2 &&
              ids[0] == gm_tokenizer_find(tok, "<0xFF>") && ids[1] == gm_tokenizer_find(tok, "<0xC3>"),
          "invalid UTF-8 -> byte pieces");
    gm_free(ids);
    /* add_bos */
    CHECK(gm_tokenizer_encode(tok, "Hello world!", 12, true, &ids, &n) == GM_OK && n == 4 && ids[0] == 2 &&
              ids[1] == 9259 && ids[2] == 1902 && ids[3] == 236888,
          "Hello world! with bos");
    gm_free(ids);
    char *text = NULL;
    int32_t bad[] = {9259, 262144};
    CHECK(gm_tokenizer_decode(tok, bad, 2, &text) == GM_ERR_RANGE && !text, "decode of id 262144");
    CHECK(strstr(gm_last_error(), "262144") != NULL, "message: %s", gm_last_error());
    int32_t neg[] = {-1};
    CHECK(gm_tokenizer_decode(tok, neg, 1, &text) == GM_ERR_RANGE, "decode of id -1");
    CHECK(gm_tokenizer_decode(tok, NULL, 0, &text) == GM_OK && text && text[0] == 0, "decode of nothing");
    gm_free(text);
    int32_t ctl[] = {2, 105, 9259, 106, 1};
    CHECK(gm_tokenizer_decode(tok, ctl, 5, &text) == GM_OK && !strcmp(text, "Hello"), "control tokens decode to nothing: %s",
          text);
    gm_free(text);
}

int main(void) {
    const char *model = gm_test_model_path();
    if (!model) {
        printf("no model: skipped\n");
        return 77;
    }
    gm_tokenizer *tok;
    double t0 = now_s();
    gm_status st = gm_tokenizer_load(model, &tok);
    CHECK(st == GM_OK, "load %s: %s", model, gm_last_error());
    if (st != GM_OK) return gm_test_finish();
    printf("loaded %s in %.3f s\n", model, now_s() - t0);
    CHECK(gm_tokenizer_vocab_size(tok) == 262144, "vocab %d", gm_tokenizer_vocab_size(tok));
    CHECK(!strcmp(gm_tokenizer_piece(tok, 2), "<bos>") && !strcmp(gm_tokenizer_piece(tok, 106), "<end_of_turn>"),
          "special pieces");
    CHECK(!strcmp(gm_tokenizer_piece(tok, 138), "\xe2\x96\x81\xe2\x96\x81"), "id 138 is U+2581 U+2581 as in HF");
    CHECK(!strcmp(gm_tokenizer_piece(tok, 248), "<0x0A>"), "byte piece text");
    CHECK(gm_tokenizer_piece(tok, 262144) == NULL && gm_tokenizer_piece(tok, -1) == NULL, "piece out of range");
    CHECK(gm_tokenizer_find(tok, "<start_of_turn>") == 105 && gm_tokenizer_find(tok, "no such piece!") == -1, "find");
    CHECK(gm_tokenizer_bos_id(tok) == 2 && gm_tokenizer_eos_id(tok) == 1, "bos/eos ids");

    char path[1024];
    tf_file f;
    gm_tokenizer *mapped = tokcache_roundtrip(tok, "gguf");
    if (tf_load(gm_test_fixture("tokenizer_parity.jsonl", path, sizeof path), &f) == 0) {
        parity(tok, &f, true, "gguf");
        if (mapped) parity(mapped, &f, true, "gguf, mapped from the tokenizer cache");
        const char *json = getenv("GM_TOKENIZER_JSON");
        if (json && *json) {
            gm_tokenizer *tj;
            t0 = now_s();
            CHECK(gm_tokenizer_load(json, &tj) == GM_OK, "load %s: %s", json, gm_last_error());
            printf("loaded %s in %.3f s\n", json, now_s() - t0);
            if (tj) parity(tj, &f, false, "tokenizer.json");
            gm_tokenizer_free(tj);
        }
        tf_free(&f);
    } else {
        CHECK(0, "cannot load %s", path);
    }
    decode_pieces(tok);
    bad_input(tok);
    if (mapped) {
        decode_pieces(mapped);
        bad_input(mapped);
    }
    gm_tokenizer_free(mapped);
    linear_time(tok);
    gm_tokenizer_free(tok);
    return gm_test_finish();
}
