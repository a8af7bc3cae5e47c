/* Minimal test harness: CHECK counts, the summary line is "N passed, N failed", exit 1 on failure. */
#ifndef GM_TEST_UTIL_H
#define GM_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static inline const char *gm_test_fixture(const char *name, char *buf, size_t n) {
    const char *dir = getenv("GM_FIXTURES");
    snprintf(buf, n, "%s/%s", dir ? dir : "tests/fixtures", name);
    return buf;
}

#endif
