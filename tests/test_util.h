/* Minimal test harness: CHECK counts, the summary line is "N passed, N failed", exit 1 on failure. */
#ifndef GM_TEST_UTIL_H
#define GM_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"

static int gm_test_passed, gm_test_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            gm_test_passed++;                                                                      \
        } else {                                                                                   \
            gm_test_failed++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static inline int gm_test_finish(void) {
    printf("%d passed, %d failed\n", gm_test_passed, gm_test_failed);
    return gm_test_failed ? 1 : (gm_test_passed ? 0 : 1);
}

/* Path of the real 270M model, or NULL (the caller exits 77 = skipped unless GM_REQUIRE_MODEL=1). */
static inline const char *gm_test_model_path(void) {
    const char *p = getenv("GM_TEST_MODEL");
    FILE *f = p ? fopen(p, "rb") : NULL;
    if (f) {
        fclose(f);
        return p;
    }
    if (getenv("GM_REQUIRE_MODEL") && atoi(getenv("GM_REQUIRE_MODEL"))) {
        fprintf(stderr, "GM_REQUIRE_MODEL is set but the model %s is missing\n", p ? p : "(unset)");
        exit(1);
    }
    return NULL;
}

/* `path` on `devices` in-process devices (no MPI) under `rule`, `threads` each, a cache of cache_length;
 * NULL, the error printed, when the load fails. */
static inline gm_model *gm_test_load_mesh(const char *path, int devices, gm_sharding rule, int threads, int cache_length) {
    gm_load_options o;
    gm_load_options_default(&o);
    o.devices = devices;
    o.sharding = rule;
    o.threads_per_device = threads;
    o.cache_length = cache_length;
    o.use_mpi = false;
    gm_model *m = NULL;
    if (gm_model_load(path, &o, &m) != GM_OK) fprintf(stderr, "load %s: %s\n", path, gm_last_error());
    return m;
}

static inline const char *gm_test_fixture(const char *name, char *buf, size_t n) {
    const char *dir = getenv("GM_FIXTURES");
    snprintf(buf, n, "%s/%s", dir ? dir : "tests/fixtures", name);
    return buf;
}

#endif
