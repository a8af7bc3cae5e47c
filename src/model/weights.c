#define _GNU_SOURCE
#include "model/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/huge_pages.h"
#include "base/threads.h"
#include "kernels/matvec.h"
#include "model/weight_cache.h"

/* Weights live in anonymous memory (the model file's mapped page cache sits in 4 KiB pages: slower to
 * stream), in transparent huge pages unless GM_HUGEPAGES=0 (base/huge_pages.h; 270M decode, 1 thread:
 * 77-81 tok/s with, 62-72 without). The price is the first touch: right after the file filled the page
 * cache a huge-page fault may go through compaction (1B Q8_0 load: 1.5-2.0 s with, 0.5-1.1 s without;
 * docs/BENCHMARKS.md, "Load"). The weight cache (weight_cache.h) avoids that price: its own file, read
 * back in 2 MiB folios. */
#define ARENA_CHUNK_BYTES (32u << 20)
#define ARENA_MIN_OWN (4u << 20) /* matrices this large get an allocation of their own */

/* Small matrices are carved out of the arena's chunks, 64-byte aligned, so that they too sit in
 * huge pages: on their own (a 1.25 MB matrix is never 2 MiB aligned) they were in 4 KiB pages. Sets
 * *borrowed when the memory belongs to the arena. */
static void *alloc_weights(gm_weight_arena *a, size_t bytes, bool *borrowed) {
    *borrowed = false;
    if (bytes >= ARENA_MIN_OWN) return gm_alloc_huge(bytes);
    size_t need = (bytes + 63) & ~(size_t)63;
    if (a->n_chunks == 0 || ARENA_CHUNK_BYTES - a->used < need) {
        if (a->n_chunks == a->cap_chunks) {
            int cap = a->cap_chunks ? 2 * a->cap_chunks : 8;
            void **c = realloc(a->chunks, (size_t)cap * sizeof *c);
            if (!c) return NULL;
            a->chunks = c;
            a->cap_chunks = cap;
        }
        void *chunk = gm_alloc_huge(ARENA_CHUNK_BYTES);
        if (!chunk) return NULL;
        a->chunks[a->n_chunks++] = chunk;
        a->used = 0;
    }
    void *p = (uint8_t *)a->chunks[a->n_chunks - 1] + a->used;
    a->used += need;
    *borrowed = true;
    return p;
}

static gm_status expect_shape(const gm_source *src, const gm_tensor_info *t, uint64_t ne0, uint64_t ne1) {
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]", gm_source_path(src),
                       t->name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)ne0,
                       (unsigned long long)ne1);
    return GM_OK;
}

static const gm_tensor_info *need(const gm_source *src, const char *name) {
    const gm_tensor_info *t = gm_source_find(src, name);
    if (!t) gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' is missing", gm_source_path(src), name);
    return t;
}

/* A vector weight, converted to f32; norms get +1 when the file stores w (HF layout). */
static gm_status load_vector(const gm_source *src, const char *name, uint64_t n, bool add_one, float **out, uint64_t *bytes) {
    const gm_tensor_info *t = need(src, name);
    if (!t) return GM_ERR_FORMAT;
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' has %llu x %llu elements, expected %llu", gm_source_path(src),
                       name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)n);
    void *raw = malloc(t->row_bytes);
    float *v = malloc(n * sizeof *v);
    if (!raw || !v) {
        free(raw);
        free(v);
        return gm_fail(GM_ERR_NOMEM, "out of memory loading '%s'", name);
    }
    gm_status st = gm_source_read_rows(src, t, 0, 1, raw);
    if (st == GM_OK) {
        gm_dequant_row(t->type, raw, v, n);
        if (add_one)
            for (uint64_t i = 0; i < n; i++) v[i] += 1.0f;
    }
    free(raw);
    if (st != GM_OK) {
        free(v);
        return st;
    }
    *out = v;
    *bytes += n * sizeof *v;
    return GM_OK;
}

static bool exact_mode(void) {
    const char *e = getenv("GM_EXACT");
    return e && *e && strcmp(e, "0") != 0;
}

/* Rows [r, r + n) of this device's slice, as stored, into dst (n rows of m->row_bytes). */
static gm_status read_slice_rows(const gm_source *src, const gm_tensor_info *t, const gm_matrix *m,
                                 const gm_dtype_info *di, uint64_t r, uint64_t n, uint8_t *dst, uint8_t *rowbuf) {
    if (m->plan.split != GM_SPLIT_COLS) return gm_source_read_rows(src, t, m->lo + r, n, dst);
    /* column slice: one ranged read per row (only this device's bytes are kept) */
    uint64_t col_byte0 = m->lo / di->block * di->bytes;
    for (uint64_t i = 0; i < n; i++) {
        GM_TRY(gm_source_read_rows(src, t, r + i, 1, rowbuf));
        memcpy(dst + i * m->row_bytes, rowbuf + col_byte0, m->row_bytes);
    }
    return GM_OK;
}

/* Quantized (and BF16) slices are packed into 16-row panels after every matrix has its memory: all
 * of them in one pass of the loader threads, in pieces of about 1 MiB of file rows that the threads
 * claim as they come, so the copy out of the page cache, the first touch of the new pages and the
 * packing run in parallel for the small layer matrices too (one at a time, a 1 MiB matrix was not
 * worth waking the other threads for, and the 270M's layers loaded on one thread). Each thread
 * stages rows through its own buffer, kept for the whole pass: a fresh 1 MiB malloc per piece is a
 * fresh mmap, whose pages the kernel zeroes and unmaps each time. */
typedef struct gm_stage {
    uint8_t *buf, *row;
    size_t cap, row_cap;
} gm_stage;

static bool stage_reserve(uint8_t **p, size_t *cap, size_t want) {
    if (*cap >= want) return true;
    uint8_t *n = realloc(*p, want);
    if (!n) return false;
    *p = n;
    *cap = want;
    return true;
}

typedef struct pack_item {
    const gm_tensor_info *t;
    gm_matrix *m;
    const gm_dtype_info *di;
    size_t piece_rows; /* rows per piece, a multiple of 16 */
    int first_piece;   /* this item's pieces: [first_piece, next item's) */
} pack_item;

/* What every matrix of one device's load shares. */
typedef struct load_ctx {
    const gm_source *src;
    gm_sharding rule;
    int n_dev, dev;
    gm_pool *pool;          /* the loader threads (may be NULL) */
    gm_weight_cache *cache; /* NULL without --weight-cache */
    gm_weight_arena *arena; /* the device's small matrices */
    pack_item *items;       /* matrices waiting to be packed, in load order */
    int n_items, cap_items, n_pieces;
} load_ctx;

enum { MAX_LOADERS = 256 };

typedef struct pack_job {
    const load_ctx *lc;
    gm_stage stages[MAX_LOADERS];
    gm_status st[MAX_LOADERS];
    char err[MAX_LOADERS][160];
} pack_job;

static void pack_piece(void *ctx, int c, int slot) {
    pack_job *j = ctx;
    if (slot >= MAX_LOADERS || j->st[slot] != GM_OK) return;
    const load_ctx *lc = j->lc;
    int lo = 0, hi = lc->n_items - 1; /* the last item whose first piece is <= c */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (lc->items[mid].first_piece <= c) lo = mid;
        else hi = mid - 1;
    }
    const pack_item *it = &lc->items[lo];
    gm_matrix *m = it->m;
    size_t r0 = (size_t)(c - it->first_piece) * it->piece_rows;
    size_t nr = m->rows - r0 < it->piece_rows ? (size_t)m->rows - r0 : it->piece_rows;
    gm_stage *sg = &j->stages[slot];
    bool cols = m->plan.split == GM_SPLIT_COLS;
    gm_status st = stage_reserve(&sg->buf, &sg->cap, it->piece_rows * m->row_bytes) &&
                           (!cols || stage_reserve(&sg->row, &sg->row_cap, it->t->row_bytes))
                       ? GM_OK
                       : gm_fail(GM_ERR_NOMEM, "cannot allocate %zu bytes to stage '%s'", it->piece_rows * m->row_bytes,
                                 it->t->name);
    if (st == GM_OK) st = read_slice_rows(lc->src, it->t, m, it->di, r0, nr, sg->buf, sg->row);
    if (st == GM_OK) gm_pack_rows(&m->packed, sg->buf, m->row_bytes, r0, r0 + nr);
    if (st != GM_OK) {
        j->st[slot] = st;
        snprintf(j->err[slot], sizeof j->err[slot], "%s", gm_last_error());
    }
}

/* Pack every waiting matrix (one pass of the loader threads). */
static gm_status pack_waiting(const load_ctx *lc) {
    if (lc->n_items == 0) return GM_OK;
    pack_job *j = calloc(1, sizeof *j);
    if (!j) return gm_fail(GM_ERR_NOMEM, "out of memory");
    j->lc = lc;
    if (lc->pool) gm_pool_run_chunks(lc->pool, pack_piece, j, lc->n_pieces);
    else
        for (int c = 0; c < lc->n_pieces; c++) pack_piece(j, c, 0);
    gm_status st = GM_OK;
    for (int i = 0; i < MAX_LOADERS; i++) {
        if (st == GM_OK && j->st[i] != GM_OK) st = gm_fail(j->st[i], "%s", j->err[i]);
        free(j->stages[i].buf);
        free(j->stages[i].row);
    }
    free(j);
    return st;
}

/* Give a quantized slice its packed memory (or its bytes in the weight cache) and queue it for packing. */
static gm_status load_packed(load_ctx *lc, const gm_tensor_info *t, gm_matrix *m, const gm_dtype_info *di,
                             uint64_t *bytes) {
    size_t pbytes = gm_packed_bytes(t->type, (size_t)m->rows, (size_t)m->cols);
    gm_pack_describe(t->type, (size_t)m->rows, (size_t)m->cols, &m->packed);
    *bytes += pbytes;
    if (lc->cache) {
        const void *p = gm_wcache_take(lc->cache, t->name, t->type, m->rows, m->cols, pbytes);
        if (p) {
            m->packed.data = (uint8_t *)p; /* read-only mapping: the kernels only read */
            m->borrowed = true;
            return GM_OK;
        }
    }
    m->packed.data = alloc_weights(lc->arena, pbytes, &m->borrowed);
    if (!m->packed.data)
        return gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %zu bytes for '%s' (device %d)", gm_source_path(lc->src),
                       pbytes, t->name, lc->dev);
    /* the cache keeps the pointer; it reads the bytes only when it writes its file, after the packing */
    if (lc->cache) GM_TRY(gm_wcache_add(lc->cache, m->packed.data));
    if (lc->n_items == lc->cap_items) {
        int cap = lc->cap_items ? 2 * lc->cap_items : 64;
        pack_item *n = realloc(lc->items, (size_t)cap * sizeof *n);
        if (!n) return gm_fail(GM_ERR_NOMEM, "out of memory");
        lc->items = n;
        lc->cap_items = cap;
    }
    size_t piece = (1u << 20) / m->row_bytes / GM_PANEL_ROWS * GM_PANEL_ROWS;
    if (piece < GM_PANEL_ROWS) piece = GM_PANEL_ROWS;
    size_t pieces = ((size_t)m->rows + piece - 1) / piece;
    if ((size_t)lc->n_pieces + pieces > (size_t)INT32_MAX)
        return gm_fail(GM_ERR_STATE, "'%s': too many pieces to pack", t->name);
    lc->items[lc->n_items++] = (pack_item){t, m, di, piece, lc->n_pieces};
    lc->n_pieces += (int)pieces;
    return GM_OK;
}

static gm_status load_matrix(load_ctx *lc, const char *name, uint64_t ne0, uint64_t ne1, gm_matrix *m,
                             uint64_t *bytes) {
    const gm_source *src = lc->src;
    int n_dev = lc->n_dev, dev = lc->dev;
    const gm_tensor_info *t = need(src, name);
    if (!t) return GM_ERR_FORMAT;
    GM_TRY(expect_shape(src, t, ne0, ne1));
    memset(m, 0, sizeof *m);
    m->name = t->name;
    m->type = t->type;
    m->full_rows = ne1;
    m->full_cols = ne0;
    GM_TRY(gm_plan_tensor(gm_source_config(src), t, lc->rule, n_dev, &m->plan));
    m->off = calloc((size_t)n_dev + 1, sizeof *m->off);
    if (!m->off) return gm_fail(GM_ERR_NOMEM, "out of memory");
    /* output ranges per device: the plan's rows when split by rows, else an even split of the rows
     * (replicated and column-split weights still divide the output computation) */
    for (int d = 0; d < n_dev; d++) {
        uint64_t lo, hi;
        if (m->plan.split == GM_SPLIT_ROWS) gm_plan_range(&m->plan, t, n_dev, d, &lo, &hi);
        else {
            size_t a, b;
            gm_split_range((size_t)ne1, n_dev, d, 1, &a, &b);
            lo = a, hi = b;
        }
        m->off[d] = lo;
        m->off[d + 1] = hi;
    }
    gm_plan_range(&m->plan, t, n_dev, dev, &m->lo, &m->hi);
    const gm_dtype_info *di = gm_dtype_get(t->type);
    if (m->plan.split == GM_SPLIT_COLS) {
        m->rows = ne1;
        m->cols = m->hi - m->lo;
        if (m->lo % di->block || m->cols % di->block)
            return gm_fail(GM_ERR_STATE, "plan for '%s' cuts a %s block", name, di->name);
        m->row_bytes = (size_t)(m->cols / di->block * di->bytes);
    } else {
        if (m->plan.split == GM_SPLIT_NONE) m->lo = 0, m->hi = ne1;
        m->rows = m->hi - m->lo;
        m->cols = ne0;
        m->row_bytes = (size_t)t->row_bytes;
    }
    if (!exact_mode() && gm_packed_bytes(t->type, (size_t)m->rows, (size_t)m->cols) > 0)
        return load_packed(lc, t, m, di, bytes);
    size_t total = (size_t)(m->rows * m->row_bytes);
    m->data = alloc_weights(lc->arena, total, &m->borrowed);
    if (!m->data)
        return gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %zu bytes for '%s' (device %d)", gm_source_path(src), total,
                       name, dev);
    *bytes += total;
    if (m->plan.split != GM_SPLIT_COLS) return gm_source_read_rows(src, t, m->lo, m->rows, m->data);
    /* column slice: one ranged read per row (only this device's bytes are read) */
    uint64_t col_byte0 = m->lo / di->block * di->bytes;
    uint8_t *row = malloc(t->row_bytes);
    if (!row) return gm_fail(GM_ERR_NOMEM, "out of memory");
    gm_status st = GM_OK;
    for (uint64_t r = 0; r < m->rows && st == GM_OK; r++) {
        st = gm_source_read_rows(src, t, r, 1, row);
        memcpy((uint8_t *)m->data + r * m->row_bytes, row + col_byte0, m->row_bytes);
    }
    free(row);
    return st;
}

void gm_matrix_row(const gm_matrix *m, uint64_t r, float *out) {
    if (m->packed.data) gm_packed_row(&m->packed, (size_t)r, out);
    else gm_dequant_row(m->type, (const uint8_t *)m->data + r * m->row_bytes, out, (size_t)m->cols);
}

static void free_matrix(gm_matrix *m) {
    if (!m->borrowed) {
        free(m->data);
        free(m->packed.data);
    }
    if (!m->screen8_borrowed) free(m->screen8.data);
    free(m->off);
    memset(m, 0, sizeof *m);
}

typedef struct copy_job {
    gm_matrix *m;
    int chunks;
    _Atomic bool bad; /* a value the copy cannot hold */
} copy_job;

static void copy_chunk(void *ctx, int c, int slot) {
    (void)slot;
    copy_job *j = ctx;
    size_t lo, hi, panels = ((size_t)j->m->rows + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
    gm_split_range(panels, j->chunks, c, 1, &lo, &hi);
    if (hi > lo && !gm_pack_screen_copy(&j->m->packed, &j->m->screen8, lo * GM_PANEL_ROWS, hi * GM_PANEL_ROWS))
        j->bad = true;
}

/* The screening copy of a BF16 vocabulary matrix (gm_pack_screen_copy): where the kernels screen and the
 * matrix is split by rows, unless GM_SCREEN_COPY=0. From the weight cache when it holds one, else built on
 * the loader threads (and recorded there); a matrix with a value the copy cannot hold keeps none. */
static gm_status load_screen_copy(load_ctx *lc, gm_matrix *m, uint64_t *bytes) {
    const char *e = getenv("GM_SCREEN_COPY");
    if ((e && *e == '0') || m->packed.kind != GM_PK_BF16 || !m->packed.data || !gm_packed_can_screen(GM_PK_D16) ||
        m->plan.split == GM_SPLIT_COLS)
        return GM_OK;
    gm_pack_describe_as(GM_PK_D16, GM_Q8_0, (size_t)m->rows, (size_t)m->cols, &m->screen8);
    size_t n = gm_packed_size(&m->screen8);
    const char *name = "token_embd.weight (screening copy)";
    const void *p = lc->cache ? gm_wcache_take(lc->cache, name, GM_Q8_0, m->rows, m->cols, n) : NULL;
    if (p) {
        m->screen8.data = (uint8_t *)p, m->screen8_borrowed = true;
        *bytes += n;
        return GM_OK;
    }
    m->screen8.data = gm_alloc_huge(n);
    if (!m->screen8.data)
        return gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %zu bytes for the screening copy of '%s' (device %d)",
                       gm_source_path(lc->src), n, m->name, lc->dev);
    copy_job j = {.m = m, .chunks = 64, .bad = false};
    if (lc->pool) gm_pool_run_chunks(lc->pool, copy_chunk, &j, j.chunks);
    else
        for (int c = 0; c < j.chunks; c++) copy_chunk(&j, c, 0);
    if (j.bad) { /* the exact product it is; a cache of this load would miss the copy's record: none is kept */
        free(m->screen8.data);
        memset(&m->screen8, 0, sizeof m->screen8);
        return GM_OK;
    }
    if (lc->cache) GM_TRY(gm_wcache_add(lc->cache, m->screen8.data));
    *bytes += n;
    return GM_OK;
}

static gm_status load_all(load_ctx *lc, gm_device_weights *w) {
    const gm_source *src = lc->src;
    const gm_config *c = gm_source_config(src);
    uint64_t D = (uint64_t)c->d_model, F = (uint64_t)c->d_ff, H = (uint64_t)c->head_dim;
    uint64_t NH = (uint64_t)c->n_heads * H, KH = (uint64_t)c->n_kv_heads * H;
    bool add1 = c->norms_add_one;
    w->layers = calloc((size_t)c->n_layers, sizeof *w->layers);
    if (!w->layers) return gm_fail(GM_ERR_NOMEM, "out of memory");
    GM_TRY(load_matrix(lc, "token_embd.weight", D, (uint64_t)c->vocab_size, &w->embed, &w->bytes));
    GM_TRY(load_vector(src, "output_norm.weight", D, add1, &w->final_norm, &w->bytes));
    char name[128];
    for (int l = 0; l < c->n_layers; l++) {
        gm_layer_weights *L = &w->layers[l];
#define VEC(field, suffix, n)                                                                                          \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", l);                                                        \
    GM_TRY(load_vector(src, name, n, add1, &L->field, &w->bytes))
#define MAT(field, suffix, ne0, ne1)                                                                                   \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", l);                                                        \
    GM_TRY(load_matrix(lc, name, ne0, ne1, &L->field, &w->bytes))
        VEC(attn_norm, "attn_norm", D);
        VEC(post_attn_norm, "post_attention_norm", D);
        VEC(ffn_norm, "ffn_norm", D);
        VEC(post_ffw_norm, "post_ffw_norm", D);
        VEC(q_norm, "attn_q_norm", H);
        VEC(k_norm, "attn_k_norm", H);
        MAT(q, "attn_q", D, NH);
        MAT(k, "attn_k", D, KH);
        MAT(v, "attn_v", D, KH);
        MAT(o, "attn_output", NH, D);
        MAT(gate, "ffn_gate", D, F);
        MAT(up, "ffn_up", D, F);
        MAT(down, "ffn_down", F, D);
#undef VEC
#undef MAT
    }
    GM_TRY(pack_waiting(lc));
    return load_screen_copy(lc, &w->embed, &w->bytes);
}

gm_status gm_weights_load(const gm_source *src, gm_sharding rule, int n_dev, int dev, gm_pool *pool,
                          const char *cache_dir, gm_device_weights *w) {
    memset(w, 0, sizeof *w);
    load_ctx lc = {.src = src, .rule = rule, .n_dev = n_dev, .dev = dev, .pool = pool, .arena = &w->arena};
    gm_status st = cache_dir && !exact_mode() ? gm_wcache_open(cache_dir, src, rule, n_dev, dev, &lc.cache) : GM_OK;
    if (st == GM_OK) st = load_all(&lc, w);
    free(lc.items);
    if (lc.cache) {
        if (st == GM_OK) gm_wcache_finish(lc.cache, w->cache_note, sizeof w->cache_note);
        w->cache_hits = gm_wcache_hits(lc.cache);
        w->cache_misses = gm_wcache_misses(lc.cache);
        gm_wcache_release_map(lc.cache, &w->cache_map, &w->cache_map_bytes); /* matrices point into it */
        gm_wcache_free(lc.cache);
    }
    return st;
}

void gm_weights_free(gm_device_weights *w, int n_layers) {
    if (!w) return;
    free_matrix(&w->embed);
    free(w->final_norm);
    for (int l = 0; w->layers && l < n_layers; l++) {
        gm_layer_weights *L = &w->layers[l];
        free(L->attn_norm);
        free(L->post_attn_norm);
        free(L->ffn_norm);
        free(L->post_ffw_norm);
        free(L->q_norm);
        free(L->k_norm);
        gm_matrix *ms[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) free_matrix(ms[i]);
    }
    free(w->layers);
    for (int i = 0; i < w->arena.n_chunks; i++) free(w->arena.chunks[i]);
    free(w->arena.chunks);
    gm_wcache_unmap(w->cache_map, w->cache_map_bytes);
    memset(w, 0, sizeof *w);
}
