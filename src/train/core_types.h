/* Types and functions of the training math for one scalar type (included by train/core.h with REAL and
 * SFX defined; see there). No include guard on purpose. */

/* Whole weights of one layer; la/lb are the LoRA adapters (NULL without LoRA):
 * A [r][cols of the matrix], B [rows][r]; the layer computes W x + (alpha / r) B A x. */
typedef struct SFX(gm_tr_layer) {
    const REAL *w[GM_LT_COUNT];
    const REAL *la[GM_LM_COUNT], *lb[GM_LM_COUNT];
} SFX(gm_tr_layer);

/* Gradients of one layer, accumulated into (+=); NULL = frozen (not computed). */
typedef struct SFX(gm_tr_layer_grad) {
    REAL *g[GM_LT_COUNT];
    REAL *ga[GM_LM_COUNT], *gb[GM_LM_COUNT];
} SFX(gm_tr_layer_grad);

/* What one layer's forward keeps for its backward ([T] = tokens of the device's batch). */
typedef struct SFX(gm_tr_acts) {
    REAL *xn1;     /* [T][D] attn_norm(x_in) */
    REAL *r1;      /* [T] 1 / rms of x_in */
    REAL *q_pre;   /* [T][N*H] q projection before QK-norm */
    REAL *rq;      /* [T][N] */
    REAL *k_pre;   /* [T][K*H] */
    REAL *rk;      /* [T][K] */
    REAL *v;       /* [T][K*H] */
    REAL *qf;      /* [T][N*H] q after norm, RoPE and the query scale */
    REAL *kf;      /* [T][K*H] k after norm and RoPE */
    REAL *att;     /* [T][N*H] attention output (input of o) */
    REAL *lse;     /* [T][N] log-sum-exp of each query's scores (softmax recomputed in backward) */
    REAL *o_out;   /* [T][D] o projection, before post_attention_norm */
    REAL *r2;      /* [T] */
    REAL *x_mid;   /* [T][D] residual after the attention block */
    REAL *xn2;     /* [T][D] ffn_norm(x_mid) */
    REAL *r3;      /* [T] */
    REAL *gate;    /* [T][F] gate projection (pre-activation) */
    REAL *up;      /* [T][F] */
    REAL *h;       /* [T][F] gelu(gate) * up */
    REAL *tg;      /* [T][F] the tanh inside gelu(gate) */
    REAL *d_out;   /* [T][D] down projection, before post_ffw_norm */
    REAL *r4;      /* [T] */
    REAL *xa[GM_LM_COUNT]; /* [T][r] LoRA: input . A^T */
    REAL *block;   /* the one allocation behind all of the above */
    size_t bytes;
} SFX(gm_tr_acts);

/* Scratch, RoPE tables and the compute resources of one device. */
typedef struct SFX(gm_tr_ctx) {
    const gm_config *cfg;
    int max_T, lora_rank;
    REAL lora_scale;       /* alpha / r */
    void *gemm;            /* gm_gemm_ctx * (float), NULL (double: plain loops) */
    void *pool;            /* gm_pool * of the gemm ctx, or NULL (serial) */
    int threads;
    REAL *inv_freq_local, *inv_freq_global; /* [H/2] */
    /* backward / head scratch */
    REAL *dy, *dxn, *dF1, *dF2, *dq, *dk, *dv, *datt, *dqp, *dkp, *dxa, *xf, *rf, *dxf, *logits;
    int *pos;              /* [T] position of each token in its sequence */
    int *hrows;            /* [T] head: loss positions */
    int32_t *htarg;        /* [T] head: their targets */
    double *hloss;         /* [T] head: their losses */
    int head_chunk;        /* logits rows per chunk */
    REAL *probs;           /* [threads][2][attn_cap] attention score matrices */
    size_t attn_cap;       /* longest sequence ^ 2 reserved */
    size_t bytes;
} SFX(gm_tr_ctx);

/* gemm: a gm_gemm_ctx * for float (its pool also runs the elementwise work), NULL for double. */
gm_status SFX(gm_tr_ctx_init)(SFX(gm_tr_ctx) *c, const gm_config *cfg, int max_T, int lora_rank, double lora_alpha,
                              void *gemm);
void SFX(gm_tr_ctx_free)(SFX(gm_tr_ctx) *c);
/* Room for the attention scores of sequences up to `longest` tokens (call before a batch with longer ones). */
gm_status SFX(gm_tr_ctx_reserve_attn)(SFX(gm_tr_ctx) *c, int longest);
gm_status SFX(gm_tr_acts_alloc)(SFX(gm_tr_acts) *a, const gm_config *cfg, int max_T, int lora_rank);
void SFX(gm_tr_acts_free)(SFX(gm_tr_acts) *a);

/* x [T][D] = E[token] * sqrt(D). E: [V][D]. */
void SFX(gm_tr_embed_fwd)(SFX(gm_tr_ctx) *c, const REAL *E, const gm_tr_batch *b, REAL *x);
/* gE[token] += dx * sqrt(D). */
void SFX(gm_tr_embed_bwd)(SFX(gm_tr_ctx) *c, REAL *gE, const gm_tr_batch *b, const REAL *dx);
/* Layer l: x_out [T][D] from x_in [T][D]; fills a. */
void SFX(gm_tr_layer_fwd)(SFX(gm_tr_ctx) *c, int l, const SFX(gm_tr_layer) *w, const gm_tr_batch *b,
                          const REAL *x_in, SFX(gm_tr_acts) *a, REAL *x_out);
/* dx [T][D]: on entry d loss / d x_out, on return d loss / d x_in. Gradients accumulate into g. */
void SFX(gm_tr_layer_bwd)(SFX(gm_tr_ctx) *c, int l, const SFX(gm_tr_layer) *w, SFX(gm_tr_layer_grad) *g,
                          const gm_tr_batch *b, const REAL *x_in, const SFX(gm_tr_acts) *a, REAL *dx);
/* Final norm, tied output and masked cross-entropy, forward and backward at once: *loss_sum gets
 * sum over loss positions of -log p(target) (not normalised); dx [T][D] = d (loss_sum * inv_count) / d x
 * (zero at positions without loss); gE (may be NULL) and g_norm accumulate. dx NULL: the loss only. */
void SFX(gm_tr_head)(SFX(gm_tr_ctx) *c, const REAL *E, REAL *gE, const REAL *final_norm, REAL *g_final_norm,
                     const gm_tr_batch *b, const REAL *x, REAL *dx, double *loss_sum);

/* Whole weights of a model (one device, no sharding) and the same-shaped gradients (NULL = frozen). */
typedef struct SFX(gm_tr_weights) {
    const REAL *embed, *final_norm;
    SFX(gm_tr_layer) *layers;      /* [n_layers] */
} SFX(gm_tr_weights);
typedef struct SFX(gm_tr_grads) {
    REAL *embed, *final_norm;
    SFX(gm_tr_layer_grad) *layers; /* [n_layers] */
} SFX(gm_tr_grads);

/* loss = (sum of masked CE) * inv_count and its gradients (accumulated into g) on one device.
 * xs: [n_layers + 1][T][D] residual streams, acts: [n_layers], dx: [T][D] scratch. */
void SFX(gm_tr_loss_grad)(SFX(gm_tr_ctx) *c, const SFX(gm_tr_weights) *w, SFX(gm_tr_grads) *g, const gm_tr_batch *b,
                          REAL *xs, SFX(gm_tr_acts) *acts, REAL *dx, double *loss);
