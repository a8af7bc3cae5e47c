/* (left id, right id) -> (rank, merged id) for tokenizer.json merges lists. A pair listed twice keeps
 * the later entry, as the HashMap that HF `tokenizers` collects the list into does. */
#include <stdlib.h>

#include "text/tokenizer_internal.h"

static inline size_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return (size_t)k;
}

gm_status gm_pair_map_init(gm_pair_map *pm, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2) cap <<= 1;
    pm->keys = calloc(cap, sizeof *pm->keys);
    pm->rank = malloc(cap * sizeof *pm->rank);
    pm->merged = malloc(cap * sizeof *pm->merged);
    pm->mask = cap - 1;
    pm->count = 0;
    if (!pm->keys || !pm->rank || !pm->merged) {
        gm_pair_map_free(pm);
        return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %zu merges", expected);
    }
    return GM_OK;
}

static gm_status grow(gm_pair_map *pm) {
    gm_pair_map bigger;
    GM_TRY(gm_pair_map_init(&bigger, (pm->mask + 1)));
    for (size_t i = 0; i <= pm->mask; i++)
        if (pm->keys[i]) {
            uint64_t k = pm->keys[i] - 1;
            gm_pair_map_put(&bigger, (int32_t)(k >> 32), (int32_t)(uint32_t)k, pm->rank[i], pm->merged[i]);
        }
    gm_pair_map_free(pm);
    *pm = bigger;
    return GM_OK;
}

gm_status gm_pair_map_put(gm_pair_map *pm, int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    if ((pm->count + 1) * 2 > pm->mask + 1) GM_TRY(grow(pm));
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    for (size_t i = pair_hash(key) & pm->mask;; i = (i + 1) & pm->mask) {
        if (!pm->keys[i] || pm->keys[i] == key) {
            if (!pm->keys[i]) pm->count++;
            pm->keys[i] = key;
            pm->rank[i] = rank;
            pm->merged[i] = merged;
            return GM_OK;
        }
    }
}

bool gm_pair_map_get(const gm_pair_map *pm, int32_t left, int32_t right, uint32_t *rank, int32_t *merged) {
    if (!pm->keys) return false;
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    for (size_t i = pair_hash(key) & pm->mask;; i = (i + 1) & pm->mask) {
        uint64_t k = pm->keys[i];
        if (!k) return false;
        if (k == key) {
            *rank = pm->rank[i];
            *merged = pm->merged[i];
            return true;
        }
    }
}

void gm_pair_map_free(gm_pair_map *pm) {
    free(pm->keys);
    free(pm->rank);
    free(pm->merged);
    pm->keys = NULL;
    pm->rank = NULL;
    pm->merged = NULL;
    pm->mask = pm->count = 0;
}
