/* Internal layout of gm_tokenizer, shared by the vocabulary loaders (GGUF, tokenizer.json,
 * tokenizer.model), the BPE core and the public API in tokenizer.c.
 *
 * Semantics follow Hugging Face `tokenizers` on Gemma's tokenizer.json:
 *   1. "added" pieces (control and user-defined: <bos>, <start_of_turn>, "\n\n", <h1>, ...) are cut out of
 *      the raw text first, leftmost-longest;
 *   2. each remaining segment gets ' ' -> U+2581 (no dummy prefix, nothing else);
 *   3. BPE over the whole segment (no pre-tokenizer split): start from characters (a character missing
 *      from the vocabulary becomes its UTF-8 bytes as <0xXX> pieces), then repeatedly apply the
 *      best-ranked adjacent merge, leftmost first among equal ranks.
 * Merge ranks come from tokenizer.json's merges list, or (GGUF, tokenizer.model: no merges stored)
 * are derived from the piece scores exactly the way the HF converter builds that list:
 *   rank order of (left, right) -> m  =  score(m) desc, chars(left) desc, chars(right) desc, m asc,
 *   over pieces m of type NORMAL or USER_DEFINED (the latter with score 0, as SentencePiece stores it),
 *   for every split of m into two vocabulary pieces. */
#ifndef GM_TEXT_TOKENIZER_INTERNAL_H
#define GM_TEXT_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "text/piece_map.h"

/* SentencePiece / GGUF token types. */
enum {
    GM_PIECE_NORMAL = 1,
    GM_PIECE_UNKNOWN = 2,
    GM_PIECE_CONTROL = 3,
    GM_PIECE_USER_DEFINED = 4,
    GM_PIECE_UNUSED = 5,
    GM_PIECE_BYTE = 6
};

/* Per-piece flags. */
enum {
    GM_PF_IN_MODEL = 1,     /* part of the BPE model's vocabulary (HF: model.vocab) */
    GM_PF_ADDED = 2,        /* cut out of raw text before BPE */
    GM_PF_SKIP_DECODE = 4,  /* decodes to nothing (control / HF "special") */
    GM_PF_MERGE_TARGET = 8, /* derived-rank mode: may be the result of a merge */
    GM_PF_BYTE = 16         /* text is "<0xXX>": decodes to that raw byte (HF ByteFallback rule) */
};

#define GM_TOK_MAX_VOCAB (1 << 24)      /* absurd-size guard for every loader */
#define GM_TOK_MAX_PIECE_BYTES 65535    /* longest piece accepted */
#define GM_TOK_MAX_MERGED_BYTES 1023    /* longest piece a merge may produce (BPE candidate packing) */
#define GM_TOK_MAX_TEXT ((size_t)1 << 30) /* longest input accepted by encode */

/* Trie over the added pieces' bytes (leftmost-longest matching on raw text). */
typedef struct gm_trie_node {
    int32_t child;   /* first child node, -1 none */
    int32_t sibling; /* next sibling node, -1 none */
    int32_t id;      /* piece id ending here, -1 none */
    uint8_t byte;
} gm_trie_node;

typedef struct gm_added_trie {
    int32_t root[256]; /* node for the first byte, -1 none */
    gm_trie_node *nodes;
    size_t n_nodes, cap;
} gm_added_trie;

/* (left id, right id) -> (rank, merged id), from an explicit merges list. */
typedef struct gm_pair_map {
    uint64_t *keys;  /* (left << 32 | right) + 1; 0 = empty slot */
    uint32_t *rank;
    int32_t *merged;
    size_t mask;     /* capacity - 1 (power of two) */
    size_t count;
} gm_pair_map;

struct gm_tokenizer {
    int32_t n;              /* ids 0 .. n-1 */
    char *blob;             /* all piece strings, each NUL-terminated */
    size_t blob_cap, blob_fill;
    uint32_t *off;          /* [n] offset of piece i in blob */
    uint32_t *len;          /* [n] bytes of piece i */
    uint16_t *nchars;       /* [n] code points of piece i (merge-rank tie-breaks) */
    uint8_t *type;          /* [n] GM_PIECE_* */
    uint8_t *flags;         /* [n] GM_PF_* */
    float *score;           /* [n] merge priority for derived ranks (higher first) */
    uint8_t *dec_byte;      /* [n] the raw byte of a GM_PF_BYTE piece */
    char *dec_blob;         /* decoded bytes per id (U+2581 -> ' ', byte pieces -> the byte, skipped -> "") */
    uint32_t *dec_off, *dec_len;
    gm_piece_map map;       /* piece text -> id (all ids) */
    int32_t ascii_id[128];  /* single ASCII character -> model id, -1 if absent */
    int32_t byte_id[256];   /* "<0xXX>" -> model id, -1 if absent */
    gm_added_trie trie;
    bool has_merges;        /* explicit merges list (tokenizer.json) vs derived ranks */
    gm_pair_map pairs;
    int32_t unk_id, bos_id, eos_id;
    bool fuse_unk;
    uint32_t max_piece_len;
    char source[64];        /* "gguf", "tokenizer.json", "tokenizer.model" */
    void *cache_map;        /* mapped from a tokenizer cache file (tokenizer_cache.h): the arrays point */
    size_t cache_map_bytes; /* into it, and release unmaps it instead of freeing them */
};

/* Loader scaffold: the loaders fill pieces, types, scores and flags through these, then call
 * gm_tok_finish() which builds every derived table. */
gm_status gm_tok_alloc(gm_tokenizer *t, int32_t n, uint64_t blob_bytes, const char *what);
/* Set piece `id` (text copied; may contain any bytes). Pieces are appended in id order. */
gm_status gm_tok_set_piece(gm_tokenizer *t, int32_t id, const char *text, size_t len, const char *what);
gm_status gm_tok_finish(gm_tokenizer *t, const char *what);
void gm_tok_release(gm_tokenizer *t);

static inline const char *gm_tok_text(const gm_tokenizer *t, int32_t id) { return t->blob + t->off[id]; }

/* Loaders (fill a zeroed gm_tokenizer). */
gm_status gm_vocab_load_gguf(gm_tokenizer *t, const char *path);
gm_status gm_vocab_load_hf_json(gm_tokenizer *t, const char *path);
gm_status gm_vocab_load_spm(gm_tokenizer *t, const char *path);

/* Added-piece trie. */
gm_status gm_trie_add(gm_added_trie *tr, const char *s, size_t len, int32_t id);
/* Longest added piece starting at s[0] (within n bytes): its id and *mlen, or -1. */
int32_t gm_trie_longest(const gm_added_trie *tr, const uint8_t *s, size_t n, size_t *mlen);
void gm_trie_free(gm_added_trie *tr);

/* Pair map. */
gm_status gm_pair_map_init(gm_pair_map *pm, size_t expected);
gm_status gm_pair_map_put(gm_pair_map *pm, int32_t left, int32_t right, uint32_t rank, int32_t merged);
bool gm_pair_map_get(const gm_pair_map *pm, int32_t left, int32_t right, uint32_t *rank, int32_t *merged);
void gm_pair_map_free(gm_pair_map *pm);

/* BPE over one normalized segment; appends ids to *out (grown with realloc). */
typedef struct gm_bpe_work gm_bpe_work;
gm_bpe_work *gm_bpe_work_new(void);
void gm_bpe_work_free(gm_bpe_work *w);
gm_status gm_bpe_segment(const gm_tokenizer *t, gm_bpe_work *w, const uint8_t *text, size_t len,
                         int32_t **out, size_t *n_out, size_t *cap_out);

/* Strict UTF-8 (as Rust's str): length of the valid sequence at s, or 0 if invalid/truncated. */
static inline size_t gm_utf8_valid_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

#endif
