/* A tiny GGUF writer for tests: build a file in memory from chosen key-value pairs and tensors, then
 * corrupt bytes or write prefixes of it to a temp file for the reader to open.
 *
 *     gguf_builder b;
 *     gguf_builder_init(&b);
 *     gguf_kv_str(&b, "general.architecture", "gemma3");
 *     gguf_kv_u32(&b, "gemma3.block_count", 1);
 *     uint64_t ne[2] = {32, 2};
 *     gguf_add_tensor(&b, "w", 2, ne, 8, blocks, 68);      // type 8 = Q8_0, data placed aligned
 *     size_t len; uint8_t *file = gguf_build(&b, &len);      // malloc'd: header, kvs, infos, data
 *     char path[256]; gguf_write_temp(file, len, path, sizeof path);
 *     ... open path ...; remove(path); free(file); gguf_builder_free(&b);
 *
 * Header fields sit at fixed offsets (GGUF_OFF_*), so a test can patch them after building. The data
 * section has no padding after the last tensor: every strict prefix of a built file is truncated.
 * Everything here is static inline; include it after defining _POSIX_C_SOURCE >= 200809L (mkstemp). */
#ifndef GM_TESTS_GGUF_BUILD_H
#define GM_TESTS_GGUF_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { GGUF_OFF_MAGIC = 0, GGUF_OFF_VERSION = 4, GGUF_OFF_N_TENSORS = 8, GGUF_OFF_N_KV = 16, GGUF_HEADER_BYTES = 24 };

/* GGUF value types */
enum {
    GGUFB_U8 = 0, GGUFB_I8 = 1, GGUFB_U16 = 2, GGUFB_I16 = 3, GGUFB_U32 = 4, GGUFB_I32 = 5, GGUFB_F32 = 6,
    GGUFB_BOOL = 7, GGUFB_STRING = 8, GGUFB_ARRAY = 9, GGUFB_U64 = 10, GGUFB_I64 = 11, GGUFB_F64 = 12
};

typedef struct gguf_bytes {
    uint8_t *p;
    size_t len, cap;
} gguf_bytes;

typedef struct gguf_builder {
    uint32_t version;   /* written to the header; 3 by default */
    uint32_t alignment; /* data alignment used to place tensors; 32 unless set by gguf_kv_alignment */
    uint64_t n_kv, n_tensors;
    gguf_bytes kv, info, data;
} gguf_builder;

static inline void gguf_put(gguf_bytes *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "gguf_build: out of memory\n");
            exit(1);
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* little-endian on every platform this project builds for (x86-64, arm64) */
static inline void gguf_put_u32(gguf_bytes *b, uint32_t v) { gguf_put(b, &v, 4); }
static inline void gguf_put_u64(gguf_bytes *b, uint64_t v) { gguf_put(b, &v, 8); }
static inline void gguf_put_str(gguf_bytes *b, const char *s) {
    gguf_put_u64(b, strlen(s));
    gguf_put(b, s, strlen(s));
}

static inline void gguf_builder_init(gguf_builder *b) {
    memset(b, 0, sizeof *b);
    b->version = 3;
    b->alignment = 32;
}

static inline void gguf_builder_free(gguf_builder *b) {
    free(b->kv.p);
    free(b->info.p);
    free(b->data.p);
    memset(b, 0, sizeof *b);
}

/* A key and its type, then `n` raw value bytes exactly as given (for crafting bad values too). */
static inline void gguf_kv_raw(gguf_builder *b, const char *key, uint32_t type, const void *value, size_t n) {
    gguf_put_str(&b->kv, key);
    gguf_put_u32(&b->kv, type);
    gguf_put(&b->kv, value, n);
    b->n_kv++;
}

static inline void gguf_kv_u8(gguf_builder *b, const char *k, uint8_t v) { gguf_kv_raw(b, k, GGUFB_U8, &v, 1); }
static inline void gguf_kv_i8(gguf_builder *b, const char *k, int8_t v) { gguf_kv_raw(b, k, GGUFB_I8, &v, 1); }
static inline void gguf_kv_u16(gguf_builder *b, const char *k, uint16_t v) { gguf_kv_raw(b, k, GGUFB_U16, &v, 2); }
static inline void gguf_kv_i16(gguf_builder *b, const char *k, int16_t v) { gguf_kv_raw(b, k, GGUFB_I16, &v, 2); }
static inline void gguf_kv_u32(gguf_builder *b, const char *k, uint32_t v) { gguf_kv_raw(b, k, GGUFB_U32, &v, 4); }
static inline void gguf_kv_i32(gguf_builder *b, const char *k, int32_t v) { gguf_kv_raw(b, k, GGUFB_I32, &v, 4); }
static inline void gguf_kv_u64(gguf_builder *b, const char *k, uint64_t v) { gguf_kv_raw(b, k, GGUFB_U64, &v, 8); }
static inline void gguf_kv_i64(gguf_builder *b, const char *k, int64_t v) { gguf_kv_raw(b, k, GGUFB_I64, &v, 8); }
static inline void gguf_kv_f32(gguf_builder *b, const char *k, float v) { gguf_kv_raw(b, k, GGUFB_F32, &v, 4); }
static inline void gguf_kv_f64(gguf_builder *b, const char *k, double v) { gguf_kv_raw(b, k, GGUFB_F64, &v, 8); }
static inline void gguf_kv_bool(gguf_builder *b, const char *k, int v) {
    uint8_t u = v != 0;
    gguf_kv_raw(b, k, GGUFB_BOOL, &u, 1);
}

static inline void gguf_kv_str(gguf_builder *b, const char *key, const char *value) {
    gguf_put_str(&b->kv, key);
    gguf_put_u32(&b->kv, GGUFB_STRING);
    gguf_put_str(&b->kv, value);
    b->n_kv++;
}

/* general.alignment as a u32, and use it to place the tensors added afterwards */
static inline void gguf_kv_alignment(gguf_builder *b, uint32_t alignment) {
    gguf_kv_u32(b, "general.alignment", alignment);
    if (alignment) b->alignment = alignment;
}

/* Numeric array: `count` elements of `elem_type`, each `elem_size` bytes, from `data`. */
static inline void gguf_kv_array(gguf_builder *b, const char *key, uint32_t elem_type, const void *data, uint64_t count,
                                 size_t elem_size) {
    gguf_put_str(&b->kv, key);
    gguf_put_u32(&b->kv, GGUFB_ARRAY);
    gguf_put_u32(&b->kv, elem_type);
    gguf_put_u64(&b->kv, count);
    gguf_put(&b->kv, data, (size_t)count * elem_size);
    b->n_kv++;
}

static inline void gguf_kv_str_array(gguf_builder *b, const char *key, const char *const *strs, uint64_t count) {
    gguf_put_str(&b->kv, key);
    gguf_put_u32(&b->kv, GGUFB_ARRAY);
    gguf_put_u32(&b->kv, GGUFB_STRING);
    gguf_put_u64(&b->kv, count);
    for (uint64_t i = 0; i < count; i++) gguf_put_str(&b->kv, strs[i]);
    b->n_kv++;
}

/* A tensor info with an explicit offset (relative to the data section); no data is added. */
static inline void gguf_add_tensor_info(gguf_builder *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                                        uint32_t type, uint64_t offset) {
    gguf_put_str(&b->info, name);
    gguf_put_u32(&b->info, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gguf_put_u64(&b->info, ne[d]);
    gguf_put_u32(&b->info, type);
    gguf_put_u64(&b->info, offset);
    b->n_tensors++;
}

/* A tensor and its data, placed at the next aligned offset of the data section; returns that offset. */
static inline uint64_t gguf_add_tensor(gguf_builder *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                                       uint32_t type, const void *data, size_t nbytes) {
    static const uint8_t zeros[64] = {0};
    while (b->data.len % b->alignment) gguf_put(&b->data, zeros, 1);
    uint64_t off = b->data.len;
    gguf_add_tensor_info(b, name, n_dims, ne, type, off);
    gguf_put(&b->data, data, nbytes);
    return off;
}

/* The whole file (malloc'd); *len its size. The data section starts at the next multiple of
 * b->alignment after the tensor infos. */
static inline uint8_t *gguf_build(const gguf_builder *b, size_t *len) {
    gguf_bytes out = {0};
    gguf_put(&out, "GGUF", 4);
    gguf_put_u32(&out, b->version);
    gguf_put_u64(&out, b->n_tensors);
    gguf_put_u64(&out, b->n_kv);
    gguf_put(&out, b->kv.p, b->kv.len);
    gguf_put(&out, b->info.p, b->info.len);
    if (b->data.len) {
        static const uint8_t zero = 0;
        while (out.len % b->alignment) gguf_put(&out, &zero, 1);
        gguf_put(&out, b->data.p, b->data.len);
    }
    *len = out.len;
    return out.p;
}

/* Offset of the data section in a file gguf_build made from b. */
static inline size_t gguf_data_offset(const gguf_builder *b) {
    size_t n = GGUF_HEADER_BYTES + b->kv.len + b->info.len;
    return (n + b->alignment - 1) / b->alignment * b->alignment;
}

/* Write len bytes to a new temp file; its path goes to path. Returns 0 on success. */
static inline int gguf_write_temp(const uint8_t *data, size_t len, char *path, size_t path_size) {
    const char *dir = getenv("TMPDIR");
    snprintf(path, path_size, "%s/gm_test_gguf_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w <= 0) {
            close(fd);
            remove(path);
            return -1;
        }
        done += (size_t)w;
    }
    return close(fd);
}

/* Rewrite an existing file with len bytes (faster than a new temp file per variant). */
static inline int gguf_rewrite(const char *path, const uint8_t *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && w == len ? 0 : -1;
}

#endif
