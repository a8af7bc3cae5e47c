/* The training math of Gemma 3, one device's share: forward with saved activations and a hand-written
 * backward for every op (embedding, RMSNorm with stored 1 + w, QK-norm, split-half RoPE, GQA attention
 * with sliding window and causal mask, GeGLU with tanh GELU, tied output, masked cross-entropy), with
 * optional LoRA adapters on q, k, v, o, gate, up, down.
 *
 * Written once (core_impl.h) and compiled for float (the trainer, src/train/trainer.c) and double (the
 * finite-difference reference of the tests). Everything here works on whole (gathered) tensors of one
 * layer at a time and knows nothing of sharding; the trainer gathers and scatters around it.
 *
 * Tensors are row-major [rows][cols] with rows = outputs (ggml ne[1]) and cols = inputs (ne[0]), i.e.
 * as PyTorch's nn.Linear stores them. A batch is several sequences packed one after another; attention
 * stays inside each sequence and positions restart at 0 for each. */
#ifndef GM_TRAIN_CORE_H
#define GM_TRAIN_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemma.h"

/* Per-layer tensors, in this order everywhere (checkpoints, gradients, tests). */
enum {
    GM_LT_ATTN_NORM, GM_LT_Q, GM_LT_K, GM_LT_V, GM_LT_Q_NORM, GM_LT_K_NORM, GM_LT_O, GM_LT_POST_ATTN_NORM,
    GM_LT_FFN_NORM, GM_LT_GATE, GM_LT_UP, GM_LT_DOWN, GM_LT_POST_FFW_NORM, GM_LT_COUNT
};
/* The matrices that may carry LoRA adapters. */
enum { GM_LM_Q, GM_LM_K, GM_LM_V, GM_LM_O, GM_LM_GATE, GM_LM_UP, GM_LM_DOWN, GM_LM_COUNT };

extern const int gm_lm_tensor[GM_LM_COUNT];     /* LoRA matrix -> layer tensor */
const char *gm_lt_suffix(int lt);               /* GGUF name part: "attn_q", "ffn_down", ... */
const char *gm_lt_hf_name(int lt);              /* HF: "self_attn.q_proj", "mlp.down_proj", ... */
bool gm_lt_is_norm(int lt);
/* Shape [rows][cols]; vectors are 1 x n. */
void gm_lt_shape(const gm_config *c, int lt, uint64_t *rows, uint64_t *cols);

/* A packed batch: sequences s = 0..n_seq-1 hold tokens [seq_off[s], seq_off[s+1]). */
typedef struct gm_tr_batch {
    int n_seq;
    const int *seq_off;       /* [n_seq + 1] */
    const int32_t *tokens;    /* [T] inputs */
    const int32_t *targets;   /* [T] the next token, or -1 where the position has no loss */
    int T;
    double inv_count;         /* 1 / loss positions of the whole global batch (every device's share) */
} gm_tr_batch;

#define REAL float
#define SFX(name) name##_f32
#include "train/core_types.h"
#undef REAL
#undef SFX
#define REAL double
#define SFX(name) name##_f64
#include "train/core_types.h"
#undef REAL
#undef SFX

#endif
