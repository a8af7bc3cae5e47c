#define _POSIX_C_SOURCE 200809L
/* gemma generate (one turn, or --raw text) and gemma chat (one-shot, scripted lines, or a REPL). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "cli.h"

static const char *GEN_HELP_HEAD =
    "usage: gemma generate -m MODEL [options] PROMPT...\n"
    "  One chat turn (the Gemma 3 template) or, with --raw, <bos> + PROMPT; prints only the generated text.\n";
static const char *CHAT_HELP_HEAD =
    "usage: gemma chat -m MODEL [--multi-turn] [options] [PROMPT...]\n"
    "  With PROMPT: one turn. Without: one turn per line of standard input (a REPL on a terminal:\n"
    "  /reset clears the conversation, /quit leaves). Answers stream as they are generated.\n";
static const char *GEN_HELP_TAIL =
    "  --max-new-tokens N     stop after N tokens (default 256)\n"
    "  --stop STR             also stop at this text (repeatable; the text is not printed)\n"
    "  --raw                  (generate) no chat template: <bos> + PROMPT\n"
    "  --batch FILE           (generate) one prompt per line of FILE, generated together with the batch\n"
    "                         split by rows over the devices (padded when it does not divide)\n"
    "  --json                 (generate --batch) one JSON object per prompt: prompt, text, tokens, stop\n"
    "  --multi-turn           (chat) keep the conversation in the KV cache between turns\n"
    "  --verbose              print prompt/answer token counts and speeds on stderr\n";

typedef struct gen_flags {
    cli_model_flags mf;
    cli_sampling sp;
    long max_new;
    const char *stops[16];
    int n_stops;
    bool raw, multi_turn, verbose, json;
    const char *batch;
    char *prompt; /* joined positional arguments, or NULL */
} gen_flags;

static void json_string(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p == '\n') fputs("\\n", stdout);
        else if (*p == '\t') fputs("\\t", stdout);
        else if (*p == '\r') fputs("\\r", stdout);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static bool stream_out(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

static int parse(const char *cmd, int argc, char **argv, gen_flags *f) {
    memset(f, 0, sizeof *f);
    cli_model_flags_init(&f->mf);
    cli_sampling_init(&f->sp);
    f->max_new = 256;
    size_t plen = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(strcmp(cmd, "chat") ? GEN_HELP_HEAD : CHAT_HELP_HEAD, stdout);
            fputs(CLI_MODEL_FLAGS_HELP, stdout);
            fputs(CLI_SAMPLING_FLAGS_HELP, stdout);
            fputs(GEN_HELP_TAIL, stdout);
            return 0;
        }
        if ((r = cli_model_flag(cmd, argc, argv, &i, &f->mf)) != 0 || (r = cli_sampling_flag(cmd, argc, argv, &i, &f->sp)) != 0) {
            if (r < 0) return 2;
            continue;
        }
        if (cli_flag_value(argc, argv, &i, "--max-new-tokens", "-n", &v)) {
            if (!cli_parse_int(v, 1, 1 << 20, &f->max_new)) return cli_usage_error(cmd, "--max-new-tokens wants an integer >= 1");
        } else if (cli_flag_value(argc, argv, &i, "--stop", NULL, &v)) {
            if (!v || !*v) return cli_usage_error(cmd, "--stop needs a non-empty string");
            if (f->n_stops == 16) return cli_usage_error(cmd, "at most 16 --stop strings");
            f->stops[f->n_stops++] = v;
        } else if (cli_flag_value(argc, argv, &i, "--batch", NULL, &v)) {
            if (!v || !*v) return cli_usage_error(cmd, "--batch needs a file of prompts");
            f->batch = v;
        } else if (!strcmp(argv[i], "--json")) {
            f->json = true;
        } else if (!strcmp(argv[i], "--raw")) {
            f->raw = true;
        } else if (!strcmp(argv[i], "--multi-turn")) {
            f->multi_turn = true;
        } else if (!strcmp(argv[i], "--verbose")) {
            f->verbose = true;
        } else if (argv[i][0] == '-' && argv[i][1] != 0 && strcmp(argv[i], "--") != 0) {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else {
            if (!strcmp(argv[i], "--")) i++;
            for (; i < argc; i++) { /* the rest is the prompt */
                size_t n = strlen(argv[i]);
                char *np = realloc(f->prompt, plen + n + 2);
                if (!np) return cli_error(cmd, "out of memory");
                f->prompt = np;
                if (plen) f->prompt[plen++] = ' ';
                memcpy(f->prompt + plen, argv[i], n + 1);
                plen += n;
            }
        }
    }
    if (cli_sampling_finish(cmd, &f->sp) != 0) return 2;
    return -1; /* parsed, continue */
}

static void report(const char *cmd, const gm_generate_result *r, bool verbose) {
    if (r->stop == GM_STOP_INTERRUPTED) fprintf(stderr, "gemma %s: interrupted after %d tokens\n", cmd, r->n_generated);
    if (r->stop == GM_STOP_CACHE_FULL)
        fprintf(stderr, "\ngemma %s: the KV cache is full: the answer was cut after %d tokens; start a new conversation "
                        "or raise --cache-length\n", cmd, r->n_generated);
    if (verbose)
        fprintf(stderr, "[%d prompt tokens in %.3f s (%.1f tok/s), %d generated in %.3f s (%.1f tok/s), stop: %s]\n",
                r->n_prompt, r->prefill_seconds, r->n_prompt / (r->prefill_seconds > 0 ? r->prefill_seconds : 1e-9),
                r->n_generated, r->decode_seconds,
                r->n_generated / (r->decode_seconds > 0 ? r->decode_seconds : 1e-9), gm_stop_reason_name(r->stop));
}

static int exit_code_of(const gm_generate_result *r) {
    if (r->stop == GM_STOP_INTERRUPTED) return 130;
    if (r->stop == GM_STOP_CACHE_FULL) return 3;
    return 0;
}

/* One prompt per non-empty line of the file. */
static int read_lines(const char *path, char ***lines, size_t *n) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    char *line = NULL;
    size_t cap = 0, count = 0, room = 0;
    ssize_t len;
    *lines = NULL;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        if (count == room) {
            char **nl = realloc(*lines, (room = room ? room * 2 : 16) * sizeof *nl);
            if (!nl) break;
            *lines = nl;
        }
        (*lines)[count++] = strdup(line);
    }
    free(line);
    fclose(fp);
    *n = count;
    return 0;
}

static int run_batch(const char *cmd, gen_flags *f) {
    char **lines = NULL;
    size_t n = 0;
    if (read_lines(f->batch, &lines, &n) != 0) return cli_error(cmd, "--batch %s: cannot read the file", f->batch);
    if (n == 0) {
        free(lines);
        return cli_usage_error(cmd, "--batch %s: no prompts (one per line)", f->batch);
    }
    gm_model *m;
    int code = 0;
    if (cli_load_model(cmd, &f->mf, &m, &code) != 0) {
        for (size_t i = 0; i < n; i++) free(lines[i]);
        free(lines);
        return code;
    }
    int32_t **ids = calloc(n, sizeof *ids);
    size_t *lens = calloc(n, sizeof *lens);
    gm_batch_row *rows = calloc(n, sizeof *rows);
    gm_status st = ids && lens && rows ? GM_OK : gm_fail(GM_ERR_NOMEM, "out of memory");
    const gm_tokenizer *tok = gm_model_tokenizer(m);
    if (st == GM_OK && !tok) st = gm_fail(GM_ERR_STATE, "%s has no tokenizer", f->mf.model);
    for (size_t i = 0; st == GM_OK && i < n; i++) {
        char *text = NULL;
        if (!f->raw) st = gm_chat_template(lines[i], true, &text);
        if (st == GM_OK) st = gm_tokenizer_encode(tok, text ? text : lines[i], strlen(text ? text : lines[i]), f->raw, &ids[i], &lens[i]);
        gm_free(text);
    }
    gm_batch_options bo = {.max_new_tokens = (int)f->max_new, .sampling = f->sp.cfg};
    if (st == GM_OK) st = gm_generate_batch(m, (const int32_t *const *)ids, lens, n, &bo, rows);
    for (size_t i = 0; st == GM_OK && i < n; i++) {
        char *text = NULL;
        size_t keep = rows[i].n_ids;
        if (keep && (rows[i].stop == GM_STOP_EOS || rows[i].stop == GM_STOP_END_OF_TURN)) keep--; /* not the stop token */
        st = gm_tokenizer_decode(tok, rows[i].ids, keep, &text);
        if (st != GM_OK) break;
        if (f->json) {
            printf("{\"prompt\":");
            json_string(lines[i]);
            printf(",\"text\":");
            json_string(text);
            printf(",\"tokens\":[");
            for (size_t k = 0; k < rows[i].n_ids; k++) printf(k ? ",%d" : "%d", rows[i].ids[k]);
            printf("],\"stop\":\"%s\"}\n", gm_stop_reason_name(rows[i].stop));
        } else {
            printf("### %zu: %s\n%s\n\n", i + 1, lines[i], text);
        }
        gm_free(text);
    }
    if (st != GM_OK) code = cli_error(cmd, "%s", gm_last_error());
    for (size_t i = 0; i < n; i++) {
        free(lines[i]);
        if (ids) gm_free(ids[i]);
        if (rows) gm_free(rows[i].ids);
    }
    free(lines);
    free(ids);
    free(lens);
    free(rows);
    cli_unload_model(m);
    return code;
}

static int run(const char *cmd, int argc, char **argv) {
    gen_flags f;
    int pr = parse(cmd, argc, argv, &f);
    if (pr >= 0) {
        free(f.prompt);
        return pr;
    }
    bool is_chat = !strcmp(cmd, "chat");
    if (f.batch) {
        if (is_chat || f.prompt) {
            free(f.prompt);
            return cli_usage_error(cmd, "--batch takes its prompts from the file, not the command line");
        }
        return run_batch(cmd, &f);
    }
    if (!is_chat && (!f.prompt || !*f.prompt)) {
        free(f.prompt);
        return cli_usage_error(cmd, "empty prompt: give the prompt text as arguments");
    }
    if (is_chat && f.prompt && !*f.prompt) {
        free(f.prompt);
        return cli_usage_error(cmd, "empty prompt");
    }
    gm_model *m;
    int code = 0;
    int lr = cli_load_model(cmd, &f.mf, &m, &code);
    if (lr != 0) {
        free(f.prompt);
        return code;
    }
    if (!gm_model_tokenizer(m)) {
        cli_unload_model(m);
        free(f.prompt);
        return cli_error(cmd, "%s has no tokenizer (tokenizer.json or tokenizer.model)", f.mf.model);
    }
    const int32_t forbidden[] = {255999, 256000};
    size_t n_forbidden = gm_model_config(m)->vocab_size > 256000 ? 2 : 0;
    gm_sampler *sampler = NULL;
    if (gm_sampler_create(&f.sp.cfg, forbidden, n_forbidden, &sampler) != GM_OK) {
        cli_unload_model(m);
        free(f.prompt);
        return cli_error(cmd, "%s", gm_last_error());
    }
    cli_install_sigint();
    gm_generate_options go = {.max_new_tokens = (int)f.max_new, .pick = cli_pick, .pick_ctx = sampler,
                              .stop_strings = f.stops, .n_stop_strings = f.n_stops, .on_text = stream_out,
                              .interrupt = &cli_interrupted, .logits_top = cli_sampling_logits_top(&f.sp)};
    gm_generate_result r = {0};
    gm_status st = GM_OK;
    if (!is_chat && f.raw) {
        gm_session *s = NULL;
        int32_t *ids = NULL;
        size_t n = 0;
        st = gm_tokenizer_encode(gm_model_tokenizer(m), f.prompt, strlen(f.prompt), true, &ids, &n);
        if (st == GM_OK) st = gm_session_new(m, &s);
        if (st == GM_OK) st = gm_generate(s, ids, n, &go, NULL, &r);
        gm_free(ids);
        gm_session_free(s);
        if (st == GM_OK) putchar('\n');
        report(cmd, &r, f.verbose);
        code = st == GM_OK ? exit_code_of(&r) : cli_error(cmd, "%s", gm_last_error());
    } else {
        gm_chat *chat = NULL;
        st = gm_chat_new(m, &chat);
        if (st != GM_OK) code = cli_error(cmd, "%s", gm_last_error());
        if (st == GM_OK && f.prompt) {
            st = gm_chat_turn(chat, f.prompt, &go, NULL, &r);
            if (st == GM_OK) putchar('\n');
            report(cmd, &r, f.verbose);
            code = st == GM_OK ? exit_code_of(&r) : cli_error(cmd, "%s", gm_last_error());
        } else if (st == GM_OK) {
            bool tty = isatty(STDIN_FILENO);
            char *line = NULL;
            size_t cap = 0;
            for (;;) {
                if (tty) {
                    fputs("> ", stdout);
                    fflush(stdout);
                }
                ssize_t len = getline(&line, &cap, stdin);
                if (len < 0 || cli_interrupted) break;
                while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
                if (len == 0) continue;
                if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
                if (!strcmp(line, "/reset")) {
                    gm_chat_reset(chat);
                    continue;
                }
                if (!f.multi_turn) gm_chat_reset(chat);
                gm_sampler_reseed(sampler, f.sp.cfg.seed);
                st = gm_chat_turn(chat, line, &go, NULL, &r);
                if (st == GM_OK) putchar('\n');
                report(cmd, &r, f.verbose);
                if (st != GM_OK) {
                    code = cli_error(cmd, "%s", gm_last_error());
                    break;
                }
                code = exit_code_of(&r);
                if (code) break;
            }
            free(line);
            if (cli_interrupted && code == 0) { /* Ctrl-C at the prompt ends the session like ^C in a shell */
                fprintf(stderr, "gemma %s: interrupted\n", cmd);
                code = 130;
            }
        }
        gm_chat_free(chat);
    }
    gm_sampler_free(sampler);
    cli_unload_model(m);
    free(f.prompt);
    return code;
}

int cmd_generate(int argc, char **argv) { return run("generate", argc, argv); }
int cmd_chat(int argc, char **argv) { return run("chat", argc, argv); }
