/* Streaming safetensors writer (see safetensors_write.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t elem_bytes(const char *dtype) {
    if (!strcmp(dtype, "F32") || !strcmp(dtype, "I32")) return 4;
    if (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16")) return 2;
    return 0;
}

static gm_status io_error(gm_st_writer *w, const char *what) {
    return gm_fail(GM_ERR_IO, "%s: %s failed: %s", w->path, what, strerror(errno ? errno : EIO));
}

gm_status gm_st_write_begin(gm_st_writer *w, const char *path, const gm_st_entry *e, size_t n) {
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    /* header JSON: {"__metadata__":{"format":"pt"},"name":{"dtype":..,"shape":[..],"data_offsets":[a,b]},...} */
    size_t cap = 64 + n * 256, len = 0;
    for (size_t i = 0; i < n; i++) cap += strlen(e[i].name);
    char *h = malloc(cap);
    if (!h) return gm_fail(GM_ERR_NOMEM, "out of memory");
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t eb = elem_bytes(e[i].dtype), count = 1;
        if (!eb || e[i].n_dims < 1 || e[i].n_dims > 2 || strchr(e[i].name, '"') || strchr(e[i].name, '\\')) {
            free(h);
            return gm_fail(GM_ERR_ARG, "%s: cannot write tensor '%s' (%s, %d dims)", path, e[i].name, e[i].dtype, e[i].n_dims);
        }
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", e[i].name, e[i].dtype);
        for (int d = 0; d < e[i].n_dims; d++) {
            len += (size_t)snprintf(h + len, cap - len, "%s%llu", d ? "," : "", (unsigned long long)e[i].shape[d]);
            count *= e[i].shape[d];
        }
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + count * eb));
        off += count * eb;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while ((8 + len) % 8) h[len++] = ' '; /* data starts 8-byte aligned, as the reference writer pads */
    w->expected = off;
    w->f = fopen(path, "wb");
    if (!w->f) {
        free(h);
        return gm_fail(GM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)len >> (8 * i));
    errno = 0;
    bool ok = fwrite(le, 1, 8, w->f) == 8 && fwrite(h, 1, len, w->f) == len;
    free(h);
    if (!ok) {
        gm_status st = io_error(w, "write");
        gm_st_write_abort(w);
        return st;
    }
    return GM_OK;
}

gm_status gm_st_write(gm_st_writer *w, const void *data, size_t bytes) {
    errno = 0;
    if (fwrite(data, 1, bytes, w->f) != bytes) return io_error(w, "write");
    w->written += bytes;
    return GM_OK;
}

gm_status gm_st_write_end(gm_st_writer *w) {
    if (w->written != w->expected) {
        gm_st_write_abort(w);
        return gm_fail(GM_ERR_STATE, "%s: %llu data bytes written, header announces %llu", w->path,
                       (unsigned long long)w->written, (unsigned long long)w->expected);
    }
    errno = 0;
    gm_status st = GM_OK;
    if (fflush(w->f) != 0) st = io_error(w, "write");
    else if (fsync(fileno(w->f)) != 0) st = io_error(w, "fsync");
    if (fclose(w->f) != 0 && st == GM_OK) st = io_error(w, "close");
    w->f = NULL;
    if (st != GM_OK) remove(w->path);
    return st;
}

void gm_st_write_abort(gm_st_writer *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    remove(w->path);
}
