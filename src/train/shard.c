/* FSDP for training: which part of each tensor each device holds, and the collectives that assemble a
 * unit (a layer, the embedding, the final norm) before use and scatter its gradients after.
 *
 * The split follows kauldron's FSDPSharding rule (shard/plan.c) where it splits a tensor (rows of the
 * embedding and of gate/up, ...); where the rule replicates (tensors under 4 MiB, vectors) the tensor is
 * split flat into P near-equal pieces instead, so that every device holds 1/P of every tensor (ZeRO-3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "io/dtype.h"
#include "train/trainer_internal.h"

size_t gm_tparam_shard_n(const gm_tparam *p, int g) {
    size_t k = p->off[g + 1] - p->off[g];
    return p->kind == GM_LAYOUT_COLS ? (size_t)p->rows * k : k;
}

int gm_train_find_param(const gm_trainer *t, const char *name) {
    for (int i = 0; i < t->n_params; i++)
        if (!strcmp(t->params[i].name, name)) return i;
    return -1;
}

static gm_status layout(gm_trainer *t, gm_tparam *p, bool matrix) {
    int P = t->P;
    p->off = calloc((size_t)P + 1, sizeof *p->off);
    p->poff = calloc((size_t)P + 1, sizeof *p->poff);
    if (!p->off || !p->poff) return gm_fail(GM_ERR_NOMEM, "out of memory");
    p->kind = GM_LAYOUT_FLAT;
    p->plan.split = GM_SPLIT_NONE;
    snprintf(p->plan.reason, sizeof p->plan.reason, P == 1 ? "whole (one device)" : "flat (vector)");
    if (matrix && P > 1 && t->force_split) {
        bool cols = p->lt == GM_LT_O || p->lt == GM_LT_DOWN;
        size_t len = cols ? (size_t)p->cols : (size_t)p->rows;
        for (int g = 0; g < P; g++) {
            size_t lo, hi;
            gm_split_range(len, P, g, 1, &lo, &hi);
            p->off[g] = cols ? lo : lo * (size_t)p->cols;
            p->off[g + 1] = cols ? hi : hi * (size_t)p->cols;
        }
        if (cols) {
            p->kind = GM_LAYOUT_COLS;
            for (int g = 0; g <= P; g++) p->poff[g] = (size_t)p->rows * p->off[g];
        }
        snprintf(p->plan.reason, sizeof p->plan.reason, "forced %s split (test)", cols ? "column" : "row");
        return GM_OK;
    }
    if (matrix && P > 1) {
        gm_tensor_info ti;
        memset(&ti, 0, sizeof ti);
        snprintf(ti.name, sizeof ti.name, "%s", p->name);
        ti.type = GM_F32;
        ti.n_dims = 2;
        ti.ne[0] = p->cols, ti.ne[1] = p->rows, ti.ne[2] = ti.ne[3] = 1;
        ti.row_bytes = p->cols * 4;
        ti.nbytes = p->n * 4;
        GM_TRY(gm_plan_tensor(&t->cfg, &ti, GM_SHARDING_FSDP, P, &p->plan));
        if (p->plan.split != GM_SPLIT_NONE) {
            for (int g = 0; g < P; g++) {
                uint64_t lo, hi;
                gm_plan_range(&p->plan, &ti, P, g, &lo, &hi);
                if (p->plan.split == GM_SPLIT_ROWS) p->off[g] = (size_t)(lo * p->cols), p->off[g + 1] = (size_t)(hi * p->cols);
                else p->off[g] = (size_t)lo, p->off[g + 1] = (size_t)hi;
            }
            if (p->plan.split == GM_SPLIT_COLS) {
                p->kind = GM_LAYOUT_COLS;
                for (int g = 0; g <= P; g++) p->poff[g] = (size_t)p->rows * p->off[g];
            }
            return GM_OK;
        }
        /* the rule replicates it: ZeRO-3 still splits it, flat */
        char why[sizeof p->plan.reason];
        snprintf(why, sizeof why, "%s", p->plan.reason);
        snprintf(p->plan.reason, sizeof p->plan.reason, "flat (rule: %.100s)", why);
    }
    for (int g = 0; g < P; g++) {
        size_t lo, hi;
        gm_split_range((size_t)p->n, P, g, 16, &lo, &hi);
        p->off[g] = lo, p->off[g + 1] = hi;
    }
    return GM_OK;
}

gm_status gm_train_plan(gm_trainer *t) {
    const gm_config *c = &t->cfg;
    int L = c->n_layers, r = t->opt.lora_rank;
    int per_layer = GM_LT_COUNT + (r > 0 ? 2 * GM_LM_COUNT : 0);
    t->n_params = L * per_layer + 2;
    t->n_units = L + 2;
    t->params = calloc((size_t)t->n_params, sizeof *t->params);
    t->unit_first = calloc((size_t)t->n_units, sizeof *t->unit_first);
    t->unit_count = calloc((size_t)t->n_units, sizeof *t->unit_count);
    t->unit_n = calloc((size_t)t->n_units, sizeof *t->unit_n);
    t->unit_gn = calloc((size_t)t->n_units, sizeof *t->unit_gn);
    if (!t->params || !t->unit_first || !t->unit_count || !t->unit_n || !t->unit_gn)
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    bool base_trainable = r == 0;
    int k = 0;
    for (int l = 0; l < L; l++) {
        t->unit_first[l] = k;
        for (int lt = 0; lt < GM_LT_COUNT; lt++) {
            gm_tparam *p = &t->params[k++];
            snprintf(p->name, sizeof p->name, "blk.%d.%s.weight", l, gm_lt_suffix(lt));
            p->unit = l, p->lt = lt, p->lm = -1;
            gm_lt_shape(c, lt, &p->rows, &p->cols);
            p->norm = gm_lt_is_norm(lt);
            p->trainable = base_trainable;
        }
        for (int lm = 0; r > 0 && lm < GM_LM_COUNT; lm++)
            for (int ab = 0; ab < 2; ab++) {
                gm_tparam *p = &t->params[k++];
                int lt = gm_lm_tensor[lm];
                uint64_t R, C;
                gm_lt_shape(c, lt, &R, &C);
                snprintf(p->name, sizeof p->name, "blk.%d.%s.lora_%c", l, gm_lt_suffix(lt), ab ? 'b' : 'a');
                p->unit = l, p->lt = lt, p->lm = lm, p->ab = ab;
                p->rows = ab ? R : (uint64_t)r;
                p->cols = ab ? (uint64_t)r : C;
                p->trainable = true;
            }
        t->unit_count[l] = k - t->unit_first[l];
    }
    gm_tparam *e = &t->params[k];
    t->unit_first[L] = k++, t->unit_count[L] = 1;
    snprintf(e->name, sizeof e->name, "token_embd.weight");
    e->unit = L, e->lt = -1, e->lm = -1, e->rows = (uint64_t)c->vocab_size, e->cols = (uint64_t)c->d_model;
    e->trainable = base_trainable;
    gm_tparam *f = &t->params[k];
    t->unit_first[L + 1] = k++, t->unit_count[L + 1] = 1;
    snprintf(f->name, sizeof f->name, "output_norm.weight");
    f->unit = L + 1, f->lt = -1, f->lm = -1, f->rows = 1, f->cols = (uint64_t)c->d_model, f->norm = true;
    f->trainable = base_trainable;
    for (int i = 0; i < t->n_params; i++) {
        gm_tparam *p = &t->params[i];
        p->n = p->rows * p->cols;
        GM_TRY(layout(t, p, p->rows > 1 && p->lm < 0));
        p->full_off = t->unit_n[p->unit];
        t->unit_n[p->unit] += ((size_t)p->n + 15) / 16 * 16;
        if (p->trainable) {
            p->gfull_off = t->unit_gn[p->unit];
            t->unit_gn[p->unit] += ((size_t)p->n + 15) / 16 * 16;
        }
        if (p->kind == GM_LAYOUT_COLS && (size_t)p->n > t->max_cols_pack) t->max_cols_pack = (size_t)p->n;
    }
    for (int l = 0; l < L; l++) {
        if (t->unit_n[l] > t->max_layer_n) t->max_layer_n = t->unit_n[l];
        if (t->unit_gn[l] > t->max_layer_gn) t->max_layer_gn = t->unit_gn[l];
    }
    return GM_OK;
}

/* full [rows][cols] <-> device-major packed ([g][rows][its columns]) */
static void pack_cols(const gm_tparam *p, int P, const float *full, float *packed) {
    for (int g = 0; g < P; g++) {
        size_t c0 = p->off[g], n = p->off[g + 1] - c0;
        for (uint64_t r = 0; r < p->rows; r++) memcpy(packed + p->poff[g] + r * n, full + r * p->cols + c0, n * sizeof(float));
    }
}

static void unpack_cols(const gm_tparam *p, int P, const float *packed, float *full) {
    for (int g = 0; g < P; g++) {
        size_t c0 = p->off[g], n = p->off[g + 1] - c0;
        for (uint64_t r = 0; r < p->rows; r++) memcpy(full + r * p->cols + c0, packed + p->poff[g] + r * n, n * sizeof(float));
    }
}

static float *state_of(gm_tdev *d, int p, int which) {
    switch (which) {
    case 0: return d->w[p];
    case 1: return d->g[p];
    case 2: return d->m[p];
    default: return d->v[p];
    }
}

/* Assemble tensor p from every device's shard `mine` into full [n] (collective). */
static gm_status gather_into(gm_trainer *t, gm_tdev *d, const gm_tparam *p, const float *mine, float *full) {
    int g = d->global;
    size_t n = gm_tparam_shard_n(p, g);
    if (p->kind == GM_LAYOUT_FLAT) {
        if (mine) memcpy(full + p->off[g], mine, n * sizeof(float));
        else memset(full + p->off[g], 0, n * sizeof(float));
        return gm_comm_all_gather(t->comm, d->local, full, p->off);
    }
    if (mine) memcpy(d->pack + p->poff[g], mine, n * sizeof(float));
    else memset(d->pack + p->poff[g], 0, n * sizeof(float));
    GM_TRY(gm_comm_all_gather(t->comm, d->local, d->pack, p->poff));
    unpack_cols(p, t->P, d->pack, full);
    return GM_OK;
}

gm_status gm_train_gather_unit(gm_trainer *t, gm_tdev *d, int u) {
    if (t->P == 1) return GM_OK;
    for (int i = t->unit_first[u]; i < t->unit_first[u] + t->unit_count[u]; i++)
        GM_TRY(gather_into(t, d, &t->params[i], d->w[i], d->unit_w[u] + t->params[i].full_off));
    return GM_OK;
}

gm_status gm_train_scatter_grads(gm_trainer *t, gm_tdev *d, int u) {
    if (t->P == 1) return GM_OK;
    int g = d->global;
    for (int i = t->unit_first[u]; i < t->unit_first[u] + t->unit_count[u]; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        float *full = d->unit_g[u] + p->gfull_off, *mine = d->g[i];
        size_t n = gm_tparam_shard_n(p, g);
        const float *seg;
        if (p->kind == GM_LAYOUT_FLAT) {
            GM_TRY(gm_comm_reduce_scatter(t->comm, d->local, full, p->off));
            seg = full + p->off[g];
        } else {
            pack_cols(p, t->P, full, d->pack);
            GM_TRY(gm_comm_reduce_scatter(t->comm, d->local, d->pack, p->poff));
            seg = d->pack + p->poff[g];
        }
        for (size_t k = 0; k < n; k++) mine[k] += seg[k];
    }
    return GM_OK;
}

gm_status gm_train_gather_tensor(gm_trainer *t, gm_tdev *d, int pi, int which, float *out) {
    const gm_tparam *p = &t->params[pi];
    const float *mine = state_of(d, pi, which);
    if (t->P == 1) {
        if (mine) memcpy(out, mine, (size_t)p->n * sizeof(float));
        else memset(out, 0, (size_t)p->n * sizeof(float));
        return GM_OK;
    }
    return gather_into(t, d, p, mine, out);
}

void gm_train_set_shard(gm_trainer *t, gm_tdev *d, int pi, int which, const float *src) {
    const gm_tparam *p = &t->params[pi];
    float *mine = state_of(d, pi, which);
    if (!mine) return;
    int g = d->global;
    if (p->kind == GM_LAYOUT_FLAT) {
        memcpy(mine, src + p->off[g], gm_tparam_shard_n(p, g) * sizeof(float));
        return;
    }
    size_t c0 = p->off[g], n = p->off[g + 1] - c0;
    for (uint64_t r = 0; r < p->rows; r++) memcpy(mine + r * n, src + r * p->cols + c0, n * sizeof(float));
}

typedef struct full_job {
    int p, which;
    float *out;      /* local device 0's destination */
    float **scratch; /* [n_local] for the other devices */
    const float *src;
} full_job;

static gm_status full_gather_fn(gm_trainer *t, gm_tdev *d, void *arg) {
    full_job *j = arg;
    return gm_train_gather_tensor(t, d, j->p, j->which, d->local == 0 ? j->out : j->scratch[d->local]);
}

gm_status gm_train_full_tensor(gm_trainer *t, int p, int which, float *out) {
    full_job j = {p, which, out, NULL, NULL};
    j.scratch = calloc((size_t)t->n_local, sizeof *j.scratch);
    if (!j.scratch) return gm_fail(GM_ERR_NOMEM, "out of memory");
    gm_status st = GM_OK;
    for (int i = 1; i < t->n_local && st == GM_OK; i++)
        if (!(j.scratch[i] = malloc((size_t)t->params[p].n * sizeof(float))))
            st = gm_fail(GM_ERR_NOMEM, "out of memory gathering '%s'", t->params[p].name);
    if (st == GM_OK) st = gm_train_run(t, full_gather_fn, &j);
    for (int i = 1; i < t->n_local; i++) free(j.scratch[i]);
    free(j.scratch);
    return st;
}

static gm_status full_set_fn(gm_trainer *t, gm_tdev *d, void *arg) {
    full_job *j = arg;
    gm_train_set_shard(t, d, j->p, j->which, j->src);
    return GM_OK;
}

gm_status gm_train_set_full(gm_trainer *t, int p, int which, const float *src) {
    full_job j = {p, which, NULL, NULL, src};
    return gm_train_run(t, full_set_fn, &j);
}
