/* gemma — command-line front end. Thin: parse flags, call the library, print. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    gm_cmd_fn fn;
    const char *help;
} commands[] = {
    {"info", cmd_info, "print config, tensors, special tokens and the sharding plan"},
    {"tokenize", cmd_tokenize, "UTF-8 text on stdin -> token ids"},
    {"detokenize", cmd_detokenize, "token ids -> text"},
    {"logits", cmd_logits, "next-token logits of <bos> + PROMPT: top-K table, picture, one sampled token"},
    {"generate", cmd_generate, "one chat turn (or --raw text) -> generated text"},
    {"chat", cmd_chat, "chat: one-shot, line by line, or interactive; streaming"},
    {"bench", cmd_bench, "prefill and decode speed, memory, communication per token"},
    {"train", cmd_train, "fine-tune (full or LoRA) on JSONL data, FSDP over devices / MPI ranks"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: gemma COMMAND -m MODEL [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'gemma COMMAND --help' shows a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gemma: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
