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

/* the layout is the writer's: tokenizer_cache.c asserts it at compile time, and test_tokenizer_cache maps
 * a real file whose hash was recomputed this same way */
static const uint64_t KEY = 0x5eed5eed5eed5eedull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n = size > GM_TOKCACHE_HEADER_BYTES ? size : GM_TOKCACHE_HEADER_BYTES;
    uint8_t *buf = calloc(1, n);
    if (!buf) abort();
    memcpy(buf, data, size);
    uint64_t file_bytes = n, h = gm_hash_words(buf + GM_TOKCACHE_HEADER_BYTES, n - GM_TOKCACHE_HEADER_BYTES);
    memcpy(buf + GM_TOKCACHE_KEY_AT, &KEY, 8);
    memcpy(buf + GM_TOKCACHE_SIZE_AT, &file_bytes, 8);
    memcpy(buf + GM_TOKCACHE_HASH_AT, &h, 8);
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
