#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* One write per message: stderr is unbuffered, and under mpirun the ranks' lines would interleave. */
static int vreport(int code, const char *cmd, const char *fmt, va_list ap) {
    char msg[4096];
    int n = snprintf(msg, sizeof msg, "gemma %s: ", cmd);
    if (n < 0 || (size_t)n >= sizeof msg) n = 0;
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", msg);
    return code;
}

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vreport(1, cmd, fmt, ap);
    va_end(ap);
    return r;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vreport(2, cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "run 'gemma %s --help' for usage\n", cmd);
    return r;
}

bool cli_parse_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_flag_value(int argc, char **argv, int *i, const char *name, const char *alias, const char **value) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) == 0 && a[n] == '=') {
        *value = a + n + 1;
        return true;
    }
    if (strcmp(a, name) != 0 && !(alias && strcmp(a, alias) == 0)) return false;
    if (*i + 1 >= argc) {
        *value = NULL; /* caller reports the missing value */
        return true;
    }
    *value = argv[++*i];
    return true;
}
