/* The Gemma 3 forward pass of one device, written against weight slices and collectives: with one
 * device the slices are whole tensors and the collectives return at once. */
#include "model/device.h"
#include "model/vocab_screen.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/huge_pages.h"
#include "kernels/matvec.h"
#include "kernels/ops.h"
#include "kernels/packed.h"

enum { XQ_TERM_STAGGER = 1344 }; /* 21 cache lines */

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

gm_status gm_device_init(gm_device *d, const gm_config *cfg, int local, int global, int n_devices, gm_comm *comm,
                         int threads, int cache_length) {
    memset(d, 0, sizeof *d);
    d->local = local;
    d->global = global;
    d->n_devices = n_devices;
    d->cfg = cfg;
    d->comm = comm;
    d->cache_length = cache_length;
    GM_TRY(gm_pool_create(threads, &d->pool));
    size_t T = GM_PREFILL_CHUNK, D = (size_t)cfg->d_model, F = (size_t)cfg->d_ff, H = (size_t)cfg->head_dim;
    size_t NH = (size_t)cfg->n_heads * H, KH = (size_t)cfg->n_kv_heads * H;
    size_t wide = max3(D, F, NH);
    size_t NP = (size_t)cfg->n_heads * GM_ATTN_PIECES_MAX;
    size_t L = (size_t)cache_length, wide_span = L < GM_ATTN_WIDE_SPAN ? L : GM_ATTN_WIDE_SPAN;
    d->score_cap = 4 * L > GM_ATTN_ROWS_MAX * wide_span ? 4 * L : GM_ATTN_ROWS_MAX * wide_span;
    float **bufs[] = {&d->x, &d->xn, &d->q, &d->k, &d->v, &d->att, &d->y, &d->gate, &d->up, &d->pack, &d->scores,
                      &d->inv_freq_local, &d->inv_freq_global, &d->xa, &d->ya, &d->rope_local, &d->rope_global,
                      &d->attn_part, &d->attn_max, &d->attn_sum};
    size_t sizes[] = {T * D, T * D, T * NH, T * KH, T * KH, T * NH, T * wide, T * F, T * F, T * wide,
                      (size_t)threads * d->score_cap, H / 2, H / 2, T * wide, T * wide, T * H, T * H, NP * H, NP, NP};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *bufs[i] = malloc(sizes[i] * sizeof(float) + 64);
        d->activation_bytes += sizes[i] * sizeof(float) + 64;
        if (!*bufs[i]) {
            gm_device_free(d);
            return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate %zu bytes of activations", global,
                           sizes[i] * sizeof(float));
        }
    }
    size_t nq = T * wide, nblk = T * ((wide + GM_XQ_BLOCK - 1) / GM_XQ_BLOCK), nh = (T + 15) / 16 * 16 * wide;
    d->xq.q = aligned_alloc(64, (nq * sizeof(int16_t) + 63) / 64 * 64);
    d->xq.q2 = aligned_alloc(64, (nq * sizeof(int16_t) + 63) / 64 * 64);
    d->xq.d = malloc(nblk * sizeof(float));
    d->xq.s = malloc(nblk * sizeof(float));
    d->xq.qs = malloc(4 * nblk * sizeof(int32_t));
    /* one token's input pairs as the AVX2 matvec reads them (gm_packed_matvec_xb) */
    size_t nxb = gm_packed_matvec_xb() ? gm_xq_xb_bytes(wide) : 0;
    if (nxb) d->xq.xb = aligned_alloc(64, (nxb + 63) / 64 * 64);
    d->activation_bytes += nxb;
    /* The three bf16 terms in one block, each starting XQ_TERM_STAGGER bytes further into its page than
     * the one before. The AMX matmul loads the same tile of all three: at equal page offsets their
     * rows fight for the same cache sets, and 1B Q8_0 prefill ran 15-20 % slower (whether separate
     * allocations landed there depended on malloc's state; docs/BENCHMARKS.md, "Prefill and where the
     * activations sit"). */
    size_t term = (nh * sizeof(uint16_t) + 4095) / 4096 * 4096 + XQ_TERM_STAGGER;
    uint8_t *terms = aligned_alloc(4096, (3 * term + 4095) / 4096 * 4096);
    d->xq.hi = (uint16_t *)terms;
    d->xq.mid = terms ? (uint16_t *)(terms + term) : NULL;
    d->xq.lo = terms ? (uint16_t *)(terms + 2 * term) : NULL;
    /* the int8 terms of batched products and of the screened vocabulary product (3 bytes per value;
     * only where the kernels use them) */
    bool int8 = (T > 1 && gm_packed_int8_matmul()) || gm_packed_can_screen(GM_PK_D16);
    /* and the same terms in column order for the kernels' Q6_K kind that reads them (GM_PK_N6H) */
    bool int8n = int8 && gm_pack_kind_reads_b8n(gm_pack_kind_of(GM_Q6_K));
    if (int8) {
        /* with AMX, only products of fewer tokens than gm_packed_amx_min_tokens take them */
        size_t T8 = gm_packed_amx_matmul() && T >= GM_AMX_MIN_TOKENS_MAX ? GM_AMX_MIN_TOKENS_MAX - 1 : T;
        size_t nq8 = T8 * wide, nblk8 = T8 * ((wide + GM_XQ_BLOCK - 1) / GM_XQ_BLOCK);
        d->xq.b8 = aligned_alloc(64, (3 * nq8 + 63) / 64 * 64);
        if (int8n) d->xq.b8n = aligned_alloc(64, (3 * nq8 + 63) / 64 * 64);
        d->xq.e8 = malloc(nblk8 * sizeof(float));
        d->xq.s8 = malloc(GM_X8_SUMS * nblk8 * sizeof(int32_t));
        d->activation_bytes += (int8n ? 6 : 3) * nq8 + 4 * nblk8 * sizeof(float);
    }
    d->activation_bytes += 2 * nq * sizeof(int16_t) + 6 * nblk * sizeof(float) + 3 * nh * sizeof(uint16_t);
    if (!d->xq.q || !d->xq.q2 || !d->xq.d || !d->xq.s || !d->xq.qs || !d->xq.hi || !d->xq.mid || !d->xq.lo ||
        (int8 && (!d->xq.b8 || !d->xq.e8 || !d->xq.s8)) || (int8n && !d->xq.b8n) || (nxb && !d->xq.xb)) {
        gm_device_free(d);
        return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate %zu bytes of quantized activations", global,
                       nq * sizeof(int16_t));
    }
    gm_rope_inv_freq(d->inv_freq_local, H, cfg->rope_base_local, cfg->rope_scale_local);
    gm_rope_inv_freq(d->inv_freq_global, H, cfg->rope_base_global, cfg->rope_scale_global);
    return GM_OK;
}

void gm_device_free(gm_device *d) {
    if (!d) return;
    if (d->cfg) gm_weights_free(&d->w, d->cfg->n_layers);
    gm_pool_free(d->pool);
    float *bufs[] = {d->x, d->xn, d->q, d->k, d->v, d->att, d->y, d->gate, d->up, d->pack, d->scores,
                     d->inv_freq_local, d->inv_freq_global, d->xa, d->ya, d->rope_local, d->rope_global,
                     d->attn_part, d->attn_max, d->attn_sum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(d->xq.q);
    free(d->xq.q2);
    free(d->xq.d);
    free(d->xq.s);
    free(d->xq.qs);
    free(d->xq.xb);
    free(d->xq.hi); /* mid and lo live in the same block */
    free(d->xq.b8);
    free(d->xq.b8n);
    free(d->screen_bound);
    free(d->screen_lo);
    free(d->screen_heap);
    free(d->screen_eb);
    free(d->xq.e8);
    free(d->xq.s8);
    memset(d, 0, sizeof *d);
}

/* KV positions layer l keeps: cache_length on global layers, O(window) on local ones. */
static int kv_slots(const gm_config *cfg, int l, int cache_length) {
    if (!cfg->layer_is_global[l] && cfg->sliding_window > 0 && cfg->sliding_window + GM_PREFILL_CHUNK < cache_length)
        return cfg->sliding_window + GM_PREFILL_CHUNK;
    return cache_length;
}

/* Each layer's keys and values in memory of their own from gm_alloc_huge: huge pages where they fill 2 MiB
 * (a global layer's at long cache lengths), where decode streams them from memory (the weights pass through
 * the caches between layers) and in 4 KiB pages the hardware prefetcher stopped at every page
 * (bench_attention, 2048 positions, cold: 318 -> 282 us per layer); ordinary pages for smaller ones, which
 * a huge page would round up and the first token would fault in whole (the 270M's 576-position local
 * layers: 42 MB zeroed at the first token in one huge-page block, +45-65 ms on this VM in a third of the
 * runs, for +1.4 % decode at 512 positions). */
gm_status gm_kv_cache_init(gm_kv_cache *kv, const gm_config *cfg, int cache_length, bool f16) {
    memset(kv, 0, sizeof *kv);
    kv->f16 = f16;
    kv->layers = calloc((size_t)cfg->n_layers, sizeof *kv->layers);
    if (!kv->layers) return gm_fail(GM_ERR_NOMEM, "out of memory for the KV cache");
    kv->n_layers = cfg->n_layers;
    size_t KH = (size_t)cfg->n_kv_heads * (size_t)cfg->head_dim, es = f16 ? 2 : sizeof(float);
    for (int l = 0; l < cfg->n_layers; l++) { /* the whole cache first, for the message if an allocation fails */
        kv->layers[l].slots = kv_slots(cfg, l, cache_length);
        kv->bytes += 2 * (uint64_t)kv->layers[l].slots * KH * es;
    }
    for (int l = 0; l < cfg->n_layers; l++) {
        gm_kv_layer *L = &kv->layers[l];
        size_t half = (size_t)L->slots * KH * es;
        L->k = gm_alloc_huge(half);
        L->v = gm_alloc_huge(half);
        if (!L->k || !L->v) {
            uint64_t need = kv->bytes;
            gm_kv_cache_free(kv);
            return gm_fail(GM_ERR_NOMEM,
                           "out of memory: cannot allocate the KV cache (%zu bytes for layer %d; %llu bytes (%.1f MiB) "
                           "for all %d layers at --cache-length %d): lower --cache-length",
                           2 * half, l, (unsigned long long)need, need / 1048576.0, cfg->n_layers, cache_length);
        }
    }
    return GM_OK;
}

/* Store one token's keys or values (KH f32) at slot `slot` of a cache layer's k or v. */
static void kv_store(void *base, bool f16, int slot, const float *x, size_t KH) {
    if (!f16) {
        memcpy((float *)base + (size_t)slot * KH, x, KH * sizeof(float));
        return;
    }
    uint16_t *h = (uint16_t *)base + (size_t)slot * KH;
    for (size_t i = 0; i < KH; i++) h[i] = gm_f32_to_f16(x[i]);
}

void gm_kv_cache_free(gm_kv_cache *kv) {
    if (!kv || !kv->layers) return;
    for (int l = 0; l < kv->n_layers; l++) {
        free(kv->layers[l].k);
        free(kv->layers[l].v);
    }
    free(kv->layers);
    memset(kv, 0, sizeof *kv);
}

/* ---- linear layers: y = W x over the mesh ---- */

/* One product of this device: local rows [r0, r1) of a matrix against T inputs. */
typedef struct mm_task {
    const gm_matrix *m;
    size_t r0, r1;
    const float *X;   /* [T][cols] f32 inputs (file-layout kernels) */
    gm_xq xq;         /* quantized inputs (packed kernels) */
    float *Y;         /* Y[t * ldy + (r - r0)] */
    size_t ldy;
    float *bound;     /* non-NULL: the screened product (T = 1), bound[r - r0] beside Y (vocab_screen.h) */
    const float *eb;  /* its per-block errors (gm_packed_screen_errors) */
    double *lo, *hi;  /* with bound: [panels of r0 .. r1] each panel's largest lower / upper bound
                       * (gm_panel_bounds) */
    const double *tau;      /* non-NULL (with bound): the screen's exact pass instead, over the panels
                             * holding a row whose upper bound reaches *tau (gm_screen_recompute) */
    _Atomic size_t *exact;  /* rows that pass recomputed */
} mm_task;

/* Rows per step of the screen and its summary (a multiple of GM_PANEL_ROWS): 8 KiB of values and bounds.
 * One summary after the whole screen read 2 MiB back from L3 on one thread (270M: 0.17 ms a token). */
enum { SCREEN_STEP = 1024 };

typedef struct mm_job {
    const mm_task *tasks;
    int n, T, threads;
    int first[5]; /* chunks of task k: [first[k], first[k+1]) */
} mm_job;

/* Part `part` of `parts` of n units, for `threads` threads that claim parts in order. When the parts
 * are steps of the threads (parts = steps x threads), thread t's even share is cut into steps of 1/2,
 * 1/4, ... and part s x threads + t is step s of share t: threads that keep pace claim their own
 * share's steps one after the other and stream it as one run (the hardware prefetcher keeps going),
 * while a thread that another process delays leaves its later steps to the others. (Even parts in
 * claim order cut the streams into pieces: 270M decode at 2 threads 85.4-85.7 tok/s against
 * 86.9-88.4, with a busy core 60.6-60.9 against 61.6-62.0.) Otherwise even parts. */
static void chunk_range(size_t n, int threads, int parts, int part, size_t *lo, size_t *hi) {
    if (threads < 2 || parts % threads != 0 || parts == threads) {
        gm_split_range(n, parts, part, 1, lo, hi);
        return;
    }
    int steps = parts / threads, t = part % threads, s = part / threads;
    size_t a, b;
    gm_split_range(n, threads, t, 1, &a, &b);
    size_t len = b - a;
    *lo = a + (s == 0 ? 0 : len - (len >> s));
    *hi = a + (s == steps - 1 ? len : len - (len >> (s + 1)));
}

/* Chunk c of the job: a part of its task's rows (packed: whole 16-row panels; chunk_range). Threads
 * claim chunks as they come (gm_pool_run_chunks), a few per thread, so a thread another process
 * delays does not hold up the others. */
static void mm_chunk(void *ctx, int c, int slot) {
    (void)slot;
    const mm_job *j = ctx;
    int k = 0;
    while (c >= j->first[k + 1]) k++;
    const mm_task *tk = &j->tasks[k];
    const gm_matrix *m = tk->m;
    int part = c - j->first[k], parts = j->first[k + 1] - j->first[k];
    size_t lo, hi;
    if (m->packed.data) {
        size_t p0 = tk->r0 / GM_PANEL_ROWS, p1 = (tk->r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS;
        chunk_range(p1 - p0, j->threads, parts, part, &lo, &hi);
        size_t a = (p0 + lo) * GM_PANEL_ROWS, b = (p0 + hi) * GM_PANEL_ROWS;
        if (a < tk->r0) a = tk->r0;
        if (b > tk->r1) b = tk->r1;
        if (b <= a) return;
        float *Y = tk->Y + (a - tk->r0);
        size_t pa = a / GM_PANEL_ROWS - tk->r0 / GM_PANEL_ROWS; /* a's panel in lo, hi */
        if (tk->bound && tk->tau) {
            size_t done = gm_screen_recompute(&m->packed, a, b, &tk->xq, Y, tk->hi + pa, *tk->tau);
            atomic_fetch_add(tk->exact, done);
            return;
        }
        if (tk->bound) { /* in steps of SCREEN_STEP rows, whose values and bounds are in L1 for their summary;
                          * steps end at multiples of SCREEN_STEP, so no two share a panel */
            for (size_t s = a, e; s < b; s = e) {
                e = (s / SCREEN_STEP + 1) * SCREEN_STEP;
                e = e < b ? e : b;
                size_t ps = s / GM_PANEL_ROWS - tk->r0 / GM_PANEL_ROWS;
                gm_packed_screen(gm_matrix_screened(m), s, e, &tk->xq, tk->eb, Y + (s - a), tk->bound + (s - tk->r0));
                gm_panel_bounds(s, e, Y + (s - a), tk->bound + (s - tk->r0), tk->lo + ps, tk->hi + ps);
            }
            return;
        }
        /* one token: the int16 matvec, or (fast) the int8 matmul's single term where the kind has one */
        if (j->T == 1 && !(tk->xq.fast && gm_xq_int8_for(&tk->xq, m->packed.kind) &&
                           gm_packed_kind_int8(m->packed.kind, true)))
            gm_packed_matvec(&m->packed, a, b, &tk->xq, Y);
        else gm_packed_matmul(&m->packed, a, b, &tk->xq, (size_t)j->T, Y, tk->ldy);
        return;
    }
    gm_split_range(tk->r1 - tk->r0, parts, part, 4, &lo, &hi);
    if (hi <= lo) return;
    const uint8_t *W = (const uint8_t *)m->data + (tk->r0 + lo) * m->row_bytes;
    if (j->T == 1) gm_matvec(m->type, W, m->row_bytes, hi - lo, (size_t)m->cols, tk->X, tk->Y + lo);
    else gm_matmul(m->type, W, m->row_bytes, hi - lo, (size_t)m->cols, tk->X, (size_t)j->T, tk->Y + lo, tk->ldy);
}

/* Run the tasks on the device's threads: each in up to 4 chunks per thread (none with 1 thread). */
static void run_tasks(gm_device *d, const mm_task *tasks, int n, int T) {
    int threads = gm_pool_size(d->pool);
    mm_job j = {tasks, n, T, threads, {0}};
    for (int k = 0; k < n; k++) {
        const mm_task *tk = &tasks[k];
        size_t units = tk->m->packed.data ? (tk->r1 - tk->r0 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS + 1 : (tk->r1 - tk->r0 + 3) / 4;
        size_t want = threads == 1 ? 1 : 4 * (size_t)threads;
        j.first[k + 1] = j.first[k] + (int)(units < want ? (units ? units : 1) : want);
    }
    gm_pool_run_chunks(d->pool, mm_chunk, &j, j.first[n]);
}

/* Row outputs that need a device-major staging area (T > 1, rows split over several devices). */
static bool staged(const gm_device *d, const gm_matrix *m, int T) {
    return m->plan.split != GM_SPLIT_COLS && d->n_devices > 1 && T > 1;
}

/* The local part of Y [T][full_rows] = X [T][full_cols] . W^T (X quantized in d->xq when packed). */
static mm_task linear_task(gm_device *d, const gm_matrix *m, const float *X, int T, float *Y) {
    size_t R = (size_t)m->full_rows, C = (size_t)m->full_cols;
    mm_task tk = {.m = m, .X = X, .xq = d->xq};
    if (m->plan.split == GM_SPLIT_COLS) {
        /* partial sums over this device's input columns, completed by an all-reduce */
        tk.r0 = 0, tk.r1 = (size_t)m->rows, tk.Y = Y, tk.ldy = R;
        if (m->packed.data) {
            tk.xq.q += m->lo, tk.xq.q2 += m->lo, tk.xq.d += m->lo / GM_XQ_BLOCK, tk.xq.s += m->lo / GM_XQ_BLOCK;
            tk.xq.qs += m->lo / 8;
            if (tk.xq.xb) tk.xq.xb += 8 * m->lo;
            tk.xq.x += m->lo, tk.xq.hi += m->lo, tk.xq.mid += m->lo, tk.xq.lo += m->lo;
            if (tk.xq.has8)
                tk.xq.b8 += 3 * m->lo, tk.xq.e8 += m->lo / GM_XQ_BLOCK, tk.xq.s8 += GM_X8_SUMS * (m->lo / GM_XQ_BLOCK);
            if (tk.xq.has8 && tk.xq.b8n) tk.xq.b8n += 3 * m->lo;
            tk.xq.cols = (size_t)m->cols;
        } else if (T > 1) {
            for (int t = 0; t < T; t++)
                memcpy(d->pack + (size_t)t * m->cols, X + (size_t)t * C + m->lo, m->cols * sizeof(float));
            tk.X = d->pack;
        } else {
            tk.X = X + m->lo;
        }
        return tk;
    }
    /* rows [off[g], off[g+1]) computed here, then gathered */
    uint64_t lo = m->off[d->global], hi = m->off[d->global + 1];
    tk.r0 = (size_t)(lo - m->lo), tk.r1 = (size_t)(hi - m->lo);
    if (staged(d, m, T)) tk.Y = d->pack + (size_t)T * lo, tk.ldy = hi - lo; /* [device][t][its rows] */
    else tk.Y = Y + lo, tk.ldy = R;
    return tk;
}

/* The collective that completes a product on every device. */
static gm_status linear_finish(gm_device *d, const gm_matrix *m, int T, float *Y) {
    size_t R = (size_t)m->full_rows;
    if (m->plan.split == GM_SPLIT_COLS) return gm_comm_all_reduce(d->comm, d->local, Y, (size_t)T * R);
    if (!staged(d, m, T)) return gm_comm_all_gather(d->comm, d->local, Y, m->off);
    size_t off_t[GM_MAX_DEVICES + 1];
    for (int g = 0; g <= d->n_devices; g++) off_t[g] = (size_t)T * m->off[g];
    GM_TRY(gm_comm_all_gather(d->comm, d->local, d->pack, off_t));
    for (int g = 0; g < d->n_devices; g++) {
        size_t glo = m->off[g], n = m->off[g + 1] - glo;
        const float *seg = d->pack + off_t[g];
        for (int t = 0; t < T; t++) memcpy(Y + (size_t)t * R + glo, seg + (size_t)t * n, n * sizeof(float));
    }
    return GM_OK;
}

/* ---- per-token work of a step on the device's threads ---- */

/* A prefill's per-token work (norms, RoPE, GeGLU, the inputs' quantization) on all the device's threads, in
 * runs of consecutive tokens: on one thread it was ~5 % of a 512-token prefill's work on the 270M, done while
 * the other threads waited. Steps of fewer than 2 TOKENS_PER_RUN tokens (decode) stay on this thread. */
enum { TOKENS_PER_RUN = 8 };
typedef void (*token_fn)(gm_device *d, const void *arg, int t0, int t1);

typedef struct token_job {
    gm_device *d;
    token_fn fn;
    const void *arg;
    int T, runs;
} token_job;

static void token_run(void *ctx, int c, int slot) {
    (void)slot;
    const token_job *j = ctx;
    size_t lo, hi;
    gm_split_range((size_t)j->T, j->runs, c, 1, &lo, &hi);
    if (hi > lo) j->fn(j->d, j->arg, (int)lo, (int)hi);
}

/* fn(d, arg, t0, t1) over tokens [0, T) in disjoint runs; each token's work must not read another's */
static void for_tokens(gm_device *d, int T, token_fn fn, const void *arg) {
    int threads = gm_pool_size(d->pool), runs = T / TOKENS_PER_RUN;
    runs = runs > 2 * threads ? 2 * threads : runs;
    if (threads < 2 || runs < 2) {
        fn(d, arg, 0, T);
        return;
    }
    token_job j = {d, fn, arg, T, runs};
    gm_pool_run_chunks(d->pool, token_run, &j, runs);
}

typedef void (*quantize_fn)(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
typedef struct quant_arg {
    const float *X; /* [T][C] */
    size_t C;
    quantize_fn quantize; /* gm_quantize_x (the int16 terms) or gm_quantize_x8 (the int8 ones) */
} quant_arg;

/* rows [t0, t1) of the terms, into d->xq */
static void quantize_rows(gm_device *d, const void *arg, int t0, int t1) {
    const quant_arg *a = arg;
    gm_xq v = gm_xq_rows(&d->xq, a->C, (size_t)t0);
    a->quantize(a->X + (size_t)t0 * a->C, a->C, (size_t)(t1 - t0), a->C, &v);
}

/* X [T][C]'s terms into d->xq: a batch's rows on the threads, then a call without rows sets xq's layout */
static void quantize_inputs(gm_device *d, const float *X, size_t C, int T, quantize_fn quantize) {
    quant_arg qa = {X, C, quantize};
    if (T > 1) for_tokens(d, T, quantize_rows, &qa);
    quantize(X, C, T > 1 ? 0 : (size_t)T, C, &d->xq);
}

/* X [T][full_cols] prepared for the packed kernels of ms (quantized once for all of them). */
static void prepare_inputs(gm_device *d, const gm_matrix *const *ms, int n, const float *X, int T) {
    /* the int8 terms feed the batched products, with --precision fast the single-token ones too, and the
     * exact single-token ones of the kinds that read them faster (gm_packed_decode_int8) */
    bool quant = false, bf16 = false, int16 = false, batch8 = T > 1 || d->fast, decode8 = false;
    size_t amx_from = 2; /* AMX from this many tokens: where it is faster for every matrix of the call */
    for (int i = 0; i < n; i++) {
        gm_pack_kind k = ms[i]->packed.data ? ms[i]->packed.kind : GM_PK_NONE;
        quant |= k != GM_PK_NONE && k != GM_PK_BF16;
        bf16 |= k == GM_PK_BF16;
        decode8 |= !batch8 && gm_packed_decode_int8(k) && gm_xq_room8_for(&d->xq, k);
        if (k != GM_PK_NONE && gm_packed_amx_min_tokens(k) > amx_from) amx_from = gm_packed_amx_min_tokens(k);
    }
    bool int8 = d->xq.b8 && gm_packed_int8_matmul() && (batch8 || decode8);
    for (int i = 0; i < n; i++) { /* the int16 terms for the rest: matvec, Q6_K */
        gm_pack_kind k = ms[i]->packed.data ? ms[i]->packed.kind : GM_PK_NONE;
        bool reads8 = int8 && (batch8 ? gm_packed_kind_int8(k, d->fast) : gm_packed_decode_int8(k)) &&
                      gm_xq_room8_for(&d->xq, k);
        int16 |= k != GM_PK_NONE && k != GM_PK_BF16 && !reads8;
    }
    size_t C = (size_t)ms[0]->full_cols;
    bool amx = T > 1 && (quant || bf16) && (size_t)T >= amx_from && gm_packed_amx_matmul();
    bool f32 = T > 1 && (quant || bf16) && !amx && gm_packed_f32_matmul();
    /* nothing left from an earlier product: gm_packed_matmul takes the int8 terms where has8 says so and
     * the AMX products where split does */
    d->xq.has8 = false, d->xq.split = false;
    if (amx) {
        gm_prepare_x_bf16(X, C, (size_t)T, C, true, &d->xq); /* every kind's AMX matmul */
    } else if (f32) {
        gm_prepare_x_bf16(X, C, (size_t)T, C, false, &d->xq); /* every kind's f32 matmul: x as it is */
    } else {
        /* fast BF16 products of several tokens read the bf16 rounding of x (the split's hi) */
        if (bf16) gm_prepare_x_bf16(X, C, (size_t)T, C, d->fast && T > 1, &d->xq);
        /* the int16 terms only where a product reads them (gm_quantize_x clears has8: it goes first) */
        if (int16) quantize_inputs(d, X, C, T, gm_quantize_x);
        if (quant && int8) quantize_inputs(d, X, C, T, gm_quantize_x8);
    }
    d->xq.f32 = f32;
    d->xq.fast = d->fast && !amx; /* the AMX matmuls stay exact */
}

/* Ys[i] [T][rows of ms[i]] = X . ms[i]^T for matrices sharing the input X [T][full_cols]: X is
 * prepared once, the products run in one pass of the thread pool when none needs the staging buffer,
 * then the partial sums are all-reduced and the row outputs gathered in one synchronization. */
static gm_status linear_n(gm_device *d, const gm_matrix *const *ms, int n, const float *X, int T, float *const *Ys) {
    bool fuse = true;
    for (int i = 0; i < n; i++)
        fuse &= !staged(d, ms[i], T) && (ms[i]->packed.data || ms[i]->plan.split != GM_SPLIT_COLS || T == 1);
    prepare_inputs(d, ms, n, X, T);
    mm_task tasks[4];
    if (fuse && n <= 4) {
        for (int i = 0; i < n; i++) tasks[i] = linear_task(d, ms[i], X, T, Ys[i]);
        run_tasks(d, tasks, n, T);
        float *gbufs[GM_GATHER_MAX];
        const size_t *goffs[GM_GATHER_MAX];
        int ng = 0;
        for (int i = 0; i < n; i++) {
            if (ms[i]->plan.split == GM_SPLIT_COLS) GM_TRY(linear_finish(d, ms[i], T, Ys[i]));
            else gbufs[ng] = Ys[i], goffs[ng++] = (const size_t *)ms[i]->off;
        }
        return gm_comm_all_gather_n(d->comm, d->local, gbufs, goffs, ng);
    }
    for (int i = 0; i < n; i++) {
        tasks[0] = linear_task(d, ms[i], X, T, Ys[i]);
        run_tasks(d, tasks, 1, T);
        GM_TRY(linear_finish(d, ms[i], T, Ys[i]));
    }
    return GM_OK;
}

static gm_status linear(gm_device *d, const gm_matrix *m, const float *X, int T, float *Y) {
    return linear_n(d, &m, 1, X, T, &Y);
}

/* ---- embedding lookup: x[t] = E[token] * sqrt(D), rows owned by whoever holds them ---- */

static gm_status embed(gm_device *d, const int32_t *tokens, int T, float *x) {
    const gm_matrix *E = &d->w.embed;
    size_t D = (size_t)d->cfg->d_model;
    float scale = d->cfg->embed_scale;
    if (E->plan.split == GM_SPLIT_COLS) {
        /* every device holds columns [lo, hi) of every row: gather along D */
        size_t off_t[GM_MAX_DEVICES + 1];
        size_t cols = (size_t)E->cols;
        for (int g = 0; g < d->n_devices; g++) {
            size_t lo, hi;
            gm_split_range((size_t)E->full_cols, d->n_devices, g, (size_t)E->plan.unit, &lo, &hi);
            off_t[g] = (size_t)T * lo;
        }
        off_t[d->n_devices] = (size_t)T * (size_t)E->full_cols;
        float *mine = d->pack + off_t[d->global];
        for (int t = 0; t < T; t++) {
            gm_matrix_row(E, (uint64_t)tokens[t], mine + (size_t)t * cols);
            for (size_t i = 0; i < cols; i++) mine[(size_t)t * cols + i] *= scale;
        }
        GM_TRY(gm_comm_all_gather(d->comm, d->local, d->pack, off_t));
        for (int g = 0; g < d->n_devices; g++) {
            size_t glo = off_t[g] / (size_t)T, n = (off_t[g + 1] - off_t[g]) / (size_t)T;
            for (int t = 0; t < T; t++) memcpy(x + (size_t)t * D + glo, d->pack + off_t[g] + (size_t)t * n, n * sizeof(float));
        }
        return GM_OK;
    }
    bool sharded = E->plan.split == GM_SPLIT_ROWS;
    for (int t = 0; t < T; t++) {
        float *row = x + (size_t)t * D;
        uint64_t tok = (uint64_t)tokens[t];
        if (tok >= E->lo && tok < E->hi) {
            gm_matrix_row(E, tok - E->lo, row);
            for (size_t i = 0; i < D; i++) row[i] *= scale;
        } else {
            memset(row, 0, D * sizeof(float));
        }
    }
    /* rows split by vocabulary: exactly one device holds each token's row, the others add zeros */
    return sharded ? gm_comm_all_reduce(d->comm, d->local, x, (size_t)T * D) : GM_OK;
}

/* ---- attention over the cache, all heads (each device computes them all; KV is replicated) ---- */

typedef struct attn_job {
    gm_device *d;
    int layer;
    bool global;
    int t0, T, rows; /* tokens [t0, t0 + T); rows: query heads per piece of work (<= 4, <= heads per kv head) */
    int tokens;  /* consecutive tokens per piece of work (rows x tokens <= GM_ATTN_ROWS_MAX) */
    int pieces;  /* > 1: one token, its positions cut into this many pieces (split decoding) */
} attn_job;

/* The first position a token at position p attends to: 0, or the start of a local layer's window. */
static int attn_first(const gm_config *c, bool global, int p) {
    return !global && c->sliding_window > 0 && p - c->sliding_window + 1 > 0 ? p - c->sliding_window + 1 : 0;
}

/* The rows gathered in a (all of one sequence's cache, kv) against kv head kvh of the job's layer */
static void attn_rows_run(const attn_job *j, gm_attn_rows *a, const gm_kv_cache *kv, int kvh, float *scores) {
    const gm_config *c = j->d->cfg;
    size_t H = (size_t)c->head_dim, KH = (size_t)c->n_kv_heads * H;
    const gm_kv_layer *L = &kv->layers[j->layer];
    a->kv_f16 = kv->f16;
    size_t head = (size_t)kvh * H * (a->kv_f16 ? 2 : sizeof(float)); /* bytes to this kv head */
    gm_attention_rows(a, (const char *)L->k + head, (const char *)L->v + head, KH, L->slots, H, c->attn_softcap,
                      scores);
}

/* Chunk = (run of `tokens` consecutive tokens, kv head, run of up to `rows` of its query heads, piece of
 * the positions): the rows of a chunk share every key and value read of their cache (tokens of another
 * sequence in the batch, with another cache, go in a call of their own). With one piece the outputs are
 * final; with several (one token) each chunk reads only its piece of the cache and leaves unnormalized
 * outputs in attn_part, merged by attention(). */
static void attn_chunk(void *ctx, int chunk, int slot) {
    attn_job *j = ctx;
    const gm_config *c = j->d->cfg;
    int N = c->n_heads, H = c->head_dim, G = c->n_heads / c->n_kv_heads, K = c->n_kv_heads;
    size_t NH = (size_t)N * (size_t)H;
    float *scores = j->d->scores + (size_t)slot * j->d->score_cap;
    int runs = (G + j->rows - 1) / j->rows; /* per (t, kv head) */
    int piece = chunk % j->pieces;
    size_t job = (size_t)(chunk / j->pieces);
    int rest = (int)(job % ((size_t)K * (size_t)runs));
    int tb = j->t0 + (int)(job / ((size_t)K * (size_t)runs)) * j->tokens; /* tokens [tb, te) */
    int te = tb + j->tokens < j->t0 + j->T ? tb + j->tokens : j->t0 + j->T;
    int kvh = rest / runs, h0 = kvh * G + (rest % runs) * j->rows; /* heads [h0, h1) */
    int h1 = h0 + j->rows < (kvh + 1) * G ? h0 + j->rows : (kvh + 1) * G;
    gm_attn_rows a = {0};
    float mx[4], sm[4]; /* a piece's per-row max and sum, scattered to attn_max / attn_sum below */
    int lo = 0, hi = -1; /* the positions of the rows gathered so far */
    for (int t = tb; t < te; t++) {
        int p = j->d->tok_pos[t], first = attn_first(c, j->global, p), last = p;
        if (j->pieces > 1) { /* positions [first + span * piece / pieces, ...) */
            int span = p - first + 1;
            last = first + (int)((int64_t)span * (piece + 1) / j->pieces) - 1;
            first += (int)((int64_t)span * piece / j->pieces);
            a.max_out = mx, a.sum_out = sm;
        }
        int nlo = a.n && lo < first ? lo : first, nhi = a.n && hi > last ? hi : last;
        /* another sequence (another cache), or more scores than the scratch holds: a call of their own */
        if (a.n > 0 && (j->d->tok_kv[t] != j->d->tok_kv[t - 1] ||
                        (size_t)(a.n + h1 - h0) * (size_t)(nhi - nlo + 1) > j->d->score_cap)) {
            attn_rows_run(j, &a, j->d->tok_kv[t - 1], kvh, scores);
            a.n = 0, nlo = first, nhi = last;
        }
        lo = nlo, hi = nhi;
        for (int h = h0; h < h1; h++) {
            a.q[a.n] = j->d->q + (size_t)t * NH + (size_t)h * (size_t)H;
            a.out[a.n] = j->pieces > 1 ? j->d->attn_part + ((size_t)h * (size_t)j->pieces + (size_t)piece) * (size_t)H
                                       : j->d->att + (size_t)t * NH + (size_t)h * (size_t)H;
            a.first[a.n] = first;
            a.last[a.n] = last;
            a.n++;
        }
    }
    attn_rows_run(j, &a, j->d->tok_kv[te - 1], kvh, scores);
    for (int i = 0; a.max_out && i < a.n; i++) {
        size_t o = (size_t)(h0 + i) * (size_t)j->pieces + (size_t)piece;
        j->d->attn_max[o] = mx[i], j->d->attn_sum[o] = sm[i];
    }
}

/* Pieces of one token's attention: on several threads, when there are fewer (kv head, run) units than
 * about two per thread, one token's positions are cut so that every thread reads a part of the cache
 * (each key and value once in all) instead of every thread reading all of it for its heads. */
static int attn_pieces(const gm_device *d, int T, int units, int span) {
    int threads = gm_pool_size(d->pool);
    if (T != 1 || threads < 2 || units >= 2 * threads) return 1;
    int p = (2 * threads + units - 1) / units, most = span / 64; /* at least 64 positions a piece */
    p = p > most ? most : p;
    p = p > GM_ATTN_PIECES_MAX ? GM_ATTN_PIECES_MAX : p;
    return p < 1 ? 1 : p;
}

/* Attention of tokens [t0, t0 + T) of the step */
static void attention(gm_device *d, int l, int t0, int T) {
    const gm_config *c = d->cfg;
    int N = c->n_heads, K = c->n_kv_heads, G = N / K, H = c->head_dim;
    bool global = c->layer_is_global[l];
    int threads = gm_pool_size(d->pool), rows = (T * N + threads - 1) / threads;
    rows = rows < 1 ? 1 : rows > 4 ? 4 : rows;
    attn_job aj = {d, l, global, t0, T, rows < G ? rows : G, 1, 1};
    int span = d->tok_pos[t0] - attn_first(c, global, d->tok_pos[t0]) + 1; /* token t0's positions (T = 1) */
    int run4 = G < 4 ? G : 4;
    aj.pieces = attn_pieces(d, T, K * ((G + run4 - 1) / run4), span);
    if (aj.pieces > 1) aj.rows = run4; /* every head of a run shares its piece's reads */
    int runs = (G + aj.rows - 1) / aj.rows;
    /* Several tokens per chunk (a prefill): their rows read each key and value once for all, where one
     * token per chunk read the whole span again for every token (at 4096 positions 8 MB of f32 keys and
     * values per token and layer, from L3 or memory). Fewer tokens where that would leave fewer than
     * about four chunks per thread. */
    if (T > 1) {
        aj.tokens = GM_ATTN_ROWS_MAX / aj.rows;
        while (aj.tokens > 1 && (T + aj.tokens - 1) / aj.tokens * K * runs < 4 * threads) aj.tokens /= 2;
    }
    gm_pool_run_chunks(d->pool, attn_chunk, &aj, (T + aj.tokens - 1) / aj.tokens * K * runs * aj.pieces);
    if (aj.pieces > 1)
        for (int h = 0; h < N; h++) {
            size_t o = (size_t)h * (size_t)aj.pieces;
            gm_attention_merge(d->att + ((size_t)t0 * (size_t)N + (size_t)h) * (size_t)H, d->attn_part + o * (size_t)H,
                               (size_t)H, d->attn_max + o, d->attn_sum + o, aj.pieces, (size_t)H);
        }
}

/* cos / sin tables of the step's token positions (local and global RoPE), shared by every layer */
static void rope_tables(gm_device *d, int T) {
    size_t H = (size_t)d->cfg->head_dim;
    for (int t = 0; t < T; t++) {
        gm_rope_table(d->rope_local + (size_t)t * H, H, d->tok_pos[t], d->inv_freq_local);
        gm_rope_table(d->rope_global + (size_t)t * H, H, d->tok_pos[t], d->inv_freq_global);
    }
}

static void add_normed(float *x, float *y, const float *w, size_t n, float eps) {
    gm_rmsnorm(y, y, w, n, eps);
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* Rows mode: every device holds different tokens (its own batch rows). Projections then gather the
 * rows of all devices, run the sharded product on all of them, and keep their own; the rest of the
 * layer (norms, RoPE, attention over the row's own KV cache) stays local. */
static gm_status proj(gm_device *d, const gm_matrix *m, const float *X, int T, float *Y) {
    if (!d->rows_mode) return linear(d, m, X, T, Y);
    if (d->rows_total == 0) return GM_OK;
    size_t C = (size_t)m->full_cols, R = (size_t)m->full_rows;
    size_t off[GM_MAX_DEVICES + 1];
    for (int g = 0; g <= d->n_devices; g++) off[g] = d->rows_off[g] * C;
    memcpy(d->xa + off[d->global], X, (size_t)T * C * sizeof(float));
    GM_TRY(gm_comm_all_gather(d->comm, d->local, d->xa, off));
    GM_TRY(linear(d, m, d->xa, d->rows_total, d->ya));
    memcpy(Y, d->ya + d->rows_off[d->global] * R, (size_t)T * R * sizeof(float));
    return GM_OK;
}

/* proj of several matrices sharing the input X: fused (linear_n) outside rows mode */
static gm_status proj_n(gm_device *d, const gm_matrix *const *ms, int n, const float *X, int T, float *const *Ys) {
    if (!d->rows_mode) return linear_n(d, ms, n, X, T, Ys);
    for (int i = 0; i < n; i++) GM_TRY(proj(d, ms[i], X, T, Ys[i]));
    return GM_OK;
}

/* Whether this device's rows of gate and up are exactly the columns of down it holds: then the GeGLU
 * of those rows stays here (down's partial sums are all-reduced anyway), with no gather of gate / up
 * (fsdp and tp both split F this way). */
static bool ffn_stays_local(const gm_device *d, const gm_layer_weights *W) {
    return !d->rows_mode && d->n_devices > 1 && W->gate.plan.split == GM_SPLIT_ROWS &&
           W->up.plan.split == GM_SPLIT_ROWS && W->down.plan.split == GM_SPLIT_COLS && W->gate.lo == W->up.lo &&
           W->gate.hi == W->up.hi && W->down.lo == W->gate.lo && W->down.hi == W->gate.hi;
}

/* The layer's per-token steps, on the threads (for_tokens) */
typedef struct layer_rows {
    const gm_layer_weights *W;
    bool global;
    int first;    /* the first kept token: queries and outputs from here on */
    size_t lo, n; /* GeGLU: columns [lo, lo + n) of d->gate and d->up */
} layer_rows;

/* xn = the attention norm of x */
static void attn_norm_rows(gm_device *d, const void *arg, int t0, int t1) {
    const layer_rows *a = arg;
    size_t D = (size_t)d->cfg->d_model;
    for (int t = t0; t < t1; t++) gm_rmsnorm(d->xn + t * D, d->x + t * D, a->W->attn_norm, D, d->cfg->rms_eps);
}

/* the kept tokens' queries and every token's keys: their norms and RoPE, the queries scaled */
static void qk_rows(gm_device *d, const void *arg, int t0, int t1) {
    const layer_rows *a = arg;
    const gm_config *c = d->cfg;
    size_t H = (size_t)c->head_dim, N = (size_t)c->n_heads, K = (size_t)c->n_kv_heads, NH = N * H, KH = K * H;
    for (int t = t0; t < t1; t++) {
        const float *cs = (a->global ? d->rope_global : d->rope_local) + (size_t)t * H;
        for (size_t h = 0; h < N && t >= a->first; h++) {
            float *q = d->q + t * NH + h * H;
            gm_rmsnorm(q, q, a->W->q_norm, H, c->rms_eps);
            gm_rope_apply(q, H, cs);
            for (size_t i = 0; i < H; i++) q[i] *= c->query_scale;
        }
        for (size_t h = 0; h < K; h++) {
            float *k = d->k + t * KH + h * H;
            gm_rmsnorm(k, k, a->W->k_norm, H, c->rms_eps);
            gm_rope_apply(k, H, cs);
        }
    }
}

/* kept token i (from `first`): x += the post-attention norm of y, then xn = the feed-forward norm of x */
static void post_attn_rows(gm_device *d, const void *arg, int i0, int i1) {
    const layer_rows *a = arg;
    size_t D = (size_t)d->cfg->d_model;
    for (int i = i0; i < i1; i++) {
        size_t t = (size_t)(a->first + i);
        add_normed(d->x + t * D, d->y + t * D, a->W->post_attn_norm, D, d->cfg->rms_eps);
        gm_rmsnorm(d->xn + t * D, d->x + t * D, a->W->ffn_norm, D, d->cfg->rms_eps);
    }
}

/* kept token i: gate = GeGLU(gate, up) over columns [lo, lo + n) */
static void geglu_rows(gm_device *d, const void *arg, int i0, int i1) {
    const layer_rows *a = arg;
    size_t F = (size_t)d->cfg->d_ff;
    for (int i = i0; i < i1; i++) {
        float *g = d->gate + i * F + a->lo;
        gm_geglu(g, g, d->up + i * F + a->lo, a->n);
    }
}

/* kept token i: x += the post-feed-forward norm of y */
static void post_ffw_rows(gm_device *d, const void *arg, int i0, int i1) {
    const layer_rows *a = arg;
    size_t D = (size_t)d->cfg->d_model;
    for (int i = i0; i < i1; i++) {
        size_t t = (size_t)(a->first + i);
        add_normed(d->x + t * D, d->y + t * D, a->W->post_ffw_norm, D, d->cfg->rms_eps);
    }
}

/* gate, up and GeGLU of this device's rows [lo, hi) of F for inputs X [T][D], left in place in d->gate [T][F]. */
static void ffn_local(gm_device *d, const gm_layer_weights *W, const float *X, int T) {
    size_t F = (size_t)d->cfg->d_ff, lo = (size_t)W->gate.lo, n = (size_t)(W->gate.hi - W->gate.lo);
    const gm_matrix *gu[2] = {&W->gate, &W->up};
    prepare_inputs(d, gu, 2, X, T);
    mm_task tasks[2];
    float *out[2] = {d->gate, d->up};
    for (int i = 0; i < 2; i++)
        tasks[i] = (mm_task){.m = gu[i], .r0 = 0, .r1 = n, .X = X, .xq = d->xq, .Y = out[i] + lo, .ldy = F};
    run_tasks(d, tasks, 2, T);
    layer_rows a = {.lo = lo, .n = n};
    for_tokens(d, T, geglu_rows, &a);
}

/* One layer for the step's T tokens. Only the last `keep` tokens' outputs are computed (keep = T but in
 * the last layer, where a token whose logits nobody asked for needs only its key and value in the cache:
 * its query, attention, o projection and feed-forward block would give an output nothing reads; llama.cpp
 * skips them too). The kept tokens' outputs are those of keep = T, up to rounding: a single kept token
 * takes the one-token products. */
static gm_status layer_forward(gm_device *d, int l, int T, int keep) {
    const gm_config *c = d->cfg;
    const gm_layer_weights *W = &d->w.layers[l];
    size_t D = (size_t)c->d_model, F = (size_t)c->d_ff, H = (size_t)c->head_dim;
    size_t N = (size_t)c->n_heads, K = (size_t)c->n_kv_heads, NH = N * H, KH = K * H;
    bool global = c->layer_is_global[l];
    int t0 = T - keep, n = keep; /* the kept tokens [t0, T) */
    if (keep < T && d->rows_mode) return gm_fail(GM_ERR_STATE, "rows mode keeps every token's output");

    layer_rows rows = {.W = W, .global = global, .first = t0, .lo = 0, .n = F};
    for_tokens(d, T, attn_norm_rows, &rows);
    if (keep == T) {
        const gm_matrix *qkv[3] = {&W->q, &W->k, &W->v};
        float *qkv_out[3] = {d->q, d->k, d->v};
        GM_TRY(proj_n(d, qkv, 3, d->xn, T, qkv_out));
    } else {
        const gm_matrix *kv[2] = {&W->k, &W->v};
        float *kv_out[2] = {d->k, d->v};
        GM_TRY(proj_n(d, kv, 2, d->xn, T, kv_out));
        if (n > 0) GM_TRY(proj(d, &W->q, d->xn + t0 * D, n, d->q + t0 * NH));
    }
    for_tokens(d, T, qk_rows, &rows);
    for (int t = 0; t < T; t++) { /* in token order: two tokens of a step may share a ring's slot */
        int p = d->tok_pos[t];
        gm_kv_layer *L = &d->tok_kv[t]->layers[l];
        kv_store(L->k, d->tok_kv[t]->f16, p % L->slots, d->k + t * KH, KH);
        kv_store(L->v, d->tok_kv[t]->f16, p % L->slots, d->v + t * KH, KH);
    }
    if (n == 0) return GM_OK;
    attention(d, l, t0, n);
    float *xn = d->xn + t0 * D, *y = d->y + t0 * D; /* [n][D] the kept tokens' rows */
    GM_TRY(proj(d, &W->o, d->att + t0 * NH, n, y));
    for_tokens(d, n, post_attn_rows, &rows);
    if (ffn_stays_local(d, W)) {
        ffn_local(d, W, xn, n);
    } else {
        const gm_matrix *gu[2] = {&W->gate, &W->up};
        float *gu_out[2] = {d->gate, d->up};
        GM_TRY(proj_n(d, gu, 2, xn, n, gu_out));
        for_tokens(d, n, geglu_rows, &rows);
    }
    GM_TRY(proj(d, &W->down, d->gate, n, y));
    for_tokens(d, n, post_ffw_rows, &rows);
    return GM_OK;
}

/* logits = E xn with only the `top` largest exact (and every value tying with the top-th): the int8
 * screen over this device's rows, the top-th largest lower bound as the threshold, then the exact
 * product again for the panels holding a row whose upper bound reaches it; every other row keeps its
 * screened value, which is below the threshold (docs/DESIGN.md, "The screened vocabulary product").
 * Each device screens its own rows: a row in the mesh's top is in its device's top, and every value left
 * screened is below `top` exact ones of its own device, so the gathered logits keep the property.
 * Returns false (nothing done) where the mesh cannot screen; a device that cannot (fewer rows than top,
 * no memory, a NaN or inf in x) computes its rows exactly and joins the same gather. With --precision fast
 * a matrix screens where one token's fast product is the exact matvec (gm_packed_kind_int8 false, as the
 * single-token choice in mm_chunk reads it: BF16, whose inputs prepare_inputs rounds to bf16
 * for several tokens only), so the exact pass gives the values the whole product would, and the screen reads
 * the int8 copy instead of the BF16 bytes; the other kinds' fast product already reads their bytes once with
 * one int8 term, as the screen would. */
static bool screened_logits(gm_device *d, const gm_matrix *E, int top, float *logits, gm_status *st) {
    const gm_packed *S = gm_matrix_screened(E);
    if (top < 1 || top > GM_SCREEN_TOP_MAX || (d->fast && gm_packed_kind_int8(E->packed.kind, true)) || !d->xq.b8 ||
        !E->packed.data || !gm_packed_can_screen(S->kind) || E->plan.split == GM_SPLIT_COLS ||
        d->cfg->final_softcap > 0)
        return false;
    size_t C = (size_t)E->full_cols;
    /* the exact rows' inputs: the int16 terms (clears has8: first), or BF16's f32 x */
    if (E->packed.kind == GM_PK_BF16) gm_prepare_x_bf16(d->xn, C, 1, C, false, &d->xq);
    else gm_quantize_x(d->xn, C, 1, C, &d->xq);
    gm_quantize_x8(d->xn, C, 1, C, &d->xq);
    d->xq.f32 = d->xq.fast = false;
    mm_task tk = linear_task(d, E, d->xn, 1, logits);
    size_t n = tk.r1 - tk.r0;
    bool screen = n >= (size_t)top;
    for (size_t b = 0; b < C / GM_XQ_BLOCK && screen; b++) screen = isfinite(d->xq.e8[b]);
    size_t panels = (tk.r1 + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS - tk.r0 / GM_PANEL_ROWS;
    if (screen && d->screen_cap < n) {
        float *b = realloc(d->screen_bound, n * sizeof *b);
        if (b) d->screen_bound = b, d->screen_cap = n;
        screen = b != NULL;
    }
    if (screen && d->screen_panels < panels) { /* lo and hi in one block */
        double *p = realloc(d->screen_lo, 2 * panels * sizeof *p);
        if (p) d->screen_lo = p, d->screen_panels = panels;
        screen = p != NULL;
    }
    if (screen && !d->screen_eb) screen = (d->screen_eb = malloc(C / GM_XQ_BLOCK * sizeof(float))) != NULL;
    if (screen && d->screen_top < top) {
        double *h = realloc(d->screen_heap, (size_t)top * sizeof *h);
        if (h) d->screen_heap = h, d->screen_top = top;
        screen = h != NULL;
    }
    tk.bound = screen ? d->screen_bound : NULL;
    if (screen) gm_packed_screen_errors(S, d->xn, &tk.xq, d->screen_eb, S == &E->screen8);
    tk.eb = d->screen_eb;
    tk.lo = d->screen_lo, tk.hi = screen ? d->screen_lo + panels : NULL;
    run_tasks(d, &tk, 1, 1);
    if (screen) {
        double tau = gm_screen_threshold(tk.Y, tk.bound, tk.r0, tk.r1, tk.lo, top, d->screen_heap);
        /* the exact pass on the device's threads too: top-k's 64 reach ~7400 rows (~1 ms on one thread) */
        _Atomic size_t exact = 0;
        tk.tau = &tau, tk.exact = &exact;
        run_tasks(d, &tk, 1, 1);
        d->screen_exact_rows += exact;
        d->screen_steps++;
    }
    *st = linear_finish(d, E, 1, logits);
    return true;
}

static gm_status logits_of(gm_device *d, const float *x, float *logits, int top) {
    const gm_config *c = d->cfg;
    gm_rmsnorm(d->xn, x, d->w.final_norm, (size_t)c->d_model, c->rms_eps);
    gm_status st = GM_OK;
    if (screened_logits(d, &d->w.embed, top, logits, &st)) return st;
    GM_TRY(linear(d, &d->w.embed, d->xn, 1, logits));
    if (c->final_softcap > 0)
        for (int i = 0; i < c->vocab_size; i++) logits[i] = c->final_softcap * tanhf(logits[i] / c->final_softcap);
    return GM_OK;
}

gm_status gm_device_forward(gm_device *d, gm_kv_cache *kv, const int32_t *tokens, int T, int pos0, float *logits_last,
                            float *logits_all, size_t all_stride, int top) {
    const gm_config *c = d->cfg;
    size_t D = (size_t)c->d_model;
    for (int done = 0; done < T;) {
        int n = T - done < GM_PREFILL_CHUNK ? T - done : GM_PREFILL_CHUNK;
        GM_TRY(embed(d, tokens + done, n, d->x));
        for (int t = 0; t < n; t++) {
            d->tok_pos[t] = pos0 + done + t;
            d->tok_kv[t] = kv;
        }
        rope_tables(d, n);
        /* the last layer runs only the tokens whose logits are wanted: all, the prompt's last, or none */
        int keep = logits_all ? n : done + n == T && logits_last ? 1 : 0;
        for (int l = 0; l < c->n_layers; l++) GM_TRY(layer_forward(d, l, n, l == c->n_layers - 1 ? keep : n));
        if (logits_all)
            for (int t = 0; t < n; t++)
                GM_TRY(logits_of(d, d->x + (size_t)t * D, logits_all + (size_t)(done + t) * all_stride, 0));
        done += n;
        if (done == T && logits_last) GM_TRY(logits_of(d, d->x + (size_t)(n - 1) * D, logits_last, logits_all ? 0 : top));
    }
    return GM_OK;
}

/* ---- rows mode: one step of batched generation, each device with its own rows ---- */

/* Each device says how many items it has; off[g] .. off[g+1] become device g's items in a gathered buffer. */
static gm_status gather_counts(gm_device *d, int n, size_t *off) {
    float counts[GM_MAX_DEVICES];
    size_t one[GM_MAX_DEVICES + 1];
    for (int g = 0; g <= d->n_devices; g++) one[g] = (size_t)g;
    counts[d->global] = (float)n;
    GM_TRY(gm_comm_all_gather(d->comm, d->local, counts, one));
    off[0] = 0;
    for (int g = 0; g < d->n_devices; g++) off[g + 1] = off[g] + (size_t)counts[g];
    return GM_OK;
}

gm_status gm_device_rows_step(gm_device *d, const int32_t *tokens, const int *pos, gm_kv_cache *const *kv, int T,
                              const int *logit_rows, int n_logits, float *logits, int *n_logits_all) {
    const gm_config *c = d->cfg;
    size_t D = (size_t)c->d_model, V = (size_t)c->vocab_size;
    if (T > GM_PREFILL_CHUNK) return gm_fail(GM_ERR_ARG, "rows step of %d tokens (at most %d)", T, GM_PREFILL_CHUNK);
    d->rows_mode = true;
    gm_status st = gather_counts(d, T, d->rows_off);
    d->rows_total = (int)d->rows_off[d->n_devices];
    if (st == GM_OK && d->rows_total > GM_PREFILL_CHUNK)
        st = gm_fail(GM_ERR_ARG, "rows step of %d tokens over all devices (at most %d)", d->rows_total, GM_PREFILL_CHUNK);
    if (st == GM_OK && d->rows_total > 0) {
        /* token ids travel as float bit patterns: the gather copies bytes */
        float *tokf = d->pack;
        memcpy(tokf + d->rows_off[d->global], tokens, (size_t)T * sizeof *tokens);
        st = gm_comm_all_gather(d->comm, d->local, tokf, d->rows_off);
        int32_t all_tokens[GM_PREFILL_CHUNK];
        memcpy(all_tokens, tokf, (size_t)d->rows_total * sizeof *all_tokens);
        if (st == GM_OK) st = embed(d, all_tokens, d->rows_total, d->xa);
        if (st == GM_OK) memcpy(d->x, d->xa + d->rows_off[d->global] * D, (size_t)T * D * sizeof(float));
        for (int t = 0; t < T; t++) {
            d->tok_pos[t] = pos[t];
            d->tok_kv[t] = kv[t];
        }
        rope_tables(d, T);
        for (int l = 0; st == GM_OK && l < c->n_layers; l++) st = layer_forward(d, l, T, T);
    }
    /* logits of the requested rows: gather their final hidden states, one vocabulary product each */
    size_t loff[GM_MAX_DEVICES + 1];
    if (st == GM_OK) st = gather_counts(d, n_logits, loff);
    int total = st == GM_OK ? (int)loff[d->n_devices] : 0;
    if (st == GM_OK && total > GM_PREFILL_CHUNK) st = gm_fail(GM_ERR_ARG, "%d logit rows in one step", total);
    if (st == GM_OK && total > 0) {
        size_t hoff[GM_MAX_DEVICES + 1];
        for (int g = 0; g <= d->n_devices; g++) hoff[g] = loff[g] * D;
        for (int i = 0; i < n_logits; i++)
            gm_rmsnorm(d->xa + (loff[d->global] + (size_t)i) * D, d->x + (size_t)logit_rows[i] * D, d->w.final_norm, D,
                       c->rms_eps);
        st = gm_comm_all_gather(d->comm, d->local, d->xa, hoff);
        for (int i = 0; st == GM_OK && i < total; i++) {
            bool mine = (size_t)i >= loff[d->global] && (size_t)i < loff[d->global + 1];
            /* rows of other devices still take part in the product; their result lands in the spare row */
            float *dst = logits + (mine ? (size_t)i - loff[d->global] : (size_t)n_logits) * V;
            st = linear(d, &d->w.embed, d->xa + (size_t)i * D, 1, dst);
            if (st == GM_OK && mine && c->final_softcap > 0)
                for (size_t k = 0; k < V; k++) dst[k] = c->final_softcap * tanhf(dst[k] / c->final_softcap);
        }
    }
    if (n_logits_all) *n_logits_all = total;
    d->rows_mode = false;
    return st;
}
