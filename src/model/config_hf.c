/* gm_config from a Hugging Face config.json. Two layouts reach us:
 *   transformers 4.x (Google's hub files): rope_theta, rope_local_base_freq, rope_scaling {rope_type, factor},
 *   transformers 5.x: rope_parameters {"full_attention": {...}, "sliding_attention": {...}};
 * the multimodal checkpoints (4B, 12B, 27B) hold the text model under "text_config", written as a diff
 * against Gemma3TextConfig's defaults, so absent keys there take those defaults. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/config.h"
#include "model/gemma3_constants.h"

/* transformers' Gemma3TextConfig defaults (unchanged from 4.50 to 5.x). */
#define HF_VOCAB 262208
#define HF_HIDDEN 2304
#define HF_INTERMEDIATE 9216
#define HF_LAYERS 26
#define HF_HEADS 8
#define HF_KV_HEADS 4
#define HF_HEAD_DIM 256
#define HF_MAX_POS 131072
#define HF_QUERY_PRE_ATTN_SCALAR 256.0
#define HF_SLIDING_WINDOW 4096
#define HF_SLIDING_PATTERN 6

typedef struct reader {
    const cJSON *text;  /* the text model's keys */
    const cJSON *top;   /* the whole file (ids and tying may sit here in multimodal configs) */
    const char *path;
    bool nested;        /* keys under text_config default when absent */
} reader;

static const cJSON *get(const reader *r, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->text, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* Integer key in [lo, hi]; absent: `def`, or an error when `required` (top-level text configs only). */
static gm_status get_int(const reader *r, const char *key, bool required, long def, long lo, long hi, int *out) {
    const cJSON *v = get(r, key);
    if (!v) {
        if (required && !r->nested)
            return gm_fail(GM_ERR_FORMAT, "%s: required key '%s' is missing", r->path, key);
        *out = (int)def;
        return GM_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return gm_fail(GM_ERR_FORMAT, "%s: key '%s' is not an integer", r->path, key);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return gm_fail(GM_ERR_FORMAT, "%s: key '%s' = %.17g is out of range [%ld, %ld]", r->path, key, v->valuedouble,
                       lo, hi);
    *out = (int)v->valuedouble;
    return GM_OK;
}

/* Finite number; absent or null: `def`. */
static gm_status num_of(const cJSON *v, const char *path, const char *key, double def, double *out) {
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return GM_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return gm_fail(GM_ERR_FORMAT, "%s: key '%s' is not a finite number", path, key);
    *out = v->valuedouble;
    return GM_OK;
}

static gm_status get_float(const reader *r, const char *key, double def, float *out) {
    double d = def;
    GM_TRY(num_of(get(r, key), r->path, key, def, &d));
    *out = (float)d;
    return GM_OK;
}

/* A token id (an int, or a list whose first entry counts, like eos_token_id [1, 106]) from the text
 * config, else the top level, else `def`. */
static gm_status get_id(const reader *r, const char *key, int def, int *out) {
    const cJSON *v = get(r, key);
    if (!v) v = cJSON_GetObjectItemCaseSensitive(r->top, key);
    if (v && cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return GM_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e9)
        return gm_fail(GM_ERR_FORMAT, "%s: key '%s' is not a token id", r->path, key);
    *out = (int)v->valuedouble;
    return GM_OK;
}

/* One RoPE parameter object ({rope_type | type, factor, rope_theta}) applied over *base and *scale. */
static gm_status rope_params(const cJSON *o, const char *path, const char *what, float *base, float *scale) {
    if (!o || cJSON_IsNull(o)) return GM_OK;
    if (!cJSON_IsObject(o)) return gm_fail(GM_ERR_FORMAT, "%s: '%s' is not an object", path, what);
    double theta;
    GM_TRY(num_of(cJSON_GetObjectItemCaseSensitive(o, "rope_theta"), path, what, *base, &theta));
    if (theta <= 0) return gm_fail(GM_ERR_FORMAT, "%s: %s: rope_theta %g must be positive", path, what, theta);
    *base = (float)theta;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(o, "type"); /* older spelling */
    if (!type || cJSON_IsNull(type)) return GM_OK;
    if (!cJSON_IsString(type)) return gm_fail(GM_ERR_FORMAT, "%s: %s: rope_type is not a string", path, what);
    if (strcmp(type->valuestring, "default") == 0) {
        *scale = 1.0f;
    } else if (strcmp(type->valuestring, "linear") == 0) {
        double f;
        GM_TRY(num_of(cJSON_GetObjectItemCaseSensitive(o, "factor"), path, what, 0, &f));
        if (f <= 0) return gm_fail(GM_ERR_FORMAT, "%s: %s: linear RoPE scaling needs a positive 'factor'", path, what);
        *scale = (float)f;
    } else {
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: %s: RoPE type '%.40s' is not supported (only default and linear)",
                       path, what, type->valuestring);
    }
    return GM_OK;
}

static gm_status read_rope(const reader *r, gm_config *cfg) {
    cfg->rope_base_global = GEMMA3_ROPE_BASE_GLOBAL;
    cfg->rope_base_local = GEMMA3_ROPE_BASE_LOCAL;
    cfg->rope_scale_global = cfg->rope_scale_local = 1.0f;
    /* transformers 4.x keys */
    GM_TRY(get_float(r, "rope_theta", GEMMA3_ROPE_BASE_GLOBAL, &cfg->rope_base_global));
    GM_TRY(get_float(r, "rope_local_base_freq", GEMMA3_ROPE_BASE_LOCAL, &cfg->rope_base_local));
    GM_TRY(rope_params(get(r, "rope_scaling"), r->path, "rope_scaling", &cfg->rope_base_global, &cfg->rope_scale_global));
    /* transformers 5.x: per layer type, or one flat object for the global layers */
    const cJSON *rp = get(r, "rope_parameters");
    if (rp && !cJSON_IsObject(rp)) return gm_fail(GM_ERR_FORMAT, "%s: 'rope_parameters' is not an object", r->path);
    const cJSON *full = rp ? cJSON_GetObjectItemCaseSensitive(rp, "full_attention") : NULL;
    const cJSON *slide = rp ? cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention") : NULL;
    if (full || slide) {
        GM_TRY(rope_params(full, r->path, "rope_parameters.full_attention", &cfg->rope_base_global,
                           &cfg->rope_scale_global));
        GM_TRY(rope_params(slide, r->path, "rope_parameters.sliding_attention", &cfg->rope_base_local,
                           &cfg->rope_scale_local));
    } else if (rp) {
        GM_TRY(rope_params(rp, r->path, "rope_parameters", &cfg->rope_base_global, &cfg->rope_scale_global));
    }
    if (cfg->rope_base_global <= 0 || cfg->rope_base_local <= 0)
        return gm_fail(GM_ERR_FORMAT, "%s: RoPE bases must be positive", r->path);
    return GM_OK;
}

/* layer_types ["sliding_attention" | "full_attention", ...], else sliding_window_pattern P (layer i is
 * global iff (i + 1) % P == 0), else P = 6. transformers ignores "_sliding_window_pattern", and so do we. */
static gm_status read_layer_types(const reader *r, gm_config *cfg) {
    const cJSON *lt = get(r, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != cfg->n_layers)
            return gm_fail(GM_ERR_FORMAT, "%s: 'layer_types' is not an array of %d entries", r->path, cfg->n_layers);
        int i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            if (!cJSON_IsString(e)) return gm_fail(GM_ERR_FORMAT, "%s: layer_types[%d] is not a string", r->path, i);
            if (strcmp(e->valuestring, "full_attention") == 0)
                cfg->layer_is_global[i] = true;
            else if (strcmp(e->valuestring, "sliding_attention") == 0)
                cfg->layer_is_global[i] = false;
            else
                return gm_fail(GM_ERR_UNSUPPORTED, "%s: layer_types[%d] = '%.40s' is not supported", r->path, i,
                               e->valuestring);
        }
    } else {
        int period;
        GM_TRY(get_int(r, "sliding_window_pattern", false, HF_SLIDING_PATTERN, 1, 1 << 20, &period));
        for (int i = 0; i < cfg->n_layers; i++) cfg->layer_is_global[i] = (i + 1) % period == 0;
    }
    if (cfg->sliding_window == 0) /* sliding_window null: every layer attends globally */
        for (int i = 0; i < cfg->n_layers; i++) cfg->layer_is_global[i] = true;
    return GM_OK;
}

/* Features of other Gemma-family configs this engine does not implement. */
static gm_status check_unsupported(const reader *r) {
    const cJSON *act = get(r, "hidden_activation"); /* Gemma3 ignores "hidden_act", as transformers does */
    if (act && (!cJSON_IsString(act) ||
                (strcmp(act->valuestring, "gelu_pytorch_tanh") != 0 && strcmp(act->valuestring, "gelu_new") != 0)))
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: hidden_activation '%.40s' is not supported (Gemma 3 uses gelu_pytorch_tanh)",
                       r->path, cJSON_IsString(act) ? act->valuestring : "?");
    const char *flags[] = {"attention_bias", "use_bidirectional_attention"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (cJSON_IsTrue(get(r, flags[i])))
            return gm_fail(GM_ERR_UNSUPPORTED, "%s: '%s' = true is not supported", r->path, flags[i]);
    return GM_OK;
}

gm_status gm_config_from_hf_json(const char *json, size_t len, const char *path, gm_config *cfg, gm_hf_info *info) {
    memset(cfg, 0, sizeof *cfg);
    memset(info, 0, sizeof *info);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        cJSON_Delete(root);
        return gm_fail(GM_ERR_FORMAT, "%s: not a JSON object (parse error near byte %zu)", path, at);
    }
    reader r = {.text = root, .top = root, .path = path};
    gm_status s = GM_OK;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) {
        s = gm_fail(GM_ERR_FORMAT, "%s: key 'model_type' is missing (not a transformers config.json?)", path);
    } else if (strcmp(mt->valuestring, "gemma3") == 0) {
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
        const cJSON *tmt = tc ? cJSON_GetObjectItemCaseSensitive(tc, "model_type") : NULL;
        if (!cJSON_IsObject(tc))
            s = gm_fail(GM_ERR_FORMAT, "%s: model_type 'gemma3' without a 'text_config' object", path);
        else if (tmt && (!cJSON_IsString(tmt) || strcmp(tmt->valuestring, "gemma3_text") != 0))
            s = gm_fail(GM_ERR_UNSUPPORTED, "%s: text_config.model_type is not 'gemma3_text'", path);
        r.text = tc;
        r.nested = true;
        info->multimodal = true;
    } else if (strcmp(mt->valuestring, "gemma3_text") != 0) {
        s = gm_fail(GM_ERR_UNSUPPORTED,
                    "%s: model_type '%.60s' is not supported (this engine runs Gemma 3: 'gemma3_text' or 'gemma3')",
                    path, mt->valuestring);
    }
    if (s != GM_OK) goto done;
    snprintf(cfg->architecture, sizeof cfg->architecture, "gemma3");

    const int MAXW = 1 << 20;
    if ((s = check_unsupported(&r)) != GM_OK) goto done;
    if ((s = get_int(&r, "hidden_size", true, HF_HIDDEN, 1, MAXW, &cfg->d_model)) != GM_OK) goto done;
    if ((s = get_int(&r, "intermediate_size", true, HF_INTERMEDIATE, 1, MAXW, &cfg->d_ff)) != GM_OK) goto done;
    if ((s = get_int(&r, "num_hidden_layers", true, HF_LAYERS, 1, MAXW, &cfg->n_layers)) != GM_OK) goto done;
    if ((s = get_int(&r, "num_attention_heads", true, HF_HEADS, 1, 4096, &cfg->n_heads)) != GM_OK) goto done;
    if ((s = get_int(&r, "num_key_value_heads", false, HF_KV_HEADS, 1, 4096, &cfg->n_kv_heads)) != GM_OK) goto done;
    if ((s = get_int(&r, "head_dim", false, HF_HEAD_DIM, 1, 65536, &cfg->head_dim)) != GM_OK) goto done;
    if ((s = get_int(&r, "vocab_size", false, HF_VOCAB, 1, 1 << 24, &cfg->vocab_size)) != GM_OK) goto done;
    if ((s = get_int(&r, "max_position_embeddings", false, HF_MAX_POS, 1, 1 << 30, &cfg->context_length)) != GM_OK)
        goto done;
    if ((s = get_int(&r, "sliding_window", false, HF_SLIDING_WINDOW, 1, 1 << 30, &cfg->sliding_window)) != GM_OK)
        goto done;
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r.text, "sliding_window"))) cfg->sliding_window = 0;
    if (cfg->n_layers > GM_MAX_LAYERS) {
        s = gm_fail(GM_ERR_UNSUPPORTED, "%s: %d layers (at most %d supported)", path, cfg->n_layers, GM_MAX_LAYERS);
        goto done;
    }
    if ((s = read_layer_types(&r, cfg)) != GM_OK) goto done;
    if ((s = read_rope(&r, cfg)) != GM_OK) goto done;
    if ((s = get_float(&r, "rms_norm_eps", GEMMA3_RMS_EPS, &cfg->rms_eps)) != GM_OK) goto done;
    if ((s = get_float(&r, "attn_logit_softcapping", 0, &cfg->attn_softcap)) != GM_OK) goto done;
    if ((s = get_float(&r, "final_logit_softcapping", 0, &cfg->final_softcap)) != GM_OK) goto done;
    float qpas;
    if ((s = get_float(&r, "query_pre_attn_scalar", HF_QUERY_PRE_ATTN_SCALAR, &qpas)) != GM_OK) goto done;
    if (!(qpas > 0) || !(cfg->rms_eps >= 0) || cfg->attn_softcap < 0 || cfg->final_softcap < 0) {
        s = gm_fail(GM_ERR_FORMAT, "%s: query_pre_attn_scalar must be positive, rms_norm_eps and softcaps not negative",
                    path);
        goto done;
    }
    cfg->query_scale = (float)(1.0 / sqrt((double)qpas));
    cfg->embed_scale = (float)sqrt((double)cfg->d_model);
    cfg->norms_add_one = true; /* HF stores w; Gemma3RMSNorm computes x * (1 + w) */

    if ((s = get_id(&r, "bos_token_id", GEMMA3_BOS, &cfg->bos_id)) != GM_OK) goto done;
    if ((s = get_id(&r, "eos_token_id", GEMMA3_EOS, &cfg->eos_id)) != GM_OK) goto done;
    if ((s = get_id(&r, "pad_token_id", GEMMA3_PAD, &cfg->pad_id)) != GM_OK) goto done;
    cfg->unk_id = GEMMA3_UNK;
    cfg->start_of_turn_id = GEMMA3_START_OF_TURN;
    cfg->end_of_turn_id = GEMMA3_END_OF_TURN;

    /* tie_word_embeddings: the outer config decides for multimodal checkpoints */
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (!tie && r.nested) tie = cJSON_GetObjectItemCaseSensitive(r.text, "tie_word_embeddings");
    info->tie_word_embeddings = !tie || cJSON_IsNull(tie) || cJSON_IsTrue(tie);
    if (tie && !cJSON_IsBool(tie) && !cJSON_IsNull(tie)) {
        s = gm_fail(GM_ERR_FORMAT, "%s: 'tie_word_embeddings' is not a boolean", path);
        goto done;
    }
    s = gm_config_validate(cfg, path);
done:
    cJSON_Delete(root);
    return s;
}
