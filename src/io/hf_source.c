/* A Hugging Face Gemma 3 folder as a gm_source: config.json, then model.safetensors or the shards named
 * by model.safetensors.index.json. Tensors are renamed to the GGUF names ("blk.3.attn_q.weight"), shapes
 * given in ggml order (HF [out, in] row-major == ne [in, out]), and checked against the config, so the
 * rest of the engine sees one layout whatever the file format. Vision tensors are skipped. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"
#include "io/source_internal.h"
#include "model/config.h"

#define MAX_JSON_BYTES (64u << 20)

/* ---- names ---- */

enum dim { D_NONE, D_MODEL, D_FF, D_Q, D_KV, D_HEAD, D_VOCAB };

typedef struct slot {
    const char *hf;    /* suffix after "layers.N." (per-layer) or after the model prefix */
    const char *gguf;  /* suffix after "blk.N." or the whole name */
    enum dim ne0, ne1; /* expected ggml shape; ne1 D_NONE for vectors */
} slot;

static const slot LAYER_SLOTS[] = {
    {"input_layernorm.weight", "attn_norm.weight", D_MODEL, D_NONE},
    {"self_attn.q_proj.weight", "attn_q.weight", D_MODEL, D_Q},
    {"self_attn.k_proj.weight", "attn_k.weight", D_MODEL, D_KV},
    {"self_attn.v_proj.weight", "attn_v.weight", D_MODEL, D_KV},
    {"self_attn.o_proj.weight", "attn_output.weight", D_Q, D_MODEL},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", D_HEAD, D_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", D_HEAD, D_NONE},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", D_MODEL, D_NONE},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", D_MODEL, D_NONE},
    {"mlp.gate_proj.weight", "ffn_gate.weight", D_MODEL, D_FF},
    {"mlp.up_proj.weight", "ffn_up.weight", D_MODEL, D_FF},
    {"mlp.down_proj.weight", "ffn_down.weight", D_FF, D_MODEL},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", D_MODEL, D_NONE},
};
#define N_LAYER_SLOTS ((int)(sizeof LAYER_SLOTS / sizeof LAYER_SLOTS[0]))

static const slot GLOBAL_SLOTS[] = {
    {"embed_tokens.weight", "token_embd.weight", D_MODEL, D_VOCAB},
    {"norm.weight", "output_norm.weight", D_MODEL, D_NONE},
    {"lm_head.weight", "output.weight", D_MODEL, D_VOCAB}, /* only when the head is not tied */
};
enum { G_EMBED, G_NORM, G_HEAD, N_GLOBAL_SLOTS };

/* Text-model prefixes: Gemma3ForCausalLM, Google's multimodal files (transformers 4.x), transformers 5.x. */
static const char *const TEXT_PREFIXES[] = {"language_model.model.", "model.language_model.", "model."};
static const char *const HEAD_NAMES[] = {"lm_head.weight", "language_model.lm_head.weight"};
static const char *const SKIP_PREFIXES[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                            "model.multi_modal_projector."};

enum { MAP_OK, MAP_SKIP, MAP_UNKNOWN };

static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* HF name -> slot index (layer * N_LAYER_SLOTS + slot, globals after all layers). */
static int map_name(const char *hf, bool tied, int n_layers, int *index, int *layer) {
    for (size_t i = 0; i < sizeof SKIP_PREFIXES / sizeof SKIP_PREFIXES[0]; i++)
        if (starts(hf, SKIP_PREFIXES[i])) return MAP_SKIP;
    for (size_t i = 0; i < sizeof HEAD_NAMES / sizeof HEAD_NAMES[0]; i++)
        if (strcmp(hf, HEAD_NAMES[i]) == 0) {
            if (tied) return MAP_SKIP;
            *layer = -1;
            *index = n_layers * N_LAYER_SLOTS + G_HEAD;
            return MAP_OK;
        }
    const char *rest = NULL;
    for (size_t i = 0; i < sizeof TEXT_PREFIXES / sizeof TEXT_PREFIXES[0] && !rest; i++)
        if (starts(hf, TEXT_PREFIXES[i])) rest = hf + strlen(TEXT_PREFIXES[i]);
    if (!rest) return MAP_UNKNOWN;
    for (int g = 0; g < G_HEAD; g++)
        if (strcmp(rest, GLOBAL_SLOTS[g].hf) == 0) {
            *layer = -1;
            *index = n_layers * N_LAYER_SLOTS + g;
            return MAP_OK;
        }
    if (!starts(rest, "layers.")) return MAP_UNKNOWN;
    const char *p = rest + strlen("layers.");
    long n = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) n = n * 10 + (*p - '0');
    if (digits == 0 || *p != '.' || (digits > 1 && p[-digits] == '0')) return MAP_UNKNOWN;
    for (int k = 0; k < N_LAYER_SLOTS; k++)
        if (strcmp(p + 1, LAYER_SLOTS[k].hf) == 0) {
            *layer = (int)n;
            if (n >= n_layers) return MAP_UNKNOWN; /* reported by the caller with the layer count */
            *index = (int)n * N_LAYER_SLOTS + k;
            return MAP_OK;
        }
    return MAP_UNKNOWN;
}

static uint64_t dim_value(const gm_config *c, enum dim d) {
    switch (d) {
    case D_MODEL: return (uint64_t)c->d_model;
    case D_FF: return (uint64_t)c->d_ff;
    case D_Q: return (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    case D_KV: return (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim;
    case D_HEAD: return (uint64_t)c->head_dim;
    case D_VOCAB: return (uint64_t)c->vocab_size;
    case D_NONE: break;
    }
    return 1;
}

static const slot *slot_of(const gm_config *c, int index, int *layer) {
    if (index < c->n_layers * N_LAYER_SLOTS) {
        *layer = index / N_LAYER_SLOTS;
        return &LAYER_SLOTS[index % N_LAYER_SLOTS];
    }
    *layer = -1;
    return &GLOBAL_SLOTS[index - c->n_layers * N_LAYER_SLOTS];
}

static void gguf_name(const slot *sl, int layer, char *out, size_t n) {
    if (layer >= 0)
        snprintf(out, n, "blk.%d.%s", layer, sl->gguf);
    else
        snprintf(out, n, "%s", sl->gguf);
}

/* ---- building the source ---- */

typedef struct builder {
    gm_source *s;
    gm_hf_info info;
    int n_slots;
    int *slot_tensor;        /* n_slots: index into s->tensors, or -1 */
    const char **slot_hf;    /* n_slots: the HF name (for messages), points into a shard's header */
    gm_safetensors *shards;  /* one parsed header per file */
    char shard_names[GM_SOURCE_MAX_FILES][256];
} builder;

static gm_status add_tensor(builder *b, int file, const gm_st_tensor *st) {
    gm_source *s = b->s;
    const gm_config *c = &s->config;
    int index = -1, layer = -1;
    int m = map_name(st->name, b->info.tie_word_embeddings, c->n_layers, &index, &layer);
    if (m == MAP_SKIP) return GM_OK;
    if (m == MAP_UNKNOWN) {
        if (layer >= c->n_layers)
            return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' names layer %d but config.json has %d layers",
                           s->files[file].path, st->name, layer, c->n_layers);
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: tensor '%s' is not part of a Gemma 3 text model", s->files[file].path,
                       st->name);
    }
    if (b->slot_tensor[index] >= 0)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' duplicates '%s' (same weight under two names or in two files)",
                       s->files[file].path, st->name, b->slot_hf[index]);
    const slot *sl = slot_of(c, index, &layer);
    char name[128];
    gguf_name(sl, layer, name, sizeof name);
    if (st->dtype < 0)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16",
                       s->files[file].path, st->name, st->dtype_name);
    /* expected ggml shape vs stored row-major shape reversed */
    int want_dims = sl->ne1 == D_NONE ? 1 : 2;
    uint64_t want[2] = {dim_value(c, sl->ne0), dim_value(c, sl->ne1)};
    bool ok = st->n_dims == want_dims;
    for (int d = 0; ok && d < want_dims; d++) ok = st->shape[st->n_dims - 1 - d] == want[d];
    if (!ok) {
        char got[96] = "", exp[64];
        for (int d = 0, used = 0; d < st->n_dims && used < (int)sizeof got; d++)
            used += snprintf(got + used, sizeof got - (size_t)used, d ? ", %llu" : "%llu",
                             (unsigned long long)st->shape[d]);
        if (want_dims == 1)
            snprintf(exp, sizeof exp, "%llu", (unsigned long long)want[0]);
        else
            snprintf(exp, sizeof exp, "%llu, %llu", (unsigned long long)want[1], (unsigned long long)want[0]);
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; config.json implies [%s]%s", s->files[file].path,
                       st->name, got, exp,
                       sl->ne1 == D_VOCAB ? " (vocab_size must equal the embedding rows)" : "");
    }
    gm_tensor_info *t = &s->tensors[s->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = (gm_dtype)st->dtype;
    t->n_dims = want_dims;
    t->ne[0] = want[0];
    t->ne[1] = want_dims == 2 ? want[1] : 1;
    t->ne[2] = t->ne[3] = 1;
    t->offset = st->offset;
    t->nbytes = st->nbytes;
    t->row_bytes = t->ne[0] * st->elem_bytes;
    s->file_of[s->n_tensors] = file;
    b->slot_tensor[index] = (int)s->n_tensors;
    b->slot_hf[index] = st->name;
    s->n_tensors++;
    return GM_OK;
}

static gm_status open_shard(builder *b, const char *dir, const char *file) {
    gm_source *s = b->s;
    if (s->n_files >= GM_SOURCE_MAX_FILES)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: more than %d safetensors files", dir, GM_SOURCE_MAX_FILES);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (strlen(path) >= sizeof s->files[0].path) return gm_fail(GM_ERR_ARG, "%s: path too long", path);
    GM_TRY(gm_file_open(&s->files[s->n_files], path));
    snprintf(b->shard_names[s->n_files], sizeof b->shard_names[0], "%s", file);
    s->n_files++;
    return gm_safetensors_read(&s->files[s->n_files - 1], &b->shards[s->n_files - 1]);
}

/* A file name from the index must be a plain name inside the folder. */
static bool plain_file_name(const char *f) {
    return f[0] && strcmp(f, ".") && strcmp(f, "..") && !strchr(f, '/') && !strchr(f, '\\') && strlen(f) < 256;
}

static int shard_named(const builder *b, const char *file) {
    for (int f = 0; f < b->s->n_files; f++)
        if (strcmp(b->shard_names[f], file) == 0) return f;
    return -1;
}

/* model.safetensors.index.json: open every shard it names, and insist the shards hold exactly the
 * tensors the index puts in them. */
static gm_status open_index(builder *b, const char *dir, const char *index_path) {
    char *text;
    uint64_t len;
    GM_TRY(gm_file_slurp(index_path, MAX_JSON_BYTES, &text, &len));
    cJSON *root = cJSON_ParseWithLength(text, (size_t)len);
    free(text);
    gm_status s = GM_OK;
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(root) || !cJSON_IsObject(map)) {
        s = gm_fail(GM_ERR_FORMAT, "%s: not valid JSON with a 'weight_map' object", index_path);
        goto done;
    }
    for (const cJSON *e = map->child; e && s == GM_OK; e = e->next) {
        if (!cJSON_IsString(e) || !plain_file_name(e->valuestring))
            s = gm_fail(GM_ERR_FORMAT, "%s: weight_map['%s'] is not a file name in the folder", index_path, e->string);
        else if (shard_named(b, e->valuestring) < 0)
            s = open_shard(b, dir, e->valuestring);
    }
    if (s == GM_OK && b->s->n_files == 0) s = gm_fail(GM_ERR_FORMAT, "%s: weight_map is empty", index_path);
    for (int f = 0; f < b->s->n_files && s == GM_OK; f++) {
        const gm_safetensors *sh = &b->shards[f];
        for (size_t i = 0; i < sh->n_tensors && s == GM_OK; i++) {
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(map, sh->tensors[i].name);
            if (!e)
                s = gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' is not listed in %s", b->s->files[f].path,
                            sh->tensors[i].name, index_path);
            else if (strcmp(e->valuestring, b->shard_names[f]) != 0)
                s = gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' is here but the index puts it in %s", b->s->files[f].path,
                            sh->tensors[i].name, e->valuestring);
        }
    }
    for (const cJSON *e = map->child; e && s == GM_OK; e = e->next) {
        int f = shard_named(b, e->valuestring);
        if (!gm_safetensors_find(&b->shards[f], e->string))
            s = gm_fail(GM_ERR_FORMAT, "%s: the index lists tensor '%s' but the file does not hold it",
                        b->s->files[f].path, e->string);
    }
done:
    cJSON_Delete(root);
    return s;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static gm_status build(builder *b, const char *dir) {
    gm_source *s = b->s;
    char path[2048];

    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!is_file(path))
        return gm_fail(GM_ERR_IO, "%s: no config.json in this folder (a Hugging Face model folder has one)", dir);
    char *json;
    uint64_t len;
    GM_TRY(gm_file_slurp(path, MAX_JSON_BYTES, &json, &len));
    gm_status st = gm_config_from_hf_json(json, (size_t)len, path, &s->config, &b->info);
    free(json);
    GM_TRY(st);

    b->shards = calloc(GM_SOURCE_MAX_FILES, sizeof *b->shards);
    if (!b->shards) return gm_fail(GM_ERR_NOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (is_file(path)) { /* transformers prefers the single file too */
        GM_TRY(open_shard(b, dir, "model.safetensors"));
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if (!is_file(path))
            return gm_fail(GM_ERR_IO, "%s: neither model.safetensors nor model.safetensors.index.json is here", dir);
        GM_TRY(open_index(b, dir, path));
    }

    const gm_config *c = &s->config;
    b->n_slots = c->n_layers * N_LAYER_SLOTS + N_GLOBAL_SLOTS;
    size_t total = 0;
    for (int f = 0; f < s->n_files; f++) total += b->shards[f].n_tensors;
    b->slot_tensor = malloc((size_t)b->n_slots * sizeof *b->slot_tensor);
    b->slot_hf = calloc((size_t)b->n_slots, sizeof *b->slot_hf);
    s->tensors = calloc(total ? total : 1, sizeof *s->tensors);
    s->file_of = calloc(total ? total : 1, sizeof *s->file_of);
    if (!b->slot_tensor || !b->slot_hf || !s->tensors || !s->file_of) return gm_fail(GM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < b->n_slots; i++) b->slot_tensor[i] = -1;
    for (int f = 0; f < s->n_files; f++)
        for (size_t i = 0; i < b->shards[f].n_tensors; i++) GM_TRY(add_tensor(b, f, &b->shards[f].tensors[i]));

    /* every weight of the text model present; then order as a GGUF file does (embedding, layers, norm) */
    for (int i = 0; i < b->n_slots; i++) {
        int layer;
        const slot *sl = slot_of(c, i, &layer);
        if (b->slot_tensor[i] >= 0 || (sl == &GLOBAL_SLOTS[G_HEAD] && b->info.tie_word_embeddings)) continue;
        char name[128];
        gguf_name(sl, layer, name, sizeof name);
        if (sl == &GLOBAL_SLOTS[G_HEAD])
            return gm_fail(GM_ERR_FORMAT, "%s: tie_word_embeddings is false but there is no lm_head.weight", dir);
        return gm_fail(GM_ERR_FORMAT, "%s: weight %s (HF '...%s%s') is missing", dir, name,
                       layer >= 0 ? "layers.N." : "", sl->hf);
    }
    gm_tensor_info *sorted = malloc(s->n_tensors * sizeof *sorted);
    int *sorted_file = malloc(s->n_tensors * sizeof *sorted_file);
    if (!sorted || !sorted_file) {
        free(sorted);
        free(sorted_file);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    int order[] = {c->n_layers * N_LAYER_SLOTS + G_EMBED, -1, c->n_layers * N_LAYER_SLOTS + G_NORM,
                   c->n_layers * N_LAYER_SLOTS + G_HEAD};
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
        int lo = order[o] >= 0 ? order[o] : 0, hi = order[o] >= 0 ? order[o] + 1 : c->n_layers * N_LAYER_SLOTS;
        for (int i = lo; i < hi; i++)
            if (b->slot_tensor[i] >= 0) {
                sorted[k] = s->tensors[b->slot_tensor[i]];
                sorted_file[k++] = s->file_of[b->slot_tensor[i]];
            }
    }
    free(s->tensors);
    free(s->file_of);
    s->tensors = sorted;
    s->file_of = sorted_file;
    return GM_OK;
}

gm_status gm_hf_source_open(const char *dir, gm_source **out) {
    *out = NULL;
    gm_source *s = calloc(1, sizeof *s);
    if (!s) return gm_fail(GM_ERR_NOMEM, "out of memory");
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; /* "folder/" and "folder" name the same source */
    if (n >= sizeof s->path) {
        free(s);
        return gm_fail(GM_ERR_ARG, "%s: path too long", dir);
    }
    memcpy(s->path, dir, n);
    s->path[n] = 0;
    s->format = "safetensors";
    builder b = {.s = s};
    gm_status st = build(&b, s->path);
    if (b.shards)
        for (int f = 0; f < GM_SOURCE_MAX_FILES; f++) gm_safetensors_free(&b.shards[f]);
    free(b.shards);
    free(b.slot_tensor);
    free(b.slot_hf);
    if (st != GM_OK) {
        gm_source_close(s);
        return st;
    }
    *out = s;
    return GM_OK;
}
