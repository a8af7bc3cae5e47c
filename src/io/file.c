#define _GNU_SOURCE
#include "io/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

gm_status gm_file_open(gm_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!path || !*path) return gm_fail(GM_ERR_ARG, "empty model path");
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gm_fail(GM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return gm_fail(GM_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return gm_fail(GM_ERR_IO, "%s: is a directory", path);
    }
    f->fd = fd;
    f->size = (uint64_t)st.st_size;
    return GM_OK;
}

void gm_file_close(gm_file *f) {
    if (f && f->fd >= 0) close(f->fd);
    if (f) f->fd = -1;
}

gm_status gm_file_read(const gm_file *f, uint64_t offset, void *dst, uint64_t len) {
    if (offset > f->size || len > f->size - offset)
        return gm_fail(GM_ERR_FORMAT,
                       "%s: read of %llu bytes at offset %llu is past the end of the file (%llu bytes)",
                       f->path, (unsigned long long)len, (unsigned long long)offset,
                       (unsigned long long)f->size);
    uint8_t *p = dst;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t got = pread(f->fd, p, chunk, (off_t)offset);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return gm_fail(GM_ERR_IO, "%s: read failed at offset %llu: %s", f->path,
                           (unsigned long long)offset, got < 0 ? strerror(errno) : "unexpected end of file");
        p += got;
        offset += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return GM_OK;
}

gm_status gm_file_slurp(const char *path, uint64_t max_bytes, char **out, uint64_t *out_len) {
    gm_file f;
    *out = NULL;
    GM_TRY(gm_file_open(&f, path));
    if (f.size > max_bytes) {
        gm_file_close(&f);
        return gm_fail(GM_ERR_FORMAT, "%s: %llu bytes is larger than the %llu allowed", path,
                       (unsigned long long)f.size, (unsigned long long)max_bytes);
    }
    char *buf = malloc(f.size + 1);
    if (!buf) {
        gm_file_close(&f);
        return gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %llu bytes", path, (unsigned long long)f.size);
    }
    gm_status s = gm_file_read(&f, 0, buf, f.size);
    gm_file_close(&f);
    if (s != GM_OK) {
        free(buf);
        return s;
    }
    buf[f.size] = 0;
    *out = buf;
    if (out_len) *out_len = f.size;
    return GM_OK;
}
