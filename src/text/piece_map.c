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

void gm_piece_map_insert(gm_piece_map *m, int32_t id) {
    const char *blob = m->blob;
    const uint32_t *off = m->off, *len = m->len;
    {
        const uint8_t *s = (const uint8_t *)blob + off[id];
        uint32_t h = gm_piece_hash(s, len[id]);
        for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
            uint64_t v = m->slots[i];
            if (!v) {
                m->slots[i] = ((uint64_t)h << 32) | (uint32_t)(id + 1);
                break;
            }
            int32_t other = (int32_t)(uint32_t)v - 1;
            if ((uint32_t)(v >> 32) == h && len[other] == len[id] && memcmp(blob + off[other], s, len[id]) == 0)
                break; /* duplicate text: the first id inserted wins */
        }
    }
}

void gm_piece_map_free(gm_piece_map *m) {
    free(m->slots);
    m->slots = NULL;
}
