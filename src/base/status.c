#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thread-local, so two models (or two meshes) in one process never share an error slot. */
static _Thread_local char last_error[1024];

gm_status gm_fail(gm_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

gm_status gm_fail_context(gm_status status, const char *fmt, ...) {
    char prefix[512], old[sizeof last_error];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
    return status;
}

const char *gm_last_error(void) { return last_error[0] ? last_error : "no error"; }

const char *gm_status_name(gm_status status) {
    switch (status) {
    case GM_OK: return "ok";
    case GM_ERR_IO: return "i/o error";
    case GM_ERR_FORMAT: return "bad file format";
    case GM_ERR_UNSUPPORTED: return "unsupported";
    case GM_ERR_NOMEM: return "out of memory";
    case GM_ERR_ARG: return "invalid argument";
    case GM_ERR_RANGE: return "out of range";
    case GM_ERR_COMM: return "communication error";
    case GM_ERR_STATE: return "invalid state";
    case GM_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}
