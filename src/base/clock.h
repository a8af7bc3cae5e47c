/* Monotonic wall clock in seconds, for timings the library reports. */
#ifndef GM_BASE_CLOCK_H
#define GM_BASE_CLOCK_H

#include <time.h>

static inline double gm_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
