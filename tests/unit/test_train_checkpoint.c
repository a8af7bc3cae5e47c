/* Checkpoints against the PyTorch curves of hf_train_tiny_ref (gen_train_refs.py):
 *   - 5 AdamW steps on 2 devices, save, resume on 1 device (and LoRA: 3 devices -> 2; Adafactor: 2 -> 3):
 *     steps 6..10 give PyTorch's (optax's) losses (1e-5 relative), so weights, optimizer moments and the step
 *     count survived;
 *   - the saved folder loads in the inference engine (gm_model_load: HF layout, norms as w, LoRA merged) and
 *     its logits give PyTorch's loss of batch 6 after 5 steps;
 *   - a save that fails (file size limit = disk full) reports an error, deletes its temporaries and leaves the
 *     previous checkpoint byte for byte; an --out that cannot be a folder is refused by name;
 *   - a NaN loss stops the step with its number and changes nothing;
 *   - the LoRA run's first 5 steps wait by yielding (gm_train_options.wait) and still give PyTorch's losses;
 *     an unknown wait value is refused. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "train_ref.h"

static void set_lora_curve(train_ref *r, gm_trainer *t) {
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (p->lm < 0) continue;
        char hf[160], key[200];
        train_ref_hf_name(p, hf, sizeof hf);
        if (p->ab == 1) continue; /* B = 0, as the trainer initialises it */
        snprintf(key, sizeof key, "lora_curve_init.%s", hf);
        uint64_t n;
        float *v = train_ref_tensor(r, key, &n);
        CHECK(gm_train_set_full(t, i, 0, v) == GM_OK, "set");
        free(v);
    }
}

static void steps(train_ref *r, gm_trainer *t, int from, int to, const double *want, const char *what) {
    for (int s = from; s < to; s++) {
        gm_train_stats st;
        gm_status rc = gm_trainer_step(t, r->batch[s], REF_SEQS, &st);
        CHECK(rc == GM_OK, "%s: step %d: %s", what, s + 1, gm_last_error());
        if (rc != GM_OK) return;
        CHECK(fabs(st.loss - want[s]) <= 1e-5 * fabs(want[s]), "%s: step %d: loss %.8f, PyTorch %.8f", what, s + 1,
              st.loss, want[s]);
    }
}

/* loss of batch s from the inference engine's logits of the saved folder */
static double inference_loss(train_ref *r, const char *dir, int s) {
    gm_load_options lo;
    gm_load_options_default(&lo);
    lo.use_mpi = false;
    lo.cache_length = 64;
    gm_model *m;
    if (gm_model_load(dir, &lo, &m) != GM_OK) {
        CHECK(0, "gm_model_load(%s): %s", dir, gm_last_error());
        return NAN;
    }
    int V = gm_model_config(m)->vocab_size;
    double sum = 0;
    int count = 0;
    for (int q = 0; q < REF_SEQS; q++) {
        const gm_train_example *x = &r->batch[s][q];
        gm_session *ss;
        float *logits = malloc((size_t)x->n * V * sizeof *logits);
        CHECK(gm_session_new(m, &ss) == GM_OK, "session");
        CHECK(gm_session_forward(ss, x->tokens, (size_t)x->n - 1, NULL, logits) == GM_OK, "%s", gm_last_error());
        for (int i = 0; i < x->n - 1; i++) {
            if (!x->loss_mask[i]) continue;
            const float *z = logits + (size_t)i * V;
            double mx = -INFINITY, se = 0;
            for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
            for (int v = 0; v < V; v++) se += exp(z[v] - mx);
            sum += mx + log(se) - z[x->tokens[i + 1]];
            count++;
        }
        free(logits);
        gm_session_free(ss);
    }
    gm_model_free(m);
    return sum / count;
}

static char *slurp(const char *dir, const char *name, size_t *n) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        n += l > 4 && !strcmp(e->d_name + l - 4, ".tmp");
    }
    if (d) closedir(d);
    return n;
}

static void rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        remove(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static void full_run(train_ref *r, const char *dir) {
    gm_train_options o;
    gm_trainer *t;
    train_ref_options(r, &o, 2, 0);
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    steps(r, t, 0, 5, r->full_losses, "full, 2 devices");
    CHECK(gm_trainer_save(t, dir) == GM_OK, "save: %s", gm_last_error());
    CHECK(count_tmp(dir) == 0, "temporaries left");

    /* a failing save (every write beyond 64 KiB fails, as on a full disk) leaves the checkpoint intact */
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "config.json"};
    char *before[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) before[i] = slurp(dir, files[i], &nb[i]);
    CHECK(gm_trainer_step(t, r->batch[5], REF_SEQS, NULL) == GM_OK, "step 6");
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    setrlimit(RLIMIT_FSIZE, &lim);
    gm_status rc = gm_trainer_save(t, dir);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(rc == GM_ERR_IO, "a save that cannot write must fail (got %s)", gm_status_name(rc));
    CHECK(strstr(gm_last_error(), dir) != NULL, "the message names the file: %s", gm_last_error());
    CHECK(count_tmp(dir) == 0, "temporaries left after the failed save");
    for (int i = 0; i < 4; i++) {
        size_t n;
        char *now = slurp(dir, files[i], &n);
        CHECK(before[i] && now && n == nb[i] && !memcmp(now, before[i], n), "%s changed by the failed save", files[i]);
        free(now), free(before[i]);
    }
    gm_trainer_free(t);

    /* resume on another device count: steps 6..10 as PyTorch */
    train_ref_options(r, &o, 1, 0);
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    CHECK(gm_trainer_resume(t, dir) == GM_OK, "resume: %s", gm_last_error());
    CHECK(gm_trainer_steps_done(t) == 5 && gm_trainer_examples_seen(t) == 5 * REF_SEQS, "step count restored");
    steps(r, t, 5, 10, r->full_losses, "full, resumed on 1 device");
    gm_trainer_free(t);

    double l = inference_loss(r, dir, 5);
    CHECK(fabs(l - r->full_losses[5]) <= 1e-5 * r->full_losses[5], "exported model: loss %.8f, PyTorch %.8f", l,
          r->full_losses[5]);
    printf("full: resumed curve matches; exported folder's loss %.7f (PyTorch %.7f)\n", l, r->full_losses[5]);
}

static void lora_run(train_ref *r, const char *dir) {
    gm_train_options o;
    gm_trainer *t;
    train_ref_options(r, &o, 3, 1);
    o.wait = (gm_wait)9;
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_ERR_ARG && strstr(gm_last_error(), "wait"), "wait 9: %s",
          gm_last_error());
    o.wait = GM_WAIT_YIELD; /* the policy changes how threads wait, not one loss */
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    set_lora_curve(r, t);
    steps(r, t, 0, 5, r->lora_losses, "LoRA, 3 devices, waits yielding");
    CHECK(gm_trainer_save(t, dir) == GM_OK, "save: %s", gm_last_error());
    gm_trainer_free(t);
    train_ref_options(r, &o, 2, 1);
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    CHECK(gm_trainer_resume(t, dir) == GM_OK, "resume: %s", gm_last_error());
    steps(r, t, 5, 10, r->lora_losses, "LoRA, resumed on 2 devices");
    gm_trainer_free(t);
    double l = inference_loss(r, dir, 5);
    CHECK(fabs(l - r->lora_losses[5]) <= 1e-5 * r->lora_losses[5], "exported merged model: loss %.8f, PyTorch %.8f", l,
          r->lora_losses[5]);
    printf("LoRA: resumed curve matches; merged export's loss %.7f (PyTorch %.7f)\n", l, r->lora_losses[5]);

    /* a full fine-tuning run cannot resume a LoRA checkpoint */
    train_ref_options(r, &o, 1, 0);
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    CHECK(gm_trainer_resume(t, dir) == GM_ERR_ARG && strstr(gm_last_error(), "LoRA rank"), "%s", gm_last_error());
    CHECK(gm_trainer_resume(t, "/nonexistent/ckpt") == GM_ERR_IO, "missing checkpoint");
    gm_trainer_free(t);
}

static void adafactor_run(train_ref *r, const char *dir) {
    gm_train_options o;
    gm_trainer *t;
    train_ref_options(r, &o, 2, 0);
    o.optimizer = GM_OPT_ADAFACTOR, o.lr = r->ada_lr, o.weight_decay = 0;
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    t->af_min_dim = r->ada_min_dim;
    steps(r, t, 0, 5, r->ada_losses, "Adafactor, 2 devices");
    CHECK(gm_trainer_save(t, dir) == GM_OK, "save: %s", gm_last_error());
    gm_trainer_free(t);
    o.devices = 3;
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    t->af_min_dim = r->ada_min_dim;
    CHECK(gm_trainer_resume(t, dir) == GM_OK, "resume: %s", gm_last_error());
    steps(r, t, 5, 10, r->ada_losses, "Adafactor, resumed on 3 devices");
    gm_trainer_free(t);
    printf("Adafactor: resumed curve matches optax\n");
}

static void bad_out_and_nan(train_ref *r) {
    gm_train_options o;
    gm_trainer *t;
    train_ref_options(r, &o, 2, 0);
    CHECK(gm_trainer_create(r->folder, &o, &t) == GM_OK, "%s", gm_last_error());
    char file[] = "/tmp/gm_ckpt_file_XXXXXX";
    close(mkstemp(file));
    char under[128];
    snprintf(under, sizeof under, "%s/ckpt", file);
    CHECK(gm_trainer_save(t, file) == GM_ERR_IO && strstr(gm_last_error(), "not a folder"), "%s", gm_last_error());
    CHECK(gm_trainer_save(t, under) == GM_ERR_IO && strstr(gm_last_error(), under), "%s", gm_last_error());
    remove(file);

    /* NaN in a weight: the step reports its number, applies nothing */
    int pq = gm_train_find_param(t, "blk.1.attn_q.weight"), pk = gm_train_find_param(t, "blk.0.ffn_up.weight");
    float *q = malloc((size_t)t->params[pq].n * sizeof *q), *k0 = malloc((size_t)t->params[pk].n * sizeof *k0);
    float *k1 = malloc((size_t)t->params[pk].n * sizeof *k1);
    CHECK(gm_trainer_step(t, r->batch[0], REF_SEQS, NULL) == GM_OK, "step 1");
    CHECK(gm_train_full_tensor(t, pq, 0, q) == GM_OK, "gather");
    q[3] = NAN;
    CHECK(gm_train_set_full(t, pq, 0, q) == GM_OK, "set");
    CHECK(gm_train_full_tensor(t, pk, 0, k0) == GM_OK, "gather");
    gm_status rc = gm_trainer_step(t, r->batch[1], REF_SEQS, NULL);
    CHECK(rc == GM_ERR_RANGE && strstr(gm_last_error(), "step 2") && strstr(gm_last_error(), "NaN"), "NaN loss: %s",
          gm_last_error());
    CHECK(gm_train_full_tensor(t, pk, 0, k1) == GM_OK && !memcmp(k0, k1, (size_t)t->params[pk].n * 4),
          "weights changed by the refused step");
    CHECK(gm_trainer_steps_done(t) == 1, "the refused step is not counted");
    free(q), free(k0), free(k1);
    gm_trainer_free(t);
}

int main(void) {
    train_ref r;
    train_ref_load(&r);
    char dir[] = "/tmp/gm_ckpt_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char sub[64];
    snprintf(sub, sizeof sub, "%s/run", dir); /* created by save */
    full_run(&r, sub);
    rm_rf(sub);
    lora_run(&r, sub);
    rm_rf(sub);
    adafactor_run(&r, sub);
    rm_rf(sub);
    bad_out_and_nan(&r);
    rmdir(dir);
    train_ref_free(&r);
    return gm_test_finish();
}
