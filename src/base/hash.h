/* FNV-1a, 64-bit: the hash of identities that must not change between runs or builds (file
 * fingerprints, weight cache keys and tables, parameter names). Not for hash tables of hot paths. */
#ifndef GM_BASE_HASH_H
#define GM_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define GM_FNV_SEED 1469598103934665603ull

/* h extended by the n bytes at p (start from GM_FNV_SEED) */
static inline uint64_t gm_fnv1a(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

#endif
