/* Helpers shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * The readers under test take paths, so a harness writes each input to a file in a private temporary
 * folder (created once, removed at exit; on /dev/shm when possible, else $TMPDIR; GM_FUZZ_TMPDIR overrides) and hands the reader that path. Fixtures are found through
 * GM_FIXTURES (environment) or the GM_FIXTURES_DIR the build defines.
 *
 * Every harness also builds without libFuzzer, with tests/fuzz/replay_main.c as main(): it runs the
 * committed corpus (tests/fuzz/corpus/<name>/) through the harness under ctest, so each input that ever
 * crashed stays a regression test with gcc and with the sanitizer build. */
#ifndef GM_FUZZ_UTIL_H
#define GM_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemma.h"

#ifndef GM_FIXTURES_DIR
#define GM_FIXTURES_DIR "tests/fixtures"
#endif

static char fz_dir_path[256];

static inline void fz_cleanup(void) {
    if (!fz_dir_path[0]) return;
    DIR *d = opendir(fz_dir_path);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", fz_dir_path, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(fz_dir_path);
}

/* The harness's private folder (flat: files only). */
static inline const char *fz_dir(void) {
    if (!fz_dir_path[0]) {
        /* tmpfs when there is one: a disk-backed folder makes file-reading harnesses 40x slower */
        const char *t = getenv("GM_FUZZ_TMPDIR");
        if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        snprintf(fz_dir_path, sizeof fz_dir_path, "%s/gm_fuzz_XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fz_dir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_dir_path;
}

/* Path of `name` inside the private folder. */
static inline const char *fz_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", fz_dir(), name);
    return buf;
}

/* Write data to `name` in the private folder (replacing it); returns the path in buf. */
static inline const char *fz_write(const char *name, const void *data, size_t size, char *buf, size_t n) {
    fz_path(name, buf, n);
    int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(buf);
        abort();
    }
    const uint8_t *p = data;
    while (size > 0) {
        ssize_t w = write(fd, p, size);
        if (w <= 0) {
            perror("write");
            abort();
        }
        p += w;
        size -= (size_t)w;
    }
    close(fd);
    return buf;
}

/* Symlink a fixture file into the private folder under `name`. */
static inline void fz_link_fixture(const char *fixture, const char *name) {
    char src[1024], dst[512];
    const char *fix = getenv("GM_FIXTURES");
    snprintf(src, sizeof src, "%s/%s", fix && *fix ? fix : GM_FIXTURES_DIR, fixture);
    char *abs = realpath(src, NULL);
    if (!abs) {
        fprintf(stderr, "fuzz: fixture %s is missing\n", src);
        abort();
    }
    fz_path(name, dst, sizeof dst);
    unlink(dst);
    if (symlink(abs, dst) != 0) {
        perror("symlink");
        abort();
    }
    free(abs);
}

static inline const char *fz_fixture(const char *rel, char *buf, size_t n) {
    const char *fix = getenv("GM_FIXTURES");
    snprintf(buf, n, "%s/%s", fix && *fix ? fix : GM_FIXTURES_DIR, rel);
    return buf;
}

/* One forward step of the tokens {first, V - 1} on a fresh session of m: whatever the weights hold
 * (NaN, garbage), it returns; the result is not checked. */
static inline void fz_forward_step(gm_model *m, int32_t first) {
    gm_session *s = NULL;
    if (gm_session_new(m, &s) != GM_OK) return;
    int32_t ids[2] = {first, gm_model_config(m)->vocab_size - 1};
    float *logits = malloc((size_t)gm_model_config(m)->vocab_size * sizeof *logits);
    if (!logits) abort();
    (void)gm_session_forward(s, ids, 2, logits, NULL);
    free(logits);
    gm_session_free(s);
}

/* A failed property: report and crash so libFuzzer (or the replay run) records the input. */
#define FZ_ASSERT(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
