/* Status codes and the per-thread error message every fallible call leaves behind. */
#ifndef GM_BASE_STATUS_H
#define GM_BASE_STATUS_H

#include "gemma.h"

/* Record a formatted message for the calling thread and return `status`.
 * Usage: return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: bad magic", path, off); */
gm_status gm_fail(gm_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefix the current message with more context ("loading x.gguf: <old message>"). */
gm_status gm_fail_context(gm_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define GM_TRY(expr)                                                                               \
    do {                                                                                           \
        gm_status gm_try_status_ = (expr);                                                         \
        if (gm_try_status_ != GM_OK) return gm_try_status_;                                        \
    } while (0)

#endif
