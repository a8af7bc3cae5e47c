/* GGUF (v2, v3) reader: header, metadata and tensor directory parsed with every count, length and
 * offset checked against the file; tensor data is read later by ranges (a device reads its slice). */
#ifndef GM_IO_GGUF_H
#define GM_IO_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "io/dtype.h"
#include "io/file.h"

enum gguf_type {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6,
    GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10, GGUF_I64 = 11, GGUF_F64 = 12,
    GGUF_TYPE_COUNT = 13
};

typedef struct gguf_kv {
    char *key;
    uint32_t type;        /* enum gguf_type */
    /* scalars */
    union {
        uint64_t u;
        int64_t i;
        double f;
    } num;
    char *str;            /* GGUF_STRING (NUL-terminated; str_len excludes the NUL) */
    uint64_t str_len;
    /* arrays (one level: nested arrays are skipped and reported as unsupported on use). Arrays of
     * more than GM_GGUF_EAGER_MAX elements (a vocabulary's pieces, scores and types) stay in the
     * file: gm_gguf_open only checks that they fit, arr_deferred is set and the payload pointers
     * are NULL; gm_gguf_read_array reads them (any array) when they are needed. */
    uint32_t arr_type;
    uint64_t arr_count;
    uint64_t arr_offset;  /* file offset of the first element */
    bool arr_deferred;
    void *arr_data;       /* numeric: packed little-endian elements of arr_type */
    char **arr_strs;      /* strings: arr_count pointers into arr_blob */
    uint32_t *arr_str_lens;
    char *arr_blob;
} gguf_kv;

#define GM_GGUF_EAGER_MAX 256

/* An array's elements, read by gm_gguf_read_array and owned by the caller. */
typedef struct gm_gguf_array {
    uint32_t type;        /* element type */
    uint64_t count;
    void *data;           /* numeric: packed little-endian elements */
    char **strs;          /* strings: count NUL-terminated copies in blob */
    uint32_t *lens;
    char *blob;
} gm_gguf_array;

typedef struct gm_tensor_info {
    char name[128];
    gm_dtype type;
    int n_dims;
    uint64_t ne[4];       /* ggml order: ne[0] is the contiguous (input) dimension */
    uint64_t offset;      /* absolute file offset of the data */
    uint64_t nbytes;
    uint64_t row_bytes;   /* bytes of one ne[0]-long row */
} gm_tensor_info;

typedef struct gm_gguf {
    gm_file file;
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gm_tensor_info *tensors;
    uint64_t data_offset;
} gm_gguf;

gm_status gm_gguf_open(gm_gguf *g, const char *path);
void gm_gguf_close(gm_gguf *g);

const gguf_kv *gm_gguf_find(const gm_gguf *g, const char *key);
const gm_tensor_info *gm_gguf_tensor(const gm_gguf *g, const char *name);
/* Typed getters: GM_OK and *out set when present and convertible; GM_ERR_FORMAT (naming file and
 * key) when present with an unusable type; GM_ERR_RANGE when absent (callers apply defaults). */
gm_status gm_gguf_get_int(const gm_gguf *g, const char *key, int64_t *out);
gm_status gm_gguf_get_float(const gm_gguf *g, const char *key, double *out);
gm_status gm_gguf_get_bool(const gm_gguf *g, const char *key, bool *out);
const char *gm_gguf_get_str(const gm_gguf *g, const char *key);
const char *gm_gguf_type_name(uint32_t type);
/* Read the elements of array kv (deferred or not) from the file into out; free with
 * gm_gguf_array_free. Safe while other threads read the same file. */
gm_status gm_gguf_read_array(const gm_gguf *g, const gguf_kv *kv, gm_gguf_array *out);
void gm_gguf_array_free(gm_gguf_array *a);
/* Free the payload of array values whose key starts with prefix (e.g. the tokenizer arrays once a
 * tokenizer was built from them); the keys stay, with arr_count 0. */
void gm_gguf_release_arrays(gm_gguf *g, const char *prefix);

/* Read rows [row0, row0 + nrows) of a 2-D (or 1-D: one row) tensor into dst (raw, as stored). */
gm_status gm_gguf_read_rows(const gm_gguf *g, const gm_tensor_info *t, uint64_t row0, uint64_t nrows,
                            void *dst);

#endif
