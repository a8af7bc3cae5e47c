/* tokenizer.json loader vs HF `tokenizers`: a small byte-fallback BPE trained by
 * tests/reference/gen_tokenizer_fixtures.py (tests/fixtures/tokenizer_tiny/tokenizer.json, with Gemma's
 * normalizer and pre-tokenizer, special and non-special added tokens, and one added token outside the
 * model vocabulary), exact ids and decodes on the corpus of tokenizer_tiny_parity.jsonl (also through
 * the tokenizer cache file: written, mapped back, same ids); then malformed
 * and unsupported tokenizer.json files, each refused with a clear message. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemma.h"
#include "test_util.h"
#include "tokcache_util.h"
#include "tokenizer_fixture.h"

static char g_dir[256];

static void parity(const gm_tokenizer *tok, const tf_file *f) {
    size_t bad = 0, dec_bad = 0, dec_n = 0;
    for (size_t k = 0; k < f->n; k++) {
        const tf_case *c = &f->cases[k];
        int32_t *ids;
        size_t n;
        if (gm_tokenizer_encode(tok, c->text, c->len, false, &ids, &n) != GM_OK) {
            CHECK(0, "case %zu: %s", k, gm_last_error());
            continue;
        }
        if (n != c->n_ids || memcmp(ids, c->ids, n * sizeof *ids)) {
            if (bad++ < 8) {
                fprintf(stderr, "tiny mismatch case %zu [%s] \"%.60s\"\n", k, c->cat, c->text);
                tf_print_diff("ids", ids, n, c->ids, c->n_ids);
            }
        }
        gm_free(ids);
        if (c->dec) {
            char *text;
            size_t tl;
            dec_n++;
            if (gm_tokenizer_decode_len(tok, c->ids, c->n_ids, &text, &tl) != GM_OK || tl != c->dec_len ||
                memcmp(text, c->dec, tl)) {
                if (dec_bad++ < 5) fprintf(stderr, "tiny decode mismatch case %zu: \"%.60s\"\n", k, text);
            }
            gm_free(text);
        }
    }
    printf("tiny tokenizer.json: %zu cases, %zu id mismatches; %zu decodes, %zu mismatches\n", f->n, bad, dec_n, dec_bad);
    CHECK(f->n >= 400 && bad == 0, "%zu of %zu cases differ from HF", bad, f->n);
    CHECK(dec_n >= 400 && dec_bad == 0, "%zu of %zu decodes differ from HF", dec_bad, dec_n);
}

/* Write `root` as <g_dir>/<name>/tokenizer.json and try to load that folder. */
static gm_status load_variant(const cJSON *root, const char *name, gm_tokenizer **out) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    char *text = cJSON_PrintUnformatted(root);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    free(text);
    return gm_tokenizer_load(dir, out);
}

static void expect_error(const cJSON *root, const char *name, gm_status want, const char *needle) {
    gm_tokenizer *tok = (gm_tokenizer *)1;
    gm_status st = load_variant(root, name, &tok);
    CHECK(st == want && tok == NULL, "%s: status %s (want %s)", name, gm_status_name(st), gm_status_name(want));
    CHECK(strstr(gm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", name, gm_last_error(), needle);
    printf("  %-22s -> %s: %s\n", name, gm_status_name(st), gm_last_error());
}

static cJSON *fresh(const char *path) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(b);
    free(b);
    return j;
}

static void malformed(const char *json_path) {
    cJSON *j;
    j = fresh(json_path);
    cJSON_ReplaceItemInObject(j, "normalizer", cJSON_CreateNull());
    expect_error(j, "no_normalizer", GM_ERR_UNSUPPORTED, "normalizer");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "byte_fallback", cJSON_CreateFalse());
    expect_error(j, "no_byte_fallback", GM_ERR_UNSUPPORTED, "byte_fallback");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "type", cJSON_CreateString("Unigram"));
    expect_error(j, "unigram", GM_ERR_UNSUPPORTED, "Unigram");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_ReplaceItemInObject(j, "pre_tokenizer", cJSON_Parse("{\"type\":\"ByteLevel\"}"));
    expect_error(j, "bytelevel", GM_ERR_UNSUPPORTED, "ByteLevel");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_AddItemToArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "merges"),
                         cJSON_Parse("[\"no-such-piece\", \"x\"]"));
    expect_error(j, "bad_merge", GM_ERR_FORMAT, "no-such-piece");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_AddItemToArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "merges"), cJSON_CreateNumber(7));
    expect_error(j, "merge_not_pair", GM_ERR_FORMAT, "merges");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "vocab"), "<0x41>");
    expect_error(j, "missing_byte", GM_ERR_FORMAT, "has no piece");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_AddItemToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "vocab"), "dup", cJSON_CreateNumber(5));
    expect_error(j, "duplicate_id", GM_ERR_FORMAT, "given twice");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_AddItemToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "vocab"), "huge",
                          cJSON_CreateNumber(4e9));
    expect_error(j, "absurd_id", GM_ERR_FORMAT, "huge");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 0), "lstrip",
                              cJSON_CreateTrue());
    expect_error(j, "lstrip", GM_ERR_UNSUPPORTED, "lstrip");
    cJSON_Delete(j);

    j = fresh(json_path);
    cJSON_ReplaceItemInObject(j, "model", cJSON_CreateString("nope"));
    expect_error(j, "model_not_object", GM_ERR_FORMAT, "model");
    cJSON_Delete(j);

    /* truncated file */
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/truncated", g_dir);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "wb");
    fputs("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0", f);
    fclose(f);
    gm_tokenizer *tok;
    CHECK(gm_tokenizer_load(dir, &tok) == GM_ERR_FORMAT && strstr(gm_last_error(), "JSON"), "truncated: %s",
          gm_last_error());
    /* an empty folder */
    snprintf(dir, sizeof dir, "%s/empty", g_dir);
    mkdir(dir, 0700);
    CHECK(gm_tokenizer_load(dir, &tok) == GM_ERR_IO && strstr(gm_last_error(), "neither"), "empty folder: %s",
          gm_last_error());
    CHECK(gm_tokenizer_load("/nonexistent/tokenizer", &tok) == GM_ERR_IO, "missing path");
    CHECK(gm_tokenizer_load(NULL, &tok) == GM_ERR_ARG, "NULL path");
}

int main(void) {
    char dir[1024], file[1100], fx[1024];
    gm_test_fixture("tokenizer_tiny", dir, sizeof dir);
    snprintf(file, sizeof file, "%s/tokenizer.json", dir);
    gm_tokenizer *a, *b;
    CHECK(gm_tokenizer_load(dir, &a) == GM_OK, "load folder %s: %s", dir, gm_last_error());
    CHECK(gm_tokenizer_load(file, &b) == GM_OK, "load file %s: %s", file, gm_last_error());
    if (!a || !b) return gm_test_finish();
    tf_file f;
    if (tf_load(gm_test_fixture("tokenizer_tiny_parity.jsonl", fx, sizeof fx), &f) != 0) {
        CHECK(0, "cannot read %s", fx);
        return gm_test_finish();
    }
    int vs = (int)cJSON_GetObjectItem(f.header, "vocab_size")->valuedouble;
    CHECK(gm_tokenizer_vocab_size(a) == vs, "vocab %d, HF %d", gm_tokenizer_vocab_size(a), vs);
    int32_t soft = gm_tokenizer_find(a, "<image_soft_token>");
    CHECK(soft == vs - 1 && gm_tokenizer_is_control(a, soft), "added token outside the model vocabulary: %d", soft);
    CHECK(gm_tokenizer_bos_id(a) == gm_tokenizer_find(a, "<bos>") && gm_tokenizer_bos_id(a) >= 0, "bos");
    parity(a, &f);
    parity(b, &f);
    gm_tokenizer *mapped = tokcache_roundtrip(a, "tokenizer.json"); /* merges list: the pair map too */
    if (mapped) parity(mapped, &f);
    gm_tokenizer_free(mapped);
    tf_free(&f);
    gm_tokenizer_free(a);
    gm_tokenizer_free(b);

    snprintf(g_dir, sizeof g_dir, "/tmp/gm_tok_json_XXXXXX");
    if (!mkdtemp(g_dir)) {
        CHECK(0, "mkdtemp");
        return gm_test_finish();
    }
    malformed(file);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0, "cleanup");
    return gm_test_finish();
}
