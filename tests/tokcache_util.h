/* The tokenizer written to a tokenizer cache file and mapped back (text/tokenizer_cache.h), so that a
 * test runs its reference checks (Hugging Face ids and decodes) on the mapped copy too. */
#ifndef GM_TESTS_TOKCACHE_UTIL_H
#define GM_TESTS_TOKCACHE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_util.h"
#include "text/tokenizer_cache.h"

/* The mapped copy, or NULL with a failed CHECK. A load under another key must miss. The file is
 * removed once mapped (the mapping stays valid). */
static inline gm_tokenizer *tokcache_roundtrip(const gm_tokenizer *tok, const char *label) {
    char dir[64] = "/tmp/gm_tokcache_XXXXXX", path[128], why[512];
    if (!mkdtemp(dir)) {
        CHECK(0, "%s: mkdtemp", label);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/t.gmtok", dir);
    const uint64_t key = 0x1234abcd5678ef01ull;
    gm_tokenizer *mapped = NULL, *other = NULL;
    bool wrote = gm_tokcache_write(path, key, tok, why, sizeof why);
    CHECK(wrote, "%s: tokenizer cache not written: %s", label, why);
    CHECK(gm_tokcache_load(path, key + 1, &other) == GM_OK && !other, "%s: a file for another key was used", label);
    gm_tokenizer_free(other);
    CHECK(gm_tokcache_load(path, key, &mapped) == GM_OK && mapped, "%s: the tokenizer cache file was not used", label);
    unlink(path);
    rmdir(dir);
    if (mapped)
        CHECK(gm_tokenizer_vocab_size(mapped) == gm_tokenizer_vocab_size(tok) &&
                  gm_tokenizer_bos_id(mapped) == gm_tokenizer_bos_id(tok),
              "%s: the mapped tokenizer's vocabulary or <bos> differ", label);
    return mapped;
}

#endif
