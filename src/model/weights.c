#define _GNU_SOURCE
#include "model/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/threads.h"
#include "kernels/matvec.h"
#include "model/weight_cache.h"

/* Weights live in anonymous memory (the model file's mapped page cache sits in 4 KiB pages: slower to
 * stream), in transparent huge pages unless GM_HUGEPAGES=0: the hardware prefetcher runs across a
 * 2 MiB page but stops at every 4 KiB one (270M decode, 1 thread: 77-81 tok/s with, 62-72 without).
 * The price is the first touch: right after the file filled the page cache a huge-page fault may go
 * through compaction (1B Q8_0 load: 1.5-2.0 s with, 0.5-1.1 s without; docs/BENCHMARKS.md, "Load").
 * The weight cache (weight_cache.h) avoids that price: its own file, read back in 2 MiB folios. */
#define HUGE_PAGE_BYTES (2u << 20)
#define ARENA_CHUNK_BYTES (32u << 20)
#define ARENA_MIN_OWN (4u << 20) /* matrices this large get an allocation of their own */

static void *alloc_huge(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE_BYTES, bytes ? bytes : 64) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    const char *e = getenv("GM_HUGEPAGES");
    if (!(e && *e == '0')) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* Small matrices are carved out of the arena's chunks, 64-byte aligned, so that they too sit in
 * huge pages: on their own (a 1.25 MB matrix is never 2 MiB aligned) they were in 4 KiB pages. Sets
 * *borrowed when the memory belongs to the arena. */
static void *alloc_weights(gm_weight_arena *a, size_t bytes, bool *borrowed) {
    *borrowed = false;
    if (bytes >= ARENA_MIN_OWN) return alloc_huge(bytes);
    size_t need = (bytes + 63) & ~(size_t)63;
    if (a->n_chunks == 0 || ARENA_CHUNK_BYTES - a->used < need) {
        if (a->n_chunks == a->cap_chunks) {
            int cap = a->cap_chunks ? 2 * a->cap_chunks : 8;
            void **c = realloc(a->chunks, (size_t)cap * sizeof *c);
            if (!c) return NULL;
            a->chunks = c;
            a->cap_chunks = cap;
        }
        void *chunk = alloc_huge(ARENA_CHUNK_BYTES);
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

/* A quantized (or BF16) slice, packed into 16-row panels. The device's threads each read and pack a
 * share of the panels through their own staging buffer of about 1 MiB, so the copy out of the page
 * cache, the first touch of the new pages and the packing all run in parallel. The staging buffers
 * live for the whole load (one per loader thread, grown on demand): a fresh 1 MiB malloc per tensor
 * is a fresh mmap, whose pages the kernel zeroes and unmaps each time. */
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

typedef struct pack_job {
    const gm_source *src;
    const gm_tensor_info *t;
    gm_matrix *m;
    const gm_dtype_info *di;
    gm_stage *stages; /* [pool size] */
    gm_status st[256];
    char err[256][160];
} pack_job;

static void pack_worker(void *ctx, int i, int n) {
    pack_job *j = ctx;
    gm_matrix *m = j->m;
    gm_stage *sg = &j->stages[i];
    size_t panels = ((size_t)m->rows + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS, lo, hi;
    gm_split_range(panels, n, i, 1, &lo, &hi);
    size_t r_end = hi * GM_PANEL_ROWS < m->rows ? hi * GM_PANEL_ROWS : (size_t)m->rows;
    size_t chunk = (1u << 20) / m->row_bytes / GM_PANEL_ROWS * GM_PANEL_ROWS;
    if (chunk < GM_PANEL_ROWS) chunk = GM_PANEL_ROWS;
    bool cols = m->plan.split == GM_SPLIT_COLS;
    gm_status st = stage_reserve(&sg->buf, &sg->cap, chunk * m->row_bytes) &&
                           (!cols || stage_reserve(&sg->row, &sg->row_cap, j->t->row_bytes))
                       ? GM_OK
                       : gm_fail(GM_ERR_NOMEM, "cannot allocate %zu bytes to stage '%s'", chunk * m->row_bytes, j->t->name);
    for (size_t r = lo * GM_PANEL_ROWS; r < r_end && st == GM_OK; r += chunk) {
        size_t nr = r_end - r < chunk ? r_end - r : chunk;
        st = read_slice_rows(j->src, j->t, m, j->di, r, nr, sg->buf, sg->row);
        if (st == GM_OK) gm_pack_rows(&m->packed, sg->buf, m->row_bytes, r, r + nr);
    }
    if (i < 256) {
        j->st[i] = st;
        if (st != GM_OK) snprintf(j->err[i], sizeof j->err[i], "%s", gm_last_error());
    }
}

/* What every matrix of one device's load shares. */
typedef struct load_ctx {
    const gm_source *src;
    gm_sharding rule;
    int n_dev, dev;
    gm_pool *pool;          /* the loader threads (may be NULL) */
    gm_stage *stages;       /* [pool size] */
    gm_weight_cache *cache; /* NULL without --weight-cache */
    gm_weight_arena *arena; /* the device's small matrices */
} load_ctx;

static gm_status load_packed(const load_ctx *lc, const gm_tensor_info *t, gm_matrix *m, const gm_dtype_info *di,
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
    pack_job *j = calloc(1, sizeof *j);
    if (!j) return gm_fail(GM_ERR_NOMEM, "out of memory");
    j->src = lc->src, j->t = t, j->m = m, j->di = di, j->stages = lc->stages;
    /* small matrices are not worth waking the other threads for */
    if (lc->pool && pbytes >= (1u << 20)) gm_pool_run(lc->pool, pack_worker, j);
    else pack_worker(j, 0, 1);
    gm_status st = GM_OK;
    for (int i = 0; i < gm_pool_size(lc->pool) && i < 256 && st == GM_OK; i++)
        if (j->st[i] != GM_OK) st = gm_fail(j->st[i], "%s", j->err[i]);
    free(j);
    if (st == GM_OK && lc->cache) st = gm_wcache_add(lc->cache, m->packed.data);
    return st;
}

static gm_status load_matrix(const load_ctx *lc, const char *name, uint64_t ne0, uint64_t ne1, gm_matrix *m,
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
    free(m->off);
    memset(m, 0, sizeof *m);
}

static gm_status load_all(const load_ctx *lc, gm_device_weights *w) {
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
    return GM_OK;
}

gm_status gm_weights_load(const gm_source *src, gm_sharding rule, int n_dev, int dev, gm_pool *pool,
                          const char *cache_dir, gm_device_weights *w) {
    memset(w, 0, sizeof *w);
    int n = gm_pool_size(pool);
    load_ctx lc = {src, rule, n_dev, dev, pool, calloc((size_t)n, sizeof(gm_stage)), NULL, &w->arena};
    if (!lc.stages) return gm_fail(GM_ERR_NOMEM, "out of memory");
    gm_status st = cache_dir && !exact_mode() ? gm_wcache_open(cache_dir, src, rule, n_dev, dev, &lc.cache) : GM_OK;
    if (st == GM_OK) st = load_all(&lc, w);
    for (int i = 0; i < n; i++) {
        free(lc.stages[i].buf);
        free(lc.stages[i].row);
    }
    free(lc.stages);
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
