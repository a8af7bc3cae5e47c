/* Gradients of the training math against central finite differences in double, on tiny random
 * models: every element of every parameter (embedding, every norm, every projection, and LoRA
 * adapters in the second model), through GQA attention with a sliding window shorter than the
 * sequences, a global layer with scaled RoPE, several packed sequences and a loss mask.
 * The float build of the same code (SIMD GEMM, 2 threads) must match the double gradients to 1e-4
 * per tensor (relative L2). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "train/core.h"
#include "test_util.h"

#define L 3
static uint64_t rs = 0x853c49e6748fea9bull;
static double urand(void) { /* [-1, 1) */
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) / 4503599627370496.0 - 1.0;
}

typedef struct slot {
    char name[48];
    double *p, *g;   /* value, analytic gradient */
    float *pf, *gf;  /* float copies */
    size_t n;
} slot;

typedef struct model {
    gm_config cfg;
    int rank;
    slot s[2 + L * (GM_LT_COUNT + 2 * GM_LM_COUNT)];
    int ns;
    gm_tr_weights_f64 w;
    gm_tr_grads_f64 g;
    gm_tr_layer_f64 layers[L];
    gm_tr_layer_grad_f64 lgrads[L];
    gm_tr_weights_f32 wf;
    gm_tr_grads_f32 gf;
    gm_tr_layer_f32 layers_f[L];
    gm_tr_layer_grad_f32 lgrads_f[L];
} model;

static slot *add(model *m, const char *name, size_t n, double scale, double offset, bool trainable) {
    slot *s = &m->s[m->ns++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n = n;
    s->p = malloc(n * sizeof *s->p);
    s->g = trainable ? calloc(n, sizeof *s->g) : NULL;
    s->pf = malloc(n * sizeof *s->pf);
    s->gf = trainable ? calloc(n, sizeof *s->gf) : NULL;
    for (size_t i = 0; i < n; i++) s->p[i] = offset + scale * urand(), s->pf[i] = (float)s->p[i];
    return s;
}

static void build(model *m, int lora_rank) {
    memset(m, 0, sizeof *m);
    gm_config *c = &m->cfg;
    c->n_layers = L, c->d_model = 16, c->d_ff = 24, c->n_heads = 4, c->n_kv_heads = 2, c->head_dim = 8;
    c->vocab_size = 40, c->sliding_window = 3, c->rms_eps = 1e-6f;
    c->rope_base_global = 10000.0f, c->rope_base_local = 100.0f, c->rope_scale_global = 8.0f, c->rope_scale_local = 1.0f;
    c->query_scale = 1.0f / sqrtf(12.0f), c->embed_scale = 4.0f;
    c->layer_is_global[1] = true;
    m->rank = lora_rank;
    bool base_trainable = lora_rank == 0;
    slot *e = add(m, "token_embd", (size_t)c->vocab_size * c->d_model, 0.5, 0, base_trainable);
    slot *fn = add(m, "output_norm", (size_t)c->d_model, 0.3, 1.0, base_trainable);
    m->w = (gm_tr_weights_f64){e->p, fn->p, m->layers};
    m->g = (gm_tr_grads_f64){e->g, fn->g, m->lgrads};
    m->wf = (gm_tr_weights_f32){e->pf, fn->pf, m->layers_f};
    m->gf = (gm_tr_grads_f32){e->gf, fn->gf, m->lgrads_f};
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < GM_LT_COUNT; t++) {
            uint64_t r, cc;
            gm_lt_shape(c, t, &r, &cc);
            char name[48];
            snprintf(name, sizeof name, "blk.%d.%s", l, gm_lt_suffix(t));
            bool norm = gm_lt_is_norm(t);
            slot *s = add(m, name, (size_t)(r * cc), norm ? 0.3 : 1.0 / sqrt((double)cc), norm ? 1.0 : 0.0,
                          base_trainable);
            m->layers[l].w[t] = s->p, m->lgrads[l].g[t] = s->g;
            m->layers_f[l].w[t] = s->pf, m->lgrads_f[l].g[t] = s->gf;
        }
        for (int k = 0; lora_rank && k < GM_LM_COUNT; k++) {
            uint64_t r, cc;
            gm_lt_shape(c, gm_lm_tensor[k], &r, &cc);
            char name[48];
            snprintf(name, sizeof name, "blk.%d.%s.lora_a", l, gm_lt_suffix(gm_lm_tensor[k]));
            /* B random too: with B = 0 (the usual init) the gradient of A would be 0 */
            slot *a = add(m, name, (size_t)lora_rank * cc, 1.0 / sqrt((double)cc), 0, true);
            snprintf(name, sizeof name, "blk.%d.%s.lora_b", l, gm_lt_suffix(gm_lm_tensor[k]));
            slot *b = add(m, name, (size_t)r * lora_rank, 0.5, 0, true);
            m->layers[l].la[k] = a->p, m->layers[l].lb[k] = b->p;
            m->lgrads[l].ga[k] = a->g, m->lgrads[l].gb[k] = b->g;
            m->layers_f[l].la[k] = a->pf, m->layers_f[l].lb[k] = b->pf;
            m->lgrads_f[l].ga[k] = a->gf, m->lgrads_f[l].gb[k] = b->gf;
        }
    }
}

static void release(model *m) {
    for (int i = 0; i < m->ns; i++) free(m->s[i].p), free(m->s[i].g), free(m->s[i].pf), free(m->s[i].gf);
}

/* 3 sequences (lengths 7, 5, 9) packed; some positions without loss */
static const int seq_off[] = {0, 7, 12, 21};
static int32_t tokens[21], targets[21];

static gm_tr_batch make_batch(const gm_config *c) {
    int count = 0;
    for (int t = 0; t < 21; t++) {
        tokens[t] = (int32_t)((unsigned)((urand() + 1.0) * 0.5 * c->vocab_size) % (unsigned)c->vocab_size);
        targets[t] = (t % 4 == 1 || t == 11) ? -1 : (int32_t)((unsigned)((urand() + 1.0) * 0.5 * c->vocab_size) % (unsigned)c->vocab_size);
        count += targets[t] >= 0;
    }
    return (gm_tr_batch){3, seq_off, tokens, targets, 21, 1.0 / count};
}

static double loss_f64(model *m, gm_tr_ctx_f64 *c, const gm_tr_batch *b, double *xs, gm_tr_acts_f64 *acts, double *dx,
                       bool want_grads) {
    gm_tr_layer_grad_f64 none[L];
    memset(none, 0, sizeof none);
    gm_tr_grads_f64 g0 = {NULL, NULL, none};
    double loss;
    gm_tr_loss_grad_f64(c, &m->w, want_grads ? &m->g : &g0, b, xs, acts, dx, &loss);
    return loss;
}

static void run(int lora_rank) {
    model m;
    build(&m, lora_rank);
    gm_tr_batch b = make_batch(&m.cfg);
    int T = b.T;
    size_t D = (size_t)m.cfg.d_model;
    gm_tr_ctx_f64 c;
    CHECK(gm_tr_ctx_init_f64(&c, &m.cfg, T, lora_rank, 2.0 * (lora_rank ? lora_rank : 1), NULL) == GM_OK, "ctx");
    gm_tr_acts_f64 acts[L];
    for (int l = 0; l < L; l++) CHECK(gm_tr_acts_alloc_f64(&acts[l], &m.cfg, T, lora_rank) == GM_OK, "acts");
    double *xs = calloc((size_t)(L + 1) * T * D, sizeof *xs), *dx = calloc((size_t)T * D, sizeof *dx);
    double loss = loss_f64(&m, &c, &b, xs, acts, dx, true);
    CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
    const double h = 1e-5;
    int checked = 0;
    for (int i = 0; i < m.ns; i++) {
        slot *s = &m.s[i];
        if (!s->g) continue;
        double num = 0, den = 0;
        /* every element of small tensors; 48 spread over the bigger ones (the cost is two passes each) */
        size_t step = s->n <= 48 ? 1 : s->n / 48;
        for (size_t k = (size_t)(urand() + 1.0) * step / 2 % step; k < s->n; k += step) {
            double keep = s->p[k];
            s->p[k] = keep + h;
            double lp = loss_f64(&m, &c, &b, xs, acts, dx, false);
            s->p[k] = keep - h;
            double lm = loss_f64(&m, &c, &b, xs, acts, dx, false);
            s->p[k] = keep;
            double fd = (lp - lm) / (2 * h);
            num += (s->g[k] - fd) * (s->g[k] - fd);
            den += fd * fd;
        }
        double rel = sqrt(num / (den + 1e-300));
        CHECK(den > 0 && rel < 1e-6, "lora %d: %s: relative error %.3g vs finite differences (|g| = %.3g)", lora_rank,
              s->name, rel, sqrt(den));
        checked++;
    }
    printf("lora rank %d: loss %.6f, %d tensors checked against finite differences\n", lora_rank, loss, checked);

    /* the float build (SIMD GEMM, threads) against the double gradients */
    gm_gemm_ctx *gemm;
    CHECK(gm_gemm_ctx_create(2, &gemm) == GM_OK, "gemm");
    gm_tr_ctx_f32 cf;
    CHECK(gm_tr_ctx_init_f32(&cf, &m.cfg, T, lora_rank, 2.0 * (lora_rank ? lora_rank : 1), gemm) == GM_OK, "ctx f32");
    gm_tr_acts_f32 af[L];
    for (int l = 0; l < L; l++) CHECK(gm_tr_acts_alloc_f32(&af[l], &m.cfg, T, lora_rank) == GM_OK, "acts");
    float *xsf = calloc((size_t)(L + 1) * T * D, sizeof *xsf), *dxf = calloc((size_t)T * D, sizeof *dxf);
    double lossf;
    gm_tr_loss_grad_f32(&cf, &m.wf, &m.gf, &b, xsf, af, dxf, &lossf);
    CHECK(fabs(lossf - loss) < 1e-5 * loss, "float loss %.8f vs double %.8f", lossf, loss);
    for (int i = 0; i < m.ns; i++) {
        slot *s = &m.s[i];
        if (!s->g) continue;
        double num = 0, den = 0;
        for (size_t k = 0; k < s->n; k++) num += (s->gf[k] - s->g[k]) * (s->gf[k] - s->g[k]), den += s->g[k] * s->g[k];
        double rel = sqrt(num / (den + 1e-300));
        CHECK(rel < 1e-4, "lora %d: %s: float gradient relative error %.3g", lora_rank, s->name, rel);
    }
    for (int l = 0; l < L; l++) gm_tr_acts_free_f32(&af[l]), gm_tr_acts_free_f64(&acts[l]);
    gm_tr_ctx_free_f32(&cf);
    gm_tr_ctx_free_f64(&c);
    gm_gemm_ctx_free(gemm);
    free(xs), free(dx), free(xsf), free(dxf);
    release(&m);
}

int main(void) {
    run(0); /* full fine-tuning: every base tensor */
    run(2); /* LoRA rank 2: base frozen, adapters trained */
    return gm_test_finish();
}
