/* gemma logits: the seed tutorial's direct call. BOS + prompt, next-token logits of the last
 * position, a top-K table (and picture), optionally one token sampled like jax.random.categorical. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "cli.h"

static const char *HELP_HEAD =
    "usage: gemma logits -m MODEL [options] PROMPT...\n"
    "  <bos> + PROMPT through the model; prints the most probable next tokens.\n";
static const char *HELP_TAIL =
    "  --top K                rows in the table (default 10)\n"
    "  --plot FILE.png        bar chart of the top 30 probabilities (the seed's plot_logits)\n"
    "  --sample               pick one token: jax.random.categorical(jax.random.key(SEED), logits)\n"
    "  --seed S               seed for --sample (default 0)\n"
    "  --dump-logits FILE     write the V float32 logits, little-endian\n"
    "  --tokens IDS           use these comma-separated ids instead of tokenizing PROMPT (no BOS added)\n"
    "  --json                 one JSON document: tokens, top, sampled\n";

static int parse_ids(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return -1;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 2147483647L) return -1;
        if (*n == cap) {
            int32_t *ni = realloc(*ids, (cap *= 2) * sizeof **ids);
            if (!ni) return -1;
            *ids = ni;
        }
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return *n ? 0 : -1;
}

int cmd_logits(int argc, char **argv) {
    cli_model_flags mf;
    cli_model_flags_init(&mf);
    long top = 10, seed = 0;
    const char *plot = NULL, *dump = NULL, *tokens_arg = NULL;
    bool sample = false, json = false;
    char *prompt = NULL;
    size_t plen = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = cli_model_flag("logits", argc, argv, &i, &mf);
        if (r < 0) return free(prompt), 2;
        if (r) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(HELP_HEAD, stdout);
            fputs(CLI_MODEL_FLAGS_HELP, stdout);
            fputs(HELP_TAIL, stdout);
            free(prompt);
            return 0;
        } else if (cli_flag_value(argc, argv, &i, "--top", NULL, &v)) {
            if (!cli_parse_int(v, 1, 262144, &top)) return free(prompt), cli_usage_error("logits", "--top wants an integer >= 1");
        } else if (cli_flag_value(argc, argv, &i, "--plot", NULL, &v)) {
            if (!v || !*v) return free(prompt), cli_usage_error("logits", "--plot needs a file name");
            plot = v;
        } else if (cli_flag_value(argc, argv, &i, "--dump-logits", NULL, &v)) {
            if (!v || !*v) return free(prompt), cli_usage_error("logits", "--dump-logits needs a file name");
            dump = v;
        } else if (cli_flag_value(argc, argv, &i, "--seed", NULL, &v)) {
            if (!cli_parse_int(v, -2147483647L - 1, 4294967295L, &seed)) return free(prompt), cli_usage_error("logits", "--seed wants an integer");
        } else if (cli_flag_value(argc, argv, &i, "--tokens", NULL, &v)) {
            if (!v) return free(prompt), cli_usage_error("logits", "--tokens needs ids");
            tokens_arg = v;
        } else if (!strcmp(argv[i], "--sample")) {
            sample = true;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (argv[i][0] == '-' && argv[i][1] && strcmp(argv[i], "--")) {
            free(prompt);
            return cli_usage_error("logits", "unknown option '%s'", argv[i]);
        } else {
            if (!strcmp(argv[i], "--")) i++;
            for (; i < argc; i++) {
                size_t n = strlen(argv[i]);
                char *np = realloc(prompt, plen + n + 2);
                if (!np) return free(prompt), cli_error("logits", "out of memory");
                prompt = np;
                if (plen) prompt[plen++] = ' ';
                memcpy(prompt + plen, argv[i], n + 1);
                plen += n;
            }
        }
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (tokens_arg && parse_ids(tokens_arg, &ids, &n_ids) != 0) {
        free(ids);
        free(prompt);
        return cli_usage_error("logits", "--tokens wants comma-separated non-negative ids");
    }
    if (!tokens_arg && (!prompt || !*prompt)) {
        free(prompt);
        return cli_usage_error("logits", "empty prompt: give the prompt text as arguments");
    }
    gm_model *m;
    int code = 0;
    if (cli_load_model("logits", &mf, &m, &code) != 0) {
        free(ids);
        free(prompt);
        return code;
    }
    const gm_tokenizer *tok = gm_model_tokenizer(m);
    gm_status st = GM_OK;
    if (!tokens_arg) {
        if (!tok) st = gm_fail(GM_ERR_STATE, "%s has no tokenizer: pass --tokens", mf.model);
        else st = gm_tokenizer_encode(tok, prompt, strlen(prompt), true, &ids, &n_ids);
    }
    int V = gm_model_config(m)->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    gm_session *s = NULL;
    if (st == GM_OK && !logits) st = gm_fail(GM_ERR_NOMEM, "out of memory");
    if (st == GM_OK) st = gm_session_new(m, &s);
    if (st == GM_OK) st = gm_session_forward(s, ids, n_ids, logits, NULL);
    gm_token_prob *tp = calloc((size_t)(top > 30 ? top : 30), sizeof *tp);
    size_t n_top = 0;
    if (st == GM_OK && !tp) st = gm_fail(GM_ERR_NOMEM, "out of memory");
    if (st == GM_OK) st = gm_logits_top_k(logits, (size_t)V, (size_t)(top > 30 ? top : 30), tp, &n_top);
    int32_t sampled = -1;
    if (st == GM_OK && sample) st = gm_sample_categorical(seed, logits, (size_t)V, &sampled);
    if (st == GM_OK && dump) {
        FILE *fp = fopen(dump, "wb");
        if (!fp || fwrite(logits, sizeof(float), (size_t)V, fp) != (size_t)V) st = gm_fail(GM_ERR_IO, "--dump-logits %s: cannot write", dump);
        if (fp && fclose(fp) != 0 && st == GM_OK) st = gm_fail(GM_ERR_IO, "--dump-logits %s: cannot write", dump);
    }
    const char **labels = calloc(n_top ? n_top : 1, sizeof *labels);
    if (st == GM_OK && !labels) st = gm_fail(GM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == GM_OK && i < n_top; i++) labels[i] = tok ? gm_tokenizer_piece(tok, tp[i].id) : NULL;
    if (st == GM_OK && plot) {
        int32_t pid[30];
        double pp[30];
        size_t np = n_top < 30 ? n_top : 30;
        for (size_t i = 0; i < np; i++) pid[i] = tp[i].id, pp[i] = tp[i].prob;
        st = gm_plot_logits_png(plot, pid, labels, pp, np, NULL);
    }
    size_t shown = n_top < (size_t)top ? n_top : (size_t)top;
    if (st == GM_OK && json) {
        cJSON *root = cJSON_CreateObject();
        cJSON *jt = cJSON_AddArrayToObject(root, "tokens");
        for (size_t i = 0; i < n_ids; i++) cJSON_AddItemToArray(jt, cJSON_CreateNumber(ids[i]));
        cJSON *jtop = cJSON_AddArrayToObject(root, "top");
        for (size_t i = 0; i < shown; i++) {
            cJSON *o = cJSON_CreateObject();
            char *text = NULL;
            cJSON_AddNumberToObject(o, "id", tp[i].id);
            if (tok && gm_tokenizer_decode(tok, &tp[i].id, 1, &text) == GM_OK) cJSON_AddStringToObject(o, "token", text);
            gm_free(text);
            cJSON_AddNumberToObject(o, "logit", tp[i].logit);
            cJSON_AddNumberToObject(o, "prob", tp[i].prob);
            cJSON_AddItemToArray(jtop, o);
        }
        if (sample) {
            cJSON *o = cJSON_AddObjectToObject(root, "sampled");
            char *text = NULL;
            cJSON_AddNumberToObject(o, "id", sampled);
            if (tok && gm_tokenizer_decode(tok, &sampled, 1, &text) == GM_OK) cJSON_AddStringToObject(o, "token", text);
            gm_free(text);
        }
        char *out = cJSON_PrintUnformatted(root);
        puts(out);
        free(out);
        cJSON_Delete(root);
    } else if (st == GM_OK) {
        printf("%zu prompt tokens, next-token distribution (top %zu of %d):\n", n_ids, shown, V);
        char *bars = NULL;
        double *pp = malloc(shown * sizeof *pp);
        int32_t *pid = malloc(shown * sizeof *pid);
        if (pp && pid) {
            for (size_t i = 0; i < shown; i++) pp[i] = tp[i].prob, pid[i] = tp[i].id;
            if (gm_plot_logits_text(pid, labels, pp, shown, 40, &bars) == GM_OK) fputs(bars, stdout);
        }
        free(pp);
        free(pid);
        gm_free(bars);
        if (sample) {
            char rep[256] = "?";
            const char *piece = tok ? gm_tokenizer_piece(tok, sampled) : NULL;
            if (piece) gm_token_repr(piece, rep, sizeof rep);
            printf("sampled (seed %ld): %d %s\n", seed, sampled, rep);
        }
        if (plot) printf("plot written to %s\n", plot);
    }
    if (st != GM_OK) code = cli_error("logits", "%s", gm_last_error());
    free(labels);
    free(tp);
    free(logits);
    gm_session_free(s);
    free(ids);
    free(prompt);
    cli_unload_model(m);
    return code;
}
