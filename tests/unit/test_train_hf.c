/* The trainer against PyTorch autograd through transformers' Gemma3ForCausalLM (float32, eager) on the
 * tiny random model of tests/fixtures/hf_train_tiny (gen_train_refs.py), on 1, 2 and 4 in-process
 * devices (FSDP; and 3 devices with every matrix split by rows or by columns, unevenly, which the
 * kauldron rule only does for tensors over 4 MiB) — and, launched by mpirun (tests/cli/train_mpi.sh),
 * on 2 ranks:
 *   - the loss of batch 0 and the gradient of every parameter (relative L2 error <= 1e-4 per tensor);
 *   - the same with LoRA adapters (rank 4, random A and B from the fixture): adapter gradients;
 *   - 10 AdamW steps (full fine-tuning, and LoRA from B = 0): every step's loss within 1e-5 relative;
 *   - 10 Adafactor steps against optax.adafactor on the seed's parameter layout (blocks of at least 16 factored,
 *     so factored and unfactored tensors both occur): every step's loss within 1e-5 relative. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "test_util.h"
#include "train_ref.h"

static int mpi_rank_is_root = 1;

static void check_grads(train_ref *r, gm_trainer *t, bool lora, const char *what) {
    double loss;
    CHECK(gm_trainer_grads(t, r->batch[0], REF_SEQS, &loss) == GM_OK, "%s: %s", what, gm_last_error());
    double want = lora ? r->lora_loss : r->loss;
    CHECK(fabs(loss - want) <= 1e-5 * fabs(want), "%s: loss %.8f, PyTorch %.8f", what, loss, want);
    int compared = 0;
    double worst = 0;
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (!p->trainable) continue;
        char hf[160], key[200];
        train_ref_hf_name(p, hf, sizeof hf);
        snprintf(key, sizeof key, "%s%s", lora ? "lora_grad." : "grad.", hf);
        uint64_t n;
        float *ref = train_ref_tensor(r, key, &n);
        float *mine = malloc((size_t)p->n * sizeof *mine);
        CHECK(n == p->n, "%s: %s has %llu elements, reference %llu", what, p->name, (unsigned long long)p->n,
              (unsigned long long)n);
        CHECK(gm_train_full_tensor(t, i, 1, mine) == GM_OK, "%s", gm_last_error());
        double e = rel_err(mine, ref, (size_t)n);
        if (e > worst) worst = e;
        CHECK(e <= 1e-4, "%s: gradient of %s: relative error %.3g vs PyTorch", what, p->name, e);
        compared++;
        free(ref), free(mine);
    }
    CHECK(compared == (lora ? 3 * 14 : 3 * 13 + 2), "%s: %d gradients compared", what, compared);
    if (mpi_rank_is_root) printf("%s: loss %.7f (PyTorch %.7f), %d gradients, worst relative error %.2e\n", what, loss, want, compared, worst);
}

/* Set every LoRA tensor from the fixture (prefix "lora_init." or "lora_curve_init."; B zero if absent). */
static void set_lora(train_ref *r, gm_trainer *t, const char *prefix, bool with_b) {
    for (int i = 0; i < t->n_params; i++) {
        const gm_tparam *p = &t->params[i];
        if (p->lm < 0) continue;
        char hf[160], key[200];
        train_ref_hf_name(p, hf, sizeof hf);
        snprintf(key, sizeof key, "%s%s", prefix, hf);
        if (p->ab == 1 && !with_b) {
            float *z = calloc((size_t)p->n, sizeof *z);
            CHECK(gm_train_set_full(t, i, 0, z) == GM_OK, "set");
            free(z);
            continue;
        }
        uint64_t n;
        float *v = train_ref_tensor(r, key, &n);
        CHECK(n == p->n && gm_train_set_full(t, i, 0, v) == GM_OK, "set %s", key);
        free(v);
    }
}

static void check_curve(train_ref *r, gm_trainer *t, const double *want, const char *what) {
    double worst = 0;
    for (int s = 0; s < REF_STEPS; s++) {
        gm_train_stats st;
        gm_status rc = gm_trainer_step(t, r->batch[s], REF_SEQS, &st);
        CHECK(rc == GM_OK, "%s: step %d: %s", what, s + 1, gm_last_error());
        if (rc != GM_OK) return;
        double e = fabs(st.loss - want[s]) / fabs(want[s]);
        if (e > worst) worst = e;
        CHECK(e <= 1e-5, "%s: step %d: loss %.8f, PyTorch %.8f (relative %.2e)", what, s + 1, st.loss, want[s], e);
    }
    if (mpi_rank_is_root) printf("%s: 10 steps, worst relative loss difference %.2e\n", what, worst);
}

static void run_ex(train_ref *r, int devices, int force_split) {
    char what[64];
    gm_train_options o;
    gm_trainer *t;
    int P;

    train_ref_options(r, &o, devices, 0);
    CHECK(gm_trainer_create_ex(r->folder, &o, force_split, &t) == GM_OK, "create: %s", gm_last_error());
    P = gm_trainer_devices(t);
    snprintf(what, sizeof what, "full, %d device%s%s", P, P > 1 ? "s" : "", force_split ? " (row/column splits)" : "");
    check_grads(r, t, false, what);
    check_curve(r, t, r->full_losses, what);
    gm_trainer_free(t);

    train_ref_options(r, &o, devices, 0);
    o.optimizer = GM_OPT_ADAFACTOR;
    o.lr = r->ada_lr;
    o.weight_decay = 0;
    CHECK(gm_trainer_create_ex(r->folder, &o, force_split, &t) == GM_OK, "create: %s", gm_last_error());
    t->af_min_dim = r->ada_min_dim;
    snprintf(what, sizeof what, "Adafactor, %d device%s%s", P, P > 1 ? "s" : "", force_split ? " (row/column splits)" : "");
    check_curve(r, t, r->ada_losses, what);
    gm_trainer_free(t);

    train_ref_options(r, &o, devices, 1);
    CHECK(gm_trainer_create_ex(r->folder, &o, force_split, &t) == GM_OK, "create: %s", gm_last_error());
    snprintf(what, sizeof what, "LoRA, %d device%s%s", P, P > 1 ? "s" : "", force_split ? " (row/column splits)" : "");
    set_lora(r, t, "lora_init.", true);
    check_grads(r, t, true, what);
    gm_trainer_free(t);
    CHECK(gm_trainer_create_ex(r->folder, &o, force_split, &t) == GM_OK, "create: %s", gm_last_error());
    set_lora(r, t, "lora_curve_init.", false);
    check_curve(r, t, r->lora_losses, what);
    gm_trainer_free(t);
}

static void run(train_ref *r, int devices) { run_ex(r, devices, 0); }

int main(void) {
    train_ref r;
    train_ref_load(&r);
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) {
        if (!gm_mpi_available()) {
            printf("no MPI in this build: skipped\n");
            return 77;
        }
        mpi_rank_is_root = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0") == 0;
        run(&r, 1);
        run_ex(&r, 1, 1);
        train_ref_free(&r);
        int rc = gm_test_finish();
        gm_mpi_finalize();
        return rc;
    }
    run(&r, 1);
    run(&r, 2);
    run(&r, 4);
    run_ex(&r, 3, 1); /* uneven row and column splits */
    train_ref_free(&r);
    return gm_test_finish();
}
