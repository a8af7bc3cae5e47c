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

typedef struct cand {
    uint64_t k1;         /* primary rank (smaller merges first) */
    uint32_t k2;         /* secondary rank */
    uint32_t pos;        /* left symbol index (ties: leftmost first) */
    uint32_t span;       /* bytes of the pair when pushed: a changed pair always covers more */
    int32_t merged;      /* resulting id */
} cand;

struct gm_bpe_work {
    sym *s;
    size_t s_cap;
    cand *h;
    size_t h_n, h_cap;
};

gm_bpe_work *gm_bpe_work_new(void) { return calloc(1, sizeof(gm_bpe_work)); }

void gm_bpe_work_free(gm_bpe_work *w) {
    if (!w) return;
    free(w->s);
    free(w->h);
    free(w);
}

static inline bool cand_less(const cand *a, const cand *b) {
    if (a->k1 != b->k1) return a->k1 < b->k1;
    if (a->k2 != b->k2) return a->k2 < b->k2;
    return a->pos < b->pos;
}

static void sift_down(cand *h, size_t n, size_t i) {
    cand x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static gm_status heap_push(gm_bpe_work *w, const cand *c) {
    if (w->h_n == w->h_cap) {
        size_t cap = w->h_cap ? w->h_cap * 2 : 256;
        cand *nh = realloc(w->h, cap * sizeof *nh);
        if (!nh) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %zu merge candidates", cap);
        w->h = nh;
        w->h_cap = cap;
    }
    size_t i = w->h_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
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
        c->k1 = rank;
        c->k2 = 0;
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
        c->k1 = ((uint64_t)score_key(t->score[m]) << 32) | ((uint64_t)(0xFFFFu - t->nchars[a->id]) << 16) |
                (uint64_t)(0xFFFFu - t->nchars[b->id]);
        c->k2 = (uint32_t)m;
    }
    c->pos = (uint32_t)i;
    c->span = a->nbytes + b->nbytes;
    c->merged = m;
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
    if (w->h_cap < (size_t)n) {
        free(w->h);
        w->h = malloc((size_t)n * sizeof *w->h);
        w->h_cap = w->h ? (size_t)n : 0;
        if (!w->h) return gm_fail(GM_ERR_NOMEM, "tokenizer: out of memory for %d merge candidates", n);
    }
    for (int32_t i = 0; i + 1 < n; i++) {
        cand c;
        if (eval_pair(t, text, s, i, i + 1, &c)) w->h[w->h_n++] = c;
    }
    for (size_t i = w->h_n / 2; i-- > 0;) sift_down(w->h, w->h_n, i);
    /* 3. merge the best pair until none is left */
    while (w->h_n > 0) {
        cand c = w->h[0];
        w->h[0] = w->h[--w->h_n];
        if (w->h_n) sift_down(w->h, w->h_n, 0);
        int32_t i = (int32_t)c.pos;
        if (s[i].nbytes == 0) continue;
        int32_t j = s[i].next;
        if (j < 0 || s[i].nbytes + s[j].nbytes != c.span) continue; /* stale */
        s[i].id = c.merged;
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
