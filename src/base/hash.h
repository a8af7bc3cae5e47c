/* FNV-1a, 64-bit: the hash of identities that must not change between runs or builds (file
 * fingerprints, weight cache keys and tables, parameter names). Not for hash tables of hot paths.
 * gm_hash_words: the integrity check of cache files too large for FNV-1a's byte loop. */
#ifndef GM_BASE_HASH_H
#define GM_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GM_FNV_SEED 1469598103934665603ull

/* h extended by the n bytes at p (start from GM_FNV_SEED) */
static inline uint64_t gm_fnv1a(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

/* A 64-bit hash of n bytes at ~10 GB/s: four lanes, each a bijection of its state per 8-byte word
 * (so one changed word always changes the result), then FNV-1a over the tail and the lanes. Not
 * cryptographic: it catches damage, not forgery. */
static inline uint64_t gm_hash_words(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t h[4] = {GM_FNV_SEED, 0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull ^ n};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * k, 8);
            h[k] = (h[k] ^ w) * 0xBF58476D1CE4E5B9ull;
            h[k] ^= h[k] >> 29;
        }
    return gm_fnv1a(gm_fnv1a(GM_FNV_SEED, b + i, n - i), h, sizeof h);
}

#endif
