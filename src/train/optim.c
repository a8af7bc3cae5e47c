/* Optimizers on a device's shards. Element-wise (AdamW) or with small cross-device reductions
 * (Adafactor's factored moments), so the result does not depend on how the tensors are split.
 *
 * AdamW follows torch.optim.AdamW (foreach=False) operation by operation in float, with the scalars
 * computed in double and rounded once, as PyTorch does: decoupled decay p *= 1 - lr * wd (for norms on
 * the stored w' = 1 + w, i.e. w decays towards 0 as in the HF parametrisation), m = lerp(m, g, 1 - b1),
 * v = v * b2 + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

gm_status gm_train_optim_alloc(gm_trainer *t, gm_tdev *d) {
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

gm_status gm_train_optim_step(gm_trainer *t, gm_tdev *d, float clip) {
    if (t->opt.optimizer == GM_OPT_ADAMW) {
        adamw(t, d, clip);
        return GM_OK;
    }
    return gm_fail(GM_ERR_UNSUPPORTED, "optimizer %d is not implemented", (int)t->opt.optimizer);
}
