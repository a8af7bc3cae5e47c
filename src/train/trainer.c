/* gm_trainer: setup (mesh, shards read from the model source), training and evaluation steps.
 * Every local device is a thread running the same step (SPMD); MPI ranks run the same calls. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/threads.h"
#include "kernels/matvec.h"
#include "train/trainer_internal.h"

void gm_train_options_default(gm_train_options *o) {
    memset(o, 0, sizeof *o);
    o->devices = 1;
    o->threads_per_device = 1;
    o->use_mpi = true;
    o->optimizer = GM_OPT_ADAMW;
    o->lr = 1e-4;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->seed = 0;
}

static bool launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

/* ---------------------------------------------------------------- running on every device */

typedef struct run_job {
    gm_trainer *t;
    gm_tdev_fn fn;
    void *arg;
    gm_status st[GM_MAX_DEVICES];
    char err[GM_MAX_DEVICES][320];
} run_job;

static void run_worker(void *ctx, int i, int n) {
    (void)n;
    run_job *j = ctx;
    gm_status st = j->fn(j->t, &j->t->dev[i], j->arg);
    j->st[i] = st;
    if (st != GM_OK) snprintf(j->err[i], sizeof j->err[i], "%s", gm_last_error());
}

gm_status gm_train_run(gm_trainer *t, gm_tdev_fn fn, void *arg) {
    run_job *j = calloc(1, sizeof *j);
    if (!j) return gm_fail(GM_ERR_NOMEM, "out of memory");
    j->t = t, j->fn = fn, j->arg = arg;
    gm_pool_run(t->devices, run_worker, j);
    gm_status st = GM_OK;
    for (int i = 0; i < t->n_local && st == GM_OK; i++)
        if (j->st[i] != GM_OK) st = gm_fail(j->st[i], "%s", j->err[i]);
    free(j);
    return st;
}

/* Every device learns whether any device failed (so none is left waiting in a collective). */
static gm_status agree(gm_trainer *t, gm_tdev *d, gm_status mine) {
    float flag = mine != GM_OK ? 1.0f : 0.0f;
    GM_TRY(gm_comm_all_reduce(t->comm, d->local, &flag, 1));
    if (mine != GM_OK) return mine;
    if (flag > 0) return gm_fail(GM_ERR_COMM, "device %d: another device of the mesh failed", d->global);
    return GM_OK;
}

/* Sum of one double per device, in device order, on every device (exact to double rounding). */
static gm_status sum_over_devices(gm_trainer *t, gm_tdev *d, double x, double *out) {
    float buf[2 * GM_MAX_DEVICES];
    size_t off[GM_MAX_DEVICES + 1];
    for (int g = 0; g <= t->P; g++) off[g] = 2 * (size_t)g;
    float hi = (float)x;
    buf[2 * d->global] = hi;
    buf[2 * d->global + 1] = (float)(x - (double)hi);
    if (t->P > 1) GM_TRY(gm_comm_all_gather(t->comm, d->local, buf, off));
    double s = 0;
    for (int g = 0; g < t->P; g++) s += (double)buf[2 * g] + (double)buf[2 * g + 1];
    *out = s;
    return GM_OK;
}

/* ---------------------------------------------------------------- loading */

static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s) { return gm_fnv1a(GM_FNV_SEED, s, strlen(s)); }

/* LoRA A ~ U(-1/sqrt(in), 1/sqrt(in)) (peft's kaiming_uniform(a=sqrt(5)) bound), B = 0; each element a
 * function of (seed, tensor name, index), so every device count draws the same adapters. */
static void init_lora(gm_trainer *t, gm_tdev *d, int i) {
    const gm_tparam *p = &t->params[i];
    size_t n = gm_tparam_shard_n(p, d->global);
    float *w = d->w[i];
    if (p->ab == 1) {
        memset(w, 0, n * sizeof *w);
        return;
    }
    float bound = 1.0f / sqrtf((float)p->cols);
    uint64_t h = name_hash(p->name) ^ mix64(t->opt.seed);
    for (size_t k = 0; k < n; k++) {
        size_t idx = p->kind == GM_LAYOUT_FLAT ? p->off[d->global] + k : 0; /* adapters are always FLAT */
        double u = (double)(mix64(h + idx) >> 11) / 9007199254740992.0; /* [0, 1) */
        w[k] = (float)((2.0 * u - 1.0) * bound);
    }
}

static gm_status load_shard(gm_trainer *t, gm_tdev *d, int i) {
    const gm_tparam *p = &t->params[i];
    const gm_tensor_info *ti = gm_source_find(t->src, p->name);
    if (!ti) return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' is missing", gm_source_path(t->src), p->name);
    if (ti->ne[0] != p->cols || ti->ne[1] != p->rows || ti->ne[2] != 1 || ti->ne[3] != 1)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]",
                       gm_source_path(t->src), p->name, (unsigned long long)ti->ne[0], (unsigned long long)ti->ne[1],
                       (unsigned long long)p->cols, (unsigned long long)p->rows);
    int g = d->global;
    float *dst = d->w[i];
    size_t C = (size_t)p->cols;
    uint64_t r0, r1;
    if (p->kind == GM_LAYOUT_FLAT) r0 = p->off[g] / C, r1 = (p->off[g + 1] + C - 1) / C;
    else r0 = 0, r1 = p->rows;
    const uint64_t chunk = 256;
    uint8_t *raw = malloc((size_t)(chunk * ti->row_bytes));
    float *row = malloc(C * sizeof *row);
    gm_status st = raw && row ? GM_OK : gm_fail(GM_ERR_NOMEM, "out of memory reading '%s'", p->name);
    for (uint64_t r = r0; r < r1 && st == GM_OK; r += chunk) {
        uint64_t nr = r1 - r < chunk ? r1 - r : chunk;
        st = gm_source_read_rows(t->src, ti, r, nr, raw);
        for (uint64_t k = 0; k < nr && st == GM_OK; k++) {
            uint64_t rr = r + k;
            gm_dequant_row(ti->type, raw + k * ti->row_bytes, row, C);
            if (p->norm && gm_source_config(t->src)->norms_add_one)
                for (size_t c = 0; c < C; c++) row[c] += 1.0f;
            if (p->kind == GM_LAYOUT_FLAT) {
                size_t lo = (size_t)rr * C, hi = lo + C;
                if (lo < p->off[g]) lo = p->off[g];
                if (hi > p->off[g + 1]) hi = p->off[g + 1];
                memcpy(dst + (lo - p->off[g]), row + (lo - (size_t)rr * C), (hi - lo) * sizeof *row);
            } else {
                size_t c0 = p->off[g], n = p->off[g + 1] - c0;
                memcpy(dst + (size_t)rr * n, row + c0, n * sizeof *row);
            }
        }
    }
    free(raw);
    free(row);
    return st;
}

static float *falloc(size_t n, uint64_t *acct) {
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) return NULL;
    memset(p, 0, (n ? n : 1) * sizeof(float));
    if (acct) *acct += n * sizeof(float);
    return p;
}

static gm_status dev_init(gm_trainer *t, gm_tdev *d, void *arg) {
    (void)arg;
    int NP = t->n_params, NU = t->n_units;
    GM_TRY(gm_gemm_ctx_create(t->opt.threads_per_device, &d->gemm));
    gm_pool_set_spin(gm_gemm_ctx_pool(d->gemm), gm_wait_spin(t->wait));
    float ***ptrs[] = {&d->w, &d->g, &d->m, &d->v, &d->fr, &d->fc};
    for (size_t k = 0; k < sizeof ptrs / sizeof ptrs[0]; k++)
        if (!(*ptrs[k] = calloc((size_t)NP, sizeof(float *)))) return gm_fail(GM_ERR_NOMEM, "out of memory");
    float ***uptrs[] = {&d->wblock, &d->gblock, &d->mblock, &d->vblock, &d->unit_w, &d->unit_g};
    for (size_t k = 0; k < sizeof uptrs / sizeof uptrs[0]; k++)
        if (!(*uptrs[k] = calloc((size_t)NU, sizeof(float *)))) return gm_fail(GM_ERR_NOMEM, "out of memory");
    /* shard blocks per unit; with one device the shard is the whole tensor and the block is laid out
     * exactly like the unit's full buffer, so the full buffer is the block itself */
    for (int u = 0; u < NU; u++) {
        size_t nw = 0, ng = 0;
        for (int i = t->unit_first[u]; i < t->unit_first[u] + t->unit_count[u]; i++) {
            size_t s = (gm_tparam_shard_n(&t->params[i], d->global) + 15) / 16 * 16;
            nw += s;
            if (t->params[i].trainable) ng += s;
        }
        d->wblock[u] = falloc(nw, &d->mem.params);
        if (!d->wblock[u]) return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate %zu bytes of weights", d->global, 4 * nw);
        if (ng && !(d->gblock[u] = falloc(ng, &d->mem.grads)))
            return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate %zu bytes of gradients", d->global, 4 * ng);
        size_t ow = 0, og = 0;
        for (int i = t->unit_first[u]; i < t->unit_first[u] + t->unit_count[u]; i++) {
            size_t s = (gm_tparam_shard_n(&t->params[i], d->global) + 15) / 16 * 16;
            d->w[i] = d->wblock[u] + ow;
            ow += s;
            if (t->params[i].trainable) {
                d->g[i] = d->gblock[u] + og;
                og += s;
            }
        }
    }
    GM_TRY(gm_train_optim_alloc(t, d));
    int L = t->cfg.n_layers, E = GM_UNIT_EMBED(t), Fn = GM_UNIT_FINAL(t);
    if (t->P == 1) {
        for (int u = 0; u < NU; u++) d->unit_w[u] = d->wblock[u], d->unit_g[u] = d->gblock[u];
    } else {
        uint64_t *acc = &d->mem.gathered;
        d->layer_w = falloc(t->max_layer_n, acc);
        d->layer_g = t->max_layer_gn ? falloc(t->max_layer_gn, acc) : NULL;
        d->embed_w = falloc(t->unit_n[E], acc);
        d->embed_g = t->unit_gn[E] ? falloc(t->unit_gn[E], acc) : NULL;
        d->final_w = falloc(t->unit_n[Fn], acc);
        d->final_g = t->unit_gn[Fn] ? falloc(t->unit_gn[Fn], acc) : NULL;
        d->pack = t->max_cols_pack ? falloc(t->max_cols_pack, acc) : NULL;
        if (!d->layer_w || (t->max_layer_gn && !d->layer_g) || !d->embed_w || (t->unit_gn[E] && !d->embed_g) ||
            !d->final_w || (t->unit_gn[Fn] && !d->final_g) || (t->max_cols_pack && !d->pack))
            return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate the buffers for gathered weights", d->global);
        for (int l = 0; l < L; l++) d->unit_w[l] = d->layer_w, d->unit_g[l] = d->layer_g;
        d->unit_w[E] = d->embed_w, d->unit_g[E] = d->embed_g;
        d->unit_w[Fn] = d->final_w, d->unit_g[Fn] = d->final_g;
    }
    for (int i = 0; i < NP; i++) {
        if (t->params[i].lm >= 0) init_lora(t, d, i);
        else GM_TRY(load_shard(t, d, i));
    }
    return GM_OK;
}

static void dev_free(gm_trainer *t, gm_tdev *d) {
    if (d->acts)
        for (int l = 0; l < t->cfg.n_layers; l++) gm_tr_acts_free_f32(&d->acts[l]);
    free(d->acts);
    if (d->ctx.cfg) gm_tr_ctx_free_f32(&d->ctx);
    free(d->xs), free(d->dx);
    for (int u = 0; d->wblock && u < t->n_units; u++) {
        free(d->wblock[u]), free(d->gblock[u]);
        if (d->mblock) free(d->mblock[u]);
        if (d->vblock) free(d->vblock[u]);
    }
    for (int i = 0; d->fr && i < t->n_params; i++) free(d->fr[i]), free(d->fc[i]);
    for (int i = 0; d->v && t->opt.optimizer == GM_OPT_ADAFACTOR && i < t->n_params; i++) free(d->v[i]);
    free(d->w), free(d->g), free(d->m), free(d->v), free(d->fr), free(d->fc);
    free(d->wblock), free(d->gblock), free(d->mblock), free(d->vblock), free(d->unit_w), free(d->unit_g);
    free(d->layer_w), free(d->layer_g), free(d->embed_w), free(d->embed_g), free(d->final_w), free(d->final_g);
    free(d->pack);
    gm_gemm_ctx_free(d->gemm);
    memset(d, 0, sizeof *d);
}

static gm_status check_ranks_agree(gm_trainer *t) {
    if (t->n_ranks == 1) return GM_OK;
    const gm_train_options *o = &t->opt;
    /* the seed travels as it is (a double would drop the low bits of a 64-bit seed) */
    double opts[8] = {o->devices, o->lora_rank, o->lora_alpha, o->optimizer, o->lr, o->beta1, o->beta2, o->weight_decay};
    uint64_t digest[10] = {gm_source_fingerprint(t->src), o->seed};
    memcpy(digest + 2, opts, sizeof opts);
    gm_disagreement d;
    GM_TRY(gm_mpi_find_disagreement(digest, 10, &d));
    if (d.first < 0) return GM_OK;
    bool file = d.theirs[0] != d.root[0], opts_differ = memcmp(d.theirs + 1, d.root + 1, sizeof digest - sizeof *digest) != 0;
    const char *what = !file ? "training options differ" : opts_differ ? "model file and training options differ"
                                                                       : "model file differs";
    return gm_fail(GM_ERR_ARG, "rank %d: %s from rank 0's%s; every rank must train the same model with the same options",
                   d.first, what, d.count > 1 ? " (and other ranks differ too)" : "");
}

gm_status gm_trainer_create(const char *path, const gm_train_options *o, gm_trainer **out) {
    return gm_trainer_create_ex(path, o, 0, out);
}

gm_status gm_trainer_create_ex(const char *path, const gm_train_options *o_in, int force_split, gm_trainer **out) {
    *out = NULL;
    gm_train_options o;
    if (o_in) o = *o_in;
    else gm_train_options_default(&o);
    if (o.devices < 1 || o.devices > GM_MAX_DEVICES)
        return gm_fail(GM_ERR_ARG, "devices %d: must be between 1 and %d", o.devices, GM_MAX_DEVICES);
    if (o.threads_per_device < 1 || o.threads_per_device > 256)
        return gm_fail(GM_ERR_ARG, "threads %d: must be between 1 and 256", o.threads_per_device);
    if (o.wait != GM_WAIT_AUTO && o.wait != GM_WAIT_SPIN && o.wait != GM_WAIT_YIELD)
        return gm_fail(GM_ERR_ARG, "wait %d: must be GM_WAIT_AUTO, GM_WAIT_SPIN or GM_WAIT_YIELD", (int)o.wait);
    if (o.lora_rank < 0 || o.lora_rank > 4096) return gm_fail(GM_ERR_ARG, "LoRA rank %d: must be 0..4096", o.lora_rank);
    if (o.lora_rank > 0 && o.lora_alpha == 0) o.lora_alpha = 2.0 * o.lora_rank;
    if (!(o.lr >= 0) || !isfinite(o.lr)) return gm_fail(GM_ERR_ARG, "learning rate %g: must be >= 0", o.lr);
    if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
        return gm_fail(GM_ERR_ARG, "betas (%g, %g): must be in [0, 1)", o.beta1, o.beta2);
    if (!(o.eps >= 0) || !(o.weight_decay >= 0) || !(o.clip_norm >= 0))
        return gm_fail(GM_ERR_ARG, "eps, weight decay and clip norm must be >= 0");
    if (o.optimizer != GM_OPT_ADAMW && o.optimizer != GM_OPT_ADAFACTOR)
        return gm_fail(GM_ERR_ARG, "unknown optimizer %d", (int)o.optimizer);
    gm_trainer *t = calloc(1, sizeof *t);
    if (!t) return gm_fail(GM_ERR_NOMEM, "out of memory");
    t->opt = o;
    t->force_split = force_split;
    t->af_min_dim = 128;
    t->rank = 0, t->n_ranks = 1;
    gm_status st = GM_OK;
    if (o.use_mpi && launched_by_mpirun())
        st = gm_mpi_init(gm_mpi_wait_policy(o.wait), &t->rank, &t->n_ranks);
    if (st == GM_OK && t->n_ranks * o.devices > GM_MAX_DEVICES)
        st = gm_fail(GM_ERR_ARG, "%d ranks x %d devices is more than %d devices", t->n_ranks, o.devices, GM_MAX_DEVICES);
    if (st == GM_OK) st = gm_source_open(path, &t->src);
    if (st == GM_OK) {
        t->cfg = *gm_source_config(t->src);
        if (t->cfg.attn_softcap > 0 || t->cfg.final_softcap > 0)
            st = gm_fail(GM_ERR_UNSUPPORTED, "%s: logit soft-capping (Gemma 2) is not supported by training", path);
        if (gm_tokenizer_load(path, &t->tok) != GM_OK) t->tok = NULL;
    }
    if (st == GM_OK) st = check_ranks_agree(t);
    if (st == GM_OK) st = gm_comm_create(o.devices, t->n_ranks, t->rank, &t->comm);
    if (st == GM_OK) {
        t->wait = gm_comm_wait_policy(t->comm, o.wait, (long)o.devices * o.threads_per_device);
        gm_comm_set_spin(t->comm, gm_wait_spin(t->wait));
        t->n_local = o.devices;
        t->P = t->n_local * t->n_ranks;
        st = gm_train_plan(t);
    }
    if (st == GM_OK) {
        t->dev = calloc((size_t)t->n_local, sizeof *t->dev);
        if (!t->dev) st = gm_fail(GM_ERR_NOMEM, "out of memory");
        for (int i = 0; st == GM_OK && i < t->n_local; i++)
            t->dev[i].local = i, t->dev[i].global = gm_comm_global_index(t->comm, i);
    }
    if (st == GM_OK) st = gm_pool_create(t->n_local, &t->devices);
    if (st == GM_OK) gm_pool_set_spin(t->devices, gm_wait_spin(t->wait));
    if (st == GM_OK) st = gm_train_run(t, dev_init, NULL);
    if (st != GM_OK) {
        gm_trainer_free(t);
        return st;
    }
    *out = t;
    return GM_OK;
}

void gm_trainer_free(gm_trainer *t) {
    if (!t) return;
    for (int i = 0; t->dev && i < t->n_local; i++) dev_free(t, &t->dev[i]);
    free(t->dev);
    for (int i = 0; t->params && i < t->n_params; i++) free(t->params[i].off), free(t->params[i].poff);
    free(t->params), free(t->unit_first), free(t->unit_count), free(t->unit_n), free(t->unit_gn);
    gm_pool_free(t->devices);
    gm_comm_free(t->comm);
    gm_tokenizer_free(t->tok);
    gm_source_close(t->src);
    free(t);
}

const gm_config *gm_trainer_config(const gm_trainer *t) { return &t->cfg; }
const gm_tokenizer *gm_trainer_tokenizer(const gm_trainer *t) { return t->tok; }
int gm_trainer_devices(const gm_trainer *t) { return t->P; }
int gm_trainer_rank(const gm_trainer *t) { return t->rank; }
int gm_trainer_ranks(const gm_trainer *t) { return t->n_ranks; }
int64_t gm_trainer_steps_done(const gm_trainer *t) { return t->step; }
int64_t gm_trainer_examples_seen(const gm_trainer *t) { return t->examples_seen; }

gm_status gm_trainer_set_lr(gm_trainer *t, double lr) {
    if (!(lr >= 0) || !isfinite(lr)) return gm_fail(GM_ERR_ARG, "learning rate %g: must be finite and >= 0", lr);
    t->opt.lr = lr;
    return GM_OK;
}

uint64_t gm_trainer_param_count(const gm_trainer *t, bool trainable_only) {
    uint64_t n = 0;
    for (int i = 0; i < t->n_params; i++)
        if (!trainable_only || t->params[i].trainable) n += t->params[i].n;
    return n;
}

gm_train_memory gm_trainer_memory(const gm_trainer *t, int local) {
    gm_train_memory m = {0};
    if (local < 0 || local >= t->n_local) return m;
    m = t->dev[local].mem;
    m.total = m.params + m.grads + m.optimizer + m.gathered + m.activations;
    return m;
}

/* ---------------------------------------------------------------- steps */

typedef struct step_job {
    const gm_train_example *ex;
    int n;
    double inv_count;
    int mode;             /* 0 train (update), 1 eval, 2 gradients only */
    double loss_sum, grad_norm;
} step_job;

static gm_status ensure_capacity(gm_trainer *t, gm_tdev *d, int T) {
    if (T <= d->cap_T) return GM_OK;
    int cap = (T + 63) / 64 * 64, L = t->cfg.n_layers;
    if (d->acts)
        for (int l = 0; l < L; l++) gm_tr_acts_free_f32(&d->acts[l]);
    if (d->ctx.cfg) gm_tr_ctx_free_f32(&d->ctx);
    free(d->xs), free(d->dx);
    d->xs = d->dx = NULL;
    d->cap_T = 0;
    d->mem.activations = 0;
    if (!d->acts && !(d->acts = calloc((size_t)L, sizeof *d->acts))) return gm_fail(GM_ERR_NOMEM, "out of memory");
    GM_TRY(gm_tr_ctx_init_f32(&d->ctx, &t->cfg, cap, t->opt.lora_rank, t->opt.lora_alpha, d->gemm));
    d->mem.activations += d->ctx.bytes;
    for (int l = 0; l < L; l++) {
        GM_TRY(gm_tr_acts_alloc_f32(&d->acts[l], &t->cfg, cap, t->opt.lora_rank));
        d->mem.activations += d->acts[l].bytes;
    }
    size_t D = (size_t)t->cfg.d_model;
    d->xs = falloc((size_t)(L + 1) * (size_t)cap * D, &d->mem.activations);
    d->dx = falloc((size_t)cap * D, &d->mem.activations);
    if (!d->xs || !d->dx) return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate activations for %d tokens", d->global, cap);
    d->cap_T = cap;
    return GM_OK;
}

static void layer_views(gm_trainer *t, gm_tdev *d, int l, gm_tr_layer_f32 *w, gm_tr_layer_grad_f32 *g) {
    memset(w, 0, sizeof *w);
    memset(g, 0, sizeof *g);
    for (int i = t->unit_first[l]; i < t->unit_first[l] + t->unit_count[l]; i++) {
        const gm_tparam *p = &t->params[i];
        const float *pw = d->unit_w[l] + p->full_off;
        float *pg = p->trainable ? d->unit_g[l] + p->gfull_off : NULL;
        if (p->lm < 0) w->w[p->lt] = pw, g->g[p->lt] = pg;
        else if (p->ab == 0) w->la[p->lm] = pw, g->ga[p->lm] = pg;
        else w->lb[p->lm] = pw, g->gb[p->lm] = pg;
    }
}

static gm_status dev_step(gm_trainer *t, gm_tdev *d, void *arg) {
    step_job *j = arg;
    const gm_config *c = &t->cfg;
    int L = c->n_layers, E = GM_UNIT_EMBED(t), Fn = GM_UNIT_FINAL(t);
    size_t lo, hi;
    gm_split_range((size_t)j->n, t->P, d->global, 1, &lo, &hi);
    int T = 0;
    for (size_t e = lo; e < hi; e++) T += j->ex[e].n - 1;
    int *seq_off = malloc((hi - lo + 1) * sizeof *seq_off);
    int32_t *tok = malloc(((size_t)T + 1) * sizeof *tok), *tgt = malloc(((size_t)T + 1) * sizeof *tgt);
    gm_status st = seq_off && tok && tgt ? GM_OK : gm_fail(GM_ERR_NOMEM, "out of memory");
    if (st == GM_OK) st = ensure_capacity(t, d, T > 0 ? T : 1);
    int longest = 1;
    for (size_t e = lo; e < hi; e++) longest = j->ex[e].n - 1 > longest ? j->ex[e].n - 1 : longest;
    if (st == GM_OK) {
        size_t before = d->ctx.bytes;
        st = gm_tr_ctx_reserve_attn_f32(&d->ctx, longest);
        d->mem.activations += d->ctx.bytes - before;
    }
    st = agree(t, d, st);
    if (st != GM_OK) {
        free(seq_off), free(tok), free(tgt);
        return st;
    }
    int k = 0;
    seq_off[0] = 0;
    for (size_t e = lo; e < hi; e++) {
        const gm_train_example *x = &j->ex[e];
        for (int i = 0; i < x->n - 1; i++, k++) {
            tok[k] = x->tokens[i];
            tgt[k] = !x->loss_mask || x->loss_mask[i] ? x->tokens[i + 1] : -1;
        }
        seq_off[e - lo + 1] = k;
    }
    gm_tr_batch b = {(int)(hi - lo), seq_off, tok, tgt, T, j->inv_count};
    bool backward = j->mode != 1;
    size_t D = (size_t)c->d_model, stride = (size_t)d->cap_T * D;
    gm_tr_ctx_f32 *cx = &d->ctx;

    for (int i = 0; backward && i < t->n_params; i++)
        if (d->g[i]) memset(d->g[i], 0, gm_tparam_shard_n(&t->params[i], d->global) * sizeof(float));
    const gm_tparam *pe = &t->params[t->unit_first[E]], *pf = &t->params[t->unit_first[Fn]];
    if (st == GM_OK) st = gm_train_gather_unit(t, d, E);
    if (st == GM_OK) st = gm_train_gather_unit(t, d, Fn);
    const float *Ew = d->unit_w[E] + pe->full_off, *Fw = d->unit_w[Fn] + pf->full_off;
    if (st == GM_OK) gm_tr_embed_fwd_f32(cx, Ew, &b, d->xs);
    gm_tr_layer_f32 lw;
    gm_tr_layer_grad_f32 lg;
    for (int l = 0; l < L && st == GM_OK; l++) {
        st = gm_train_gather_unit(t, d, l);
        if (st != GM_OK) break;
        layer_views(t, d, l, &lw, &lg);
        gm_tr_layer_fwd_f32(cx, l, &lw, &b, d->xs + (size_t)l * stride, &d->acts[l], d->xs + (size_t)(l + 1) * stride);
    }
    double loss_sum = 0;
    float *gE = NULL, *gF = NULL;
    if (backward && pe->trainable) {
        gE = d->unit_g[E] + pe->gfull_off;
        if (t->P > 1) memset(d->unit_g[E], 0, t->unit_gn[E] * sizeof(float));
    }
    if (backward && pf->trainable) {
        gF = d->unit_g[Fn] + pf->gfull_off;
        if (t->P > 1) memset(d->unit_g[Fn], 0, t->unit_gn[Fn] * sizeof(float));
    }
    if (st == GM_OK)
        gm_tr_head_f32(cx, Ew, gE, Fw, gF, &b, d->xs + (size_t)L * stride, backward ? d->dx : NULL, &loss_sum);
    for (int l = L - 1; backward && l >= 0 && st == GM_OK; l--) {
        st = gm_train_gather_unit(t, d, l);
        if (st != GM_OK) break;
        layer_views(t, d, l, &lw, &lg);
        if (t->P > 1 && t->unit_gn[l]) memset(d->unit_g[l], 0, t->unit_gn[l] * sizeof(float));
        gm_tr_layer_bwd_f32(cx, l, &lw, &lg, &b, d->xs + (size_t)l * stride, &d->acts[l], d->dx);
        st = gm_train_scatter_grads(t, d, l);
    }
    if (backward && st == GM_OK) {
        if (gE) gm_tr_embed_bwd_f32(cx, gE, &b, d->dx);
        st = gm_train_scatter_grads(t, d, E);
        if (st == GM_OK) st = gm_train_scatter_grads(t, d, Fn);
    }
    free(seq_off), free(tok), free(tgt);
    double total_loss = 0;
    if (st == GM_OK) st = sum_over_devices(t, d, loss_sum, &total_loss);
    if (st == GM_OK && d->local == 0) j->loss_sum = total_loss;
    if (st != GM_OK || !backward) return st;
    double sq = 0;
    for (int i = 0; i < t->n_params; i++) {
        if (!d->g[i]) continue;
        size_t n = gm_tparam_shard_n(&t->params[i], d->global);
        for (size_t e = 0; e < n; e++) sq += (double)d->g[i][e] * (double)d->g[i][e];
    }
    double total_sq;
    GM_TRY(sum_over_devices(t, d, sq, &total_sq));
    double loss = total_loss * j->inv_count, gn = sqrt(total_sq);
    if (d->local == 0) j->grad_norm = gn;
    if (j->mode != 0) return GM_OK;
    if (!isfinite(loss) || !isfinite(gn))
        return gm_fail(GM_ERR_RANGE, "step %lld: the %s is %s; stopping without applying it", (long long)t->step + 1,
                       isfinite(loss) ? "gradient norm" : "loss", isnan(isfinite(loss) ? gn : loss) ? "NaN" : "infinite");
    float clip = t->opt.clip_norm > 0 && gn > t->opt.clip_norm ? (float)(t->opt.clip_norm / gn) : 1.0f;
    return gm_train_optim_step(t, d, clip);
}

static gm_status check_batch(const gm_trainer *t, const gm_train_example *ex, int n, int64_t *count, int64_t *tokens) {
    if (!ex || n < 1) return gm_fail(GM_ERR_ARG, "empty batch");
    *count = 0, *tokens = 0;
    for (int e = 0; e < n; e++) {
        if (ex[e].n < 2 || !ex[e].tokens) return gm_fail(GM_ERR_ARG, "example %d has %d tokens (at least 2 needed)", e, ex[e].n);
        for (int i = 0; i < ex[e].n; i++)
            if (ex[e].tokens[i] < 0 || ex[e].tokens[i] >= t->cfg.vocab_size)
                return gm_fail(GM_ERR_RANGE, "example %d: token %d has id %d, outside the vocabulary of %d", e, i,
                               ex[e].tokens[i], t->cfg.vocab_size);
        for (int i = 0; i < ex[e].n - 1; i++) *count += !ex[e].loss_mask || ex[e].loss_mask[i];
        *tokens += ex[e].n - 1;
    }
    return GM_OK;
}

static gm_status run_step(gm_trainer *t, const gm_train_example *batch, int n, int mode, step_job *j, int64_t *count,
                          int64_t *tokens) {
    GM_TRY(check_batch(t, batch, n, count, tokens));
    if (*count == 0 && mode != 1) return gm_fail(GM_ERR_ARG, "the batch has no position that counts for the loss");
    memset(j, 0, sizeof *j);
    j->ex = batch, j->n = n, j->mode = mode;
    j->inv_count = *count ? 1.0 / (double)*count : 0.0;
    return gm_train_run(t, dev_step, j);
}

gm_status gm_trainer_step(gm_trainer *t, const gm_train_example *batch, int n, gm_train_stats *stats) {
    double t0 = gm_now_seconds();
    step_job j;
    int64_t count, tokens;
    GM_TRY(run_step(t, batch, n, 0, &j, &count, &tokens));
    t->step++;
    t->examples_seen += n;
    if (stats) {
        stats->loss = j.loss_sum / (double)count;
        stats->grad_norm = j.grad_norm;
        stats->tokens = tokens;
        stats->loss_tokens = count;
        stats->seconds = gm_now_seconds() - t0;
    }
    return GM_OK;
}

gm_status gm_trainer_grads(gm_trainer *t, const gm_train_example *batch, int n, double *loss) {
    step_job j;
    int64_t count, tokens;
    GM_TRY(run_step(t, batch, n, 2, &j, &count, &tokens));
    *loss = j.loss_sum / (double)count;
    return GM_OK;
}

gm_status gm_trainer_eval(gm_trainer *t, const gm_train_example *batch, int n, double *loss_sum, int64_t *count) {
    step_job j;
    int64_t tokens;
    GM_TRY(run_step(t, batch, n, 1, &j, count, &tokens));
    *loss_sum = j.loss_sum;
    return GM_OK;
}
