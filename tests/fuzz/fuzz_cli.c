/* libFuzzer harness: the command-line prompt paths (gemma generate / chat / logits / tokenize /
 * detokenize) with arbitrary arguments and standard input, on the tiny random model with a tokenizer
 * (tests/fixtures/hf_tiny_chat). The input is split at 0x00 bytes: the first piece picks the command
 * (its first byte), the next pieces are arguments (at most 24), and whatever follows a 0x01 0x01 pair is
 * standard input. The harness puts "-m MODEL --cache-length 40 -n 3" first; fuzzed flags that would
 * write files (--plot, --dump-logits) or raise the resource limits (--cache-length, --devices, --threads,
 * -n/--max-new-tokens, -m) are dropped; --batch FILE always reads the standard-input bytes (a fuzzed path
 * could name /dev/zero). Property: the command returns an exit code (0, 1, 2, 3) without
 * crashing; usage errors are 2. Seeds: tests/fuzz/corpus/fuzz_cli. */
#include "fuzz/fuzz_util.h"

#include "cli.h"

static const char *const CMDS[] = {"generate", "chat", "logits", "tokenize", "detokenize"};
static gm_cmd_fn const FNS[] = {cmd_generate, cmd_chat, cmd_logits, cmd_tokenize, cmd_detokenize};
static const char *const DROP[] = {"--plot", "--dump-logits", "--cache-length", "--devices", "--threads", "-t",
                                   "-n", "--max-new-tokens", "-m", "--model", "--gen-tokens", "--prompt-tokens"};
static char model_path[1024];
static FILE *real_stderr;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_fixture("hf_tiny_chat", model_path, sizeof model_path);
    if (!freopen("/dev/null", "w", stdout)) abort();
    real_stderr = stderr;
    FILE *null = fopen("/dev/null", "w"); /* the commands' messages; sanitizer reports still reach fd 2 */
    if (!null) abort();
    stderr = null;
    return 0;
}

static int dropped(const char *a) {
    for (size_t k = 0; k < sizeof DROP / sizeof DROP[0]; k++) {
        size_t n = strlen(DROP[k]);
        if (!strncmp(a, DROP[k], n) && (a[n] == 0 || a[n] == '=')) return a[n] == '=' ? 1 : 2;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* split off standard input */
    size_t args_len = size;
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == 1 && data[i + 1] == 1) {
            args_len = i;
            break;
        }
    char path[512];
    size_t in_off = args_len + 2 <= size ? args_len + 2 : size;
    fz_write("stdin", data + in_off, size - in_off, path, sizeof path);
    if (!freopen(path, "rb", stdin)) abort();

    char *buf = malloc(args_len + 1);
    if (!buf) abort();
    memcpy(buf, data, args_len);
    buf[args_len] = 0;
    int c = (uint8_t)buf[0] % 5;
    char *argv[48];
    int argc = 0;
    char cl[] = "40", nt[] = "3";
    argv[argc++] = (char *)CMDS[c];
    argv[argc++] = "-m";
    argv[argc++] = model_path;
    if (c <= 2) {
        argv[argc++] = "--cache-length";
        argv[argc++] = cl;
        if (c <= 1) {
            argv[argc++] = "-n";
            argv[argc++] = nt;
        }
    }
    size_t at = strlen(buf) + 1;
    static char batch_eq[600];
    snprintf(batch_eq, sizeof batch_eq, "--batch=%s", path);
    while (at <= args_len && argc < 24 + 7) {
        char *a = buf + at;
        at += strlen(a) + 1;
        int d = dropped(a);
        if (d == 2) at += at <= args_len ? strlen(buf + at) + 1 : 0; /* and its value */
        if (d) continue;
        if (!strncmp(a, "--batch", 7) && (a[7] == 0 || a[7] == '=')) { /* prompts from a file: the stdin bytes */
            if (a[7] == '=') {
                argv[argc++] = batch_eq;
            } else {
                argv[argc++] = a;
                argv[argc++] = (char *)path;
                at += at <= args_len ? strlen(buf + at) + 1 : 0;
            }
            continue;
        }
        argv[argc++] = a;
    }
    argv[argc] = NULL;
    cli_interrupted = 0;
    int rc = FNS[c](argc, argv);
    fflush(stdout);
    if (!(rc == 0 || rc == 1 || rc == 2 || rc == 3)) {
        fprintf(real_stderr, "fuzz_cli: gemma %s returned %d\n", CMDS[c], rc);
        abort();
    }
    free(buf);
    return 0;
}
