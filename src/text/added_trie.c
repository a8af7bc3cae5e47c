/* Byte trie over the "added" pieces (control and user-defined tokens), for the leftmost-longest cut
 * of raw text that Hugging Face `tokenizers` does (Aho-Corasick, MatchKind::LeftmostLongest) before
 * normalization and BPE. Scanning positions left to right and taking the longest piece that starts
 * at the first position where any piece starts gives the same matches. */
#include <stdlib.h>

#include "text/tokenizer_internal.h"

static int32_t new_node(gm_added_trie *tr, uint8_t byte) {
    if (tr->n_nodes == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 1024;
        gm_trie_node *nn = realloc(tr->nodes, cap * sizeof *nn);
        if (!nn) return -1;
        tr->nodes = nn;
        tr->cap = cap;
    }
    if (tr->n_nodes >= INT32_MAX) return -1;
    gm_trie_node *nd = &tr->nodes[tr->n_nodes];
    nd->child = nd->sibling = nd->id = -1;
    nd->byte = byte;
    return (int32_t)tr->n_nodes++;
}

gm_status gm_trie_add(gm_added_trie *tr, const char *s, size_t len, int32_t id) {
    if (!tr->nodes)
        for (int i = 0; i < 256; i++) tr->root[i] = -1;
    if (len == 0) return GM_OK; /* an empty added token never matches (as in HF) */
    const uint8_t *p = (const uint8_t *)s;
    int32_t node = tr->root[p[0]];
    if (node < 0) {
        node = new_node(tr, p[0]);
        if (node < 0) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for the added-token trie");
        tr->root[p[0]] = node;
    }
    for (size_t i = 1; i < len; i++) {
        int32_t c = tr->nodes[node].child, prev = -1;
        while (c >= 0 && tr->nodes[c].byte != p[i]) {
            prev = c;
            c = tr->nodes[c].sibling;
        }
        if (c < 0) {
            c = new_node(tr, p[i]);
            if (c < 0) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for the added-token trie");
            if (prev < 0) tr->nodes[node].child = c;
            else tr->nodes[prev].sibling = c;
        }
        node = c;
    }
    if (tr->nodes[node].id < 0) tr->nodes[node].id = id; /* the same text twice: first id wins */
    return GM_OK;
}

int32_t gm_trie_longest(const gm_added_trie *tr, const uint8_t *s, size_t n, size_t *mlen) {
    if (!tr->nodes || n == 0) return -1;
    int32_t node = tr->root[s[0]], best = -1;
    size_t i = 0;
    while (node >= 0) {
        const gm_trie_node *nd = &tr->nodes[node];
        if (nd->id >= 0) {
            best = nd->id;
            *mlen = i + 1;
        }
        if (++i >= n) break;
        int32_t c = nd->child;
        while (c >= 0 && tr->nodes[c].byte != s[i]) c = tr->nodes[c].sibling;
        node = c;
    }
    return best;
}

void gm_trie_free(gm_added_trie *tr) {
    free(tr->nodes);
    tr->nodes = NULL;
    tr->n_nodes = tr->cap = 0;
}
