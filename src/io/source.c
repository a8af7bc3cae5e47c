#define _GNU_SOURCE /* st_mtim */
#include "io/source_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/hash.h"
#include "model/config.h"

gm_status gm_source_open(const char *path, gm_source **out) {
    *out = NULL;
    if (!path || !*path) return gm_fail(GM_ERR_ARG, "no model path given (-m PATH)");
    struct stat st;
    if (stat(path, &st) != 0) return gm_fail(GM_ERR_IO, "%s: cannot open the model: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return gm_hf_source_open(path, out);
    gm_source *s = calloc(1, sizeof *s);
    if (!s) return gm_fail(GM_ERR_NOMEM, "out of memory");
    snprintf(s->path, sizeof s->path, "%s", path);
    s->format = "gguf";
    s->is_gguf = true;
    gm_status st2 = gm_gguf_open(&s->gguf, path);
    if (st2 == GM_OK) st2 = gm_config_from_gguf(&s->gguf, &s->config);
    if (st2 != GM_OK) {
        gm_source_close(s);
        return st2;
    }
    *out = s;
    return GM_OK;
}

void gm_source_close(gm_source *s) {
    if (!s) return;
    if (s->is_gguf) gm_gguf_close(&s->gguf);
    for (int i = 0; i < s->n_files; i++) gm_file_close(&s->files[i]);
    free(s->tensors);
    free(s->file_of);
    free(s->hf_extra);
    free(s);
}

const char *gm_source_path(const gm_source *s) { return s->path; }
const char *gm_source_format(const gm_source *s) { return s->format; }
const gm_config *gm_source_config(const gm_source *s) { return &s->config; }
const gm_gguf *gm_source_gguf(const gm_source *s) { return s->is_gguf ? &s->gguf : NULL; }

size_t gm_source_tensor_count(const gm_source *s) { return s->is_gguf ? s->gguf.n_tensors : s->n_tensors; }

const gm_tensor_info *gm_source_tensor_at(const gm_source *s, size_t i) {
    if (i >= gm_source_tensor_count(s)) return NULL;
    return s->is_gguf ? &s->gguf.tensors[i] : &s->tensors[i];
}

const gm_tensor_info *gm_source_find(const gm_source *s, const char *name) {
    size_t n = gm_source_tensor_count(s);
    for (size_t i = 0; i < n; i++) {
        const gm_tensor_info *t = gm_source_tensor_at(s, i);
        if (strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

gm_status gm_source_read_rows(const gm_source *s, const gm_tensor_info *t, uint64_t row0, uint64_t nrows, void *dst) {
    if (s->is_gguf) return gm_gguf_read_rows(&s->gguf, t, row0, nrows, dst);
    size_t idx = (size_t)(t - s->tensors);
    if (idx >= s->n_tensors) return gm_fail(GM_ERR_ARG, "tensor does not belong to this source");
    uint64_t total = t->nbytes / t->row_bytes;
    if (row0 > total || nrows > total - row0)
        return gm_fail(GM_ERR_RANGE, "%s: tensor '%s': rows [%llu, %llu) outside its %llu rows", s->path, t->name,
                       (unsigned long long)row0, (unsigned long long)(row0 + nrows), (unsigned long long)total);
    return gm_file_read(&s->files[s->file_of[idx]], t->offset + row0 * t->row_bytes, dst, nrows * t->row_bytes);
}

/* FNV-1a over sizes, the tensor directory and 64 sampled 4 KiB pieces of data. */
uint64_t gm_source_fingerprint(const gm_source *s) {
    uint64_t h = GM_FNV_SEED;
#define MIX(p, n) h = gm_fnv1a(h, (p), (n))
    size_t n = gm_source_tensor_count(s);
    for (size_t i = 0; i < n; i++) {
        const gm_tensor_info *t = gm_source_tensor_at(s, i);
        MIX(t->name, strlen(t->name));
        MIX(t->ne, sizeof t->ne);
        MIX(&t->type, sizeof t->type);
    }
    uint8_t buf[4096];
    for (size_t i = 0; n && i < 64; i++) {
        const gm_tensor_info *t = gm_source_tensor_at(s, (i * 7919) % n);
        uint64_t len = t->row_bytes < sizeof buf ? t->row_bytes : sizeof buf;
        const gm_file *f = s->is_gguf ? &s->gguf.file : &s->files[s->file_of[(size_t)(t - s->tensors)]];
        if (gm_file_read(f, t->offset, buf, len) == GM_OK) MIX(buf, len);
    }
#undef MIX
    return h;
}

uint64_t gm_source_stamp(const gm_source *s) {
    uint64_t h = gm_source_fingerprint(s);
    int n = s->is_gguf ? 1 : s->n_files;
    for (int i = 0; i < n; i++) {
        const gm_file *f = s->is_gguf ? &s->gguf.file : &s->files[i];
        struct stat st;
        if (fstat(f->fd, &st) != 0) continue;
        uint64_t v[5] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                         (uint64_t)st.st_mtim.tv_nsec};
        h = gm_fnv1a(h, v, sizeof v);
    }
    return h;
}

void gm_source_release_tokenizer_arrays(gm_source *s) {
    if (s->is_gguf) gm_gguf_release_arrays(&s->gguf, "tokenizer.ggml.");
}
