#define _GNU_SOURCE
#include "io/cache_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The model's file (or folder) name, reduced to characters safe in a file name. */
static void model_name(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    size_t k = 0;
    for (size_t i = b; i < n && k + 1 < cap && k < 96; i++) {
        char ch = path[i];
        out[k++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                           ch == '-' || ch == '_'
                       ? ch
                       : '_';
    }
    out[k] = 0;
    if (k == 0) snprintf(out, cap, "model");
}

gm_status gm_cache_file_path(char *out, size_t cap, const char *dir, const char *model_path, uint64_t key,
                             const char *tail) {
    char name[128];
    model_name(model_path, name, sizeof name);
    int n = snprintf(out, cap, "%s/%s-%016llx%s", dir, name, (unsigned long long)key, tail);
    if (n < 0 || (size_t)n >= cap) return gm_fail(GM_ERR_ARG, "--weight-cache %s: the directory path is too long", dir);
    return GM_OK;
}

int gm_cache_file_create(const char *path, char *tmp, size_t tmp_cap, const char *what, char *why, size_t why_len) {
    char dir[1400];
    int n = snprintf(dir, sizeof dir, "%s", path);
    if (n < 0 || (size_t)n >= sizeof dir || snprintf(tmp, tmp_cap, "%s.XXXXXX", path) >= (int)tmp_cap) {
        snprintf(why, why_len, "%s: cannot create a file beside %s: the path is too long", what, path);
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    if (slash && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(why, why_len, "%s: cannot create the directory %s: %s", what, dir, strerror(errno));
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, why_len, "%s: cannot create %s: %s", what, path, strerror(errno)); /* tmp: mkstemp's mangle */
        return -1;
    }
    (void)fchmod(fd, 0644); /* mkstemp's 0600 would keep a shared cache from the other users */
    return fd;
}

bool gm_cache_file_pwrite(int fd, const void *p, size_t n, uint64_t off) {
    const uint8_t *b = p;
    while (n > 0) {
        size_t chunk = n < (64u << 20) ? n : (64u << 20);
        ssize_t w = pwrite(fd, b, chunk, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        b += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return true;
}

bool gm_cache_file_commit(int fd, const char *tmp, const char *path, bool ok, bool drop_pages, const char *what,
                          char *why, size_t why_len) {
    int err = ok ? 0 : errno;
    ok = ok && fdatasync(fd) == 0;
    if (!ok && !err) err = errno;
    if (ok && drop_pages) (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (close(fd) != 0 && ok) ok = false, err = errno;
    if (ok && rename(tmp, path) != 0) ok = false, err = errno;
    if (!ok) {
        snprintf(why, why_len, "%s: cannot write %s: %s", what, path, strerror(err ? err : EIO));
        unlink(tmp);
    }
    return ok;
}
