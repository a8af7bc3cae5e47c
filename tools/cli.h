/* Shared pieces of the command-line tool: flag parsing helpers and the subcommand table. */
#ifndef GM_TOOLS_CLI_H
#define GM_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "gemma.h"

typedef int (*gm_cmd_fn)(int argc, char **argv);

/* Each subcommand: returns the process exit code (0 ok, 1 error, 2 usage error). */
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);

/* Print "gemma <cmd>: <message>" to stderr and return 1 (2 for usage errors). */
int cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Strict number parsing: the whole string must be a number within [lo, hi]. */
bool cli_parse_int(const char *s, long lo, long hi, long *out);
bool cli_parse_float(const char *s, double lo, double hi, double *out);
/* If argv[*i] is `name` (or `alias`), consume its value into *value and return true. */
bool cli_flag_value(int argc, char **argv, int *i, const char *name, const char *alias, const char **value);

#endif

/* ---- shared flags: model placement and sampling ---- */

typedef struct cli_model_flags {
    const char *model;
    gm_load_options load;
} cli_model_flags;

void cli_model_flags_init(cli_model_flags *f);
/* Consume argv[*i] if it is -m/--model, --devices, --threads, --sharding, --cache-length.
 * Returns 1 if consumed, 0 if not this flag, -1 after printing a usage error. */
int cli_model_flag(const char *cmd, int argc, char **argv, int *i, cli_model_flags *f);
extern const char *CLI_MODEL_FLAGS_HELP;

/* Loads the model. Under mpirun, ranks other than 0 follow rank 0 here and then exit: the return is
 * then 1 with *exit_code set; 0 means "continue, you are rank 0"; -1 means error printed, exit 1. */
int cli_load_model(const char *cmd, const cli_model_flags *f, gm_model **out, int *exit_code);
void cli_unload_model(gm_model *m);

/* SIGINT sets this; generation stops cleanly and the command exits 130. */
extern volatile int cli_interrupted;
void cli_install_sigint(void);

/* --sampling greedy|random|top-k|top-p, --temperature, --top-k, --top-p, --seed */
typedef struct cli_sampling {
    gm_sampler_config cfg;
    bool method_given, temp_given, k_given, p_given;
    bool full_logits; /* --full-logits: every logit exact each step (default: only those the method reads) */
} cli_sampling;
/* gm_generate_options.logits_top for these flags */
int cli_sampling_logits_top(const cli_sampling *s);
void cli_sampling_init(cli_sampling *s);
int cli_sampling_flag(const char *cmd, int argc, char **argv, int *i, cli_sampling *s);
/* Resolve implied methods and validate; prints a usage error and returns -1 when invalid. */
int cli_sampling_finish(const char *cmd, cli_sampling *s);
extern const char *CLI_SAMPLING_FLAGS_HELP;
/* A gm_pick_fn over a gm_sampler (ctx = gm_sampler*). */
int32_t cli_pick(void *ctx, float *logits, int vocab);
