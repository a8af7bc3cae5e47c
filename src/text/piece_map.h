/* Open-addressing hash map from piece text (any bytes) to id. It stores no text of its own: keys are
 * read from the owner's blob/offset/length arrays, so the map is one uint64 per slot. */
#ifndef GM_TEXT_PIECE_MAP_H
#define GM_TEXT_PIECE_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"

typedef struct gm_piece_map {
    uint64_t *slots;   /* (hash32 << 32) | (id + 1); 0 = empty */
    size_t mask;       /* capacity - 1 (power of two, >= 2 x count) */
    const char *blob;  /* owner's strings */
    const uint32_t *off, *len;
} gm_piece_map;

static inline uint32_t gm_piece_hash(const uint8_t *s, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n); /* n < 8 */
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h >> 32);
}

/* Size the map for n ids (nothing inserted yet); then insert ids (in the order given): a repeated
 * text keeps the first id inserted. At most n insertions. */
gm_status gm_piece_map_init(gm_piece_map *m, const char *blob, const uint32_t *off, const uint32_t *len,
                            int32_t n);
void gm_piece_map_insert_ids(gm_piece_map *m, const int32_t *ids, size_t n);
void gm_piece_map_free(gm_piece_map *m);

static inline int32_t gm_piece_map_find(const gm_piece_map *m, const void *text, size_t n) {
    if (!m->slots) return -1;
    const uint8_t *s = (const uint8_t *)text;
    uint32_t h = gm_piece_hash(s, n);
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t v = m->slots[i];
        if (!v) return -1;
        if ((uint32_t)(v >> 32) == h) {
            int32_t id = (int32_t)(uint32_t)v - 1;
            if (m->len[id] == n && memcmp(m->blob + m->off[id], s, n) == 0) return id;
        }
    }
}

#endif
