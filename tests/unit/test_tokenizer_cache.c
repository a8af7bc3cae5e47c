/* The tokenizer cache file (text/tokenizer_cache.h) refuses what it must: a file for another key, of
 * another size, with a changed byte; and forged files whose hash was made to match but whose tables
 * break an invariant the encoder relies on (a piece map id out of range or a full map, a trie link
 * backward, a merge pair whose merged piece is not as long as its parts, a piece outside the blob, a
 * type out of range, a missing byte piece, a misaligned section). Each must be a miss (the caller
 * builds the tokenizer again), never a crash. The unmodified file, hash recomputed the same way, maps:
 * so each refusal is the mutation's doing. The tokenizer is tests/fixtures/tokenizer_tiny (a
 * tokenizer.json with merges and added tokens); test_tokenizer_json checks its mapped copy against HF. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "base/hash.h"
#include "gemma.h"
#include "test_util.h"
#include "text/tokenizer_cache.h"

static const uint64_t KEY = 0x0123456789abcdefull;
static char g_path[128];
static uint8_t *g_file;
static size_t g_size;

static uint64_t get_u64(const uint8_t *b, size_t at) {
    uint64_t v;
    memcpy(&v, b + at, 8);
    return v;
}
static void put_u64(uint8_t *b, size_t at, uint64_t v) { memcpy(b + at, &v, 8); }
static uint64_t sec_offset(const uint8_t *b, int s) { return get_u64(b, GM_TOKCACHE_SECTIONS_AT + 16 * (size_t)s); }
static uint64_t sec_count(const uint8_t *b, int s) { return get_u64(b, GM_TOKCACHE_SECTIONS_AT + 16 * (size_t)s + 8); }

enum { S_BLOB, S_OFF, S_LEN, S_NCHARS, S_TYPE, S_FLAGS, S_SCORE, S_DEC_BYTE, S_DEC_BLOB, S_DEC_OFF, S_DEC_LEN, S_MAP,
       S_TRIE, S_PAIR_KEYS, S_PAIR_RANK, S_PAIR_MERGED };

/* Write b (n bytes) to the test file, optionally with its hash made to match; load it. */
static bool maps(uint8_t *b, size_t n, bool fix_hash, uint64_t key) {
    if (fix_hash) put_u64(b, GM_TOKCACHE_HASH_AT, gm_hash_words(b + GM_TOKCACHE_HEADER_BYTES, n - GM_TOKCACHE_HEADER_BYTES));
    FILE *f = fopen(g_path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n, "write %s", g_path);
    if (f) fclose(f);
    gm_tokenizer *t = NULL;
    CHECK(gm_tokcache_load(g_path, key, &t) == GM_OK, "load: %s", gm_last_error());
    bool hit = t != NULL;
    if (t) { /* what a caller does with it: encode and decode (a forged table would show here under ASan) */
        int32_t *ids = NULL;
        size_t k = 0;
        char *text = NULL;
        if (gm_tokenizer_encode(t, "Hello <start_of_turn> world\xff", 27, true, &ids, &k) == GM_OK)
            (void)gm_tokenizer_decode(t, ids, k, &text);
        gm_free(ids);
        gm_free(text);
    }
    gm_tokenizer_free(t);
    return hit;
}

typedef void (*mutation)(uint8_t *b);

/* A copy of the valid file, mutated, hash fixed: must not map. */
static void refused(mutation m, const char *what) {
    uint8_t *b = malloc(g_size);
    memcpy(b, g_file, g_size);
    m(b);
    CHECK(!maps(b, g_size, true, KEY), "forged file mapped: %s", what);
    free(b);
}

static int32_t vocab(const uint8_t *b) {
    int32_t n;
    memcpy(&n, b + 12, 4);
    return n;
}
static uint64_t *map_slots(uint8_t *b) { return (uint64_t *)(b + sec_offset(b, S_MAP)); }

static void map_id_too_big(uint8_t *b) {
    uint64_t *s = map_slots(b);
    for (uint64_t i = 0;; i++)
        if (s[i]) {
            s[i] = (s[i] & ~0xffffffffull) | (uint32_t)(vocab(b) + 1);
            return;
        }
}
static void map_id_zero(uint8_t *b) { /* a filled slot whose id + 1 is 0: id -1 */
    uint64_t *s = map_slots(b);
    for (uint64_t i = 0;; i++)
        if (s[i]) {
            s[i] &= ~0xffffffffull;
            return;
        }
}
static void map_full(uint8_t *b) { /* no free slot: a lookup of an absent piece would never stop */
    uint64_t *s = map_slots(b);
    for (uint64_t i = 0; i < sec_count(b, S_MAP); i++)
        if (!s[i]) s[i] = 1;
}
static void trie_loop(uint8_t *b) { /* node 1's child is node 0 (links must point forward) */
    int32_t *node1 = (int32_t *)(b + sec_offset(b, S_TRIE) + 16);
    node1[0] = 0;
}
static void pair_bad_length(uint8_t *b) { /* a merged piece longer than its two parts */
    const uint64_t *keys = (const uint64_t *)(b + sec_offset(b, S_PAIR_KEYS));
    int32_t *merged = (int32_t *)(b + sec_offset(b, S_PAIR_MERGED));
    const uint32_t *len = (const uint32_t *)(b + sec_offset(b, S_LEN));
    for (uint64_t i = 0;; i++)
        if (keys[i]) {
            for (int32_t m = 0; m < vocab(b); m++)
                if (len[m] != len[merged[i]]) {
                    merged[i] = m;
                    return;
                }
        }
}
static void piece_outside_blob(uint8_t *b) {
    uint32_t *off = (uint32_t *)(b + sec_offset(b, S_OFF));
    off[5] = (uint32_t)sec_count(b, S_BLOB);
}
static void type_out_of_range(uint8_t *b) { b[sec_offset(b, S_TYPE) + 3] = 7; }
static void no_byte_piece(uint8_t *b) { memcpy(b + GM_TOKCACHE_BYTE_ID_AT + 4 * 0x41, &(int32_t){-1}, 4); }
static void misaligned_section(uint8_t *b) { put_u64(b, GM_TOKCACHE_SECTIONS_AT + 16 * S_SCORE, sec_offset(b, S_SCORE) + 4); }
static void section_past_end(uint8_t *b) { put_u64(b, GM_TOKCACHE_SECTIONS_AT + 16 * S_DEC_BLOB + 8, 1ull << 40); }

int main(void) {
    char fx[1024], why[512], dir[64] = "/tmp/gm_tokcache_test_XXXXXX";
    gm_tokenizer *tok = NULL;
    CHECK(gm_tokenizer_load(gm_test_fixture("tokenizer_tiny", fx, sizeof fx), &tok) == GM_OK, "load %s: %s", fx,
          gm_last_error());
    if (!tok || !mkdtemp(dir)) return gm_test_finish();
    snprintf(g_path, sizeof g_path, "%s/t.gmtok", dir);
    CHECK(gm_tokcache_write(g_path, KEY, tok, why, sizeof why), "write: %s", why);
    gm_tokenizer_free(tok);
    FILE *f = fopen(g_path, "rb");
    static uint8_t buf[1 << 20];
    g_size = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    g_file = buf;
    CHECK(g_size > GM_TOKCACHE_HEADER_BYTES && get_u64(buf, GM_TOKCACHE_SIZE_AT) == g_size, "the file: %zu bytes",
          g_size);
    CHECK(sec_count(buf, S_PAIR_KEYS) > 0 && sec_count(buf, S_TRIE) > 1, "the fixture has merge pairs and a trie");

    /* the control: the same bytes, hash recomputed as the forgeries' are */
    uint8_t *b = malloc(g_size + 1);
    memcpy(b, buf, g_size);
    CHECK(maps(b, g_size, true, KEY), "the valid file (hash recomputed) does not map");
    /* what the header alone catches */
    CHECK(!maps(b, g_size, false, KEY + 1), "a file for another key mapped");
    b[g_size] = 0;
    CHECK(!maps(b, g_size + 1, false, KEY), "a file one byte longer than its header says mapped");
    b[g_size / 2] ^= 0x20;
    CHECK(!maps(b, g_size, false, KEY), "a file with a changed byte (hash not fixed) mapped");
    free(b);
    /* forgeries with a matching hash */
    refused(map_id_too_big, "a piece map id past the vocabulary");
    refused(map_id_zero, "a piece map slot holding id -1");
    refused(map_full, "a piece map without a free slot");
    refused(trie_loop, "a trie link pointing backward");
    refused(pair_bad_length, "a merge pair whose merged piece is not as long as its parts");
    refused(piece_outside_blob, "a piece offset past the blob");
    refused(type_out_of_range, "piece type 7");
    refused(no_byte_piece, "byte piece <0x41> missing");
    refused(misaligned_section, "a misaligned section");
    refused(section_past_end, "a section past the end of the file");
    unlink(g_path);
    rmdir(dir);
    return gm_test_finish();
}
