/* Sampling flags shared by generate and chat. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *CLI_SAMPLING_FLAGS_HELP =
    "  --sampling METHOD      greedy (default), random, top-k or top-p\n"
    "  --temperature T        >= 0; 0 means greedy (default 1 for random methods)\n"
    "  --top-k K              >= 1 (implies --sampling top-k)\n"
    "  --top-p P              in (0, 1] (implies --sampling top-p)\n"
    "  --seed S               PRNG seed: jax.random.key(S) (default 0)\n"
    "  --full-logits          compute every logit exactly at each step (default: greedy and top-k compute\n"
    "                         exactly only the logits they read; the tokens are the same either way)\n";

void cli_sampling_init(cli_sampling *s) {
    memset(s, 0, sizeof *s);
    s->cfg = gm_sampler_config_default();
}

int cli_sampling_flag(const char *cmd, int argc, char **argv, int *i, cli_sampling *s) {
    const char *v;
    double d;
    long n;
    if (cli_flag_value(argc, argv, i, "--sampling", NULL, &v)) {
        if (!v) return cli_usage_error(cmd, "--sampling needs a method"), -1;
        if (!strcmp(v, "greedy")) s->cfg.method = GM_SAMPLE_GREEDY;
        else if (!strcmp(v, "random")) s->cfg.method = GM_SAMPLE_RANDOM;
        else if (!strcmp(v, "top-k") || !strcmp(v, "topk")) s->cfg.method = GM_SAMPLE_TOP_K;
        else if (!strcmp(v, "top-p") || !strcmp(v, "topp")) s->cfg.method = GM_SAMPLE_TOP_P;
        else return cli_usage_error(cmd, "--sampling '%s': expected greedy, random, top-k or top-p", v), -1;
        s->method_given = true;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--temperature", NULL, &v)) {
        if (!cli_parse_float(v, -INFINITY, INFINITY, &d)) return cli_usage_error(cmd, "--temperature wants a number"), -1;
        if (d < 0) return cli_usage_error(cmd, "--temperature %g: must be >= 0 (0 means greedy)", d), -1;
        s->cfg.temperature = (float)d;
        s->temp_given = true;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--top-k", NULL, &v)) {
        if (!cli_parse_int(v, -2147483647L, 2147483647L, &n)) return cli_usage_error(cmd, "--top-k wants an integer"), -1;
        if (n < 1) return cli_usage_error(cmd, "--top-k %ld: must be >= 1", n), -1;
        s->cfg.top_k = (int)n;
        s->k_given = true;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--top-p", NULL, &v)) {
        if (!cli_parse_float(v, -INFINITY, INFINITY, &d)) return cli_usage_error(cmd, "--top-p wants a number"), -1;
        if (!(d > 0 && d <= 1)) return cli_usage_error(cmd, "--top-p %g: must be in (0, 1]", d), -1;
        s->cfg.top_p = (float)d;
        s->p_given = true;
        return 1;
    }
    if (!strcmp(argv[*i], "--full-logits")) {
        s->full_logits = true;
        return 1;
    }
    if (cli_flag_value(argc, argv, i, "--seed", NULL, &v)) {
        if (!cli_parse_int(v, -2147483647L - 1, 4294967295L, &n)) return cli_usage_error(cmd, "--seed wants an integer"), -1;
        s->cfg.seed = n;
        return 1;
    }
    return 0;
}

int cli_sampling_finish(const char *cmd, cli_sampling *s) {
    if (!s->method_given) {
        if (s->k_given) s->cfg.method = GM_SAMPLE_TOP_K;
        else if (s->p_given) s->cfg.method = GM_SAMPLE_TOP_P;
        else if (s->temp_given && s->cfg.temperature > 0) s->cfg.method = GM_SAMPLE_RANDOM;
    }
    if (gm_sampler_config_check(&s->cfg) != GM_OK) return cli_usage_error(cmd, "%s", gm_last_error()), -1;
    return 0;
}

int cli_sampling_logits_top(const cli_sampling *s) { return s->full_logits ? 0 : gm_sampler_logits_top(&s->cfg); }

int32_t cli_pick(void *ctx, float *logits, int vocab) {
    int32_t id = -1;
    if (gm_sampler_next(ctx, logits, (size_t)vocab, &id) != GM_OK) return -1;
    return id;
}
