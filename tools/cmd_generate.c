#define _POSIX_C_SOURCE 200809L
/* gemma generate (one turn, or --raw text) and gemma chat (one-shot, scripted lines, or a REPL). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    "  --multi-turn           (chat) keep the conversation in the KV cache between turns\n"
    "  --verbose              print prompt/answer token counts and speeds on stderr\n";

typedef struct gen_flags {
    cli_model_flags mf;
    cli_sampling sp;
    long max_new;
    const char *stops[16];
    int n_stops;
    bool raw, multi_turn, verbose;
    char *prompt; /* joined positional arguments, or NULL */
} gen_flags;

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

static int run(const char *cmd, int argc, char **argv) {
    gen_flags f;
    int pr = parse(cmd, argc, argv, &f);
    if (pr >= 0) {
        free(f.prompt);
        return pr;
    }
    bool is_chat = !strcmp(cmd, "chat");
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
                              .interrupt = &cli_interrupted};
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
