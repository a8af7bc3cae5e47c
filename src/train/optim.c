/* Optimizers on a device's shards. Element-wise (AdamW) or with small cross-device reductions
 * (Adafactor's factored moments), so the result does not depend on how the tensors are split.
 *
 * AdamW follows torch.optim.AdamW (foreach=False) operation by operation in float, with the scalars
 * computed in double and rounded once, as PyTorch does: decoupled decay p *= 1 - lr * wd (for norms on
 * the stored w' = 1 + w, i.e. w decays towards 0 as in the HF parametrisation), m = lerp(m, g, 1 - b1),
 * v = v * b2 + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

gm_status gm_train_optim_alloc(gm_trainer *t, gm_tdev *d) {
    if (t->opt.optimizer == GM_OPT_ADAFACTOR) return GM_OK; /* allocated at the first step (af_min_dim) */
    for (int u = 0; u < t->n_units; u++) {
        size_t n = 0;
        for (int i = t->unit_first[u]; i < t->unit_first[u] + t->unit_count[u]; i++)
            if (t->params[i].trainable) n += (gm_tparam_shard_n(&t->params[i], d->global) + 15) / 16 * 16;
        if (!n) continue;
        d->mblock[u] = calloc(n, sizeof(float));
        d->vblock[u] = calloc(n, sizeof(float));
        if (!d->mblock[u] || !d->vblock[u])
            return gm_fail(GM_ERR_NOMEM, "device %d: cannot allocate %zu bytes of optimizer state", d->global, 8 * n);
        d->mem.optimizer += 2 * n * sizeof(float);
        size_t o = 0;
        for (int i = t->unit_first[u]; i < t->unit_first[u] + t->unit_count[u]; i++) {
            if (!t->params[i].trainable) continue;
            d->m[i] = d->mblock[u] + o;
            d->v[i] = d->vblock[u] + o;
            o += (gm_tparam_shard_n(&t->params[i], d->global) + 15) / 16 * 16;
        }
    }
    return GM_OK;
}

static void adamw(gm_trainer *t, gm_tdev *d, float clip) {
    const gm_train_options *o = &t->opt;
    double step = (double)(t->step + 1);
    float b2 = (float)o->beta2;
    float decay = (float)(1.0 - o->lr * o->weight_decay);
    float one_m_b1 = (float)(1.0 - o->beta1), one_m_b2 = (float)(1.0 - o->beta2);
    double bc1 = 1.0 - pow(o->beta1, step), bc2 = 1.0 - pow(o->beta2, step);
    float neg_step = (float)-(o->lr / bc1), bc2_sqrt = (float)sqrt(bc2), eps = (float)o->eps;
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        size_t n = gm_tparam_shard_n(p, d->global);
        float *w = d->w[i], *g = d->g[i], *m = d->m[i], *v = d->v[i];
        bool norm = p->norm;
        for (size_t k = 0; k < n; k++) {
            float gk = g[k] * clip;
            if (o->weight_decay != 0.0) w[k] = norm ? 1.0f + (w[k] - 1.0f) * decay : w[k] * decay;
            m[k] = m[k] + one_m_b1 * (gk - m[k]);            /* lerp, weight < 0.5 */
            v[k] = v[k] * b2 + one_m_b2 * gk * gk;           /* mul_, addcmul_ */
            float denom = sqrtf(v[k]) / bc2_sqrt + eps;
            w[k] = w[k] + neg_step * m[k] / denom;           /* addcdiv_ */
        }
    }
}

/* ---------------------------------------------------------------- Adafactor
 *
 * optax.adafactor(lr) with its defaults (decay_rate 0.8, eps 1e-30, clipping_threshold 1, multiply_by_parameter_scale,
 * no momentum; weight_decay_rate = our weight_decay, added after the learning rate as optax does), applied to the
 * parameters as the seed library lays them out: q is [N, D, H], so each head's block is factored on its own (ours
 * is [N*H][D]: N blocks of rows); o is [N, H, D] (N blocks of our columns); k and v are one kv_einsum tensor
 * [2, K, D, H] (K blocks of rows each, and one RMS for k and v together); gate and up are one gating tensor
 * [2, F, D] (one RMS for both); norms are their scale w = stored - 1. A block is factored (row and column
 * second-moment vectors instead of a full one) when its smaller side is at least af_min_dim (optax's
 * min_dim_size_to_factor, 128). The row/column statistics and the RMS sums are all-reduced over the devices, so
 * any split gives the same update. */

typedef struct af_geom {
    bool factored;
    int nb, axis;        /* nb blocks along rows (axis 0) or columns (axis 1) */
    size_t nrow, ncol;   /* lengths of the row / column statistics */
    int group;           /* RMS group (k+v and gate+up share one) */
} af_geom;

static af_geom geom(const gm_trainer *t, int i) {
    const gm_tparam *p = &t->params[i];
    af_geom g = {false, 1, 0, 0, 0, i};
    int nb = 1, axis = 0;
    if (p->lm < 0 && p->lt == GM_LT_Q) nb = t->cfg.n_heads;
    if (p->lm < 0 && (p->lt == GM_LT_K || p->lt == GM_LT_V)) nb = t->cfg.n_kv_heads;
    if (p->lm < 0 && p->lt == GM_LT_O) nb = t->cfg.n_heads, axis = 1;
    uint64_t br = axis == 0 ? p->rows / (uint64_t)nb : p->rows, bc = axis == 1 ? p->cols / (uint64_t)nb : p->cols;
    g.factored = p->rows > 1 && (br < bc ? br : bc) >= (uint64_t)t->af_min_dim;
    g.nb = nb, g.axis = axis;
    g.nrow = axis == 0 ? (size_t)p->rows : (size_t)nb * (size_t)p->rows;
    g.ncol = axis == 0 ? (size_t)nb * (size_t)p->cols : (size_t)p->cols;
    if (p->lm < 0 && p->lt == GM_LT_V) g.group = i - 1;      /* with k (the parameter before it) */
    if (p->lm < 0 && p->lt == GM_LT_UP) g.group = i - 1;     /* with gate */
    return g;
}

static gm_status af_alloc(gm_trainer *t, gm_tdev *d) {
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        af_geom g = geom(t, i);
        if (g.factored) {
            d->fr[i] = calloc(g.nrow, sizeof(float));
            d->fc[i] = calloc(g.ncol, sizeof(float));
            if (!d->fr[i] || !d->fc[i]) return gm_fail(GM_ERR_NOMEM, "out of memory for Adafactor state");
            d->mem.optimizer += (g.nrow + g.ncol) * sizeof(float);
        } else {
            size_t n = gm_tparam_shard_n(p, d->global);
            d->v[i] = calloc(n ? n : 1, sizeof(float));
            if (!d->v[i]) return gm_fail(GM_ERR_NOMEM, "out of memory for Adafactor state");
            d->mem.optimizer += n * sizeof(float);
        }
    }
    return GM_OK;
}

/* element e of device g's shard of p -> (row, col) of the full tensor */
static void rc_of(const gm_tparam *p, int g, size_t e, uint64_t *r, uint64_t *c) {
    if (p->kind == GM_LAYOUT_FLAT) {
        size_t f = p->off[g] + e;
        *r = f / p->cols, *c = f % p->cols;
    } else {
        size_t w = p->off[g + 1] - p->off[g];
        *r = e / w, *c = p->off[g] + e % w;
    }
}

/* indices into the row / column statistics of element (r, c) */
static void stat_idx(const gm_tparam *p, const af_geom *g, uint64_t r, uint64_t c, size_t *ir, size_t *ic) {
    if (g->axis == 0) {
        size_t b = (size_t)(r / (p->rows / (uint64_t)g->nb));
        *ir = (size_t)r, *ic = b * (size_t)p->cols + (size_t)c;
    } else {
        size_t b = (size_t)(c / (p->cols / (uint64_t)g->nb));
        *ir = b * (size_t)p->rows + (size_t)r, *ic = (size_t)c;
    }
}

bool gm_train_af_factored(const gm_trainer *t, int i, size_t *nrow, size_t *ncol) {
    af_geom g = geom(t, i);
    *nrow = g.nrow, *ncol = g.ncol;
    return g.factored;
}

gm_status gm_train_af_ready(gm_trainer *t, gm_tdev *d) {
    if (t->opt.optimizer != GM_OPT_ADAFACTOR || d->af_ready) return GM_OK;
    GM_TRY(af_alloc(t, d));
    d->af_ready = true;
    return GM_OK;
}

static gm_status adafactor(gm_trainer *t, gm_tdev *d, float clip) {
    GM_TRY(gm_train_af_ready(t, d));
    const float eps = 1e-30f;
    float decay = (float)(1.0 - pow((double)(t->step + 1), -0.8)), keep = 1.0f - decay;
    int NP = t->n_params, G = d->global;
    /* 1. partial row / column sums of g^2 + eps of every factored tensor, all-reduced */
    size_t acc_n = 0;
    size_t *acc_off = calloc((size_t)NP, sizeof *acc_off);
    af_geom *geo = calloc((size_t)NP, sizeof *geo);
    if (!acc_off || !geo) {
        free(acc_off), free(geo);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < NP; i++) {
        if (!t->params[i].trainable) continue;
        geo[i] = geom(t, i);
        acc_off[i] = acc_n;
        if (geo[i].factored) acc_n += geo[i].nrow + geo[i].ncol;
    }
    float *acc = calloc(acc_n + 2 * (size_t)NP + 1, sizeof *acc);
    if (!acc) {
        free(acc_off), free(geo);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < NP; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable || !geo[i].factored) continue;
        float *rs = acc + acc_off[i], *cs = rs + geo[i].nrow;
        size_t n = gm_tparam_shard_n(p, G);
        for (size_t e = 0; e < n; e++) {
            uint64_t r, c;
            size_t ir, ic;
            rc_of(p, G, e, &r, &c);
            stat_idx(p, &geo[i], r, c, &ir, &ic);
            float gk = d->g[i][e] * clip, q = gk * gk + eps;
            rs[ir] += q, cs[ic] += q;
        }
    }
    gm_status st = gm_comm_all_reduce(t->comm, d->local, acc, acc_n);
    /* 2. the moments, the update u (into g) and the RMS sums of u and of the parameter per group */
    float *gsum = acc + acc_n; /* [NP][2]: sum u^2, sum p^2 by group leader */
    for (int i = 0; i < NP && st == GM_OK; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        af_geom *g = &geo[i];
        size_t n = gm_tparam_shard_n(p, G);
        float *gr = d->g[i], *w = d->w[i];
        if (g->factored) {
            const float *rs = acc + acc_off[i], *cs = rs + g->nrow;
            size_t block_cols = g->axis == 0 ? (size_t)p->cols : (size_t)p->cols / (size_t)g->nb;
            size_t block_rows = g->axis == 0 ? (size_t)p->rows / (size_t)g->nb : (size_t)p->rows;
            for (size_t k = 0; k < g->nrow; k++) d->fr[i][k] = decay * d->fr[i][k] + keep * (rs[k] / (float)block_cols);
            for (size_t k = 0; k < g->ncol; k++) d->fc[i][k] = decay * d->fc[i][k] + keep * (cs[k] / (float)block_rows);
            /* per block: the mean of the statistics of its smaller side (optax normalises v_row, indexed by the
             * second-largest dimension) */
            bool rows_small = block_rows <= block_cols;
            double *bmean = calloc((size_t)g->nb, sizeof *bmean);
            if (!bmean) {
                st = gm_fail(GM_ERR_NOMEM, "out of memory");
                break;
            }
            for (int b = 0; b < g->nb; b++) {
                double s = 0;
                size_t len = rows_small ? block_rows : block_cols;
                const float *v = rows_small ? d->fr[i] + (g->axis == 0 ? (size_t)b * block_rows : (size_t)b * p->rows)
                                            : d->fc[i] + (g->axis == 0 ? (size_t)b * p->cols : (size_t)b * block_cols);
                for (size_t k = 0; k < len; k++) s += v[k];
                bmean[b] = s / (double)len;
            }
            for (size_t e = 0; e < n; e++) {
                uint64_t r, c;
                size_t ir, ic;
                rc_of(p, G, e, &r, &c);
                stat_idx(p, g, r, c, &ir, &ic);
                size_t b = g->axis == 0 ? (size_t)(r / block_rows) : (size_t)(c / block_cols);
                float vr = rows_small ? d->fr[i][ir] : d->fc[i][ic], vc = rows_small ? d->fc[i][ic] : d->fr[i][ir];
                float rf = 1.0f / sqrtf(vr / (float)bmean[b]), cf = 1.0f / sqrtf(vc);
                gr[e] = gr[e] * clip * rf * cf;
            }
            free(bmean);
        } else {
            float *v = d->v[i];
            for (size_t e = 0; e < n; e++) {
                float gk = gr[e] * clip;
                v[e] = decay * v[e] + keep * (gk * gk + eps);
                gr[e] = gk * (1.0f / sqrtf(v[e]));
            }
        }
        double su = 0, sp = 0;
        for (size_t e = 0; e < n; e++) {
            float pw = p->norm ? w[e] - 1.0f : w[e];
            su += (double)gr[e] * gr[e], sp += (double)pw * pw;
        }
        gsum[2 * g->group] += (float)su, gsum[2 * g->group + 1] += (float)sp;
    }
    if (st == GM_OK) st = gm_comm_all_reduce(t->comm, d->local, gsum, 2 * (size_t)NP);
    /* 3. clip by block RMS, learning rate, parameter scale, weight decay, apply */
    for (int i = 0; i < NP && st == GM_OK; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        int grp = geo[i].group;
        double cnt = 0;
        for (int k = 0; k < NP; k++)
            if (t->params[k].trainable && geo[k].group == grp) cnt += (double)t->params[k].n;
        float rms_u = (float)sqrt((double)gsum[2 * grp] / cnt), rms_p = (float)sqrt((double)gsum[2 * grp + 1] / cnt);
        float den = rms_u / 1.0f > 1.0f ? rms_u : 1.0f, lr = (float)t->opt.lr, scale = rms_p > 1e-3f ? rms_p : 1e-3f;
        float wd = (float)t->opt.weight_decay;
        size_t n = gm_tparam_shard_n(p, G);
        float *gr = d->g[i], *w = d->w[i];
        for (size_t e = 0; e < n; e++) {
            float u = gr[e] / den * lr * scale;
            if (wd != 0.0f) u = u + wd * (p->norm ? w[e] - 1.0f : w[e]);
            w[e] = w[e] + -u;
        }
    }
    free(acc), free(acc_off), free(geo);
    return st;
}

gm_status gm_train_optim_step(gm_trainer *t, gm_tdev *d, float clip) {
    if (t->opt.optimizer == GM_OPT_ADAMW) {
        adamw(t, d, clip);
        return GM_OK;
    }
    if (t->opt.optimizer == GM_OPT_ADAFACTOR) return adafactor(t, d, clip);
    return gm_fail(GM_ERR_UNSUPPORTED, "optimizer %d is not implemented", (int)t->opt.optimizer);
}
