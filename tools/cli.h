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
