/* libFuzzer harness: any bytes as a tokenizer cache file (text/tokenizer_cache.h), mapped with
 * gm_tokcache_load; a tokenizer it accepts must encode and decode (tok_props.h). So that inputs get
 * past the header, the harness writes the right key, file size and hash into them (a file for another
 * model, cut short or with a changed byte is refused on those, which the CLI test shows); the scalar
 * fields, section table and tables stay the fuzzer's, so the checks that keep a forged file from
 * reading out of bounds or looping are what is fuzzed.
 * Seeds: tests/fuzz/corpus/fuzz_tokenizer_cache: the files written for tests/fixtures/tokenizer_tiny
 * (a merges list) and for the tokenizer of corpus/fuzz_gguf/seed_vocab640_q8.gguf (derived ranks). */
#include "fuzz/fuzz_util.h"
#include "fuzz/tok_props.h"

#include "base/hash.h"
#include "text/tokenizer_cache.h"

enum {
    KEY_AT = GM_TOKCACHE_KEY_AT,
    SIZE_AT = GM_TOKCACHE_SIZE_AT,
    HASH_AT = GM_TOKCACHE_HASH_AT,
    HEADER_BYTES = GM_TOKCACHE_HEADER_BYTES
};
static const uint64_t KEY = 0x5eed5eed5eed5eedull;

/* Once: the header layout this harness assumes is the writer's (a real file's hash checks out). */
static void check_layout(void) {
    static bool done;
    if (done) return;
    done = true;
    char dir[1024], path[512];
    gm_tokenizer *tok = NULL;
    FZ_ASSERT(gm_tokenizer_load(fz_fixture("tokenizer_tiny", dir, sizeof dir), &tok) == GM_OK, "%s", gm_last_error());
    char why[512];
    FZ_ASSERT(gm_tokcache_write(fz_path("layout.gmtok", path, sizeof path), KEY, tok, why, sizeof why), "%s", why);
    gm_tokenizer_free(tok);
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    uint64_t h;
    memcpy(&h, buf + HASH_AT, 8);
    FZ_ASSERT(n > HEADER_BYTES && n < sizeof buf && gm_hash_words(buf + HEADER_BYTES, n - HEADER_BYTES) == h,
              "the tokenizer cache header is not %d bytes with the hash at %d: update this harness", HEADER_BYTES,
              HASH_AT);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_layout();
    size_t n = size > HEADER_BYTES ? size : HEADER_BYTES;
    uint8_t *buf = calloc(1, n);
    if (!buf) abort();
    memcpy(buf, data, size);
    uint64_t file_bytes = n, h = gm_hash_words(buf + HEADER_BYTES, n - HEADER_BYTES);
    memcpy(buf + KEY_AT, &KEY, 8);
    memcpy(buf + SIZE_AT, &file_bytes, 8);
    memcpy(buf + HASH_AT, &h, 8);
    char path[512];
    fz_write("t.gmtok", buf, n, path, sizeof path);
    free(buf);
    gm_tokenizer *tok = NULL;
    FZ_ASSERT(gm_tokcache_load(path, KEY, &tok) == GM_OK, "%s", gm_last_error());
    if (tok) {
        fz_check_tokenizer(tok, data, size < 256 ? size : 256);
        gm_tokenizer_free(tok);
    }
    return 0;
}
