/* The tokenizer cache: a built tokenizer (pieces, decode strings, piece map, added-piece trie, merge
 * pairs) kept in one file, so that a later load maps it from the page cache instead of building its
 * tables again: on the 270M's 262144 pieces the build is ~40 ms of a ~60 ms load, the mapping ~2 ms.
 * The model loader keeps it beside the weight cache (--weight-cache DIR), as DIR/<model>-<key>.gmtok.
 *
 * The file: a header (magic, format version, the caller's key, file size, a hash of everything after
 * the header, the scalar fields and small tables) and 64-byte aligned sections, one per array. A file
 * whose header, size or hash does not check out, or whose tables break an invariant the encoder relies
 * on (ids in range, strings inside their blob, trie links that only point forward, a free slot in each
 * hash table), is a miss: the caller builds the tokenizer and writes the file again. */
#ifndef GM_TEXT_TOKENIZER_CACHE_H
#define GM_TEXT_TOKENIZER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "gemma.h"

/* The file layout, for tests and the fuzz harness that forge files: the header's size (the hash covers
 * everything after it), where the key, file size and hash sit, and the section table ({offset, count}
 * as two uint64 per section, in the order of the sections: blob, off, len, nchars, type, flags, score,
 * dec_byte, dec_blob, dec_off, dec_len, piece map, trie nodes, pair keys, pair ranks, pair merged). */
enum {
    GM_TOKCACHE_HEADER_BYTES = 2952,
    GM_TOKCACHE_KEY_AT = 16,
    GM_TOKCACHE_SIZE_AT = 24,
    GM_TOKCACHE_HASH_AT = 32,
    GM_TOKCACHE_BYTE_ID_AT = 648,
    GM_TOKCACHE_SECTIONS_AT = 2696,
    GM_TOKCACHE_SECTIONS = 16
};

/* The tokenizer in the file at path when the file is valid and made for key (*out NULL on a miss).
 * Fails only on a bad argument or out of memory. The tokenizer points into the file's mapping, which
 * gm_tokenizer_free unmaps. */
gm_status gm_tokcache_load(const char *path, uint64_t key, gm_tokenizer **out);
/* Write tok to path (a temporary name, flushed, then renamed). Returns whether it was written; why
 * says what failed otherwise. */
bool gm_tokcache_write(const char *path, uint64_t key, const gm_tokenizer *tok, char *why, size_t why_len);

#endif
