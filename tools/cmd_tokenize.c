/* gemma tokenize / detokenize. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *TOK_HELP =
    "usage: gemma tokenize -m MODEL [--bos] [--json] < text\n"
    "  reads UTF-8 text on stdin (any bytes: invalid UTF-8 goes through byte fallback)\n"
    "  --bos    prepend <bos>\n"
    "  --json   print a JSON array instead of space-separated ids\n";

static const char *DETOK_HELP = "usage: gemma detokenize -m MODEL ID...\n";

static int read_stdin(char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return -1;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return -1;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    bool bos = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(TOK_HELP, stdout);
            return 0;
        } else if (cli_flag_value(argc, argv, &i, "--model", "-m", &v)) {
            if (!v) return cli_usage_error("tokenize", "%s needs a value", argv[i]);
            model = v;
        } else if (!strcmp(argv[i], "--bos")) {
            bos = true;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            return cli_usage_error("tokenize", "unknown argument '%s'", argv[i]);
        }
    }
    if (!model) return cli_usage_error("tokenize", "no model given (-m PATH)");
    gm_tokenizer *tok;
    if (gm_tokenizer_load(model, &tok) != GM_OK) return cli_error("tokenize", "%s", gm_last_error());
    char *text;
    size_t len;
    if (read_stdin(&text, &len) != 0) {
        gm_tokenizer_free(tok);
        return cli_error("tokenize", "cannot read standard input");
    }
    int32_t *ids;
    size_t n;
    gm_status st = gm_tokenizer_encode(tok, text, len, bos, &ids, &n);
    free(text);
    if (st != GM_OK) {
        gm_tokenizer_free(tok);
        return cli_error("tokenize", "%s", gm_last_error());
    }
    if (json) putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? (json ? ",%d" : " %d") : "%d", ids[i]);
    puts(json ? "]" : "");
    gm_free(ids);
    gm_tokenizer_free(tok);
    return 0;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    int32_t *ids = calloc((size_t)argc, sizeof *ids);
    size_t n = 0;
    if (!ids) return cli_error("detokenize", "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *v;
        long id;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(DETOK_HELP, stdout);
            free(ids);
            return 0;
        } else if (cli_flag_value(argc, argv, &i, "--model", "-m", &v)) {
            if (!v) {
                free(ids);
                return cli_usage_error("detokenize", "%s needs a value", argv[i]);
            }
            model = v;
        } else if (cli_parse_int(argv[i], 0, INT32_MAX, &id)) {
            ids[n++] = (int32_t)id;
        } else {
            free(ids);
            return cli_usage_error("detokenize", "'%s' is not a token id", argv[i]);
        }
    }
    if (!model) {
        free(ids);
        return cli_usage_error("detokenize", "no model given (-m PATH)");
    }
    gm_tokenizer *tok;
    if (gm_tokenizer_load(model, &tok) != GM_OK) {
        free(ids);
        return cli_error("detokenize", "%s", gm_last_error());
    }
    char *text = NULL;
    gm_status st = gm_tokenizer_decode(tok, ids, n, &text);
    free(ids);
    gm_tokenizer_free(tok);
    if (st != GM_OK) return cli_error("detokenize", "%s", gm_last_error());
    fputs(text, stdout);
    putchar('\n');
    gm_free(text);
    return 0;
}
