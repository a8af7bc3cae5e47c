/* Names and shapes of the per-layer tensors the trainer handles. */
#include "train/core.h"

const int gm_lm_tensor[GM_LM_COUNT] = {GM_LT_Q, GM_LT_K, GM_LT_V, GM_LT_O, GM_LT_GATE, GM_LT_UP, GM_LT_DOWN};

static const struct {
    const char *gguf, *hf;
    bool norm;
} lt_info[GM_LT_COUNT] = {
    [GM_LT_ATTN_NORM] = {"attn_norm", "input_layernorm", true},
    [GM_LT_Q] = {"attn_q", "self_attn.q_proj", false},
    [GM_LT_K] = {"attn_k", "self_attn.k_proj", false},
    [GM_LT_V] = {"attn_v", "self_attn.v_proj", false},
    [GM_LT_Q_NORM] = {"attn_q_norm", "self_attn.q_norm", true},
    [GM_LT_K_NORM] = {"attn_k_norm", "self_attn.k_norm", true},
    [GM_LT_O] = {"attn_output", "self_attn.o_proj", false},
    [GM_LT_POST_ATTN_NORM] = {"post_attention_norm", "post_attention_layernorm", true},
    [GM_LT_FFN_NORM] = {"ffn_norm", "pre_feedforward_layernorm", true},
    [GM_LT_GATE] = {"ffn_gate", "mlp.gate_proj", false},
    [GM_LT_UP] = {"ffn_up", "mlp.up_proj", false},
    [GM_LT_DOWN] = {"ffn_down", "mlp.down_proj", false},
    [GM_LT_POST_FFW_NORM] = {"post_ffw_norm", "post_feedforward_layernorm", true},
};

const char *gm_lt_suffix(int lt) { return lt >= 0 && lt < GM_LT_COUNT ? lt_info[lt].gguf : "?"; }
const char *gm_lt_hf_name(int lt) { return lt >= 0 && lt < GM_LT_COUNT ? lt_info[lt].hf : "?"; }
bool gm_lt_is_norm(int lt) { return lt >= 0 && lt < GM_LT_COUNT && lt_info[lt].norm; }

void gm_lt_shape(const gm_config *c, int lt, uint64_t *rows, uint64_t *cols) {
    uint64_t D = (uint64_t)c->d_model, F = (uint64_t)c->d_ff, H = (uint64_t)c->head_dim;
    uint64_t NH = (uint64_t)c->n_heads * H, KH = (uint64_t)c->n_kv_heads * H;
    *rows = 1;
    switch (lt) {
    case GM_LT_Q_NORM: case GM_LT_K_NORM: *cols = H; return;
    case GM_LT_Q: *rows = NH, *cols = D; return;
    case GM_LT_K: case GM_LT_V: *rows = KH, *cols = D; return;
    case GM_LT_O: *rows = D, *cols = NH; return;
    case GM_LT_GATE: case GM_LT_UP: *rows = F, *cols = D; return;
    case GM_LT_DOWN: *rows = D, *cols = F; return;
    default: *cols = D; return;
    }
}
