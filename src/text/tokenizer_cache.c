/* Tokenizer cache file (see tokenizer_cache.h). */
#define _GNU_SOURCE
#include "text/tokenizer_cache.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "io/cache_file.h"
#include "text/tokenizer_internal.h"

enum { TC_VERSION = 1, TC_ALIGN = 64 };
static const char TC_MAGIC[8] = {'G', 'M', 'T', 'O', 'K', 'C', '\n', 0};

/* the sections, in file order */
enum {
    TC_BLOB,       /* char [blob bytes]: piece texts, each NUL-terminated */
    TC_OFF,        /* uint32 [n] */
    TC_LEN,        /* uint32 [n] */
    TC_NCHARS,     /* uint16 [n] */
    TC_TYPE,       /* uint8 [n] */
    TC_FLAGS,      /* uint8 [n] */
    TC_SCORE,      /* float [n] */
    TC_DEC_BYTE,   /* uint8 [n] */
    TC_DEC_BLOB,   /* char [decoded bytes] */
    TC_DEC_OFF,    /* uint32 [n] */
    TC_DEC_LEN,    /* uint32 [n] */
    TC_MAP,        /* uint64 [slots]: the piece map */
    TC_TRIE,       /* gm_trie_node [nodes] */
    TC_PAIR_KEYS,  /* uint64 [slots]: the merge pair map (tokenizer.json), or no slots */
    TC_PAIR_RANK,  /* uint32 [slots] */
    TC_PAIR_MERGED, /* int32 [slots] */
    TC_N
};
/* bytes per element, and whether a section has one element per piece id */
static const size_t TC_ELEM[TC_N] = {1, 4, 4, 2, 1, 1, 4, 1, 1, 4, 4, 8, sizeof(gm_trie_node), 8, 4, 4};
static const bool TC_PER_ID[TC_N] = {0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0};

typedef struct tc_header {
    char magic[8];
    uint32_t version;     /* TC_VERSION */
    int32_t n;            /* vocabulary size */
    uint64_t key;         /* the caller's: model file stamp and build */
    uint64_t file_bytes;  /* the whole file */
    uint64_t hash;        /* gm_hash_words of everything after the header */
    int32_t unk_id, bos_id, eos_id;
    uint32_t max_piece_len;
    uint8_t has_merges, fuse_unk, reserved[6];
    uint64_t pair_count;  /* filled slots of the pair map */
    char source[64];
    int32_t ascii_id[128], byte_id[256], trie_root[256];
    struct {
        uint64_t offset, count; /* file offset (TC_ALIGN-aligned) and elements */
    } sec[TC_N];
} tc_header;
_Static_assert(sizeof(tc_header) == GM_TOKCACHE_HEADER_BYTES && offsetof(tc_header, key) == GM_TOKCACHE_KEY_AT &&
                   offsetof(tc_header, file_bytes) == GM_TOKCACHE_SIZE_AT &&
                   offsetof(tc_header, hash) == GM_TOKCACHE_HASH_AT &&
                   offsetof(tc_header, byte_id) == GM_TOKCACHE_BYTE_ID_AT &&
                   offsetof(tc_header, sec) == GM_TOKCACHE_SECTIONS_AT && (int)TC_N == (int)GM_TOKCACHE_SECTIONS,
               "the layout published in tokenizer_cache.h");

static uint64_t align_up(uint64_t v) { return (v + TC_ALIGN - 1) / TC_ALIGN * TC_ALIGN; }

/* The address of each section's pointer in t (written through memcpy: the fields have several types). */
static void section_fields(gm_tokenizer *t, void *field[TC_N]) {
    field[TC_BLOB] = &t->blob;
    field[TC_OFF] = &t->off;
    field[TC_LEN] = &t->len;
    field[TC_NCHARS] = &t->nchars;
    field[TC_TYPE] = &t->type;
    field[TC_FLAGS] = &t->flags;
    field[TC_SCORE] = &t->score;
    field[TC_DEC_BYTE] = &t->dec_byte;
    field[TC_DEC_BLOB] = &t->dec_blob;
    field[TC_DEC_OFF] = &t->dec_off;
    field[TC_DEC_LEN] = &t->dec_len;
    field[TC_MAP] = &t->map.slots;
    field[TC_TRIE] = &t->trie.nodes;
    field[TC_PAIR_KEYS] = &t->pairs.keys;
    field[TC_PAIR_RANK] = &t->pairs.rank;
    field[TC_PAIR_MERGED] = &t->pairs.merged;
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static bool id_ok(int32_t id, int32_t n) { return id >= -1 && id < n; }

/* Open-addressing table: a power of two with a free slot (else a lookup of an absent key never stops). */
static bool table_ok(const uint64_t *slots, uint64_t count, uint64_t *filled) {
    if (!is_pow2(count) || count < 16) return false;
    uint64_t k = 0;
    for (uint64_t i = 0; i < count; i++) k += slots[i] != 0;
    *filled = k;
    return k < count;
}

/* Every invariant the encoder and decoder rely on for memory safety (the hash already vouched for the
 * bytes; this is what keeps a forged file from reading out of bounds or looping). */
static bool tables_ok(const gm_tokenizer *t, const tc_header *h) {
    const int32_t n = t->n;
    const uint64_t blob = h->sec[TC_BLOB].count, dec = h->sec[TC_DEC_BLOB].count;
    for (int32_t i = 0; i < n; i++) {
        if ((uint64_t)t->off[i] + t->len[i] >= blob || t->len[i] > GM_TOK_MAX_PIECE_BYTES ||
            t->blob[t->off[i] + t->len[i]] != 0 || t->type[i] < GM_PIECE_NORMAL || t->type[i] > GM_PIECE_BYTE ||
            (uint64_t)t->dec_off[i] + t->dec_len[i] > dec)
            return false;
    }
    if (t->max_piece_len > GM_TOK_MAX_MERGED_BYTES || !id_ok(t->unk_id, n) || !id_ok(t->bos_id, n) ||
        !id_ok(t->eos_id, n) || memchr(t->source, 0, sizeof t->source) == NULL)
        return false;
    for (int c = 0; c < 128; c++)
        if (!id_ok(t->ascii_id[c], n)) return false;
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0 || t->byte_id[b] >= n) return false;
    /* piece map: a filled slot holds id + 1 (branch-free: half the slots are filled, at random) */
    const uint64_t slots = t->map.mask + 1;
    if (!is_pow2(slots) || slots < 16) return false;
    uint64_t filled = 0, bad = 0;
    for (uint64_t i = 0; i < slots; i++) {
        uint64_t v = t->map.slots[i];
        filled += v != 0;
        bad |= (uint64_t)(v != 0) & (uint64_t)((uint32_t)v - 1u >= (uint32_t)n);
    }
    if (bad || filled >= slots || filled > (uint64_t)n) return false;
    /* trie: links only forward (as the builder appends nodes), so no walk can loop */
    const uint64_t nodes = t->trie.n_nodes;
    for (int b = 0; nodes && b < 256; b++)
        if (t->trie.root[b] < -1 || t->trie.root[b] >= (int64_t)nodes) return false;
    for (uint64_t i = 0; i < nodes; i++) {
        const gm_trie_node *nd = &t->trie.nodes[i];
        if ((nd->child != -1 && (nd->child <= (int64_t)i || nd->child >= (int64_t)nodes)) ||
            (nd->sibling != -1 && (nd->sibling <= (int64_t)i || nd->sibling >= (int64_t)nodes)) || !id_ok(nd->id, n))
            return false;
    }
    /* merge pairs: ids in range and merged text as long as its parts (the encoder packs lengths <= 1023) */
    if (t->pairs.keys) {
        if (!table_ok(t->pairs.keys, t->pairs.mask + 1, &filled) || filled != t->pairs.count) return false;
        for (size_t i = 0; i <= t->pairs.mask; i++) {
            if (!t->pairs.keys[i]) continue;
            uint64_t k = t->pairs.keys[i] - 1;
            uint32_t l = (uint32_t)(k >> 32), r = (uint32_t)k;
            int32_t m = t->pairs.merged[i];
            if (l >= (uint32_t)n || r >= (uint32_t)n || m < 0 || m >= n ||
                (uint64_t)t->len[l] + t->len[r] != t->len[m] || t->len[m] > t->max_piece_len)
                return false;
        }
    }
    return true;
}

/* The sections' places in the mapping, and t's pointers and sizes set from them; false when a section
 * lies outside the file or has a size the header's other fields contradict. */
static bool place_sections(gm_tokenizer *t, const tc_header *h, uint8_t *map, uint64_t size) {
    if (h->n < 1 || h->n > GM_TOK_MAX_VOCAB || h->has_merges > 1 || h->fuse_unk > 1) return false;
    const uint64_t n = (uint64_t)h->n;
    void *field[TC_N];
    section_fields(t, field);
    for (int s = 0; s < TC_N; s++) {
        uint64_t off = h->sec[s].offset, count = h->sec[s].count;
        if (off % TC_ALIGN || off < sizeof *h || off > size || count > (size - off) / TC_ELEM[s]) return false;
        if (TC_PER_ID[s] && count != n) return false;
        void *p = count || s < TC_MAP ? map + off : NULL; /* no trie nodes or merge pairs: NULL, as built */
        memcpy(field[s], &p, sizeof p);
    }
    uint64_t pairs = h->sec[TC_PAIR_KEYS].count;
    if (h->sec[TC_BLOB].count == 0 || h->sec[TC_MAP].count < 2 * n || h->sec[TC_TRIE].count > INT32_MAX ||
        h->sec[TC_PAIR_RANK].count != pairs || h->sec[TC_PAIR_MERGED].count != pairs)
        return false;
    t->n = h->n;
    t->blob_cap = t->blob_fill = (size_t)h->sec[TC_BLOB].count;
    t->map.mask = (size_t)h->sec[TC_MAP].count - 1;
    t->map.blob = t->blob;
    t->map.off = t->off;
    t->map.len = t->len;
    t->trie.n_nodes = t->trie.cap = (size_t)h->sec[TC_TRIE].count;
    memcpy(t->trie.root, h->trie_root, sizeof t->trie.root);
    t->pairs.mask = pairs ? (size_t)pairs - 1 : 0;
    t->pairs.count = (size_t)h->pair_count;
    memcpy(t->ascii_id, h->ascii_id, sizeof t->ascii_id);
    memcpy(t->byte_id, h->byte_id, sizeof t->byte_id);
    t->unk_id = h->unk_id;
    t->bos_id = h->bos_id;
    t->eos_id = h->eos_id;
    t->max_piece_len = h->max_piece_len;
    t->has_merges = h->has_merges;
    t->fuse_unk = h->fuse_unk;
    memcpy(t->source, h->source, sizeof t->source);
    return true;
}

gm_status gm_tokcache_load(const char *path, uint64_t key, gm_tokenizer **out) {
    if (!out) return gm_fail(GM_ERR_ARG, "gm_tokcache_load: out is NULL");
    *out = NULL;
    if (!path) return gm_fail(GM_ERR_ARG, "gm_tokcache_load: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return GM_OK;
    struct stat st;
    tc_header h;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof h &&
              pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && !memcmp(h.magic, TC_MAGIC, sizeof TC_MAGIC) &&
              h.version == TC_VERSION && h.key == key && h.file_bytes == (uint64_t)st.st_size;
    uint8_t *map = ok ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return GM_OK;
    const uint64_t size = (uint64_t)st.st_size;
    gm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        munmap(map, (size_t)size);
        return gm_fail(GM_ERR_NOMEM, "out of memory for the tokenizer");
    }
    if (gm_hash_words(map + sizeof h, (size_t)(size - sizeof h)) != h.hash || !place_sections(t, &h, map, size) ||
        !tables_ok(t, &h)) {
        munmap(map, (size_t)size);
        free(t);
        return GM_OK;
    }
    t->cache_map = map;
    t->cache_map_bytes = (size_t)size;
    *out = t;
    return GM_OK;
}

bool gm_tokcache_write(const char *path, uint64_t key, const gm_tokenizer *tok, char *why, size_t why_len) {
    if (why_len) why[0] = 0;
    gm_tokenizer *t = (gm_tokenizer *)tok; /* only read: section_fields takes the addresses of its pointers */
    tc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TC_MAGIC, sizeof TC_MAGIC);
    h.version = TC_VERSION;
    h.n = t->n;
    h.key = key;
    h.unk_id = t->unk_id;
    h.bos_id = t->bos_id;
    h.eos_id = t->eos_id;
    h.max_piece_len = t->max_piece_len;
    h.has_merges = t->has_merges;
    h.fuse_unk = t->fuse_unk;
    h.pair_count = t->pairs.count;
    memcpy(h.source, t->source, sizeof h.source);
    h.source[sizeof h.source - 1] = 0;
    memcpy(h.ascii_id, t->ascii_id, sizeof h.ascii_id);
    memcpy(h.byte_id, t->byte_id, sizeof h.byte_id);
    for (int b = 0; b < 256; b++) h.trie_root[b] = t->trie.nodes ? t->trie.root[b] : -1;
    const uint64_t n = (uint64_t)t->n, pairs = t->pairs.keys ? t->pairs.mask + 1 : 0;
    uint64_t count[TC_N];
    for (int s = 0; s < TC_N; s++) count[s] = TC_PER_ID[s] ? n : pairs; /* pairs: the three pair sections */
    count[TC_BLOB] = t->blob_fill;
    count[TC_DEC_BLOB] = n ? (uint64_t)t->dec_off[n - 1] + t->dec_len[n - 1] : 0; /* written in id order */
    count[TC_MAP] = t->map.mask + 1;
    count[TC_TRIE] = t->trie.n_nodes;
    void *field[TC_N];
    section_fields(t, field);
    uint64_t off = align_up(sizeof h);
    for (int s = 0; s < TC_N; s++) {
        h.sec[s].offset = off;
        h.sec[s].count = count[s];
        off = align_up(off + count[s] * TC_ELEM[s]);
    }
    h.file_bytes = off;
    uint8_t *buf = calloc(1, (size_t)off);
    if (!buf) {
        snprintf(why, why_len, "tokenizer cache: cannot write %s: out of memory", path);
        return false;
    }
    for (int s = 0; s < TC_N; s++) {
        const void *p;
        memcpy(&p, field[s], sizeof p);
        if (s == TC_TRIE) { /* field by field: the padding stays zero */
            gm_trie_node *dst = (gm_trie_node *)(buf + h.sec[s].offset);
            for (uint64_t i = 0; i < count[s]; i++) {
                dst[i].child = t->trie.nodes[i].child;
                dst[i].sibling = t->trie.nodes[i].sibling;
                dst[i].id = t->trie.nodes[i].id;
                dst[i].byte = t->trie.nodes[i].byte;
            }
        } else if (count[s]) {
            memcpy(buf + h.sec[s].offset, p, (size_t)(count[s] * TC_ELEM[s]));
        }
    }
    h.hash = gm_hash_words(buf + sizeof h, (size_t)(off - sizeof h));
    memcpy(buf, &h, sizeof h);
    char tmp[1400];
    int fd = gm_cache_file_create(path, tmp, sizeof tmp, "tokenizer cache", why, why_len);
    bool ok = fd >= 0;
    if (ok) ok = gm_cache_file_commit(fd, tmp, path, gm_cache_file_pwrite(fd, buf, (size_t)off, 0), false,
                                      "tokenizer cache", why, why_len);
    free(buf);
    return ok;
}
