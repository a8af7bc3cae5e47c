/* Piece text -> id hash map (see piece_map.h). */
#include "text/piece_map.h"

#include <stdlib.h>

gm_status gm_piece_map_init(gm_piece_map *m, const char *blob, const uint32_t *off, const uint32_t *len,
                            int32_t n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for a %zu-slot piece map", cap);
    m->mask = cap - 1;
    m->blob = blob;
    m->off = off;
    m->len = len;
    return GM_OK;
}

static void insert_hashed(gm_piece_map *m, int32_t id, uint32_t h) {
    const char *blob = m->blob;
    const uint32_t *off = m->off, *len = m->len;
    const uint8_t *s = (const uint8_t *)blob + off[id];
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t v = m->slots[i];
        if (!v) {
            m->slots[i] = ((uint64_t)h << 32) | (uint32_t)(id + 1);
            return;
        }
        int32_t other = (int32_t)(uint32_t)v - 1;
        if ((uint32_t)(v >> 32) == h && len[other] == len[id] && memcmp(blob + off[other], s, len[id]) == 0)
            return; /* duplicate text: the first id inserted wins */
    }
}

/* A vocabulary's worth of inserts is one cache miss each into a table of megabytes: hashing a few
 * ids ahead and prefetching their slots overlaps the misses. */
void gm_piece_map_insert_ids(gm_piece_map *m, const int32_t *ids, size_t n) {
    enum { AHEAD = 16 };
    uint32_t ring[AHEAD];
    for (size_t k = 0; k < n && k < AHEAD; k++) {
        ring[k] = gm_piece_hash((const uint8_t *)m->blob + m->off[ids[k]], m->len[ids[k]]);
        __builtin_prefetch(&m->slots[ring[k] & m->mask], 1);
    }
    for (size_t k = 0; k < n; k++) {
        uint32_t h = ring[k % AHEAD];
        if (k + AHEAD < n) {
            int32_t a = ids[k + AHEAD];
            uint32_t ha = gm_piece_hash((const uint8_t *)m->blob + m->off[a], m->len[a]);
            ring[k % AHEAD] = ha;
            __builtin_prefetch(&m->slots[ha & m->mask], 1);
        }
        insert_hashed(m, ids[k], h);
    }
}

void gm_piece_map_free(gm_piece_map *m) {
    free(m->slots);
    m->slots = NULL;
}
