/* Hugging Face folders as a gm_source, against what transformers wrote and what Python read back
 * (tests/fixtures/hf_tiny_expected.json, by tests/reference/gen_tiny_hf_model.py): config values,
 * GGUF names (the gguf package's own HF->GGUF map), ggml shapes, types, rows of data; then broken
 * folders and config files. The safetensors parser itself is tested in test_safetensors.c. */
#define _GNU_SOURCE /* mkdtemp, symlink */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/source_internal.h"
#include "model/config.h"
#include "test_util.h"

static char fixtures[1024];

static cJSON *load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Row `row` of a tensor as float32 (F32 or BF16 as stored). */
static bool read_row_f32(const gm_source *s, const gm_tensor_info *t, uint64_t row, float *out) {
    uint8_t *raw = malloc(t->row_bytes);
    bool ok = gm_source_read_rows(s, t, row, 1, raw) == GM_OK;
    for (uint64_t i = 0; ok && i < t->ne[0]; i++) {
        if (t->type == GM_F32) {
            memcpy(&out[i], raw + 4 * i, 4);
        } else if (t->type == GM_BF16) {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            out[i] = bf16_to_f32(h);
        } else {
            ok = false;
        }
    }
    free(raw);
    return ok;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        fprintf(stderr, "expected JSON has no number '%s'\n", key);
        return NAN;
    }
    return v->valuedouble;
}

static void check_config(const char *folder, const gm_config *c, const cJSON *e) {
#define CI(field, key) CHECK(c->field == (int)num(e, key), "%s: %s = %d, expected %g", folder, key, c->field, num(e, key))
#define CF(field, key) CHECK(c->field == (float)num(e, key), "%s: %s = %.9g, expected %.9g", folder, key, c->field, num(e, key))
    CI(n_layers, "n_layers");
    CI(d_model, "d_model");
    CI(d_ff, "d_ff");
    CI(n_heads, "n_heads");
    CI(n_kv_heads, "n_kv_heads");
    CI(head_dim, "head_dim");
    CI(vocab_size, "vocab_size");
    CI(sliding_window, "sliding_window");
    CI(context_length, "context_length");
    CI(bos_id, "bos_id");
    CI(eos_id, "eos_id");
    CI(pad_id, "pad_id");
    CF(rms_eps, "rms_eps");
    CF(rope_base_global, "rope_base_global");
    CF(rope_base_local, "rope_base_local");
    CF(rope_scale_global, "rope_scale_global");
    CF(rope_scale_local, "rope_scale_local");
    CF(query_scale, "query_scale");
    CF(embed_scale, "embed_scale");
    CF(attn_softcap, "attn_softcap");
    CF(final_softcap, "final_softcap");
#undef CI
#undef CF
    CHECK(c->norms_add_one, "%s: HF norms store w and must be applied as 1 + w", folder);
    CHECK(strcmp(c->architecture, "gemma3") == 0, "%s: architecture '%s'", folder, c->architecture);
    bool global[GM_MAX_LAYERS] = {false};
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(e, "global_layers")) global[(int)g->valuedouble] = true;
    for (int i = 0; i < c->n_layers; i++)
        CHECK(c->layer_is_global[i] == global[i], "%s: layer %d global = %d", folder, i, c->layer_is_global[i]);
}

static void check_folder(const char *name, const cJSON *exp) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%s", fixtures, name);
    gm_source *s = NULL;
    gm_status st = gm_source_open(dir, &s);
    CHECK(st == GM_OK, "%s: %s", name, gm_last_error());
    if (st != GM_OK) return;
    CHECK(strcmp(gm_source_format(s), "safetensors") == 0, "%s: format %s", name, gm_source_format(s));
    CHECK(gm_source_gguf(s) == NULL, "%s: an HF source has no GGUF", name);
    check_config(name, gm_source_config(s), cJSON_GetObjectItemCaseSensitive(exp, "config"));

    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(exp, "tensors");
    CHECK(gm_source_tensor_count(s) == (size_t)cJSON_GetArraySize(tensors), "%s: %zu tensors, expected %d (vision and tied "
          "lm_head skipped)", name, gm_source_tensor_count(s), cJSON_GetArraySize(tensors));
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors) {
        const char *tn = cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring;
        const gm_tensor_info *ti = gm_source_find(s, tn);
        CHECK(ti != NULL, "%s: tensor %s missing", name, tn);
        if (!ti) continue;
        const char *type = cJSON_GetObjectItemCaseSensitive(t, "type")->valuestring;
        CHECK(strcmp(gm_dtype_get(ti->type)->name, type) == 0, "%s: %s type %s, expected %s", name, tn,
              gm_dtype_get(ti->type)->name, type);
        const cJSON *ne = cJSON_GetObjectItemCaseSensitive(t, "ne");
        CHECK(ti->n_dims == cJSON_GetArraySize(ne), "%s: %s has %d dims", name, tn, ti->n_dims);
        uint64_t count = 1;
        for (int d = 0; d < 4; d++) {
            uint64_t want = d < cJSON_GetArraySize(ne) ? (uint64_t)cJSON_GetArrayItem(ne, d)->valuedouble : 1;
            CHECK(ti->ne[d] == want, "%s: %s ne[%d] = %llu, expected %llu", name, tn, d, (unsigned long long)ti->ne[d],
                  (unsigned long long)want);
            count *= want;
        }
        CHECK(ti->nbytes == count * (ti->type == GM_F32 ? 4 : 2), "%s: %s nbytes %llu", name, tn,
              (unsigned long long)ti->nbytes);
        /* the shard the index names */
        size_t idx = (size_t)(ti - s->tensors);
        const char *file = cJSON_GetObjectItemCaseSensitive(t, "file")->valuestring;
        const char *path = s->files[s->file_of[idx]].path;
        CHECK(strlen(path) > strlen(file) && strcmp(path + strlen(path) - strlen(file), file) == 0,
              "%s: %s read from %s, expected %s", name, tn, path, file);
    }
    /* GGUF order: embedding first, then layer 0 */
    CHECK(strcmp(gm_source_tensor_at(s, 0)->name, "token_embd.weight") == 0, "%s: first tensor %s", name,
          gm_source_tensor_at(s, 0)->name);
    CHECK(strncmp(gm_source_tensor_at(s, 1)->name, "blk.0.", 6) == 0, "%s: second tensor %s", name,
          gm_source_tensor_at(s, 1)->name);

    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(exp, "rows")) {
        const char *tn = cJSON_GetObjectItemCaseSensitive(row, "tensor")->valuestring;
        int r = (int)num(row, "row");
        const cJSON *vals = cJSON_GetObjectItemCaseSensitive(row, "values");
        const gm_tensor_info *ti = gm_source_find(s, tn);
        CHECK(ti && ti->ne[0] == (uint64_t)cJSON_GetArraySize(vals), "%s: %s row length", name, tn);
        if (!ti || ti->ne[0] != (uint64_t)cJSON_GetArraySize(vals)) continue;
        float *got = malloc(ti->ne[0] * sizeof *got);
        bool ok = read_row_f32(s, ti, (uint64_t)r, got);
        CHECK(ok, "%s: reading %s row %d: %s", name, tn, r, gm_last_error());
        int bad = 0, i = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, vals) {
            if (ok && got[i] != (float)v->valuedouble && bad++ < 3)
                fprintf(stderr, "  %s %s row %d [%d]: %.9g vs %.9g\n", name, tn, r, i, got[i], v->valuedouble);
            i++;
        }
        CHECK(ok && bad == 0, "%s: %s row %d: %d values differ from what safetensors read", name, tn, r, bad);
        free(got);
    }
    /* ranged reads stay inside the tensor */
    const gm_tensor_info *emb = gm_source_find(s, "token_embd.weight");
    uint8_t tmp[512];
    CHECK(gm_source_read_rows(s, emb, emb->ne[1], 1, tmp) == GM_ERR_RANGE, "%s: row past the end must fail", name);
    CHECK(gm_source_read_rows(s, emb, 1, UINT64_MAX, tmp) == GM_ERR_RANGE, "%s: row count overflow must fail", name);

    /* "dir/" names the same source */
    char slash[1200];
    snprintf(slash, sizeof slash, "%s/", dir);
    gm_source *s2 = NULL;
    CHECK(gm_source_open(slash, &s2) == GM_OK, "%s/: %s", name, gm_last_error());
    if (s2) {
        CHECK(gm_source_fingerprint(s2) == gm_source_fingerprint(s), "%s: fingerprint differs with a trailing /", name);
        CHECK(strcmp(gm_source_path(s2), dir) == 0, "%s: path %s", name, gm_source_path(s2));
        gm_source_close(s2);
    }
    gm_source_close(s);
}

/* Google's published config.json files (text part) against transformers' reading of them; the 270M one
 * also against the real GGUF's metadata when the model is present. */
static void check_hub_configs(const cJSON *exp) {
    const cJSON *e;
    cJSON_ArrayForEach(e, exp) {
        char path[1200];
        snprintf(path, sizeof path, "%s/hf_configs/%s.json", fixtures, e->string);
        char *text = NULL;
        uint64_t len = 0;
        CHECK(gm_file_slurp(path, 1 << 20, &text, &len) == GM_OK, "%s", gm_last_error());
        if (!text) continue;
        gm_config c;
        gm_hf_info info;
        gm_status st = gm_config_from_hf_json(text, (size_t)len, path, &c, &info);
        free(text);
        CHECK(st == GM_OK, "%s: %s", e->string, gm_last_error());
        if (st != GM_OK) continue;
        check_config(e->string, &c, e);
        CHECK(info.tie_word_embeddings, "%s: tied", e->string);
        CHECK(info.multimodal == (c.vocab_size == 262208), "%s: multimodal flag", e->string);

        const char *gguf_path = strcmp(e->string, "gemma-3-270m") == 0 ? gm_test_model_path() : NULL;
        gm_source *g = NULL;
        if (gguf_path && gm_source_open(gguf_path, &g) == GM_OK) {
            const gm_config *q = gm_source_config(g);
            CHECK(q->n_layers == c.n_layers && q->d_model == c.d_model && q->d_ff == c.d_ff && q->n_heads == c.n_heads &&
                      q->n_kv_heads == c.n_kv_heads && q->head_dim == c.head_dim && q->vocab_size == c.vocab_size &&
                      q->sliding_window == c.sliding_window && q->context_length == c.context_length,
                  "270M: HF config.json and GGUF sizes differ");
            CHECK(q->rope_base_global == c.rope_base_global && q->rope_base_local == c.rope_base_local &&
                      q->rope_scale_global == c.rope_scale_global && q->query_scale == c.query_scale &&
                      q->embed_scale == c.embed_scale && q->rms_eps == c.rms_eps,
                  "270M: HF config.json and GGUF scalars differ");
            CHECK(memcmp(q->layer_is_global, c.layer_is_global, sizeof c.layer_is_global) == 0,
                  "270M: HF and GGUF layer patterns differ");
            CHECK(!q->norms_add_one && c.norms_add_one, "GGUF stores 1 + w, HF stores w");
        }
        gm_source_close(g);
    }
}

/* ---- broken folders ---- */

static char tmpdir[256];
static int case_no;

/* A fresh folder under tmpdir holding `config` (NULL: none) and links to the given fixture files. */
static const char *make_folder(const char *config, const char *from, const char *const *files) {
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/case%d", tmpdir, case_no++);
    mkdir(dir, 0755);
    char p[1200], target[1200];
    if (config) {
        snprintf(p, sizeof p, "%s/config.json", dir);
        write_text(p, config);
    }
    for (int i = 0; files && files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        snprintf(target, sizeof target, "%s/%s/%s", fixtures, from, files[i]);
        if (symlink(target, p) != 0) fprintf(stderr, "symlink %s: %s\n", p, strerror(errno));
    }
    return dir;
}

static const char *const TINY_FILES[] = {"model.safetensors", NULL};

static void expect_fail(const char *what, const char *dir, gm_status want, const char *needle) {
    gm_source *s = NULL;
    gm_status st = gm_source_open(dir, &s);
    CHECK(st == want && s == NULL, "%s: status %s, expected %s (%s)", what, gm_status_name(st), gm_status_name(want),
          gm_last_error());
    if (st != GM_OK)
        CHECK(strstr(gm_last_error(), needle) != NULL, "%s: message '%s' should mention '%s'", what, gm_last_error(),
              needle);
    gm_source_close(s);
}

/* hf_tiny's config.json with one edit applied by `edit`. */
static char *tiny_config_with(void (*edit)(cJSON *)) {
    char p[1200];
    snprintf(p, sizeof p, "%s/hf_tiny/config.json", fixtures);
    cJSON *c = load_json(p);
    edit(c);
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    return text;
}

static void del_hidden(cJSON *c) { cJSON_DeleteItemFromObject(c, "hidden_size"); }
static void set_llama(cJSON *c) { cJSON_ReplaceItemInObject(c, "model_type", cJSON_CreateString("llama")); }
static void two_layers(cJSON *c) {
    cJSON_ReplaceItemInObject(c, "num_hidden_layers", cJSON_CreateNumber(2));
    cJSON_DeleteItemFromObject(c, "layer_types");
}
static void four_layers(cJSON *c) {
    cJSON_ReplaceItemInObject(c, "num_hidden_layers", cJSON_CreateNumber(4));
    cJSON_DeleteItemFromObject(c, "layer_types");
}
static void vocab_1000(cJSON *c) { cJSON_ReplaceItemInObject(c, "vocab_size", cJSON_CreateNumber(1000)); }
static void kv_heads_4(cJSON *c) { cJSON_ReplaceItemInObject(c, "num_key_value_heads", cJSON_CreateNumber(4)); }
static void yarn(cJSON *c) {
    cJSON *full = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "rope_parameters"), "full_attention");
    cJSON_ReplaceItemInObject(full, "rope_type", cJSON_CreateString("yarn"));
}
static void short_layer_types(cJSON *c) {
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(c, "layer_types"), 0);
}
static void untied(cJSON *c) { cJSON_ReplaceItemInObject(c, "tie_word_embeddings", cJSON_CreateFalse()); }
static void hidden_str(cJSON *c) { cJSON_ReplaceItemInObject(c, "hidden_size", cJSON_CreateString("64")); }
static void hidden_frac(cJSON *c) { cJSON_ReplaceItemInObject(c, "hidden_size", cJSON_CreateNumber(64.5)); }
static void heads_3(cJSON *c) { cJSON_ReplaceItemInObject(c, "num_attention_heads", cJSON_CreateNumber(3)); }
static void bidir(cJSON *c) { cJSON_ReplaceItemInObject(c, "use_bidirectional_attention", cJSON_CreateTrue()); }
static void relu(cJSON *c) { cJSON_ReplaceItemInObject(c, "hidden_activation", cJSON_CreateString("relu")); }
static void bos_big(cJSON *c) { cJSON_ReplaceItemInObject(c, "bos_token_id", cJSON_CreateNumber(512)); }
/* rope in the transformers 4.x keys only (as Google's gemma-3-1b config.json): same values must come out */
static void v4_rope(cJSON *c) {
    cJSON_DeleteItemFromObject(c, "rope_parameters");
    cJSON_AddNumberToObject(c, "rope_theta", 50000.0);
    cJSON_AddNumberToObject(c, "rope_local_base_freq", 1000.0);
    cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "linear");
    cJSON_AddNumberToObject(rs, "factor", 8.0);
    cJSON_DeleteItemFromObject(c, "layer_types");
    cJSON_AddNumberToObject(c, "sliding_window_pattern", 2); /* layer 1 global, as layer_types said */
}

static void bad_configs(void) {
    expect_fail("missing config.json", make_folder(NULL, "hf_tiny", TINY_FILES), GM_ERR_IO, "config.json");
    expect_fail("config of one key", make_folder("{\"model_type\": \"gemma3_text\", \"hidden_size\": 64}", "hf_tiny", NULL),
                GM_ERR_FORMAT, "intermediate_size"); /* config errors come before missing weights */
    const char *config_only[] = {"config.json", NULL};
    expect_fail("no weights", make_folder(NULL, "hf_tiny", config_only), GM_ERR_IO, "model.safetensors");
    expect_fail("bad JSON", make_folder("{\"model_type\": \"gemma3_text\", ", "hf_tiny", TINY_FILES), GM_ERR_FORMAT,
                "config.json");
    expect_fail("JSON array", make_folder("[1, 2]", "hf_tiny", TINY_FILES), GM_ERR_FORMAT, "JSON object");
    expect_fail("empty config", make_folder("", "hf_tiny", TINY_FILES), GM_ERR_FORMAT, "config.json");
    expect_fail("no model_type", make_folder("{\"hidden_size\": 64}", "hf_tiny", TINY_FILES), GM_ERR_FORMAT,
                "model_type");
    expect_fail("gemma3 without text_config", make_folder("{\"model_type\": \"gemma3\"}", "hf_tiny", TINY_FILES),
                GM_ERR_FORMAT, "text_config");

    struct {
        const char *what;
        void (*edit)(cJSON *);
        gm_status want;
        const char *needle;
    } cases[] = {
        {"missing hidden_size", del_hidden, GM_ERR_FORMAT, "hidden_size"},
        {"model_type llama", set_llama, GM_ERR_UNSUPPORTED, "llama"},
        {"fewer layers than tensors", two_layers, GM_ERR_FORMAT, "layer 2"},
        {"more layers than tensors", four_layers, GM_ERR_FORMAT, "blk.3.attn_norm.weight"},
        {"vocab_size vs embedding rows", vocab_1000, GM_ERR_FORMAT, "model.embed_tokens.weight"},
        {"kv heads vs k_proj", kv_heads_4, GM_ERR_FORMAT, "k_proj"},
        {"rope yarn", yarn, GM_ERR_UNSUPPORTED, "yarn"},
        {"layer_types length", short_layer_types, GM_ERR_FORMAT, "layer_types"},
        {"untied without lm_head", untied, GM_ERR_FORMAT, "lm_head"},
        {"hidden_size string", hidden_str, GM_ERR_FORMAT, "hidden_size"},
        {"hidden_size fraction", hidden_frac, GM_ERR_FORMAT, "hidden_size"},
        {"heads not a multiple of kv heads", heads_3, GM_ERR_FORMAT, "kv heads"},
        {"bidirectional attention", bidir, GM_ERR_UNSUPPORTED, "use_bidirectional_attention"},
        {"activation", relu, GM_ERR_UNSUPPORTED, "relu"},
        {"bos outside vocab", bos_big, GM_ERR_FORMAT, "512"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = tiny_config_with(cases[i].edit);
        expect_fail(cases[i].what, make_folder(text, "hf_tiny", TINY_FILES), cases[i].want, cases[i].needle);
        free(text);
    }

    /* the transformers 4.x spelling of the same config gives the same gm_config */
    char *text = tiny_config_with(v4_rope);
    gm_source *a = NULL, *b = NULL;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/hf_tiny", fixtures);
    CHECK(gm_source_open(make_folder(text, "hf_tiny", TINY_FILES), &a) == GM_OK, "v4 rope keys: %s", gm_last_error());
    CHECK(gm_source_open(dir, &b) == GM_OK, "hf_tiny: %s", gm_last_error());
    if (a && b) CHECK(memcmp(gm_source_config(a), gm_source_config(b), sizeof(gm_config)) == 0, "v4 rope keys: config differs");
    gm_source_close(a);
    gm_source_close(b);
    free(text);
}

/* hf_tiny_mm_sharded's index with one edit; shards linked in. */
static const char *sharded_with(const char *index_text, const char *extra_name, const uint8_t *extra, size_t extra_len) {
    static const char *const shards[] = {"config.json", "model-00001-of-00003.safetensors",
                                         "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", NULL};
    const char *dir = make_folder(NULL, "hf_tiny_mm_sharded", shards);
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_text(p, index_text);
    if (extra_name) {
        snprintf(p, sizeof p, "%s/%s", dir, extra_name);
        FILE *f = fopen(p, "wb");
        fwrite(extra, 1, extra_len, f);
        fclose(f);
    }
    return dir;
}

/* A one-tensor safetensors file: header JSON (padded to 8) then `data_len` zero bytes. */
static size_t tiny_st(uint8_t *buf, const char *name, const char *dtype, int n, int data_len) {
    char hdr[512];
    int len = snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"%s\",\"shape\":[%d],\"data_offsets\":[0,%d]}}", name,
                       dtype, n, data_len);
    while (len % 8) hdr[len++] = ' ';
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(buf + 8, hdr, (size_t)len);
    memset(buf + 8 + len, 0, (size_t)data_len);
    return 8 + (size_t)len + (size_t)data_len;
}

static void bad_shards(void) {
    char p[1200];
    snprintf(p, sizeof p, "%s/hf_tiny_mm_sharded/model.safetensors.index.json", fixtures);
    cJSON *good = load_json(p);
    CHECK(good != NULL, "index fixture");
    if (!good) return;
    cJSON *map = cJSON_GetObjectItem(good, "weight_map");
    uint8_t extra[1024];

    /* a path outside the folder */
    cJSON *j = cJSON_Duplicate(good, 1);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "weight_map"), "language_model.model.norm.weight",
                              cJSON_CreateString("../hf_tiny/model.safetensors"));
    char *t = cJSON_Print(j);
    expect_fail("index path escape", sharded_with(t, NULL, NULL, 0), GM_ERR_FORMAT, "not a file name");
    free(t);
    cJSON_Delete(j);

    /* the index puts a tensor in the wrong shard */
    j = cJSON_Duplicate(good, 1);
    const char *where = cJSON_GetObjectItem(map, "language_model.model.norm.weight")->valuestring;
    const char *other = strcmp(where, "model-00001-of-00003.safetensors") ? "model-00001-of-00003.safetensors"
                                                                           : "model-00002-of-00003.safetensors";
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "weight_map"), "language_model.model.norm.weight",
                              cJSON_CreateString(other));
    t = cJSON_Print(j);
    expect_fail("tensor in the wrong shard", sharded_with(t, NULL, NULL, 0), GM_ERR_FORMAT, "index puts it in");
    free(t);
    cJSON_Delete(j);

    /* a tensor missing from the index */
    j = cJSON_Duplicate(good, 1);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(j, "weight_map"), "language_model.model.layers.1.mlp.up_proj.weight");
    t = cJSON_Print(j);
    expect_fail("tensor not in the index", sharded_with(t, NULL, NULL, 0), GM_ERR_FORMAT, "not listed");
    free(t);
    cJSON_Delete(j);

    /* the index lists a tensor no shard holds */
    j = cJSON_Duplicate(good, 1);
    cJSON_AddStringToObject(cJSON_GetObjectItem(j, "weight_map"), "language_model.model.layers.0.extra.weight",
                            "model-00001-of-00003.safetensors");
    t = cJSON_Print(j);
    expect_fail("index lists a missing tensor", sharded_with(t, NULL, NULL, 0), GM_ERR_FORMAT, "does not hold");
    free(t);
    cJSON_Delete(j);

    /* a missing shard */
    j = cJSON_Duplicate(good, 1);
    cJSON_AddStringToObject(cJSON_GetObjectItem(j, "weight_map"), "x.weight", "model-00004-of-00004.safetensors");
    t = cJSON_Print(j);
    expect_fail("missing shard", sharded_with(t, NULL, NULL, 0), GM_ERR_IO, "model-00004-of-00004.safetensors");
    free(t);
    cJSON_Delete(j);

    /* extra shards: an unknown text tensor, a second copy of a weight under another prefix */
    struct {
        const char *what, *tensor, *dtype;
        int n, bytes;
        gm_status want;
        const char *needle;
    } extras[] = {
        {"unknown tensor", "model.layers.0.mlp.weird_proj.weight", "F32", 1, 4, GM_ERR_UNSUPPORTED, "weird_proj"},
        {"same weight twice", "model.norm.weight", "F32", 32, 128, GM_ERR_FORMAT, "duplicates"},
        {"layer beyond the config", "model.layers.7.input_layernorm.weight", "F32", 32, 128, GM_ERR_FORMAT, "layer 7"},
        {"vision tensors are skipped", "vision_tower.extra.weight", "I64", 2, 16, GM_OK, ""},
    };
    for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++) {
        j = cJSON_Duplicate(good, 1);
        cJSON_AddStringToObject(cJSON_GetObjectItem(j, "weight_map"), extras[i].tensor, "extra.safetensors");
        t = cJSON_Print(j);
        size_t n = tiny_st(extra, extras[i].tensor, extras[i].dtype, extras[i].n, extras[i].bytes);
        const char *dir = sharded_with(t, "extra.safetensors", extra, n);
        if (extras[i].want == GM_OK) {
            gm_source *s = NULL;
            CHECK(gm_source_open(dir, &s) == GM_OK, "%s: %s", extras[i].what, gm_last_error());
            if (s) CHECK(gm_source_find(s, "token_embd.weight") != NULL, "%s", extras[i].what);
            gm_source_close(s);
        } else {
            expect_fail(extras[i].what, dir, extras[i].want, extras[i].needle);
        }
        free(t);
        cJSON_Delete(j);
    }
    expect_fail("index not JSON", sharded_with("{\"weight_map\": ", NULL, NULL, 0), GM_ERR_FORMAT, "weight_map");
    expect_fail("index without weight_map", sharded_with("{\"metadata\": {}}", NULL, NULL, 0), GM_ERR_FORMAT,
                "weight_map");
    expect_fail("empty weight_map", sharded_with("{\"weight_map\": {}}", NULL, NULL, 0), GM_ERR_FORMAT, "empty");
    cJSON_Delete(good);

    /* a single-file folder whose weight has a dtype we do not compute with */
    snprintf(p, sizeof p, "%s/hf_tiny_mm_sharded/config.json", fixtures);
    const char *cfgs[] = {"config.json", NULL};
    const char *dir = make_folder(NULL, "hf_tiny_mm_sharded", cfgs);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    size_t n = tiny_st(extra, "language_model.model.norm.weight", "I32", 32, 128);
    FILE *f = fopen(p, "wb");
    fwrite(extra, 1, n, f);
    fclose(f);
    expect_fail("integer weight", dir, GM_ERR_UNSUPPORTED, "I32");
    /* a truncated shard */
    dir = make_folder(NULL, "hf_tiny_mm_sharded", cfgs);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    f = fopen(p, "wb");
    fwrite(extra, 1, n - 1, f);
    fclose(f);
    expect_fail("truncated weights", dir, GM_ERR_FORMAT, "past the end");
}

static void rm_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    char rel[1024];
    gm_test_fixture("", rel, sizeof rel);
    if (!realpath(rel, fixtures)) { /* absolute: the broken folders below link to fixture files */
        fprintf(stderr, "fixtures folder %s: %s\n", rel, strerror(errno));
        return 1;
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/hf_tiny_expected.json", fixtures);
    cJSON *exp = load_json(p);
    CHECK(exp != NULL, "cannot read %s", p);
    if (!exp) return gm_test_finish();

    const char *folders[] = {"hf_tiny", "hf_tiny_mm_sharded", "hf_tiny_mm_v4"};
    for (size_t i = 0; i < sizeof folders / sizeof folders[0]; i++) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(exp, folders[i]);
        CHECK(e != NULL, "no expectations for %s", folders[i]);
        if (e) check_folder(folders[i], e);
    }
    check_hub_configs(cJSON_GetObjectItemCaseSensitive(exp, "hf_configs"));
    /* the sharded f32 folder and the bf16 one hold the same numbers */
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/hf_tiny_mm_sharded", fixtures);
    snprintf(b, sizeof b, "%s/hf_tiny_mm_v4", fixtures);
    gm_source *sa = NULL, *sb = NULL;
    if (gm_source_open(a, &sa) == GM_OK && gm_source_open(b, &sb) == GM_OK) {
        CHECK(memcmp(gm_source_config(sa), gm_source_config(sb), sizeof(gm_config)) == 0,
              "transformers 5.x and 4.x/hub configs of one model must read the same");
        for (size_t i = 0; i < gm_source_tensor_count(sa); i++) {
            const gm_tensor_info *ta = gm_source_tensor_at(sa, i), *tb = gm_source_find(sb, ta->name);
            CHECK(tb && tb->ne[0] == ta->ne[0] && tb->ne[1] == ta->ne[1], "%s", ta->name);
            if (!tb) continue;
            float *ra = malloc(ta->ne[0] * 4), *rb = malloc(ta->ne[0] * 4);
            bool ok = read_row_f32(sa, ta, ta->ne[1] - 1, ra) && read_row_f32(sb, tb, tb->ne[1] - 1, rb);
            CHECK(ok && memcmp(ra, rb, ta->ne[0] * 4) == 0, "%s: last row differs between F32 and BF16 copies", ta->name);
            free(ra);
            free(rb);
        }
        CHECK(gm_source_fingerprint(sa) != gm_source_fingerprint(sb), "different files, different fingerprints");
    }
    gm_source_close(sa);
    gm_source_close(sb);

    snprintf(tmpdir, sizeof tmpdir, "/tmp/gm_test_hf_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(false, "mkdtemp: %s", strerror(errno));
    } else {
        bad_configs();
        bad_shards();
        rm_tree(tmpdir);
    }
    cJSON_Delete(exp);
    return gm_test_finish();
}
