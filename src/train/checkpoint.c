/* Checkpoints: save (Hugging Face layout + optimizer state) and resume, on any device count.
 *
 * DIR/config.json            Gemma3ForCausalLM text config written from the model's gm_config
 * DIR/model.safetensors      F32 weights, HF names, norms as w (= stored 1 + w, minus 1), LoRA merged in
 * DIR/tokenizer.*            copied from an HF source folder, or tokenizer.model written from a GGUF's tokenizer
 * DIR/optimizer.safetensors  per trainable tensor "<name>.exp_avg", "<name>.exp_avg_sq" (full tensors, GGUF
 *                            names), and "<name>.param" for trainable norms (their exact stored 1 + w)
 * DIR/adapter.safetensors    LoRA: "<name>.lora_a" / "<name>.lora_b" as trained (to resume; the merge is lossy)
 * DIR/trainer_state.json     step, examples seen, options
 *
 * Every file is first written complete as NAME.tmp (flushed and fsync'd); only when all are written are they
 * renamed over the old ones, trainer_state.json last. A failure (unwritable folder, disk full) deletes the
 * temporaries and leaves the previous checkpoint as it was. Rank 0 writes; every rank takes part in the
 * gathers and gets the same status. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file.h"
#include "io/safetensors.h"
#include "io/safetensors_write.h"
#include "text/spm_write.h"
#include "train/trainer_internal.h"

#define MAX_FILES 12

typedef struct outset {
    char tmp[MAX_FILES][1100], fin[MAX_FILES][1100];
    int n;
} outset;

static const char *add_out(outset *o, const char *dir, const char *name) {
    snprintf(o->fin[o->n], sizeof o->fin[0], "%s/%s", dir, name);
    snprintf(o->tmp[o->n], sizeof o->tmp[0], "%s/%s.tmp", dir, name);
    return o->tmp[o->n++];
}

static void hf_name(const gm_tparam *p, char *out, size_t n) {
    if (!strcmp(p->name, "token_embd.weight")) snprintf(out, n, "model.embed_tokens.weight");
    else if (!strcmp(p->name, "output_norm.weight")) snprintf(out, n, "model.norm.weight");
    else snprintf(out, n, "model.layers.%d.%s.weight", p->unit, gm_lt_hf_name(p->lt));
}

static gm_status write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return gm_fail(GM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    size_t n = strlen(text);
    errno = 0;
    bool ok = fwrite(text, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        remove(path);
        return gm_fail(GM_ERR_IO, "%s: write failed: %s", path, strerror(e ? e : EIO));
    }
    return GM_OK;
}

static gm_status copy_file(const char *from, const char *to) {
    char *data;
    uint64_t len;
    GM_TRY(gm_file_slurp(from, (uint64_t)1 << 31, &data, &len));
    FILE *f = fopen(to, "wb");
    gm_status st = GM_OK;
    if (!f) st = gm_fail(GM_ERR_IO, "%s: cannot create: %s", to, strerror(errno));
    else {
        errno = 0;
        bool ok = fwrite(data, 1, (size_t)len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
        int e = errno;
        if (fclose(f) != 0) ok = false;
        if (!ok) {
            remove(to);
            st = gm_fail(GM_ERR_IO, "%s: write failed: %s", to, strerror(e ? e : EIO));
        }
    }
    free(data);
    return st;
}

static char *config_json(const gm_trainer *t) {
    const gm_config *c = &t->cfg;
    cJSON *j = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("Gemma3ForCausalLM"));
    cJSON_AddStringToObject(j, "model_type", "gemma3_text");
    cJSON_AddNumberToObject(j, "hidden_size", c->d_model);
    cJSON_AddNumberToObject(j, "intermediate_size", c->d_ff);
    cJSON_AddNumberToObject(j, "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(j, "num_key_value_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(j, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(j, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(j, "sliding_window", c->sliding_window);
    cJSON_AddNumberToObject(j, "max_position_embeddings", c->context_length);
    cJSON_AddNumberToObject(j, "rms_norm_eps", (double)c->rms_eps);
    /* query_scale = 1 / sqrt(query_pre_attn_scalar): an integer in every published config */
    double qpas = 1.0 / ((double)c->query_scale * (double)c->query_scale);
    if (fabs(qpas - round(qpas)) < 1e-3 * qpas) qpas = round(qpas);
    cJSON_AddNumberToObject(j, "query_pre_attn_scalar", qpas);
    cJSON_AddNumberToObject(j, "rope_theta", (double)c->rope_base_global);
    cJSON_AddNumberToObject(j, "rope_local_base_freq", (double)c->rope_base_local);
    if (c->rope_scale_global != 1.0f) {
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "linear");
        cJSON_AddNumberToObject(rs, "factor", (double)c->rope_scale_global);
    } else {
        cJSON_AddNullToObject(j, "rope_scaling");
    }
    cJSON *lt = cJSON_AddArrayToObject(j, "layer_types");
    for (int l = 0; l < c->n_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(c->layer_is_global[l] ? "full_attention" : "sliding_attention"));
    cJSON_AddNumberToObject(j, "bos_token_id", c->bos_id);
    cJSON_AddNumberToObject(j, "eos_token_id", c->eos_id);
    cJSON_AddNumberToObject(j, "pad_token_id", c->pad_id);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", true);
    cJSON_AddStringToObject(j, "hidden_activation", "gelu_pytorch_tanh");
    cJSON_AddNullToObject(j, "attn_logit_softcapping");
    cJSON_AddNullToObject(j, "final_logit_softcapping");
    cJSON_AddBoolToObject(j, "attention_bias", false);
    cJSON_AddNumberToObject(j, "attention_dropout", 0.0);
    cJSON_AddBoolToObject(j, "use_cache", true);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

static char *state_json(const gm_trainer *t) {
    const gm_train_options *o = &t->opt;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "gemma.c training state");
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddNumberToObject(j, "step", (double)t->step);
    cJSON_AddNumberToObject(j, "examples_seen", (double)t->examples_seen);
    cJSON_AddNumberToObject(j, "devices", t->P);
    cJSON_AddStringToObject(j, "optimizer", o->optimizer == GM_OPT_ADAMW ? "adamw" : "adafactor");
    cJSON_AddNumberToObject(j, "lora_rank", o->lora_rank);
    cJSON_AddNumberToObject(j, "lora_alpha", o->lora_alpha);
    cJSON_AddNumberToObject(j, "lr", o->lr);
    cJSON_AddNumberToObject(j, "beta1", o->beta1);
    cJSON_AddNumberToObject(j, "beta2", o->beta2);
    cJSON_AddNumberToObject(j, "eps", o->eps);
    cJSON_AddNumberToObject(j, "weight_decay", o->weight_decay);
    cJSON_AddNumberToObject(j, "clip_norm", o->clip_norm);
    cJSON_AddStringToObject(j, "model", gm_source_path(t->src));
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

/* Which optimizer tensors a trainable parameter has in optimizer.safetensors: which = 0 the parameter, 2 / 3 the
 * sharded moments (AdamW m / v, Adafactor's unfactored v), 4 / 5 Adafactor's replicated row / column statistics. */
static int opt_states(const gm_trainer *t, int i, const char **suffix, int *which) {
    const gm_tparam *p = &t->params[i];
    int k = 0;
    if (t->opt.optimizer == GM_OPT_ADAMW) {
        suffix[k] = "exp_avg", which[k++] = 2;
        suffix[k] = "exp_avg_sq", which[k++] = 3;
    } else {
        size_t nr, nc;
        if (gm_train_af_factored(t, i, &nr, &nc)) {
            suffix[k] = "v_row", which[k++] = 4;
            suffix[k] = "v_col", which[k++] = 5;
        } else {
            suffix[k] = "v", which[k++] = 3;
        }
    }
    if (p->norm) suffix[k] = "param", which[k++] = 0;
    return k;
}

static gm_status af_ready_fn(gm_trainer *t, gm_tdev *d, void *arg) {
    (void)arg;
    return gm_train_af_ready(t, d);
}

static gm_status af_set_fn(gm_trainer *t, gm_tdev *d, void *arg) {
    const float **a = arg; /* {index as pointer, which as pointer, data} */
    int i = (int)(intptr_t)a[0], which = (int)(intptr_t)a[1];
    size_t nr, nc;
    gm_train_af_factored(t, i, &nr, &nc);
    memcpy(which == 4 ? d->fr[i] : d->fc[i], a[2], (which == 4 ? nr : nc) * sizeof(float));
    return GM_OK;
}

/* Everything below runs on every rank; `w` (rank 0 only) is NULL elsewhere. A write error on rank 0 stops
 * further writes but not the gathers, so that no rank is left waiting. */
static gm_status save_model(gm_trainer *t, const char *path, bool writer, float *buf, float *work) {
    int nb = 0;
    gm_st_entry *e = calloc((size_t)t->n_params, sizeof *e);
    char (*names)[160] = calloc((size_t)t->n_params, sizeof *names);
    int *pidx = calloc((size_t)t->n_params, sizeof *pidx);
    if (!e || !names || !pidx) {
        free(e), free(names), free(pidx);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (p->lm >= 0) continue;
        hf_name(p, names[nb], sizeof names[0]);
        e[nb] = (gm_st_entry){names[nb], "F32", p->rows > 1 ? 2 : 1, {p->rows > 1 ? p->rows : p->cols, p->cols}};
        pidx[nb++] = i;
    }
    gm_st_writer w;
    gm_status wst = writer ? gm_st_write_begin(&w, path, e, (size_t)nb) : GM_OK;
    gm_status st = GM_OK;
    float *ab = NULL;
    if (t->opt.lora_rank > 0) {
        size_t most = 0;
        for (int i = 0; i < t->n_params; i++)
            if (t->params[i].lm >= 0 && (size_t)t->params[i].n > most) most = (size_t)t->params[i].n;
        ab = malloc(2 * most * sizeof *ab);
        if (!ab) st = gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < nb && st == GM_OK; k++) {
        int i = pidx[k];
        const gm_tparam *p = &t->params[i];
        st = gm_train_full_tensor(t, i, 0, buf);
        if (st == GM_OK && t->opt.lora_rank > 0 && p->lt >= 0 && p->rows > 1) {
            /* W + (alpha / r) B A: A and B are the next two parameters of this matrix */
            int ia = -1;
            for (int q = t->unit_first[p->unit]; q < t->unit_first[p->unit] + t->unit_count[p->unit]; q++)
                if (t->params[q].lm >= 0 && t->params[q].lt == p->lt && t->params[q].ab == 0) ia = q;
            if (ia >= 0) {
                size_t na = (size_t)t->params[ia].n;
                st = gm_train_full_tensor(t, ia, 0, ab);
                if (st == GM_OK) st = gm_train_full_tensor(t, ia + 1, 0, ab + na);
                if (st == GM_OK && writer) {
                    size_t r = (size_t)t->opt.lora_rank;
                    gm_sgemm_lookup(NULL)(false, false, (size_t)p->rows, (size_t)p->cols, r,
                                          (float)(t->opt.lora_alpha / t->opt.lora_rank), ab + na, r, ab, (size_t)p->cols,
                                          1.0f, buf, (size_t)p->cols, work);
                }
            }
        }
        if (st == GM_OK && writer && wst == GM_OK) {
            if (p->norm)
                for (uint64_t q = 0; q < p->n; q++) buf[q] -= 1.0f;
            wst = gm_st_write(&w, buf, (size_t)p->n * sizeof(float));
        }
    }
    if (writer) {
        if (st == GM_OK && wst == GM_OK) wst = gm_st_write_end(&w);
        else if (wst == GM_OK) gm_st_write_abort(&w);
    }
    free(e), free(names), free(pidx), free(ab);
    return st != GM_OK ? st : wst;
}

static gm_status save_state_tensors(gm_trainer *t, const char *path, bool writer, float *buf, bool adapters) {
    int cap = 3 * t->n_params, nb = 0;
    gm_st_entry *e = calloc((size_t)cap, sizeof *e);
    char (*names)[160] = calloc((size_t)cap, sizeof *names);
    int *pidx = calloc((size_t)cap, sizeof *pidx), *which = calloc((size_t)cap, sizeof *which);
    if (!e || !names || !pidx || !which) {
        free(e), free(names), free(pidx), free(which);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        const char *suf[4];
        int wh[4], ns = adapters ? (p->lm >= 0) : opt_states(t, i, suf, wh);
        if (adapters) suf[0] = NULL, wh[0] = 0;
        for (int s = 0; s < ns; s++) {
            if (suf[s]) snprintf(names[nb], sizeof names[0], "%s.%s", p->name, suf[s]);
            else snprintf(names[nb], sizeof names[0], "%s", p->name);
            e[nb] = (gm_st_entry){names[nb], "F32", 2, {p->rows, p->cols}};
            if (wh[s] >= 4) {
                size_t nr, nc;
                gm_train_af_factored(t, i, &nr, &nc);
                e[nb] = (gm_st_entry){names[nb], "F32", 1, {wh[s] == 4 ? nr : nc, 0}};
            }
            pidx[nb] = i, which[nb++] = wh[s];
        }
    }
    gm_st_writer w;
    gm_status wst = writer ? gm_st_write_begin(&w, path, e, (size_t)nb) : GM_OK, st = GM_OK;
    for (int k = 0; k < nb && st == GM_OK; k++) {
        if (which[k] >= 4) { /* replicated: local device 0's copy */
            size_t nr, nc;
            gm_train_af_factored(t, pidx[k], &nr, &nc);
            const float *v = which[k] == 4 ? t->dev[0].fr[pidx[k]] : t->dev[0].fc[pidx[k]];
            if (writer && wst == GM_OK) wst = gm_st_write(&w, v, (which[k] == 4 ? nr : nc) * sizeof(float));
            continue;
        }
        st = gm_train_full_tensor(t, pidx[k], which[k], buf);
        if (st == GM_OK && writer && wst == GM_OK) wst = gm_st_write(&w, buf, (size_t)t->params[pidx[k]].n * sizeof(float));
    }
    if (writer) {
        if (st == GM_OK && wst == GM_OK) wst = gm_st_write_end(&w);
        else if (wst == GM_OK) gm_st_write_abort(&w);
    }
    free(e), free(names), free(pidx), free(which);
    return st != GM_OK ? st : wst;
}

/* Rank 0's status to every rank (the others' own errors win). */
static gm_status share_status(gm_trainer *t, gm_status mine) {
    if (t->n_ranks == 1) return mine;
    int32_t code = t->rank == 0 ? (int32_t)mine : 0;
    gm_status bst = gm_mpi_broadcast(&code, sizeof code);
    if (mine != GM_OK) return mine;
    if (bst != GM_OK) return bst;
    if (code != GM_OK) return gm_fail((gm_status)code, "rank 0 could not write the checkpoint (see its message)");
    return GM_OK;
}

static gm_status prepare_dir(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (mkdir(dir, 0755) != 0) return gm_fail(GM_ERR_IO, "--out %s: cannot create the folder: %s", dir, strerror(errno));
    } else if (!S_ISDIR(sb.st_mode)) {
        return gm_fail(GM_ERR_IO, "--out %s: exists and is not a folder", dir);
    }
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.gemma-write-test", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return gm_fail(GM_ERR_IO, "--out %s: the folder is not writable: %s", dir, strerror(errno));
    close(fd);
    remove(probe);
    return GM_OK;
}

gm_status gm_trainer_save(gm_trainer *t, const char *dir) {
    bool writer = t->rank == 0;
    gm_status st = gm_train_run(t, af_ready_fn, NULL);
    if (st == GM_OK && writer) st = prepare_dir(dir);
    GM_TRY(share_status(t, st));
    size_t most = 0;
    for (int i = 0; i < t->n_params; i++)
        if ((size_t)t->params[i].n > most) most = (size_t)t->params[i].n;
    float *buf = malloc(most * sizeof *buf), *work = NULL;
    if (posix_memalign((void **)&work, 64, gm_sgemm_work_floats() * sizeof(float)) != 0) work = NULL;
    if (!buf || !work) st = gm_fail(GM_ERR_NOMEM, "cannot allocate %zu bytes to gather tensors", most * sizeof(float));
    outset o = {.n = 0};
    const char *p_model = add_out(&o, dir, "model.safetensors");
    const char *p_opt = add_out(&o, dir, "optimizer.safetensors");
    const char *p_ad = t->opt.lora_rank > 0 ? add_out(&o, dir, "adapter.safetensors") : NULL;
    if (st == GM_OK) st = save_model(t, p_model, writer, buf, work);
    if (st == GM_OK) st = save_state_tensors(t, p_opt, writer, buf, false);
    if (st == GM_OK && p_ad) st = save_state_tensors(t, p_ad, writer, buf, true);
    if (writer && st == GM_OK) {
        char *cfg = config_json(t);
        st = cfg ? write_text(add_out(&o, dir, "config.json"), cfg) : gm_fail(GM_ERR_NOMEM, "out of memory");
        free(cfg);
    }
    if (writer && st == GM_OK) {
        if (!gm_source_gguf(t->src)) { /* an HF folder: its tokenizer files as they are */
            const char *names[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"};
            for (size_t k = 0; k < sizeof names / sizeof names[0] && st == GM_OK; k++) {
                char from[1100];
                snprintf(from, sizeof from, "%s/%s", gm_source_path(t->src), names[k]);
                struct stat sb;
                if (stat(from, &sb) == 0) st = copy_file(from, add_out(&o, dir, names[k]));
            }
        } else if (t->tok) {
            st = gm_tokenizer_write_spm(t->tok, add_out(&o, dir, "tokenizer.model"));
        }
    }
    if (writer && st == GM_OK) {
        char *s = state_json(t);
        st = s ? write_text(add_out(&o, dir, "trainer_state.json"), s) : gm_fail(GM_ERR_NOMEM, "out of memory");
        free(s);
    }
    /* all written: put them in place (trainer_state.json last) */
    for (int i = 0; writer && st == GM_OK && i < o.n; i++)
        if (rename(o.tmp[i], o.fin[i]) != 0)
            st = gm_fail(GM_ERR_IO, "%s: cannot rename to %s: %s", o.tmp[i], o.fin[i], strerror(errno));
    if (writer && st == GM_OK) {
        int fd = open(dir, O_RDONLY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
    }
    for (int i = 0; writer && st != GM_OK && i < o.n; i++) remove(o.tmp[i]);
    free(buf);
    free(work);
    return share_status(t, st);
}

/* ---------------------------------------------------------------- resume */

typedef struct stfile {
    gm_file f;
    gm_safetensors st;
    char path[1100];
    bool open;
} stfile;

static gm_status st_open(stfile *s, const char *dir, const char *name) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s/%s", dir, name);
    GM_TRY(gm_file_open(&s->f, s->path));
    gm_status st = gm_safetensors_read(&s->f, &s->st);
    if (st != GM_OK) {
        gm_file_close(&s->f);
        return st;
    }
    s->open = true;
    return GM_OK;
}

static void st_close(stfile *s) {
    if (!s->open) return;
    gm_safetensors_free(&s->st);
    gm_file_close(&s->f);
    s->open = false;
}

static gm_status st_get(stfile *s, const char *name, uint64_t n, float *out) {
    const gm_st_tensor *e = gm_safetensors_find(&s->st, name);
    if (!e) return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' is missing", s->path, name);
    if (e->dtype != GM_F32 || e->nbytes != n * 4)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' is %s with %llu bytes, expected F32 with %llu", s->path, name,
                       e->dtype_name, (unsigned long long)e->nbytes, (unsigned long long)(n * 4));
    return gm_file_read(&s->f, e->offset, out, e->nbytes);
}

gm_status gm_trainer_resume(gm_trainer *t, const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    char *text;
    uint64_t len;
    GM_TRY(gm_file_slurp(path, 1 << 20, &text, &len));
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) return gm_fail(GM_ERR_FORMAT, "%s: not valid JSON", path);
    const cJSON *fmt = cJSON_GetObjectItem(j, "format"), *step = cJSON_GetObjectItem(j, "step");
    const cJSON *seen = cJSON_GetObjectItem(j, "examples_seen"), *rank = cJSON_GetObjectItem(j, "lora_rank");
    const cJSON *optn = cJSON_GetObjectItem(j, "optimizer");
    gm_status st = GM_OK;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "gemma.c training state") || !cJSON_IsNumber(step) ||
        !cJSON_IsNumber(rank) || !cJSON_IsString(optn) || step->valuedouble < 0)
        st = gm_fail(GM_ERR_FORMAT, "%s: not a gemma.c training state", path);
    else if (rank->valueint != t->opt.lora_rank)
        st = gm_fail(GM_ERR_ARG, "%s: the checkpoint was trained with LoRA rank %d, this run asks for %d", path,
                     rank->valueint, t->opt.lora_rank);
    else if (strcmp(optn->valuestring, t->opt.optimizer == GM_OPT_ADAMW ? "adamw" : "adafactor"))
        st = gm_fail(GM_ERR_ARG, "%s: the checkpoint's optimizer is %s", path, optn->valuestring);
    int64_t steps = st == GM_OK ? (int64_t)step->valuedouble : 0;
    int64_t ex = st == GM_OK && cJSON_IsNumber(seen) ? (int64_t)seen->valuedouble : 0;
    cJSON_Delete(j);
    GM_TRY(st);
    size_t most = 0;
    for (int i = 0; i < t->n_params; i++)
        if ((size_t)t->params[i].n > most) most = (size_t)t->params[i].n;
    float *buf = malloc(most * sizeof *buf);
    if (!buf) return gm_fail(GM_ERR_NOMEM, "out of memory");
    stfile model = {0}, opt = {0}, ad = {0};
    bool lora = t->opt.lora_rank > 0;
    st = gm_train_run(t, af_ready_fn, NULL);
    if (st == GM_OK) st = st_open(&opt, dir, "optimizer.safetensors");
    if (st == GM_OK) st = lora ? st_open(&ad, dir, "adapter.safetensors") : st_open(&model, dir, "model.safetensors");
    for (int i = 0; i < t->n_params && st == GM_OK; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        char name[200];
        if (p->lm >= 0) st = st_get(&ad, p->name, p->n, buf);
        else if (p->norm) {
            snprintf(name, sizeof name, "%s.param", p->name);
            st = st_get(&opt, name, p->n, buf);
        } else {
            hf_name(p, name, sizeof name);
            st = st_get(&model, name, p->n, buf);
        }
        if (st == GM_OK) st = gm_train_set_full(t, i, 0, buf);
        const char *suf[4];
        int wh[4], ns = opt_states(t, i, suf, wh);
        for (int s = 0; s < ns && st == GM_OK; s++) {
            if (wh[s] == 0) continue;
            snprintf(name, sizeof name, "%s.%s", p->name, suf[s]);
            if (wh[s] >= 4) {
                size_t nr, nc;
                gm_train_af_factored(t, i, &nr, &nc);
                st = st_get(&opt, name, wh[s] == 4 ? nr : nc, buf);
                const float *arg[3] = {(const float *)(intptr_t)i, (const float *)(intptr_t)wh[s], buf};
                if (st == GM_OK) st = gm_train_run(t, af_set_fn, arg);
                continue;
            }
            st = st_get(&opt, name, p->n, buf);
            if (st == GM_OK) st = gm_train_set_full(t, i, wh[s], buf);
        }
    }
    st_close(&model), st_close(&opt), st_close(&ad);
    free(buf);
    if (st == GM_OK) {
        t->step = steps;
        t->examples_seen = ex;
    }
    return st;
}
