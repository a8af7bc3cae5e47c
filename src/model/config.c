#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/gemma3_constants.h"

/* Required integer key: absent or wrongly typed is an error naming file and key. */
static gm_status need_int(const gm_gguf *g, const char *arch, const char *suffix, int *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    gm_status s = gm_gguf_get_int(g, key, &v);
    if (s == GM_ERR_RANGE) return gm_fail(GM_ERR_FORMAT, "%s: required key '%s' is missing", g->file.path, key);
    if (s != GM_OK) return s;
    if (v <= 0 || v > (1 << 30)) return gm_fail(GM_ERR_FORMAT, "%s: key '%s' = %lld is out of range", g->file.path, key, (long long)v);
    *out = (int)v;
    return GM_OK;
}

/* Optional key: keeps *out when absent. */
static gm_status opt_int(const gm_gguf *g, const char *arch, const char *suffix, int *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    gm_status s = gm_gguf_get_int(g, key, &v);
    if (s == GM_ERR_RANGE) return GM_OK;
    if (s != GM_OK) return s;
    if (v < 0 || v > (1 << 30)) return gm_fail(GM_ERR_FORMAT, "%s: key '%s' = %lld is out of range", g->file.path, key, (long long)v);
    *out = (int)v;
    return GM_OK;
}

static gm_status opt_float(const gm_gguf *g, const char *arch, const char *suffix, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    gm_status s = gm_gguf_get_float(g, key, &v);
    if (s == GM_ERR_RANGE) return GM_OK;
    if (s != GM_OK) return s;
    if (!isfinite(v)) return gm_fail(GM_ERR_FORMAT, "%s: key '%s' is not finite", g->file.path, key);
    *out = (float)v;
    return GM_OK;
}

static void set_default_pattern(gm_config *cfg) {
    for (int i = 0; i < cfg->n_layers && i < GM_MAX_LAYERS; i++)
        cfg->layer_is_global[i] = (i % GEMMA3_GLOBAL_EVERY) == GEMMA3_GLOBAL_EVERY - 1;
}

gm_status gm_config_from_gguf(const gm_gguf *g, gm_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    const char *arch = gm_gguf_get_str(g, "general.architecture");
    if (!arch) return gm_fail(GM_ERR_FORMAT, "%s: key 'general.architecture' is missing", g->file.path);
    if (strcmp(arch, "gemma3") != 0)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (this engine runs gemma3)",
                       g->file.path, arch);
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", arch);
    GM_TRY(need_int(g, arch, "block_count", &cfg->n_layers));
    GM_TRY(need_int(g, arch, "embedding_length", &cfg->d_model));
    GM_TRY(need_int(g, arch, "feed_forward_length", &cfg->d_ff));
    GM_TRY(need_int(g, arch, "attention.head_count", &cfg->n_heads));
    cfg->n_kv_heads = cfg->n_heads;
    GM_TRY(opt_int(g, arch, "attention.head_count_kv", &cfg->n_kv_heads));
    cfg->head_dim = cfg->n_heads ? cfg->d_model / cfg->n_heads : 0;
    GM_TRY(opt_int(g, arch, "attention.key_length", &cfg->head_dim));
    int value_length = cfg->head_dim;
    GM_TRY(opt_int(g, arch, "attention.value_length", &value_length));
    if (value_length != cfg->head_dim)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: key_length %d != value_length %d", g->file.path, cfg->head_dim, value_length);
    cfg->context_length = 131072;
    GM_TRY(opt_int(g, arch, "context_length", &cfg->context_length));
    cfg->rms_eps = GEMMA3_RMS_EPS;
    GM_TRY(opt_float(g, arch, "attention.layer_norm_rms_epsilon", &cfg->rms_eps));
    cfg->rope_base_global = GEMMA3_ROPE_BASE_GLOBAL;
    GM_TRY(opt_float(g, arch, "rope.freq_base", &cfg->rope_base_global));
    cfg->rope_base_local = GEMMA3_ROPE_BASE_LOCAL;
    GM_TRY(opt_float(g, arch, "rope.local.freq_base", &cfg->rope_base_local)); /* Ollama */
    GM_TRY(opt_float(g, arch, "rope.freq_base_swa", &cfg->rope_base_local));   /* generic llama.cpp key */
    cfg->rope_scale_global = 1.0f;
    cfg->rope_scale_local = 1.0f;
    GM_TRY(opt_float(g, arch, "rope.scaling.factor", &cfg->rope_scale_global));
    if (cfg->rope_scale_global <= 0) cfg->rope_scale_global = 1.0f;
    GM_TRY(opt_int(g, arch, "attention.sliding_window", &cfg->sliding_window));
    GM_TRY(opt_float(g, arch, "attn_logit_softcapping", &cfg->attn_softcap));
    GM_TRY(opt_float(g, arch, "final_logit_softcapping", &cfg->final_softcap));
    if (cfg->n_layers > GM_MAX_LAYERS)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: %d layers (at most %d supported)", g->file.path, cfg->n_layers, GM_MAX_LAYERS);

    /* layer pattern: Ollama's boolean array (true = sliding), llama.cpp's integer period, else every 6th global */
    set_default_pattern(cfg);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    const gguf_kv *pat = gm_gguf_find(g, key);
    if (pat && pat->type == GGUF_ARRAY && pat->arr_type == GGUF_BOOL) {
        if (pat->arr_count != (uint64_t)cfg->n_layers)
            return gm_fail(GM_ERR_FORMAT, "%s: '%s' has %llu entries for %d layers", g->file.path, key,
                           (unsigned long long)pat->arr_count, cfg->n_layers);
        const uint8_t *b = pat->arr_data;
        for (int i = 0; i < cfg->n_layers; i++) cfg->layer_is_global[i] = b[i] == 0;
    } else if (pat) {
        int64_t period;
        GM_TRY(gm_gguf_get_int(g, key, &period));
        if (period < 1 || period > GM_MAX_LAYERS)
            return gm_fail(GM_ERR_FORMAT, "%s: '%s' = %lld is out of range", g->file.path, key, (long long)period);
        for (int i = 0; i < cfg->n_layers; i++) cfg->layer_is_global[i] = period == 1 || i % period == period - 1;
    }
    if (cfg->sliding_window == 0) /* no window in the file: every layer attends globally */
        for (int i = 0; i < cfg->n_layers; i++) cfg->layer_is_global[i] = true;

    cfg->query_scale = cfg->n_layers == GEMMA3_27B_LAYERS && cfg->n_heads > 0
                           ? 1.0f / sqrtf((float)cfg->d_model / (float)cfg->n_heads)
                           : 1.0f / sqrtf((float)cfg->head_dim);
    /* Extension key (HF's query_pre_attn_scalar) for files whose layer count does not reveal a 27B shape. */
    float pre_attn_scalar = 0;
    GM_TRY(opt_float(g, arch, "attention.query_pre_attn_scalar", &pre_attn_scalar));
    if (pre_attn_scalar > 0) cfg->query_scale = 1.0f / sqrtf(pre_attn_scalar);
    cfg->embed_scale = sqrtf((float)cfg->d_model);
    cfg->norms_add_one = false; /* llama.cpp's converter already stored 1 + w */

    const gm_tensor_info *emb = gm_gguf_tensor(g, "token_embd.weight");
    if (!emb) return gm_fail(GM_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", g->file.path);
    if (emb->n_dims != 2 || emb->ne[0] != (uint64_t)cfg->d_model || emb->ne[1] > (1u << 24))
        return gm_fail(GM_ERR_FORMAT, "%s: token_embd.weight has shape [%llu, %llu], expected [%d, vocab]", g->file.path,
                       (unsigned long long)emb->ne[0], (unsigned long long)emb->ne[1], cfg->d_model);
    cfg->vocab_size = (int)emb->ne[1];
    const gguf_kv *toks = gm_gguf_find(g, "tokenizer.ggml.tokens");
    if (toks && toks->type == GGUF_ARRAY && toks->arr_count != (uint64_t)cfg->vocab_size)
        return gm_fail(GM_ERR_FORMAT, "%s: the vocabulary has %llu tokens but token_embd.weight has %d rows",
                       g->file.path, (unsigned long long)toks->arr_count, cfg->vocab_size);

    int64_t v;
    cfg->bos_id = gm_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v) == GM_OK ? (int)v : GEMMA3_BOS;
    cfg->eos_id = gm_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v) == GM_OK ? (int)v : GEMMA3_EOS;
    cfg->pad_id = gm_gguf_get_int(g, "tokenizer.ggml.padding_token_id", &v) == GM_OK ? (int)v : GEMMA3_PAD;
    cfg->unk_id = gm_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &v) == GM_OK ? (int)v : GEMMA3_UNK;
    cfg->start_of_turn_id = GEMMA3_START_OF_TURN;
    cfg->end_of_turn_id = GEMMA3_END_OF_TURN;
    return gm_config_validate(cfg, g->file.path);
}

gm_status gm_config_validate(const gm_config *cfg, const char *source) {
    if (cfg->n_layers < 1 || cfg->n_layers > GM_MAX_LAYERS)
        return gm_fail(GM_ERR_FORMAT, "%s: %d layers is out of range", source, cfg->n_layers);
    if (cfg->n_heads < 1 || cfg->n_kv_heads < 1 || cfg->n_heads % cfg->n_kv_heads)
        return gm_fail(GM_ERR_FORMAT, "%s: %d query heads is not a multiple of %d kv heads", source, cfg->n_heads,
                       cfg->n_kv_heads);
    if (cfg->head_dim < 2 || cfg->head_dim % 2 || cfg->head_dim > 1024)
        return gm_fail(GM_ERR_FORMAT, "%s: head_dim %d must be even and at most 1024", source, cfg->head_dim);
    if (cfg->d_model < 1 || cfg->d_ff < 1 || cfg->vocab_size < 1)
        return gm_fail(GM_ERR_FORMAT, "%s: zero width (d_model %d, d_ff %d, vocab %d)", source, cfg->d_model, cfg->d_ff,
                       cfg->vocab_size);
    int ids[] = {cfg->bos_id, cfg->eos_id, cfg->pad_id};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i] < 0 || ids[i] >= cfg->vocab_size)
            return gm_fail(GM_ERR_FORMAT, "%s: special token id %d is outside the vocabulary of %d", source, ids[i],
                           cfg->vocab_size);
    return GM_OK;
}

const char *gm_config_size_label(const gm_config *c) {
    if (c->d_model == 640 && c->n_layers == 18) return "270M";
    if (c->d_model == 1152 && c->n_layers == 26) return "1B";
    if (c->d_model == 2560 && c->n_layers == 34) return "4B";
    if (c->d_model == 3840 && c->n_layers == 48) return "12B";
    if (c->d_model == 5376 && c->n_layers == 62) return "27B";
    return "custom";
}
