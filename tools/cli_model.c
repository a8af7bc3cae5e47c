#define _POSIX_C_SOURCE 200809L
/* Flags every model command shares, and loading a model onto the mesh from the CLI. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#ifdef GM_HAVE_MPI
#include <mpi.h>
#endif

/* internal: plan names (no public parser needed beyond the CLI) */
#include "shard/plan.h"
#include "shard/comm.h"

const char *CLI_MODEL_FLAGS_HELP =
    "  -m, --model PATH       GGUF file or Hugging Face model folder\n"
    "  --devices N            in-process devices of this process (default 1); under mpirun each rank brings N\n"
    "  --threads T            threads per device (default 1)\n"
    "  --sharding RULE        fsdp (default with several devices), tp or replicated\n"
    "  --cache-length N       KV cache positions (default 4096)\n"
    "  --precision P          exact (default: products as accurate as f32) or fast (activations rounded as\n"
    "                         llama.cpp rounds them: 8 bits per 32 values, bf16 for BF16 weights; ~1.5x prefill)\n"
    "  --kv-cache T           f32 or f16 keys and values (default: f32 with exact precision, f16 with fast;\n"
    "                         f16 halves the cache's memory and attention's reads)\n"
    "  --weight-cache DIR     keep the packed weights (one file per model, sharding and device) and the built\n"
    "                         tokenizer (one per model) in DIR, written on the first load: later loads map them\n"
    "                         instead of packing and building (270M: ~0.3 s -> ~0.01 s)\n"
    "  --wait W               how threads wait for each other: spin (briefly, then yield, then sleep; a few\n"
    "                         microseconds, then sleep, where waits keep running long), yield (sleep at once:\n"
    "                         for more busy threads than cores) or auto (default: yield when\n"
    "                         devices x threads x ranks on this host exceed the CPUs this process may use);\n"
    "                         under mpirun also how ranks wait in MPI (OpenMPI's mpi_yield_when_idle, unless\n"
    "                         set: auto polls unless this host's ranks outnumber its CPUs)\n";

void cli_model_flags_init(cli_model_flags *f) {
    memset(f, 0, sizeof *f);
    gm_load_options_default(&f->load);
}

int cli_model_flag(const char *cmd, int argc, char **argv, int *i, cli_model_flags *f) {
    const char *v;
    long n;
    const char *flag = argv[*i];
    if (cli_flag_value(argc, argv, i, "--model", "-m", &v)) {
        if (!v) return cli_usage_error(cmd, "%s needs a path", flag), -1;
        f->model = v;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--devices", NULL, &v)) {
        if (!cli_parse_int(v, 1, 256, &n)) return cli_usage_error(cmd, "--devices wants an integer from 1 to 256"), -1;
        f->load.devices = (int)n;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--threads", "-t", &v)) {
        if (!cli_parse_int(v, 1, 256, &n)) return cli_usage_error(cmd, "--threads wants an integer from 1 to 256"), -1;
        f->load.threads_per_device = (int)n;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--sharding", NULL, &v)) {
        if (!v || gm_sharding_parse(v, &f->load.sharding) != GM_OK)
            return cli_usage_error(cmd, "--sharding wants fsdp, tp or replicated"), -1;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--precision", NULL, &v)) {
        if (v && !strcmp(v, "exact")) f->load.precision = GM_PRECISION_EXACT;
        else if (v && !strcmp(v, "fast")) f->load.precision = GM_PRECISION_FAST;
        else return cli_usage_error(cmd, "--precision wants exact or fast"), -1;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--kv-cache", NULL, &v)) {
        if (v && !strcmp(v, "f32")) f->load.kv_type = GM_KV_F32;
        else if (v && !strcmp(v, "f16")) f->load.kv_type = GM_KV_F16;
        else return cli_usage_error(cmd, "--kv-cache wants f32 or f16"), -1;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--wait", NULL, &v)) {
        if (v && !strcmp(v, "auto")) f->load.wait = GM_WAIT_AUTO;
        else if (v && !strcmp(v, "spin")) f->load.wait = GM_WAIT_SPIN;
        else if (v && !strcmp(v, "yield")) f->load.wait = GM_WAIT_YIELD;
        else return cli_usage_error(cmd, "--wait wants auto, spin or yield"), -1;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--weight-cache", NULL, &v)) {
        if (!v || !*v) return cli_usage_error(cmd, "--weight-cache needs a directory"), -1;
        f->load.weight_cache = v;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--cache-length", NULL, &v)) {
        if (!cli_parse_int(v, 1, 1 << 20, &n)) return cli_usage_error(cmd, "--cache-length wants an integer from 1 to 1048576"), -1;
        f->load.cache_length = (int)n;
        return 1;
    }
    return 0;
}

static void cli_warn(void *user, const char *message) {
    fprintf(stderr, "gemma %s: warning: %s\n", (const char *)user, message);
}

/* A rank that cannot go on ends the whole MPI job (the program's decision, not the library's), so no
 * other rank waits forever in a collective. */
static void abort_mpi_job(void) {
#ifdef GM_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
}

int cli_load_model(const char *cmd, const cli_model_flags *f, gm_model **out, int *exit_code) {
    *out = NULL;
    if (!f->model) {
        *exit_code = cli_usage_error(cmd, "no model given (-m PATH)");
        return -1;
    }
    gm_model *m;
    gm_load_options opt = f->load;
    opt.warn = cli_warn;
    opt.warn_user = (void *)cmd;
    if (gm_model_load(f->model, &opt, &m) != GM_OK) {
        *exit_code = cli_error(cmd, "%s", gm_last_error());
        abort_mpi_job();
        return -1;
    }
    if (gm_model_rank(m) != 0) {
        gm_status st = gm_model_serve(m);
        if (st != GM_OK) {
            cli_error(cmd, "rank %d: %s", gm_model_rank(m), gm_last_error());
            abort_mpi_job();
        }
        gm_model_free(m);
        gm_shutdown();
        *exit_code = st == GM_OK ? 0 : 1;
        return 1;
    }
    *out = m;
    return 0;
}

void cli_unload_model(gm_model *m) {
    gm_model_free(m);
    gm_shutdown();
}

volatile int cli_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    cli_interrupted = 1;
}

void cli_install_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}
