/* BPE over one normalized segment, in O(n log n): symbols in a doubly linked list over an array,
 * candidate merges in a binary min-heap ordered by (rank, position), stale candidates dropped when
 * popped. This is the algorithm of HF `tokenizers` (models/bpe/word.rs, merge_all), including its
 * tie-break: among equal ranks the leftmost pair merges first. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"

typedef struct sym {
    int32_t id;
    int32_t prev, next;  /* neighbours, -1 at the ends */
    uint32_t start;      /* byte offset in the segment */
    uint32_t nbytes;     /* bytes of the segment covered; 0 = absorbed into its left neighbour */
    uint32_t synthetic;  /* piece text differs from the covered bytes (byte-fallback pieces) */
} sym;

/* A candidate merge in 16 bytes, compared as (hi, lo):
 *   hi = primary rank (merges-list index, or derived (score, left chars, right chars) key);
 *   lo = merged id (24 bits) << 40 | left symbol index (30 bits) << 10 | pair bytes (10 bits).
 * So ties on hi go to the smaller merged id (derived ranks), then to the leftmost pair. The pair bytes
 * identify stale entries: a pair that changed since the push always covers more bytes. */
typedef struct cand {
    uint64_t hi, lo;
} cand;

#define CAND_POS(c) ((uint32_t)(((c).lo >> 10) & 0x3FFFFFFFu))
#define CAND_SPAN(c) ((uint32_t)((c).lo & 0x3FFu))
#define CAND_MERGED(c) ((int32_t)((c).lo >> 40))

struct gm_bpe_work {
    sym *s;
    size_t s_cap;
    void *h_mem;  /* allocation behind h (64-byte aligned sibling groups) */
    cand *h;      /* 4-ary min-heap: children of i are 4i+1 .. 4i+4 */
    size_t h_n, h_cap;
};

gm_bpe_work *gm_bpe_work_new(void) { return calloc(1, sizeof(gm_bpe_work)); }

void gm_bpe_work_free(gm_bpe_work *w) {
    if (!w) return;
    free(w->s);
    free(w->h_mem);
    free(w);
}

static inline bool cand_less(const cand *a, const cand *b) {
    return a->hi < b->hi || (a->hi == b->hi && a->lo < b->lo);
}

static void sift_down(cand *h, size_t n, size_t i) {
    cand x = h[i];
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (cand_less(&h[k], &h[best])) best = k;
        if (!cand_less(&h[best], &x)) break;
        h[i] = h[best];
        i = best;
    }
    h[i] = x;
}

/* Room for cap entries, with h[4i+1 .. 4i+4] on one 64-byte line. Keeps the first `keep` entries. */
static gm_status heap_reserve(gm_bpe_work *w, size_t cap, size_t keep) {
    if (cap <= w->h_cap) return GM_OK;
    if (cap > SIZE_MAX / sizeof(cand) - 8) return gm_fail(GM_ERR_NOMEM, "tokenizer: %zu merge candidates", cap);
    void *mem = malloc((cap + 8) * sizeof(cand));
    if (!mem) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %zu merge candidates", cap);
    uintptr_t a = ((uintptr_t)mem + 63) & ~(uintptr_t)63;
    cand *h = (cand *)a + 3;
    if (keep) memcpy(h, w->h, keep * sizeof(cand));
    free(w->h_mem);
    w->h_mem = mem;
    w->h = h;
    w->h_cap = cap;
    return GM_OK;
}

static gm_status heap_push(gm_bpe_work *w, const cand *c) {
    if (w->h_n == w->h_cap) GM_TRY(heap_reserve(w, w->h_cap ? w->h_cap * 2 : 256, w->h_n));
    size_t i = w->h_n++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!cand_less(c, &w->h[p])) break;
        w->h[i] = w->h[p];
        i = p;
    }
    w->h[i] = *c;
    return GM_OK;
}

/* Descending score as an ascending unsigned key (-0.0 equals 0.0; NaN sorts last). */
static inline uint32_t score_key(float f) {
    if (f != f) return UINT32_MAX;
    if (f == 0.0f) f = 0.0f;
    uint32_t b;
    memcpy(&b, &f, 4);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u); /* ascending order of f */
    return ~b;
}

/* Is (s[i], s[j]) a merge? Fills *c. */
static bool eval_pair(const gm_tokenizer *t, const uint8_t *text, const sym *s, int32_t i, int32_t j, cand *c) {
    const sym *a = &s[i], *b = &s[j];
    int32_t m;
    if (t->has_merges) {
        uint32_t rank;
        if (!gm_pair_map_get(&t->pairs, a->id, b->id, &rank, &m)) return false;
        c->hi = rank;
    } else {
        /* derived ranks: the pair merges iff left text + right text is a NORMAL/USER_DEFINED piece */
        uint32_t la = t->len[a->id], lb = t->len[b->id];
        if ((uint64_t)la + lb > t->max_piece_len) return false;
        if (!a->synthetic && !b->synthetic) {
            m = gm_piece_map_find(&t->map, text + a->start, (size_t)la + lb);
        } else {
            char buf[2 * 64];
            char *tmp = la + lb <= sizeof buf ? buf : malloc((size_t)la + lb);
            if (!tmp) return false;
            memcpy(tmp, gm_tok_text(t, a->id), la);
            memcpy(tmp + la, gm_tok_text(t, b->id), lb);
            m = gm_piece_map_find(&t->map, tmp, (size_t)la + lb);
            if (tmp != buf) free(tmp);
        }
        if (m < 0 || !(t->flags[m] & GM_PF_MERGE_TARGET)) return false;
        c->hi = ((uint64_t)score_key(t->score[m]) << 32) | ((uint64_t)(0xFFFFu - t->nchars[a->id]) << 16) |
                (uint64_t)(0xFFFFu - t->nchars[b->id]);
    }
    /* merged ids < 2^24, indices < 2^30 (text <= 1 GiB), and pair bytes <= 1023: checked at load and
     * by the text limit; a pair of two synthetic symbols is only 2 bytes */
    c->lo = ((uint64_t)(uint32_t)m << 40) | ((uint64_t)(uint32_t)i << 10) | (uint64_t)(a->nbytes + b->nbytes);
    return true;
}

gm_status gm_bpe_segment(const gm_tokenizer *t, gm_bpe_work *w, const uint8_t *text, size_t len,
                         int32_t **out, size_t *n_out, size_t *cap_out) {
    if (len == 0) return GM_OK;
    if (len > UINT32_MAX / 2)
        return gm_fail(GM_ERR_RANGE, "tokenizer: segment of %zu bytes is too long", len);
    if (w->s_cap < len) {
        free(w->s);
        w->s = malloc(len * sizeof *w->s);
        w->s_cap = w->s ? len : 0;
        if (!w->s) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %zu symbols", len);
    }
    sym *s = w->s;
    int32_t n = 0;
    /* 1. characters -> symbols (missing characters -> their bytes as <0xXX> pieces) */
    for (size_t p = 0; p < len;) {
        uint8_t c0 = text[p];
        size_t cl;
        int32_t id;
        if (c0 < 0x80) {
            cl = 1;
            id = t->ascii_id[c0];
        } else {
            cl = gm_utf8_valid_len(text + p, len - p);
            if (cl == 0) {
                cl = 1; /* invalid UTF-8: this byte alone, through byte fallback */
                id = -1;
            } else {
                id = gm_piece_map_find(&t->map, text + p, cl);
                if (id >= 0 && !(t->flags[id] & GM_PF_IN_MODEL)) id = -1;
            }
        }
        if (id >= 0) {
            s[n] = (sym){id, n - 1, n + 1, (uint32_t)p, (uint32_t)cl, 0};
            n++;
        } else {
            for (size_t k = 0; k < cl; k++) {
                s[n] = (sym){t->byte_id[text[p + k]], n - 1, n + 1, (uint32_t)(p + k), 1, 1};
                n++;
            }
        }
        p += cl;
    }
    s[n - 1].next = -1;
    /* 2. initial candidates, heapified in O(n) */
    w->h_n = 0;
    GM_TRY(heap_reserve(w, (size_t)n, 0));
    for (int32_t i = 0; i + 1 < n; i++) {
        cand c;
        if (eval_pair(t, text, s, i, i + 1, &c)) w->h[w->h_n++] = c;
    }
    for (size_t i = w->h_n / 4 + 1; i-- > 0;) sift_down(w->h, w->h_n, i);
    /* 3. merge the best pair until none is left */
    while (w->h_n > 0) {
        cand c = w->h[0];
        w->h[0] = w->h[--w->h_n];
        if (w->h_n) sift_down(w->h, w->h_n, 0);
        int32_t i = (int32_t)CAND_POS(c);
        if (s[i].nbytes == 0) continue;
        int32_t j = s[i].next;
        if (j < 0 || s[i].nbytes + s[j].nbytes != CAND_SPAN(c)) continue; /* stale */
        s[i].id = CAND_MERGED(c);
        s[i].nbytes += s[j].nbytes;
        s[i].synthetic |= s[j].synthetic;
        s[j].nbytes = 0;
        s[i].next = s[j].next;
        if (s[i].next >= 0) s[s[i].next].prev = i;
        cand nc;
        if (s[i].prev >= 0 && eval_pair(t, text, s, s[i].prev, i, &nc)) GM_TRY(heap_push(w, &nc));
        if (s[i].next >= 0 && eval_pair(t, text, s, i, s[i].next, &nc)) GM_TRY(heap_push(w, &nc));
    }
    /* 4. emit */
    size_t need = *n_out;
    for (int32_t i = 0; i >= 0; i = s[i].next) need++;
    if (need > *cap_out) {
        size_t cap = *cap_out ? *cap_out : 64;
        while (cap < need) cap *= 2;
        int32_t *no = realloc(*out, cap * sizeof *no);
        if (!no) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %zu ids", cap);
        *out = no;
        *cap_out = cap;
    }
    for (int32_t i = 0; i >= 0; i = s[i].next) (*out)[(*n_out)++] = s[i].id;
    return GM_OK;
}
