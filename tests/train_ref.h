/* The PyTorch training references of tests/fixtures/hf_train_tiny_ref.* (tests/reference/gen_train_refs.py):
 * batches, losses, hyperparameters and reference tensors, for the trainer tests. */
#ifndef GM_TESTS_TRAIN_REF_H
#define GM_TESTS_TRAIN_REF_H

#include <math.h>

#include "io/file.h"
#include "io/safetensors.h"
#include "json_fixture.h"
#include "train/trainer_internal.h"

#define REF_STEPS 10
#define REF_SEQS 4

typedef struct train_ref {
    cJSON *json;
    gm_file st_file;
    gm_safetensors st;
    int32_t tokens[REF_STEPS][REF_SEQS][32];
    uint8_t mask[REF_STEPS][REF_SEQS][32];
    gm_train_example batch[REF_STEPS][REF_SEQS];
    double loss, lora_loss, full_losses[REF_STEPS], lora_losses[REF_STEPS], ada_losses[REF_STEPS];
    double ada_lr;
    int ada_min_dim;
    double lr, beta1, beta2, eps, wd, lora_alpha;
    int lora_rank;
    char folder[1024];
} train_ref;

static double jnum(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble; }

static inline void train_ref_load(train_ref *r) {
    memset(r, 0, sizeof *r);
    r->json = gm_test_load_json("hf_train_tiny_ref.json");
    gm_test_fixture("hf_train_tiny", r->folder, sizeof r->folder);
    char path[1024];
    gm_test_fixture("hf_train_tiny_ref.safetensors", path, sizeof path);
    if (gm_file_open(&r->st_file, path) != GM_OK || gm_safetensors_read(&r->st_file, &r->st) != GM_OK) {
        fprintf(stderr, "cannot read %s: %s\n", path, gm_last_error());
        exit(1);
    }
    r->loss = jnum(r->json, "loss");
    r->lora_loss = jnum(r->json, "lora_loss");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r->json, "adamw");
    r->lr = jnum(a, "lr"), r->beta1 = jnum(a, "beta1"), r->beta2 = jnum(a, "beta2"), r->eps = jnum(a, "eps");
    r->wd = jnum(a, "weight_decay");
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(r->json, "lora");
    r->lora_rank = (int)jnum(lo, "rank"), r->lora_alpha = jnum(lo, "alpha");
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(r->json, "adafactor");
    r->ada_lr = jnum(af, "lr"), r->ada_min_dim = (int)jnum(af, "min_dim_size_to_factor");
    for (int s = 0; s < REF_STEPS; s++) {
        r->full_losses[s] = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->json, "full_losses"), s)->valuedouble;
        r->lora_losses[s] = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->json, "lora_losses"), s)->valuedouble;
        r->ada_losses[s] = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->json, "adafactor_losses"), s)->valuedouble;
        const cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->json, "batches"), s);
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(b, "tokens"), *masks = cJSON_GetObjectItemCaseSensitive(b, "loss_mask");
        for (int q = 0; q < REF_SEQS; q++) {
            const cJSON *t = cJSON_GetArrayItem(toks, q), *m = cJSON_GetArrayItem(masks, q);
            int n = cJSON_GetArraySize(t);
            for (int i = 0; i < n; i++) r->tokens[s][q][i] = cJSON_GetArrayItem(t, i)->valueint;
            for (int i = 0; i < n - 1; i++) r->mask[s][q][i] = (uint8_t)cJSON_GetArrayItem(m, i)->valueint;
            r->batch[s][q] = (gm_train_example){r->tokens[s][q], r->mask[s][q], n};
        }
    }
}

static inline void train_ref_free(train_ref *r) {
    cJSON_Delete(r->json);
    gm_safetensors_free(&r->st);
    gm_file_close(&r->st_file);
}

/* A reference tensor as float32 (caller frees); exits when missing. */
static inline float *train_ref_tensor(train_ref *r, const char *name, uint64_t *n) {
    const gm_st_tensor *t = gm_safetensors_find(&r->st, name);
    if (!t || t->dtype != GM_F32) {
        fprintf(stderr, "reference tensor %s missing or not F32\n", name);
        exit(1);
    }
    float *v = malloc(t->nbytes);
    if (gm_file_read(&r->st_file, t->offset, v, t->nbytes) != GM_OK) exit(1);
    *n = t->nbytes / 4;
    return v;
}

/* HF name of a trainer parameter (base tensors): model.layers.3.self_attn.q_proj.weight */
static inline void train_ref_hf_name(const gm_tparam *p, char *out, size_t n) {
    if (!strcmp(p->name, "token_embd.weight")) snprintf(out, n, "model.embed_tokens.weight");
    else if (!strcmp(p->name, "output_norm.weight")) snprintf(out, n, "model.norm.weight");
    else if (p->lm < 0) snprintf(out, n, "model.layers.%d.%s.weight", p->unit, gm_lt_hf_name(p->lt));
    else snprintf(out, n, "model.layers.%d.%s.%c", p->unit, gm_lt_hf_name(p->lt), p->ab ? 'b' : 'a');
}

static inline double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static inline void train_ref_options(const train_ref *r, gm_train_options *o, int devices, int lora) {
    gm_train_options_default(o);
    o->devices = devices;
    o->lr = r->lr, o->beta1 = r->beta1, o->beta2 = r->beta2, o->eps = r->eps, o->weight_decay = r->wd;
    if (lora) o->lora_rank = r->lora_rank, o->lora_alpha = r->lora_alpha;
}

#endif
