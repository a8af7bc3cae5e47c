/* The training math for one scalar type: included by core_f32.c and core_f64.c with REAL, SFX,
 * GM_TR_FLOAT (1 for float) and the math macros R_EXP, R_LOG, R_SQRT, R_TANH, R_COS, R_SIN defined.
 * See train/core.h for the contract of each function. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "kernels/gemm.h"
#include "train/core.h"

typedef SFX(gm_tr_ctx) ctx_t;

/* ---------------------------------------------------------------- helpers */

static REAL *xalloc(size_t n, size_t *bytes) {
    void *p = NULL;
    size_t sz = (n ? n : 1) * sizeof(REAL);
    if (posix_memalign(&p, 64, sz) != 0) return NULL;
    memset(p, 0, sz);
    *bytes += sz;
    return p;
}

typedef void (*job_fn)(void *arg, size_t lo, size_t hi, int thread);
typedef struct par_job {
    job_fn fn;
    void *arg;
    size_t n;
} par_job;

static void par_worker(void *ctx, int i, int n) {
    par_job *j = ctx;
    size_t lo, hi;
    gm_split_range(j->n, n, i, 1, &lo, &hi);
    if (hi > lo) j->fn(j->arg, lo, hi, i);
}

/* fn over [0, n) split across the context's threads (serially without a pool). */
static void par_for(ctx_t *c, size_t n, job_fn fn, void *arg) {
    if (!c->pool || c->threads < 2 || n < 2) {
        if (n) fn(arg, 0, n, 0);
        return;
    }
    par_job j = {fn, arg, n};
    gm_pool_run(c->pool, par_worker, &j);
}

/* C[M][N] = alpha op(A) op(B) + beta C (see kernels/gemm.h) */
static void mm(ctx_t *c, bool ta, bool tb, size_t M, size_t N, size_t K, REAL alpha, const REAL *A, size_t lda,
               const REAL *B, size_t ldb, REAL beta, REAL *C, size_t ldc) {
#if GM_TR_FLOAT
    gm_gemm(c->gemm, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    (void)c;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            REAL s = 0;
            for (size_t k = 0; k < K; k++) s += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * C[i * ldc + j]);
        }
#endif
}

static REAL dot(const REAL *a, const REAL *b, size_t n) {
    REAL s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static void axpy(REAL *y, REAL a, const REAL *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* ---------------------------------------------------------------- RMSNorm: y = x / rms(x) * w (w = 1 + scale) */

typedef struct rms_job {
    REAL *y, *r, *dx, *dw;
    const REAL *x, *w, *dy;
    size_t n;
    REAL eps;
} rms_job;

static void rms_fwd_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    rms_job *j = arg;
    size_t n = j->n;
    for (size_t t = lo; t < hi; t++) {
        const REAL *x = j->x + t * n;
        REAL *y = j->y + t * n;
        double ss = 0;
        for (size_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
        REAL inv = (REAL)1 / R_SQRT((REAL)(ss / (double)n) + j->eps);
        j->r[t] = inv;
        for (size_t i = 0; i < n; i++) y[i] = x[i] * inv * j->w[i];
    }
}

/* y [rows][n] (may alias x), r [rows] = 1 / rms */
static void rms_fwd(ctx_t *c, REAL *y, REAL *r, const REAL *x, const REAL *w, size_t rows, size_t n) {
    rms_job j = {.y = y, .r = r, .x = x, .w = w, .n = n, .eps = (REAL)c->cfg->rms_eps};
    par_for(c, rows, rms_fwd_rows, &j);
}

/* dx += inv * (dy * w) - x * inv^3 / n * sum(dy * w * x) */
static void rms_bwd_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    rms_job *j = arg;
    size_t n = j->n;
    for (size_t t = lo; t < hi; t++) {
        const REAL *x = j->x + t * n, *dy = j->dy + t * n;
        REAL *dx = j->dx + t * n;
        REAL inv = j->r[t];
        double s = 0;
        for (size_t i = 0; i < n; i++) s += (double)(dy[i] * j->w[i]) * (double)x[i];
        REAL k = (REAL)(s / (double)n) * inv * inv * inv;
        for (size_t i = 0; i < n; i++) dx[i] += inv * dy[i] * j->w[i] - x[i] * k;
    }
}

/* dw[i] += sum over rows of dy * x * inv: split by columns so no two threads write one element */
typedef struct rms_dw_job {
    rms_job *j;
    size_t rows;
} rms_dw_job;

static void rms_dw_cols(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    rms_dw_job *d = arg;
    rms_job *j = d->j;
    for (size_t t = 0; t < d->rows; t++) {
        const REAL *x = j->x + t * j->n, *dy = j->dy + t * j->n;
        REAL inv = j->r[t];
        for (size_t i = lo; i < hi; i++) j->dw[i] += dy[i] * x[i] * inv;
    }
}

static void rms_bwd(ctx_t *c, REAL *dx, REAL *dw, const REAL *dy, const REAL *x, const REAL *r, const REAL *w, size_t rows,
                    size_t n) {
    rms_job j = {.dx = dx, .dw = dw, .x = x, .w = w, .dy = dy, .r = (REAL *)r, .n = n};
    par_for(c, rows, rms_bwd_rows, &j);
    if (dw) {
        rms_dw_job d = {&j, rows};
        par_for(c, n, rms_dw_cols, &d);
    }
}

/* ---------------------------------------------------------------- linear layers (+ LoRA) */

/* Y [T][R] = X [T][C] . W^T + s (X A^T) B^T ; XA [T][r] saved */
static void lin_fwd(ctx_t *c, const REAL *X, size_t T, size_t C, size_t R, const REAL *W, const REAL *A, const REAL *B,
                    REAL *XA, REAL *Y) {
    mm(c, false, true, T, R, C, 1, X, C, W, C, 0, Y, R);
    if (A && B) {
        size_t r = (size_t)c->lora_rank;
        mm(c, false, true, T, r, C, 1, X, C, A, C, 0, XA, r);
        mm(c, false, true, T, R, r, c->lora_scale, XA, r, B, r, 1, Y, R);
    }
}

/* dX = beta dX + dY W (+ LoRA path); gW += dY^T X; gA, gB likewise (NULL: not wanted). */
static void lin_bwd(ctx_t *c, const REAL *dY, const REAL *X, size_t T, size_t C, size_t R, const REAL *W, const REAL *A,
                    const REAL *B, const REAL *XA, REAL *dX, REAL beta, REAL *gW, REAL *gA, REAL *gB) {
    mm(c, false, false, T, C, R, 1, dY, R, W, C, beta, dX, C);
    if (gW) mm(c, true, false, R, C, T, 1, dY, R, X, C, 1, gW, C);
    if (A && B) {
        size_t r = (size_t)c->lora_rank;
        REAL *dXA = c->dxa; /* [T][r] */
        mm(c, false, false, T, r, R, c->lora_scale, dY, R, B, r, 0, dXA, r);
        mm(c, false, false, T, C, r, 1, dXA, r, A, C, 1, dX, C);
        if (gA) mm(c, true, false, r, C, T, 1, dXA, r, X, C, 1, gA, C);
        if (gB) mm(c, true, false, R, r, T, c->lora_scale, dY, R, XA, r, 1, gB, r);
    }
}

/* ---------------------------------------------------------------- RoPE (split halves) */

typedef struct rope_job {
    const gm_tr_batch *b;
    REAL *x;               /* [T][heads][H] */
    int heads, H;
    const REAL *inv_freq;
    REAL scale;            /* forward: applied after the rotation; backward: before */
    bool backward;
    const int *pos;        /* [T] position in its sequence */
} rope_job;

static void rope_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    rope_job *j = arg;
    size_t H = (size_t)j->H, half = H / 2;
    for (size_t t = lo; t < hi; t++) {
        int p = j->pos[t];
        for (int h = 0; h < j->heads; h++) {
            REAL *x = j->x + (t * (size_t)j->heads + (size_t)h) * H;
            for (size_t i = 0; i < half; i++) {
                REAL ang = (REAL)p * j->inv_freq[i];
                REAL cs = R_COS(ang), sn = R_SIN(ang);
                REAL a = x[i], bb = x[i + half];
                if (!j->backward) {
                    x[i] = (a * cs - bb * sn) * j->scale;
                    x[i + half] = (bb * cs + a * sn) * j->scale;
                } else { /* the transpose of the rotation */
                    a *= j->scale, bb *= j->scale;
                    x[i] = a * cs + bb * sn;
                    x[i + half] = bb * cs - a * sn;
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- attention */

typedef struct attn_job {
    ctx_t *c;
    const gm_tr_batch *b;
    const SFX(gm_tr_acts) *a;
    REAL *att, *lse;            /* forward outputs */
    const REAL *datt;           /* backward input */
    REAL *dq, *dk, *dv;         /* backward outputs (dk, dv accumulated per kv head) */
    int window;                 /* keys a query sees, itself included; 0 = all (global layer) */
} attn_job;

static int first_key(int window, int p) { return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0; }

/* One sequence's attention as matrix products (per query head h of kv group g, L tokens):
 *   S = Q_h K_g^T (L x L), P = softmax over the keys each query sees (causal, within the window),
 *   O_h = P V_g; backward: dP = dO_h V_g^T, dS = P (dP - rowsum(dO_h . O_h)), dQ_h = dS K_g,
 *   dK_g += dS^T Q_h, dV_g += P^T dO_h.
 * Q rows are N*H apart, K and V rows K*H apart (the activations' layout). Single-threaded products: the jobs
 * themselves run in parallel. */
static void mm1(ctx_t *c, int th, bool ta, bool tb, size_t M, size_t N, size_t K, REAL alpha, const REAL *A, size_t lda,
                const REAL *B, size_t ldb, REAL beta, REAL *C, size_t ldc) {
#if GM_TR_FLOAT
    gm_gemm_ctx_fn(c->gemm)(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, gm_gemm_ctx_work(c->gemm, th));
#else
    (void)th;
    mm(c, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

/* S [L][L] -> P in place (0 where a key is not visible); lse[i] = log-sum-exp of row i's visible scores, or,
 * with use_lse, P = exp(S - lse) from the forward's values. */
static void softmax_rows(REAL *S, int L, int window, REAL *lse, size_t lse_stride, bool use_lse) {
    for (int i = 0; i < L; i++) {
        REAL *row = S + (size_t)i * (size_t)L;
        int first = first_key(window, i);
        if (use_lse) {
            REAL m = lse[(size_t)i * lse_stride];
            for (int k = first; k <= i; k++) row[k] = R_EXP(row[k] - m);
        } else {
            REAL mx = -INFINITY;
            for (int k = first; k <= i; k++) mx = row[k] > mx ? row[k] : mx;
            double sum = 0;
            for (int k = first; k <= i; k++) {
                row[k] = R_EXP(row[k] - mx);
                sum += row[k];
            }
            REAL inv = (REAL)(1.0 / sum);
            for (int k = first; k <= i; k++) row[k] *= inv;
            lse[(size_t)i * lse_stride] = mx + (REAL)log(sum);
        }
        for (int k = 0; k < first; k++) row[k] = 0;
        for (int k = i + 1; k < L; k++) row[k] = 0;
    }
}

/* job = sequence * N + query head */
static void attn_fwd_jobs(void *arg, size_t lo, size_t hi, int th) {
    attn_job *j = arg;
    const gm_config *cfg = j->c->cfg;
    size_t N = (size_t)cfg->n_heads, K = (size_t)cfg->n_kv_heads, H = (size_t)cfg->head_dim, G = N / K;
    REAL *S = j->c->probs + (size_t)th * 2 * (size_t)j->c->attn_cap;
    for (size_t job = lo; job < hi; job++) {
        size_t s = job / N, h = job % N, g = h / G;
        size_t t0 = (size_t)j->b->seq_off[s];
        int L = j->b->seq_off[s + 1] - (int)t0;
        if (L <= 0) continue;
        const REAL *Q = j->a->qf + (t0 * N + h) * H, *Kg = j->a->kf + (t0 * K + g) * H, *Vg = j->a->v + (t0 * K + g) * H;
        mm1(j->c, th, false, true, (size_t)L, (size_t)L, H, 1, Q, N * H, Kg, K * H, 0, S, (size_t)L);
        softmax_rows(S, L, j->window, j->lse + t0 * N + h, N, false);
        mm1(j->c, th, false, false, (size_t)L, H, (size_t)L, 1, S, (size_t)L, Vg, K * H, 0, j->att + (t0 * N + h) * H, N * H);
    }
}

/* job = sequence * K + kv head: every query head of the group, so dk / dv have one writer */
static void attn_bwd_jobs(void *arg, size_t lo, size_t hi, int th) {
    attn_job *j = arg;
    const gm_config *cfg = j->c->cfg;
    size_t N = (size_t)cfg->n_heads, K = (size_t)cfg->n_kv_heads, H = (size_t)cfg->head_dim, G = N / K;
    REAL *P = j->c->probs + (size_t)th * 2 * (size_t)j->c->attn_cap, *dP = P + j->c->attn_cap;
    for (size_t job = lo; job < hi; job++) {
        size_t s = job / K, g = job % K;
        size_t t0 = (size_t)j->b->seq_off[s];
        int L = j->b->seq_off[s + 1] - (int)t0;
        if (L <= 0) continue;
        size_t l = (size_t)L;
        const REAL *Kg = j->a->kf + (t0 * K + g) * H, *Vg = j->a->v + (t0 * K + g) * H;
        REAL *dKg = j->dk + (t0 * K + g) * H, *dVg = j->dv + (t0 * K + g) * H;
        for (size_t h = g * G; h < (g + 1) * G; h++) {
            const REAL *Q = j->a->qf + (t0 * N + h) * H, *dO = j->datt + (t0 * N + h) * H, *O = j->a->att + (t0 * N + h) * H;
            mm1(j->c, th, false, true, l, l, H, 1, Q, N * H, Kg, K * H, 0, P, l);
            softmax_rows(P, L, j->window, j->a->lse + t0 * N + h, N, true);
            mm1(j->c, th, false, true, l, l, H, 1, dO, N * H, Vg, K * H, 0, dP, l);
            for (int i = 0; i < L; i++) {
                REAL Dt = dot(dO + (size_t)i * N * H, O + (size_t)i * N * H, H); /* sum_k P dP = dO . O */
                REAL *pr = P + (size_t)i * l, *dpr = dP + (size_t)i * l;
                for (int k = 0; k < L; k++) dpr[k] = pr[k] * (dpr[k] - Dt); /* dS (0 where P is 0) */
            }
            mm1(j->c, th, false, false, l, H, l, 1, dP, l, Kg, K * H, 0, j->dq + (t0 * N + h) * H, N * H);
            mm1(j->c, th, true, false, l, H, l, 1, dP, l, Q, N * H, 1, dKg, K * H);
            mm1(j->c, th, true, false, l, H, l, 1, P, l, dO, N * H, 1, dVg, K * H);
        }
    }
}

/* ---------------------------------------------------------------- GeGLU */

typedef struct geglu_job {
    const REAL *gate, *up;
    REAL *tg;         /* tanh(k0 (g + c g^3)): written by the forward, read by the backward */
    REAL *h;          /* forward */
    REAL *d1, *d2;    /* backward: d1 = dh on entry, dgate on return; d2 = dup */
    size_t F;
} geglu_job;

#define GELU_K0 ((REAL)0.7978845608028654)
#define GELU_C ((REAL)0.044715)

static void geglu_fwd_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    geglu_job *j = arg;
    for (size_t i = lo * j->F; i < hi * j->F; i++) {
        REAL g = j->gate[i];
        REAL t = R_TANH(GELU_K0 * (g + GELU_C * g * g * g));
        j->tg[i] = t;
        j->h[i] = (REAL)0.5 * g * ((REAL)1 + t) * j->up[i];
    }
}

static void geglu_bwd_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    geglu_job *j = arg;
    for (size_t i = lo * j->F; i < hi * j->F; i++) {
        REAL g = j->gate[i], dh = j->d1[i], t = j->tg[i];
        REAL gelu = (REAL)0.5 * g * ((REAL)1 + t);
        REAL dgelu = (REAL)0.5 * ((REAL)1 + t) + (REAL)0.5 * g * ((REAL)1 - t * t) * GELU_K0 * ((REAL)1 + (REAL)3 * GELU_C * g * g);
        j->d1[i] = dh * j->up[i] * dgelu;
        j->d2[i] = dh * gelu;
    }
}

/* ---------------------------------------------------------------- setup */

gm_status SFX(gm_tr_ctx_init)(ctx_t *c, const gm_config *cfg, int max_T, int lora_rank, double lora_alpha, void *gemm) {
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->max_T = max_T > 0 ? max_T : 1;
    c->lora_rank = lora_rank;
    c->lora_scale = lora_rank > 0 ? (REAL)(lora_alpha / lora_rank) : 0;
    c->gemm = gemm;
#if GM_TR_FLOAT
    c->pool = gemm ? gm_gemm_ctx_pool(gemm) : NULL;
    c->threads = gemm ? gm_gemm_ctx_threads(gemm) : 1;
#else
    c->threads = 1;
#endif
    size_t T = (size_t)c->max_T, D = (size_t)cfg->d_model, F = (size_t)cfg->d_ff, H = (size_t)cfg->head_dim;
    size_t NH = (size_t)cfg->n_heads * H, KH = (size_t)cfg->n_kv_heads * H, V = (size_t)cfg->vocab_size;
    size_t r = lora_rank > 0 ? (size_t)lora_rank : 1, wide = D > NH ? D : NH;
    c->head_chunk = c->max_T < 128 ? c->max_T : 128;
    struct {
        REAL **p;
        size_t n;
    } bufs[] = {{&c->inv_freq_local, H / 2}, {&c->inv_freq_global, H / 2}, {&c->dy, T * wide}, {&c->dxn, T * D},
                {&c->dF1, T * F}, {&c->dF2, T * F}, {&c->dq, T * NH}, {&c->dk, T * KH}, {&c->dv, T * KH},
                {&c->datt, T * NH}, {&c->dqp, T * NH}, {&c->dkp, T * KH}, {&c->dxa, T * r}, {&c->xf, 2 * T * D}, {&c->rf, T}, {&c->dxf, 2 * T * D},
                {&c->logits, (size_t)c->head_chunk * V}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (!(*bufs[i].p = xalloc(bufs[i].n, &c->bytes))) {
            SFX(gm_tr_ctx_free)(c);
            return gm_fail(GM_ERR_NOMEM, "training: cannot allocate %zu bytes of scratch", bufs[i].n * sizeof(REAL));
        }
    c->pos = malloc(T * sizeof *c->pos);
    c->hrows = malloc(T * sizeof *c->hrows);
    c->htarg = malloc(T * sizeof *c->htarg);
    c->hloss = malloc(T * sizeof *c->hloss);
    if (!c->pos || !c->hrows || !c->htarg || !c->hloss) {
        SFX(gm_tr_ctx_free)(c);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    c->bytes += T * (2 * sizeof(int) + sizeof(int32_t) + sizeof(double));
    for (size_t i = 0; i < H / 2; i++) {
        /* as transformers computes them: f32 base^(2i/H), then / factor (double: exact) */
        REAL e = (REAL)(2 * i) / (REAL)H;
        c->inv_freq_local[i] = (REAL)1 / (REAL)pow((REAL)cfg->rope_base_local, e) / (REAL)cfg->rope_scale_local;
        c->inv_freq_global[i] = (REAL)1 / (REAL)pow((REAL)cfg->rope_base_global, e) / (REAL)cfg->rope_scale_global;
    }
    return GM_OK;
}

void SFX(gm_tr_ctx_free)(ctx_t *c) {
    REAL *bufs[] = {c->inv_freq_local, c->inv_freq_global, c->dy, c->dxn, c->dF1, c->dF2, c->dq, c->dk, c->dv,
                    c->datt, c->dqp, c->dkp, c->dxa, c->xf, c->rf, c->dxf, c->logits, c->probs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->pos), free(c->hrows), free(c->htarg), free(c->hloss);
    memset(c, 0, sizeof *c);
}

gm_status SFX(gm_tr_ctx_reserve_attn)(ctx_t *c, int longest) {
    size_t need = (size_t)longest * (size_t)longest;
    if (need <= c->attn_cap) return GM_OK;
    free(c->probs);
    c->bytes -= 2 * (size_t)c->threads * c->attn_cap * sizeof(REAL);
    c->attn_cap = 0;
    size_t b = 0;
    if (!(c->probs = xalloc(2 * (size_t)c->threads * need, &b)))
        return gm_fail(GM_ERR_NOMEM, "training: cannot allocate attention scores for %d-token sequences", longest);
    c->bytes += b;
    c->attn_cap = need;
    return GM_OK;
}

gm_status SFX(gm_tr_acts_alloc)(SFX(gm_tr_acts) *a, const gm_config *cfg, int max_T, int lora_rank) {
    memset(a, 0, sizeof *a);
    size_t T = (size_t)(max_T > 0 ? max_T : 1), D = (size_t)cfg->d_model, F = (size_t)cfg->d_ff;
    size_t H = (size_t)cfg->head_dim, N = (size_t)cfg->n_heads, K = (size_t)cfg->n_kv_heads;
    size_t r = lora_rank > 0 ? (size_t)lora_rank : 0;
    struct {
        REAL **p;
        size_t n;
    } parts[] = {{&a->xn1, T * D},   {&a->r1, T},         {&a->q_pre, T * N * H}, {&a->rq, T * N},
                 {&a->k_pre, T * K * H}, {&a->rk, T * K}, {&a->v, T * K * H},     {&a->qf, T * N * H},
                 {&a->kf, T * K * H}, {&a->att, T * N * H}, {&a->lse, T * N},     {&a->o_out, T * D},
                 {&a->r2, T},         {&a->x_mid, T * D},  {&a->xn2, T * D},      {&a->r3, T},
                 {&a->gate, T * F},   {&a->up, T * F},     {&a->h, T * F},        {&a->tg, T * F},
                 {&a->d_out, T * D},
                 {&a->r4, T}};
    size_t total = 0, np = sizeof parts / sizeof parts[0];
    for (size_t i = 0; i < np; i++) total += (parts[i].n + 15) / 16 * 16;
    total += GM_LM_COUNT * ((T * r + 15) / 16 * 16);
    a->block = xalloc(total, &a->bytes);
    if (!a->block) return gm_fail(GM_ERR_NOMEM, "training: cannot allocate %zu bytes of activations", total * sizeof(REAL));
    REAL *p = a->block;
    for (size_t i = 0; i < np; i++) {
        *parts[i].p = p;
        p += (parts[i].n + 15) / 16 * 16;
    }
    for (int m = 0; m < GM_LM_COUNT; m++) {
        a->xa[m] = r ? p : NULL;
        p += (T * r + 15) / 16 * 16;
    }
    return GM_OK;
}

void SFX(gm_tr_acts_free)(SFX(gm_tr_acts) *a) {
    free(a->block);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------- embedding */

void SFX(gm_tr_embed_fwd)(ctx_t *c, const REAL *E, const gm_tr_batch *b, REAL *x) {
    size_t D = (size_t)c->cfg->d_model;
    REAL s = (REAL)c->cfg->embed_scale;
    for (int t = 0; t < b->T; t++) {
        const REAL *e = E + (size_t)b->tokens[t] * D;
        for (size_t i = 0; i < D; i++) x[(size_t)t * D + i] = e[i] * s;
    }
}

void SFX(gm_tr_embed_bwd)(ctx_t *c, REAL *gE, const gm_tr_batch *b, const REAL *dx) {
    size_t D = (size_t)c->cfg->d_model;
    REAL s = (REAL)c->cfg->embed_scale;
    for (int t = 0; t < b->T; t++) axpy(gE + (size_t)b->tokens[t] * D, s, dx + (size_t)t * D, D);
}

/* ---------------------------------------------------------------- one layer */

static void positions(const gm_tr_batch *b, int *pos) {
    for (int s = 0; s < b->n_seq; s++)
        for (int t = b->seq_off[s]; t < b->seq_off[s + 1]; t++) pos[t] = t - b->seq_off[s];
}

static int window_of(const gm_config *cfg, int l) { return cfg->layer_is_global[l] ? 0 : cfg->sliding_window; }

typedef struct add_job {
    REAL *y;
    const REAL *a, *b;
    size_t n;
} add_job;

static void add_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    add_job *j = arg;
    for (size_t i = lo * j->n; i < hi * j->n; i++) j->y[i] = j->a[i] + j->b[i];
}

void SFX(gm_tr_layer_fwd)(ctx_t *c, int l, const SFX(gm_tr_layer) *w, const gm_tr_batch *b, const REAL *x_in,
                          SFX(gm_tr_acts) *a, REAL *x_out) {
    const gm_config *cfg = c->cfg;
    size_t T = (size_t)b->T, D = (size_t)cfg->d_model, F = (size_t)cfg->d_ff, H = (size_t)cfg->head_dim;
    size_t N = (size_t)cfg->n_heads, K = (size_t)cfg->n_kv_heads, NH = N * H, KH = K * H;
    const REAL *inv_freq = cfg->layer_is_global[l] ? c->inv_freq_global : c->inv_freq_local;
    int *pos = c->pos; /* positions in their sequences */
    positions(b, pos);

    rms_fwd(c, a->xn1, a->r1, x_in, w->w[GM_LT_ATTN_NORM], T, D);
    lin_fwd(c, a->xn1, T, D, NH, w->w[GM_LT_Q], w->la[GM_LM_Q], w->lb[GM_LM_Q], a->xa[GM_LM_Q], a->q_pre);
    lin_fwd(c, a->xn1, T, D, KH, w->w[GM_LT_K], w->la[GM_LM_K], w->lb[GM_LM_K], a->xa[GM_LM_K], a->k_pre);
    lin_fwd(c, a->xn1, T, D, KH, w->w[GM_LT_V], w->la[GM_LM_V], w->lb[GM_LM_V], a->xa[GM_LM_V], a->v);
    rms_fwd(c, a->qf, a->rq, a->q_pre, w->w[GM_LT_Q_NORM], T * N, H);
    rms_fwd(c, a->kf, a->rk, a->k_pre, w->w[GM_LT_K_NORM], T * K, H);
    rope_job rq = {b, a->qf, (int)N, (int)H, inv_freq, (REAL)cfg->query_scale, false, pos};
    par_for(c, T, rope_rows, &rq);
    rope_job rk = {b, a->kf, (int)K, (int)H, inv_freq, 1, false, pos};
    par_for(c, T, rope_rows, &rk);
    attn_job aj = {.c = c, .b = b, .a = a, .att = a->att, .lse = a->lse, .window = window_of(cfg, l)};
    par_for(c, (size_t)b->n_seq * N, attn_fwd_jobs, &aj);
    lin_fwd(c, a->att, T, NH, D, w->w[GM_LT_O], w->la[GM_LM_O], w->lb[GM_LM_O], a->xa[GM_LM_O], a->o_out);
    rms_fwd(c, c->dy, a->r2, a->o_out, w->w[GM_LT_POST_ATTN_NORM], T, D);
    add_job ad = {a->x_mid, x_in, c->dy, D};
    par_for(c, T, add_rows, &ad);

    rms_fwd(c, a->xn2, a->r3, a->x_mid, w->w[GM_LT_FFN_NORM], T, D);
    lin_fwd(c, a->xn2, T, D, F, w->w[GM_LT_GATE], w->la[GM_LM_GATE], w->lb[GM_LM_GATE], a->xa[GM_LM_GATE], a->gate);
    lin_fwd(c, a->xn2, T, D, F, w->w[GM_LT_UP], w->la[GM_LM_UP], w->lb[GM_LM_UP], a->xa[GM_LM_UP], a->up);
    geglu_job gj = {.gate = a->gate, .up = a->up, .tg = a->tg, .h = a->h, .F = F};
    par_for(c, T, geglu_fwd_rows, &gj);
    lin_fwd(c, a->h, T, F, D, w->w[GM_LT_DOWN], w->la[GM_LM_DOWN], w->lb[GM_LM_DOWN], a->xa[GM_LM_DOWN], a->d_out);
    rms_fwd(c, c->dy, a->r4, a->d_out, w->w[GM_LT_POST_FFW_NORM], T, D);
    add_job ad2 = {x_out, a->x_mid, c->dy, D};
    par_for(c, T, add_rows, &ad2);
}

#define G_(i) (g->g[i])
#define GA_(m) (g->ga[m])
#define GB_(m) (g->gb[m])

void SFX(gm_tr_layer_bwd)(ctx_t *c, int l, const SFX(gm_tr_layer) *w, SFX(gm_tr_layer_grad) *g, const gm_tr_batch *b,
                          const REAL *x_in, const SFX(gm_tr_acts) *a, REAL *dx) {
    const gm_config *cfg = c->cfg;
    size_t T = (size_t)b->T, D = (size_t)cfg->d_model, F = (size_t)cfg->d_ff, H = (size_t)cfg->head_dim;
    size_t N = (size_t)cfg->n_heads, K = (size_t)cfg->n_kv_heads, NH = N * H, KH = K * H;
    const REAL *inv_freq = cfg->layer_is_global[l] ? c->inv_freq_global : c->inv_freq_local;
    int *pos = c->pos;
    positions(b, pos);

    /* x_out = x_mid + post_ffw_norm(d_out): dx flows on to x_mid unchanged, plus the norm's share */
    memset(c->dy, 0, T * D * sizeof(REAL));
    rms_bwd(c, c->dy, G_(GM_LT_POST_FFW_NORM), dx, a->d_out, a->r4, w->w[GM_LT_POST_FFW_NORM], T, D);
    lin_bwd(c, c->dy, a->h, T, F, D, w->w[GM_LT_DOWN], w->la[GM_LM_DOWN], w->lb[GM_LM_DOWN], a->xa[GM_LM_DOWN], c->dF1,
            0, G_(GM_LT_DOWN), GA_(GM_LM_DOWN), GB_(GM_LM_DOWN));
    geglu_job gj = {.gate = a->gate, .up = a->up, .tg = (REAL *)a->tg, .d1 = c->dF1, .d2 = c->dF2, .F = F};
    par_for(c, T, geglu_bwd_rows, &gj);
    lin_bwd(c, c->dF1, a->xn2, T, D, F, w->w[GM_LT_GATE], w->la[GM_LM_GATE], w->lb[GM_LM_GATE], a->xa[GM_LM_GATE],
            c->dxn, 0, G_(GM_LT_GATE), GA_(GM_LM_GATE), GB_(GM_LM_GATE));
    lin_bwd(c, c->dF2, a->xn2, T, D, F, w->w[GM_LT_UP], w->la[GM_LM_UP], w->lb[GM_LM_UP], a->xa[GM_LM_UP], c->dxn, 1,
            G_(GM_LT_UP), GA_(GM_LM_UP), GB_(GM_LM_UP));
    rms_bwd(c, dx, G_(GM_LT_FFN_NORM), c->dxn, a->x_mid, a->r3, w->w[GM_LT_FFN_NORM], T, D);

    /* x_mid = x_in + post_attention_norm(o_out) */
    memset(c->dy, 0, T * D * sizeof(REAL));
    rms_bwd(c, c->dy, G_(GM_LT_POST_ATTN_NORM), dx, a->o_out, a->r2, w->w[GM_LT_POST_ATTN_NORM], T, D);
    lin_bwd(c, c->dy, a->att, T, NH, D, w->w[GM_LT_O], w->la[GM_LM_O], w->lb[GM_LM_O], a->xa[GM_LM_O], c->datt, 0,
            G_(GM_LT_O), GA_(GM_LM_O), GB_(GM_LM_O));
    memset(c->dq, 0, T * NH * sizeof(REAL));
    memset(c->dk, 0, T * KH * sizeof(REAL));
    memset(c->dv, 0, T * KH * sizeof(REAL));
    attn_job aj = {.c = c, .b = b, .a = a, .datt = c->datt, .dq = c->dq, .dk = c->dk, .dv = c->dv,
                   .window = window_of(cfg, l)};
    par_for(c, (size_t)b->n_seq * K, attn_bwd_jobs, &aj);
    /* qf = rope(q_norm(q_pre)) * query_scale; kf = rope(k_norm(k_pre)) */
    rope_job rq = {b, c->dq, (int)N, (int)H, inv_freq, (REAL)cfg->query_scale, true, pos};
    par_for(c, T, rope_rows, &rq);
    rope_job rk = {b, c->dk, (int)K, (int)H, inv_freq, 1, true, pos};
    par_for(c, T, rope_rows, &rk);
    REAL *dq_pre = c->dqp, *dk_pre = c->dkp;
    memset(dq_pre, 0, T * NH * sizeof(REAL));
    memset(dk_pre, 0, T * KH * sizeof(REAL));
    rms_bwd(c, dq_pre, G_(GM_LT_Q_NORM), c->dq, a->q_pre, a->rq, w->w[GM_LT_Q_NORM], T * N, H);
    rms_bwd(c, dk_pre, G_(GM_LT_K_NORM), c->dk, a->k_pre, a->rk, w->w[GM_LT_K_NORM], T * K, H);
    lin_bwd(c, dq_pre, a->xn1, T, D, NH, w->w[GM_LT_Q], w->la[GM_LM_Q], w->lb[GM_LM_Q], a->xa[GM_LM_Q], c->dxn, 0,
            G_(GM_LT_Q), GA_(GM_LM_Q), GB_(GM_LM_Q));
    lin_bwd(c, dk_pre, a->xn1, T, D, KH, w->w[GM_LT_K], w->la[GM_LM_K], w->lb[GM_LM_K], a->xa[GM_LM_K], c->dxn, 1,
            G_(GM_LT_K), GA_(GM_LM_K), GB_(GM_LM_K));
    lin_bwd(c, c->dv, a->xn1, T, D, KH, w->w[GM_LT_V], w->la[GM_LM_V], w->lb[GM_LM_V], a->xa[GM_LM_V], c->dxn, 1,
            G_(GM_LT_V), GA_(GM_LM_V), GB_(GM_LM_V));
    rms_bwd(c, dx, G_(GM_LT_ATTN_NORM), c->dxn, x_in, a->r1, w->w[GM_LT_ATTN_NORM], T, D);
}

#undef G_
#undef GA_
#undef GB_

/* ---------------------------------------------------------------- head: final norm, tied output, CE */

typedef struct ce_job {
    REAL *logits;            /* [rows][V]: logits in, d loss / d logits out */
    const int32_t *targets;  /* per row */
    size_t V;
    REAL inv_count;
    double *row_loss;        /* per row */
} ce_job;

static void ce_rows(void *arg, size_t lo, size_t hi, int th) {
    (void)th;
    ce_job *j = arg;
    for (size_t r = lo; r < hi; r++) {
        REAL *z = j->logits + r * j->V;
        REAL mx = -INFINITY;
        for (size_t i = 0; i < j->V; i++)
            if (z[i] > mx) mx = z[i];
        int32_t tg = j->targets[r];
        REAL zt = z[tg];
        double sum = 0;
        for (size_t i = 0; i < j->V; i++) {
            REAL e = R_EXP(z[i] - mx);
            z[i] = e;
            sum += (double)e;
        }
        j->row_loss[r] = (double)mx + log(sum) - (double)zt;
        REAL scale = (REAL)(1.0 / sum) * j->inv_count;
        for (size_t i = 0; i < j->V; i++) z[i] *= scale;
        z[tg] -= j->inv_count;
    }
}

void SFX(gm_tr_head)(ctx_t *c, const REAL *E, REAL *gE, const REAL *final_norm, REAL *g_final_norm, const gm_tr_batch *b,
                     const REAL *x, REAL *dx, double *loss_sum) {
    const gm_config *cfg = c->cfg;
    size_t D = (size_t)cfg->d_model, V = (size_t)cfg->vocab_size;
    if (dx) memset(dx, 0, (size_t)b->T * D * sizeof(REAL));
    size_t M = 0;
    int *rows = c->hrows;
    int32_t *targets = c->htarg;
    double *row_loss = c->hloss;
    for (int t = 0; t < b->T; t++)
        if (b->targets[t] >= 0) rows[M] = t, targets[M++] = b->targets[t];
    *loss_sum = 0;
    if (M == 0) return;
    REAL *xg = c->xf, *xf = c->xf + (size_t)c->max_T * D;      /* gathered x, normed x: [M][D] */
    REAL *dxf = c->dxf, *dxg = c->dxf + (size_t)c->max_T * D;  /* their gradients */
    for (size_t i = 0; i < M; i++) memcpy(xg + i * D, x + (size_t)rows[i] * D, D * sizeof(REAL));
    rms_fwd(c, xf, c->rf, xg, final_norm, M, D);
    for (size_t m0 = 0; m0 < M; m0 += (size_t)c->head_chunk) {
        size_t mc = M - m0 < (size_t)c->head_chunk ? M - m0 : (size_t)c->head_chunk;
        mm(c, false, true, mc, V, D, 1, xf + m0 * D, D, E, D, 0, c->logits, V);
        ce_job cj = {c->logits, targets + m0, V, (REAL)b->inv_count, row_loss + m0};
        par_for(c, mc, ce_rows, &cj);
        if (!dx) continue; /* loss only */
        mm(c, false, false, mc, D, V, 1, c->logits, V, E, D, 0, dxf + m0 * D, D);
        if (gE) mm(c, true, false, V, D, mc, 1, c->logits, V, xf + m0 * D, D, 1, gE, D);
    }
    double sum = 0;
    for (size_t i = 0; i < M; i++) sum += row_loss[i];
    *loss_sum = sum;
    if (!dx) return;
    memset(dxg, 0, M * D * sizeof(REAL));
    rms_bwd(c, dxg, g_final_norm, dxf, xg, c->rf, final_norm, M, D);
    for (size_t i = 0; i < M; i++) memcpy(dx + (size_t)rows[i] * D, dxg + i * D, D * sizeof(REAL));
}

/* ---------------------------------------------------------------- whole model, one device */

void SFX(gm_tr_loss_grad)(ctx_t *c, const SFX(gm_tr_weights) *w, SFX(gm_tr_grads) *g, const gm_tr_batch *b, REAL *xs,
                          SFX(gm_tr_acts) *acts, REAL *dx, double *loss) {
    const gm_config *cfg = c->cfg;
    size_t stride = (size_t)c->max_T * (size_t)cfg->d_model;
    int longest = 1;
    for (int s = 0; s < b->n_seq; s++)
        if (b->seq_off[s + 1] - b->seq_off[s] > longest) longest = b->seq_off[s + 1] - b->seq_off[s];
    if (SFX(gm_tr_ctx_reserve_attn)(c, longest) != GM_OK) {
        *loss = NAN;
        return;
    }
    SFX(gm_tr_embed_fwd)(c, w->embed, b, xs);
    for (int l = 0; l < cfg->n_layers; l++)
        SFX(gm_tr_layer_fwd)(c, l, &w->layers[l], b, xs + (size_t)l * stride, &acts[l], xs + (size_t)(l + 1) * stride);
    double sum;
    SFX(gm_tr_head)(c, w->embed, g->embed, w->final_norm, g->final_norm, b, xs + (size_t)cfg->n_layers * stride, dx, &sum);
    for (int l = cfg->n_layers - 1; l >= 0; l--)
        SFX(gm_tr_layer_bwd)(c, l, &w->layers[l], &g->layers[l], b, xs + (size_t)l * stride, &acts[l], dx);
    if (g->embed) SFX(gm_tr_embed_bwd)(c, g->embed, b, dx);
    *loss = sum * b->inv_count;
}
