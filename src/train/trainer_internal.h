/* gm_trainer internals shared by trainer.c (setup, steps), shard.c (FSDP layouts and collectives),
 * optim.c (optimizers) and checkpoint.c (save / resume), and visible to tests. */
#ifndef GM_TRAIN_TRAINER_INTERNAL_H
#define GM_TRAIN_TRAINER_INTERNAL_H

#include "gemma.h"
#include "io/source.h"
#include "kernels/gemm.h"
#include "model/device.h" /* GM_MAX_DEVICES */
#include "shard/comm.h"
#include "shard/plan.h"
#include "train/core.h"

/* How one tensor is split over the P devices of the mesh.
 * FLAT: device g holds elements [off[g], off[g+1]) of the row-major tensor (a row split of the FSDP
 *       rule is a FLAT split on row boundaries; tensors the rule replicates are split flat evenly).
 * COLS: device g holds columns [off[g], off[g+1]) of every row (the rule's split of the input axis). */
typedef enum gm_layout_kind { GM_LAYOUT_FLAT, GM_LAYOUT_COLS } gm_layout_kind;

typedef struct gm_tparam {
    char name[96];          /* GGUF-style: "blk.3.attn_q.weight", "blk.3.attn_q.lora_a", "token_embd.weight" */
    int unit;               /* layer index; n_layers = embedding, n_layers + 1 = final norm */
    int lt;                 /* GM_LT_* of a layer tensor (or of the matrix a LoRA adapter belongs to); -1 else */
    int lm, ab;             /* LoRA: matrix (GM_LM_*) and 0 = A, 1 = B; lm = -1 for base tensors */
    uint64_t rows, cols, n; /* full shape [rows][cols], n = rows * cols */
    bool norm;              /* stores 1 + w */
    bool trainable;
    gm_layout_kind kind;
    size_t *off;            /* [P + 1] elements (FLAT) or columns (COLS) */
    size_t *poff;           /* [P + 1] COLS: offsets in the device-major packed buffer (rows * off) */
    size_t full_off;        /* in its unit's full weight buffer */
    size_t gfull_off;       /* in its unit's full gradient buffer (trainable only) */
    gm_tensor_plan plan;    /* the FSDP rule's verdict (for reports) */
} gm_tparam;

/* One device: its shards, full-size buffers for gathered units, activations and compute. */
typedef struct gm_tdev {
    int local, global;
    gm_gemm_ctx *gemm;
    gm_tr_ctx_f32 ctx;
    gm_tr_acts_f32 *acts;       /* [n_layers] */
    float *xs, *dx;             /* [(L + 1) * cap][D], [cap][D] */
    int cap_T;                  /* token capacity of the buffers above */
    /* shards, per parameter (pointers into the per-unit blocks) */
    float **w, **g, **m, **v;   /* [n_params]; g, m, v NULL when frozen (v unused by Adafactor) */
    float **fr, **fc;           /* Adafactor factored second moments per parameter (row / col) */
    float **wblock, **gblock, **mblock, **vblock; /* [n_units] */
    /* full buffers: unit_w[u] / unit_g[u] point at gathered storage (P > 1) or at the shards (P == 1) */
    float **unit_w, **unit_g;
    float *layer_w, *layer_g, *embed_w, *embed_g, *final_w, *final_g, *pack;
    gm_train_memory mem;
    bool af_ready;              /* Adafactor state allocated (at the first step) */
} gm_tdev;

struct gm_trainer {
    gm_config cfg;
    gm_train_options opt;
    gm_source *src;
    gm_tokenizer *tok;
    gm_comm *comm;
    gm_wait wait;               /* resolved: SPIN or YIELD */
    int n_local, rank, n_ranks, P;
    gm_tparam *params;
    int n_params;
    int n_units;                /* n_layers + 2 */
    int *unit_first, *unit_count; /* params of each unit are contiguous */
    size_t *unit_n, *unit_gn;   /* full sizes of each unit's weights / trainable gradients */
    size_t max_layer_n, max_layer_gn, max_cols_pack;
    gm_tdev *dev;
    gm_pool *devices;
    int force_split;            /* tests: split every matrix (rows, or columns for o / down) whatever its size */
    int af_min_dim;             /* Adafactor: factor only blocks whose smaller side is at least this (optax: 128) */
    int64_t step;               /* optimizer steps done */
    int64_t examples_seen;      /* examples of the steps done (saved in checkpoints) */
};

#define GM_UNIT_EMBED(t) ((t)->cfg.n_layers)
#define GM_UNIT_FINAL(t) ((t)->cfg.n_layers + 1)

/* shard.c */
gm_status gm_train_plan(gm_trainer *t);                 /* params, layouts, unit sizes */
size_t gm_tparam_shard_n(const gm_tparam *p, int g);    /* elements device g holds */
/* Gather unit u's weights into d->unit_w[u] (no-op with one device). */
gm_status gm_train_gather_unit(gm_trainer *t, gm_tdev *d, int u);
/* Reduce-scatter unit u's gradients (d->unit_g[u]) and add this device's part into its shards. */
gm_status gm_train_scatter_grads(gm_trainer *t, gm_tdev *d, int u);
/* Full tensor p on every device (collective): out [n]; which = 0 weights, 1 grads, 2 m, 3 v. */
gm_status gm_train_gather_tensor(gm_trainer *t, gm_tdev *d, int p, int which, float *out);
/* Set every device's shard of tensor p (and which state) from a full tensor src [n] (no communication). */
void gm_train_set_shard(gm_trainer *t, gm_tdev *d, int p, int which, const float *src);
int gm_train_find_param(const gm_trainer *t, const char *name);
/* The whole tensor p (which as above) into out [n] on the caller's thread (all local devices take part;
 * under MPI every rank must call it too). */
gm_status gm_train_full_tensor(gm_trainer *t, int p, int which, float *out);
/* Every local device takes its shard of tensor p from the full tensor src [n]. */
gm_status gm_train_set_full(gm_trainer *t, int p, int which, const float *src);

/* optim.c */
gm_status gm_train_optim_alloc(gm_trainer *t, gm_tdev *d);
/* Adafactor: allocate the state if not yet done (it waits for the first step so tests can set af_min_dim);
 * whether tensor i is factored and the lengths of its row / column statistics (replicated on every device). */
gm_status gm_train_af_ready(gm_trainer *t, gm_tdev *d);
bool gm_train_af_factored(const gm_trainer *t, int i, size_t *nrow, size_t *ncol);
/* Update this device's shards; clip = factor applied to the gradients (1 = none). */
gm_status gm_train_optim_step(gm_trainer *t, gm_tdev *d, float clip);

/* Run fn on every local device (one thread each) and collect the first error. */
typedef gm_status (*gm_tdev_fn)(gm_trainer *t, gm_tdev *d, void *arg);
gm_status gm_train_run(gm_trainer *t, gm_tdev_fn fn, void *arg);

/* gm_trainer_create with force_split (see struct gm_trainer). */
gm_status gm_trainer_create_ex(const char *path, const gm_train_options *o, int force_split, gm_trainer **out);

/* The gradients of one batch without an update (tests): forward and backward only, grads left in the
 * shards (zeroed first); *loss as gm_trainer_step reports it. */
gm_status gm_trainer_grads(gm_trainer *t, const gm_train_example *batch, int n, double *loss);

#endif
