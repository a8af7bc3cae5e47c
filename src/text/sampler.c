#include "text/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kernels/ops.h"
#include "text/topk.h"

struct gm_sampler {
    gm_sampler_config cfg;
    gm_prng_key rng;      /* split once per step: (rng, cur) = split(rng) */
    int32_t *forbidden;   /* [n_forbidden] */
    size_t n_forbidden;
    size_t cap;           /* scratch size in elements */
    float *work;          /* [cap] logits with forbidden ids at -inf, divided by T */
    float *sorted;        /* [cap] top-p candidates */
    int32_t *idx;         /* [cap] top-k indices */
};

gm_sampler_config gm_sampler_config_default(void) {
    gm_sampler_config c;
    memset(&c, 0, sizeof c);
    c.method = GM_SAMPLE_GREEDY;
    c.temperature = 1.0f;
    c.top_k = 1;
    c.top_p = 0.9f;
    c.seed = 0;
    c.prng_original_layout = false;
    return c;
}

gm_status gm_sampler_config_check(const gm_sampler_config *cfg) {
    if (!cfg) return gm_fail(GM_ERR_ARG, "sampler config is NULL");
    if (cfg->method < GM_SAMPLE_GREEDY || cfg->method > GM_SAMPLE_TOP_P)
        return gm_fail(GM_ERR_ARG, "sampling method %d is not one of greedy, random, top_k, top_p", (int)cfg->method);
    if (!(cfg->temperature >= 0.0f) || isinf(cfg->temperature))
        return gm_fail(GM_ERR_ARG, "temperature must be a finite number >= 0 (got %g)", (double)cfg->temperature);
    if (cfg->top_k < 1) return gm_fail(GM_ERR_ARG, "top_k must be >= 1 (got %d)", cfg->top_k);
    if (!(cfg->top_p > 0.0f && cfg->top_p <= 1.0f))
        return gm_fail(GM_ERR_ARG, "top_p must be in (0, 1] (got %g)", (double)cfg->top_p);
    return GM_OK;
}

int gm_sampler_logits_top(const gm_sampler_config *cfg) {
    if (!cfg) return 0;
    if (cfg->method == GM_SAMPLE_GREEDY || cfg->temperature == 0.0f) return 1;
    return cfg->method == GM_SAMPLE_TOP_K && cfg->top_k > 0 ? cfg->top_k : 0;
}

static gm_prng_layout layout_of(const gm_sampler_config *cfg) {
    return cfg->prng_original_layout ? GM_PRNG_ORIGINAL : GM_PRNG_PARTITIONABLE;
}

gm_status gm_sampler_create(const gm_sampler_config *cfg, const int32_t *forbidden_ids, size_t n_forbidden,
                            gm_sampler **out) {
    if (!out) return gm_fail(GM_ERR_ARG, "gm_sampler_create: out is NULL");
    *out = NULL;
    GM_TRY(gm_sampler_config_check(cfg));
    if (n_forbidden && !forbidden_ids) return gm_fail(GM_ERR_ARG, "forbidden_ids is NULL but n_forbidden is %zu", n_forbidden);
    for (size_t i = 0; i < n_forbidden; i++)
        if (forbidden_ids[i] < 0) return gm_fail(GM_ERR_ARG, "forbidden_ids[%zu] = %d is negative", i, forbidden_ids[i]);
    gm_sampler *s = calloc(1, sizeof *s);
    if (!s) return gm_fail(GM_ERR_NOMEM, "gm_sampler_create");
    s->cfg = *cfg;
    s->rng = gm_prng_key_from_seed(cfg->seed);
    if (n_forbidden) {
        s->forbidden = malloc(n_forbidden * sizeof *s->forbidden);
        if (!s->forbidden) {
            free(s);
            return gm_fail(GM_ERR_NOMEM, "gm_sampler_create: %zu forbidden ids", n_forbidden);
        }
        memcpy(s->forbidden, forbidden_ids, n_forbidden * sizeof *s->forbidden);
        s->n_forbidden = n_forbidden;
    }
    *out = s;
    return GM_OK;
}

void gm_sampler_free(gm_sampler *s) {
    if (!s) return;
    free(s->forbidden);
    free(s->work);
    free(s->sorted);
    free(s->idx);
    free(s);
}

void gm_sampler_reseed(gm_sampler *s, int64_t seed) {
    if (s) s->rng = gm_prng_key_from_seed(seed);
}

gm_prng_key gm_sampler_current_key(const gm_sampler *s) { return s->rng; }

static gm_status ensure_scratch(gm_sampler *s, size_t vocab) {
    if (s->cap >= vocab) return GM_OK;
    float *w = realloc(s->work, vocab * sizeof *w);
    if (w) s->work = w;
    float *so = realloc(s->sorted, vocab * sizeof *so);
    if (so) s->sorted = so;
    int32_t *ix = realloc(s->idx, vocab * sizeof *ix);
    if (ix) s->idx = ix;
    if (!w || !so || !ix) return gm_fail(GM_ERR_NOMEM, "sampler scratch for a vocabulary of %zu", vocab);
    s->cap = vocab;
    return GM_OK;
}

/* The largest value v of a[0..m) with mass(a >= v) >= target, where mass sums e^(a - max) in f64; -inf
 * if even all of them fall short. A quickselect on mass: each round splits the range around a pivot
 * into larger, equal and smaller values and keeps the part where the cumulative mass, counted from the
 * largest value down, crosses target. About 2m comparisons and m exponentials on average. */
static float mass_select(float *a, size_t m, float max, double target) {
    size_t lo = 0, hi = m;
    double above = 0.0; /* mass of the values larger than all of a[lo..hi) */
    while (lo < hi) {
        float x0 = a[lo], x1 = a[lo + (hi - lo) / 2], x2 = a[hi - 1];
        float pv = x0 < x1 ? (x1 < x2 ? x1 : (x0 < x2 ? x2 : x0)) : (x0 < x2 ? x0 : (x1 < x2 ? x2 : x1));
        size_t gt = lo, i = lo, lt = hi; /* [lo,gt) > pv, [gt,i) == pv, [lt,hi) < pv */
        double mass_gt = 0.0;
        while (i < lt) {
            float v = a[i];
            if (v > pv) {
                a[i++] = a[gt];
                a[gt++] = v;
                mass_gt += exp((double)v - (double)max);
            } else if (v < pv) {
                a[i] = a[--lt];
                a[lt] = v;
            } else {
                i++;
            }
        }
        if (above + mass_gt >= target) {
            hi = gt;
            continue;
        }
        double mass_eq = (double)(lt - gt) * exp((double)pv - (double)max);
        if (above + mass_gt + mass_eq >= target) return pv;
        above += mass_gt + mass_eq;
        lo = lt;
    }
    return -INFINITY;
}

/* The sorted cumulative softmax without sorting the vocabulary: one SIMD pass gives the softmax sum
 * and the masses of the bands within 1, 2, 4 .. 128 of the max; the values of the narrowest band that
 * holds comfortably more than p of the mass become the candidates, and mass_select finds among them
 * the first sorted value where the cumulative mass reaches p. */
float gm_top_p_cutoff(const float *x, size_t n, float p, float *scratch) {
    if (n == 0) return -INFINITY;
    float max = x[gm_argmax_f32(x, n)];
    if (!(max > -INFINITY)) return -INFINITY;
    float floors[GM_EXP_SUMS_MAX];
    double sums[GM_EXP_SUMS_MAX + 1];
    for (int j = 0; j < GM_EXP_SUMS_MAX; j++) floors[j] = max - (float)(1 << j);
    gm_exp_sums_f32(x, n, max, floors, GM_EXP_SUMS_MAX, sums);
    double sum = sums[GM_EXP_SUMS_MAX], wide = ((double)p + (1.0 - (double)p) * 0.5) * sum;
    float floor = -INFINITY;
    for (int j = 0; j < GM_EXP_SUMS_MAX; j++)
        if (sums[j] >= wide) {
            floor = floors[j];
            break;
        }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) { /* branch-free: the candidates are scattered */
        scratch[m] = x[i];
        m += x[i] >= floor;
    }
    /* When the cumulative sum never reaches p (the candidates are everything: JAX's cutoff index is n,
     * out of range, and nothing is dropped; or rounding) this is -inf and everything is kept. */
    return mass_select(scratch, m, max, (double)p * sum);
}

/* One draw with key `cur` from s->work[vocab] (forbidden already at -inf, not yet divided by T). */
static gm_status draw(gm_sampler *s, gm_prng_key cur, size_t vocab, int32_t *id) {
    const gm_sampler_config *c = &s->cfg;
    gm_prng_layout layout = layout_of(c);
    float *x = s->work;
    bool greedy = c->method == GM_SAMPLE_GREEDY || c->temperature == 0.0f;
    if (greedy) { /* jnp.argmax: the first maximum */
        *id = (int32_t)gm_argmax_f32(x, vocab);
        return GM_OK;
    }
    float t = c->temperature;
    if (c->method == GM_SAMPLE_TOP_K) {
        size_t k = (size_t)c->top_k;
        if (k > vocab) return gm_fail(GM_ERR_RANGE, "top_k (%zu) exceeds the vocabulary (%zu)", k, vocab);
        /* lax.top_k on the undivided logits, then categorical over the k values / T. */
        gm_topk_indices(x, vocab, k, s->idx);
        for (size_t j = 0; j < k; j++) s->sorted[j] = x[s->idx[j]] / t;
        size_t j = gm_prng_categorical(cur, layout, s->sorted, k);
        *id = s->idx[j];
        return GM_OK;
    }
    /* Both loops in blocks of 64, which the compiler vectorizes at -O2 (a division, not a multiplication
     * by 1/T, as JAX divides). */
    size_t i = 0, whole = vocab - vocab % 64;
    for (; i < whole; i += 64)
        for (size_t j = 0; j < 64; j++) x[i + j] = x[i + j] / t;
    for (; i < vocab; i++) x[i] = x[i] / t;
    if (c->method == GM_SAMPLE_TOP_P && c->top_p < 1.0f) {
        float cut = gm_top_p_cutoff(x, vocab, c->top_p, s->sorted);
        /* jnp.finfo(float32).min, not -inf, as the seed does */
        for (i = 0; i < whole; i += 64)
            for (size_t j = 0; j < 64; j++) x[i + j] = x[i + j] < cut ? -FLT_MAX : x[i + j];
        for (; i < vocab; i++) x[i] = x[i] < cut ? -FLT_MAX : x[i];
    }
    *id = (int32_t)gm_prng_categorical(cur, layout, x, vocab);
    return GM_OK;
}

gm_status gm_sampler_next(gm_sampler *s, const float *logits, size_t vocab, int32_t *id) {
    if (!s || !logits || !id) return gm_fail(GM_ERR_ARG, "gm_sampler_next: sampler, logits and id must not be NULL");
    *id = -1;
    if (vocab == 0 || vocab > INT32_MAX) return gm_fail(GM_ERR_ARG, "gm_sampler_next: vocab %zu out of range", vocab);
    GM_TRY(gm_check_logits(logits, vocab, "logits"));
    for (size_t i = 0; i < s->n_forbidden; i++)
        if ((size_t)s->forbidden[i] >= vocab)
            return gm_fail(GM_ERR_RANGE, "forbidden id %d is outside the vocabulary of %zu", s->forbidden[i], vocab);
    GM_TRY(ensure_scratch(s, vocab));
    memcpy(s->work, logits, vocab * sizeof *logits);
    for (size_t i = 0; i < s->n_forbidden; i++) s->work[s->forbidden[i]] = -INFINITY;
    bool any = false;
    for (size_t i = 0; i < vocab && !any; i++) any = s->work[i] > -INFINITY;
    if (!any) return gm_fail(GM_ERR_RANGE, "no token can be sampled: every allowed logit is -inf");
    /* As the seed's loop: next_rng, curr_rng = jax.random.split(rng), every step, greedy included. */
    gm_prng_key two[2];
    gm_prng_split(s->rng, layout_of(&s->cfg), 2, two);
    GM_TRY(draw(s, two[1], vocab, id));
    s->rng = two[0];
    return GM_OK;
}

gm_status gm_sample_categorical(int64_t seed, const float *logits, size_t vocab, int32_t *id) {
    if (!logits || !id) return gm_fail(GM_ERR_ARG, "gm_sample_categorical: logits and id must not be NULL");
    *id = -1;
    if (vocab == 0 || vocab > INT32_MAX) return gm_fail(GM_ERR_ARG, "gm_sample_categorical: vocab %zu out of range", vocab);
    GM_TRY(gm_check_logits(logits, vocab, "logits"));
    *id = (int32_t)gm_prng_categorical(gm_prng_key_from_seed(seed), GM_PRNG_PARTITIONABLE, logits, vocab);
    return GM_OK;
}
