/* gemma train: fine-tune on JSONL data (full or LoRA), FSDP over --devices and MPI ranks, evaluation,
 * checkpoints in Hugging Face layout that `gemma generate -m DIR` loads, resume on any device count.
 * Under mpirun every rank runs this same loop (SPMD); rank 0 prints and writes. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "cli.h"
#ifdef GM_HAVE_MPI
#include <mpi.h>
#endif

static const char *HELP =
    "usage: gemma train -m MODEL --data TRAIN.jsonl [options]\n"
    "  Fine-tunes MODEL (GGUF file or Hugging Face folder) in f32 on JSONL lines {\"prompt\", \"response\"}\n"
    "  (chat format, loss on the response and its <end_of_turn>) or {\"text\"} (loss on every token).\n"
    "  -m, --model PATH       model to start from\n"
    "  --data FILE            training data (JSONL)\n"
    "  --eval FILE            evaluation data: mean loss at step 0, every --eval-every steps and at the end\n"
    "  --devices N            in-process devices sharing the model FSDP-style (default 1); under mpirun each\n"
    "                         rank brings N\n"
    "  --threads T            threads per device (default 1)\n"
    "  --wait W               auto, spin or yield (default auto: yield at once when devices x threads x ranks on\n"
    "                         this host exceed the CPUs)\n"
    "  --lora RANK            train rank-RANK adapters on q,k,v,o,gate,up,down; the base stays frozen\n"
    "  --lora-alpha A         adapter scale A / RANK (default 2 * RANK)\n"
    "  --steps S              optimizer steps in all, counting those of a resumed run (default 100)\n"
    "  --batch B              examples per step, split over the devices (default 8)\n"
    "  --seq-len L            longer examples are cut to L tokens (counted in the summary; default 512)\n"
    "  --lr LR                learning rate (default 1e-4)\n"
    "  --warmup W             linear warm-up over the first W steps (default 0)\n"
    "  --weight-decay WD      AdamW decoupled weight decay (default 0)\n"
    "  --clip C               clip the global gradient norm to C (default 0 = off)\n"
    "  --optimizer NAME       adamw (default) or adafactor\n"
    "  --seed N               data order and LoRA initialisation (default 0)\n"
    "  --out DIR              checkpoint folder (config.json, model.safetensors, tokenizer, optimizer state)\n"
    "  --save-every K         also save every K steps (default: only at the end)\n"
    "  --resume DIR           continue from a checkpoint (any device count)\n"
    "  --eval-every K         evaluate every K steps (default 0: only at step 0 and at the end)\n"
    "  --strict               refuse the data at its first malformed line instead of skipping it\n"
    "  --json                 one JSON object per line on stdout: {\"step\",\"loss\",\"tok_s\"} per step,\n"
    "                         {\"step\",\"eval_loss\"} per evaluation (step 0 included)\n"
    "  --plot PNG             draw the training and evaluation losses into PNG at the end\n"
    "  --quiet                no per-step lines (with --json: only the JSON)\n";

typedef struct history {
    int64_t *steps, *esteps;
    double *loss, *eloss;
    size_t n, ne, cap, ecap;
} history;

static void remember(int64_t **st, double **v, size_t *n, size_t *cap, int64_t step, double x) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        int64_t *a = realloc(*st, c * sizeof *a);
        if (a) *st = a;
        double *b = realloc(*v, c * sizeof *b);
        if (b) *v = b;
        if (!a || !b) return;
        *cap = c;
    }
    (*st)[*n] = step, (*v)[*n] = x, (*n)++;
}

typedef struct train_flags {
    const char *model, *data, *eval, *out, *resume, *plot;
    gm_train_options opt;
    long steps, batch, seq_len, warmup, save_every, eval_every;
    bool strict, json, quiet;
} train_flags;

static void warn_line(void *user, const char *msg) {
    if (*(int *)user == 0) fprintf(stderr, "gemma train: warning: %s\n", msg);
}

static int parse(int argc, char **argv, train_flags *f) {
    memset(f, 0, sizeof *f);
    gm_train_options_default(&f->opt);
    f->steps = 100, f->batch = 8, f->seq_len = 512;
    for (int i = 1; i < argc; i++) {
        const char *v;
        long n;
        double d;
        const char *a = argv[i];
#define VAL(name, alias) cli_flag_value(argc, argv, &i, name, alias, &v)
#define NEED(cond, msg)                                                                                                \
    do {                                                                                                               \
        if (!v || !(cond)) return cli_usage_error("train", "%s", msg);                                                 \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(HELP, stdout);
            return 0;
        } else if (VAL("--model", "-m")) {
            NEED(1, "-m needs a path");
            f->model = v;
        } else if (VAL("--data", NULL)) {
            NEED(1, "--data needs a file");
            f->data = v;
        } else if (VAL("--eval", NULL)) {
            NEED(1, "--eval needs a file");
            f->eval = v;
        } else if (VAL("--out", NULL)) {
            NEED(1, "--out needs a folder");
            f->out = v;
        } else if (VAL("--plot", NULL)) {
            NEED(1, "--plot needs a file name");
            f->plot = v;
        } else if (VAL("--resume", NULL)) {
            NEED(1, "--resume needs a folder");
            f->resume = v;
        } else if (VAL("--devices", NULL)) {
            NEED(cli_parse_int(v, 1, 256, &n), "--devices wants an integer from 1 to 256");
            f->opt.devices = (int)n;
        } else if (VAL("--threads", "-t")) {
            NEED(cli_parse_int(v, 1, 256, &n), "--threads wants an integer from 1 to 256");
            f->opt.threads_per_device = (int)n;
        } else if (VAL("--wait", NULL)) {
            NEED(!strcmp(v, "auto") || !strcmp(v, "spin") || !strcmp(v, "yield"), "--wait wants auto, spin or yield");
            f->opt.wait = !strcmp(v, "spin") ? GM_WAIT_SPIN : !strcmp(v, "yield") ? GM_WAIT_YIELD : GM_WAIT_AUTO;
        } else if (VAL("--lora", NULL)) {
            NEED(cli_parse_int(v, 1, 4096, &n), "--lora wants a rank from 1 to 4096");
            f->opt.lora_rank = (int)n;
        } else if (VAL("--lora-alpha", NULL)) {
            NEED(cli_parse_float(v, 1e-6, 1e6, &d), "--lora-alpha wants a positive number");
            f->opt.lora_alpha = d;
        } else if (VAL("--steps", NULL)) {
            NEED(cli_parse_int(v, 0, 100000000, &f->steps), "--steps wants an integer >= 0");
        } else if (VAL("--batch", NULL)) {
            NEED(cli_parse_int(v, 1, 1 << 20, &f->batch), "--batch wants an integer >= 1");
        } else if (VAL("--seq-len", NULL)) {
            NEED(cli_parse_int(v, 2, 1 << 20, &f->seq_len), "--seq-len wants an integer >= 2");
        } else if (VAL("--lr", NULL)) {
            NEED(cli_parse_float(v, 0, 10, &f->opt.lr), "--lr wants a number from 0 to 10");
        } else if (VAL("--warmup", NULL)) {
            NEED(cli_parse_int(v, 0, 100000000, &f->warmup), "--warmup wants an integer >= 0");
        } else if (VAL("--weight-decay", NULL)) {
            NEED(cli_parse_float(v, 0, 10, &f->opt.weight_decay), "--weight-decay wants a number from 0 to 10");
        } else if (VAL("--clip", NULL)) {
            NEED(cli_parse_float(v, 0, 1e9, &f->opt.clip_norm), "--clip wants a number >= 0");
        } else if (VAL("--optimizer", NULL)) {
            NEED(!strcmp(v, "adamw") || !strcmp(v, "adafactor"), "--optimizer wants adamw or adafactor");
            f->opt.optimizer = !strcmp(v, "adamw") ? GM_OPT_ADAMW : GM_OPT_ADAFACTOR;
        } else if (VAL("--seed", NULL)) {
            NEED(cli_parse_int(v, 0, 0x7fffffffL, &n), "--seed wants an integer from 0 to 2^31 - 1");
            f->opt.seed = (uint64_t)n;
        } else if (VAL("--save-every", NULL)) {
            NEED(cli_parse_int(v, 0, 100000000, &f->save_every), "--save-every wants an integer >= 0");
        } else if (VAL("--eval-every", NULL)) {
            NEED(cli_parse_int(v, 0, 100000000, &f->eval_every), "--eval-every wants an integer >= 0");
        } else if (!strcmp(a, "--strict")) {
            f->strict = true;
        } else if (!strcmp(a, "--json")) {
            f->json = true;
        } else if (!strcmp(a, "--quiet")) {
            f->quiet = true;
        } else {
            return cli_usage_error("train", "unknown argument '%s'", a);
        }
#undef VAL
#undef NEED
    }
    if (!f->model) return cli_usage_error("train", "no model given (-m PATH)");
    if (!f->data) return cli_usage_error("train", "no training data given (--data FILE)");
    if (f->save_every && !f->out) return cli_usage_error("train", "--save-every needs --out");
    return -1; /* parsed: go on */
}

/* A rank that cannot go on ends the whole MPI job so that no rank waits in a collective (as cli_model.c). */
static void abort_mpi_job(void) {
#ifdef GM_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
}

/* ---- data order: a fresh permutation of the examples every epoch, from the seed ---- */

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct order {
    size_t n;
    size_t *perm;
    int64_t epoch;
    uint64_t seed;
} order;

static size_t example_at(order *o, int64_t k) {
    int64_t e = k / (int64_t)o->n;
    if (e != o->epoch) {
        for (size_t i = 0; i < o->n; i++) o->perm[i] = i;
        uint64_t s = mix(o->seed ^ mix((uint64_t)e + 1));
        for (size_t i = o->n - 1; i > 0; i--) {
            s = mix(s);
            size_t j = (size_t)(s % (i + 1));
            size_t t = o->perm[i];
            o->perm[i] = o->perm[j], o->perm[j] = t;
        }
        o->epoch = e;
    }
    return o->perm[k % (int64_t)o->n];
}

static void print_memory(gm_trainer *t, FILE *out, const char *when) {
    int P = gm_trainer_devices(t), local = P / gm_trainer_ranks(t);
    for (int i = 0; i < local; i++) {
        gm_train_memory m = gm_trainer_memory(t, i);
        fprintf(out, "memory %s, device %d: %.1f MiB (weights %.1f, gradients %.1f, optimizer %.1f, gathered %.1f, "
                     "activations %.1f)\n",
                when, gm_trainer_rank(t) * local + i, m.total / 1048576.0, m.params / 1048576.0, m.grads / 1048576.0,
                m.optimizer / 1048576.0, m.gathered / 1048576.0, m.activations / 1048576.0);
    }
}

static gm_status evaluate(gm_trainer *t, const gm_dataset *d, long batch, double *loss) {
    size_t n = gm_dataset_size(d);
    gm_train_example *b = malloc((size_t)batch * sizeof *b);
    if (!b) return gm_fail(GM_ERR_NOMEM, "out of memory");
    double sum = 0;
    int64_t count = 0;
    gm_status st = GM_OK;
    for (size_t i = 0; i < n && st == GM_OK; i += (size_t)batch) {
        int k = 0;
        for (size_t j = i; j < n && k < batch; j++) b[k++] = *gm_dataset_get(d, j);
        double s;
        int64_t c;
        st = gm_trainer_eval(t, b, k, &s, &c);
        sum += s, count += c;
    }
    free(b);
    *loss = count ? sum / (double)count : NAN;
    return st;
}

int cmd_train(int argc, char **argv) {
    train_flags f;
    int pr = parse(argc, argv, &f);
    if (pr >= 0) return pr;
    FILE *info = f.json ? stderr : stdout;
    gm_trainer *t = NULL;
    gm_dataset *train = NULL, *eval = NULL;
    gm_train_example *batch = NULL;
    order ord = {0};
    history hist = {0};
    int rc = 0;
    gm_status st = gm_trainer_create(f.model, &f.opt, &t);
    if (st != GM_OK) {
        cli_error("train", "%s", gm_last_error());
        abort_mpi_job();
        return 1;
    }
    int root = gm_trainer_rank(t) == 0, muted = !root;
    if (!gm_trainer_tokenizer(t)) {
        rc = cli_error("train", "%s has no tokenizer: text data cannot be tokenized", f.model);
        goto done;
    }
    gm_dataset_options dopt = {.seq_len = (int)f.seq_len, .strict = f.strict, .warn = warn_line, .user = &muted};
    if (gm_dataset_load(f.data, gm_trainer_tokenizer(t), &dopt, &train) != GM_OK) {
        rc = cli_error("train", "%s", gm_last_error());
        goto done;
    }
    if (f.eval && gm_dataset_load(f.eval, gm_trainer_tokenizer(t), &dopt, &eval) != GM_OK) {
        rc = cli_error("train", "%s", gm_last_error());
        goto done;
    }
    if (f.resume && gm_trainer_resume(t, f.resume) != GM_OK) {
        rc = cli_error("train", "--resume %s: %s", f.resume, gm_last_error());
        goto done;
    }
    if (root) {
        const gm_config *c = gm_trainer_config(t);
        gm_dataset_summary s = gm_dataset_summary_of(train);
        fprintf(info, "model %s: %d layers, d_model %d, vocab %d; %s, %llu of %llu parameters trained\n", f.model,
                c->n_layers, c->d_model, c->vocab_size, f.opt.lora_rank ? "LoRA" : "full fine-tuning",
                (unsigned long long)gm_trainer_param_count(t, true), (unsigned long long)gm_trainer_param_count(t, false));
        fprintf(info, "mesh: %d device%s (%d rank%s x %d), %d thread%s each; optimizer %s, lr %g, batch %ld, seq-len %ld\n",
                gm_trainer_devices(t), gm_trainer_devices(t) > 1 ? "s" : "", gm_trainer_ranks(t),
                gm_trainer_ranks(t) > 1 ? "s" : "", f.opt.devices, f.opt.threads_per_device,
                f.opt.threads_per_device > 1 ? "s" : "", f.opt.optimizer == GM_OPT_ADAMW ? "adamw" : "adafactor",
                f.opt.lr, f.batch, f.seq_len);
        fprintf(info, "data %s: %lld examples (%lld lines, %lld blank, %lld malformed skipped, %lld truncated to %ld "
                      "tokens, %lld without response tokens skipped); %lld tokens, %lld counted in the loss\n",
                f.data, (long long)s.examples, (long long)s.lines, (long long)s.blank, (long long)s.malformed,
                (long long)s.truncated, f.seq_len, (long long)s.no_loss, (long long)s.tokens, (long long)s.loss_tokens);
        if (eval) {
            gm_dataset_summary e = gm_dataset_summary_of(eval);
            fprintf(info, "eval %s: %lld examples (%lld malformed skipped, %lld truncated)\n", f.eval,
                    (long long)e.examples, (long long)e.malformed, (long long)e.truncated);
        }
        if (f.resume)
            fprintf(info, "resumed from %s at step %lld\n", f.resume, (long long)gm_trainer_steps_done(t));
        print_memory(t, info, "before the first step");
    }
    batch = malloc((size_t)f.batch * sizeof *batch);
    ord.n = gm_dataset_size(train);
    ord.perm = malloc(ord.n * sizeof *ord.perm);
    ord.epoch = -1;
    ord.seed = f.opt.seed;
    if (!batch || !ord.perm) {
        rc = cli_error("train", "out of memory");
        goto done;
    }
    cli_install_sigint();
    int64_t step = gm_trainer_steps_done(t), last_eval = -1;
    double lr0 = f.opt.lr;
    if (eval && step < f.steps) {
        double el;
        if ((st = evaluate(t, eval, f.batch, &el)) != GM_OK) goto step_failed;
        last_eval = step;
        remember(&hist.esteps, &hist.eloss, &hist.ne, &hist.ecap, step, el);
        if (root && f.json) printf("{\"step\":%lld,\"eval_loss\":%.6f}\n", (long long)step, el);
        else if (root) fprintf(info, "step %lld: eval loss %.4f\n", (long long)step, el);
        fflush(stdout);
    }
    bool printed_memory = false;
    while (step < f.steps && !cli_interrupted) {
        int64_t seen = gm_trainer_examples_seen(t);
        for (long k = 0; k < f.batch; k++) batch[k] = *gm_dataset_get(train, example_at(&ord, seen + k));
        double lr = f.warmup > 0 && step < f.warmup ? lr0 * (double)(step + 1) / (double)f.warmup : lr0;
        gm_trainer_set_lr(t, lr);
        gm_train_stats s;
        if ((st = gm_trainer_step(t, batch, (int)f.batch, &s)) != GM_OK) goto step_failed;
        step = gm_trainer_steps_done(t);
        double tok_s = s.seconds > 0 ? (double)s.tokens / s.seconds : 0;
        remember(&hist.steps, &hist.loss, &hist.n, &hist.cap, step, s.loss);
        if (root && f.json) printf("{\"step\":%lld,\"loss\":%.6f,\"tok_s\":%.1f}\n", (long long)step, s.loss, tok_s);
        else if (root && !f.quiet)
            fprintf(info, "step %lld/%ld: loss %.4f, grad norm %.3f, lr %.3g, %.1f tok/s\n", (long long)step, f.steps,
                    s.loss, s.grad_norm, lr, tok_s);
        fflush(stdout);
        if (root && !printed_memory) {
            print_memory(t, f.quiet && f.json ? stderr : info, "after the first step");
            printed_memory = true;
        }
        bool last = step == f.steps;
        if (eval && ((f.eval_every && step % f.eval_every == 0) || last)) {
            double el;
            if ((st = evaluate(t, eval, f.batch, &el)) != GM_OK) goto step_failed;
            last_eval = step;
            remember(&hist.esteps, &hist.eloss, &hist.ne, &hist.ecap, step, el);
            if (root && f.json) printf("{\"step\":%lld,\"eval_loss\":%.6f}\n", (long long)step, el);
            else if (root) fprintf(info, "step %lld: eval loss %.4f\n", (long long)step, el);
            fflush(stdout);
        }
        if (f.out && f.save_every && step % f.save_every == 0 && !last) {
            if ((st = gm_trainer_save(t, f.out)) != GM_OK) {
                rc = cli_error("train", "saving step %lld: %s", (long long)step, gm_last_error());
                goto done;
            }
            if (root && !f.quiet) fprintf(info, "saved step %lld to %s\n", (long long)step, f.out);
        }
    }
    (void)last_eval;
    if (f.out) {
        if ((st = gm_trainer_save(t, f.out)) != GM_OK) {
            rc = cli_error("train", "saving step %lld: %s", (long long)step, gm_last_error());
            goto done;
        }
        if (root) fprintf(info, "saved step %lld to %s\n", (long long)step, f.out);
    }
    if (root && f.plot && hist.n + hist.ne > 0) {
        char title[256], what[64] = "full fine-tuning";
        if (f.opt.lora_rank) snprintf(what, sizeof what, "LoRA rank %d", f.opt.lora_rank);
        snprintf(title, sizeof title, "gemma train: %s, batch %ld, lr %g", what, f.batch, lr0);
        if (gm_plot_loss_png(f.plot, hist.steps, hist.loss, hist.n, hist.esteps, hist.eloss, hist.ne, title) != GM_OK)
            rc = cli_error("train", "%s", gm_last_error());
        else fprintf(info, "plot written to %s\n", f.plot);
    }
    if (cli_interrupted) rc = 130;
    goto done;
step_failed:
    /* NaN/Inf loss or a failed collective: nothing is saved from this state */
    rc = cli_error("train", "%s%s", gm_last_error(), f.out ? "; nothing was saved (the last checkpoint, if any, is intact)" : "");
done:
    if (rc != 0 && rc != 130 && t && gm_trainer_ranks(t) > 1) abort_mpi_job(); /* no rank left waiting */
    free(batch);
    free(ord.perm);
    free(hist.steps), free(hist.loss), free(hist.esteps), free(hist.eloss);
    gm_dataset_free(train);
    gm_dataset_free(eval);
    gm_trainer_free(t);
    gm_shutdown();
    return rc;
}
