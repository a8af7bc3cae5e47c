#include "io/gguf.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffered, bounds-checked cursor over the metadata part of the file ---- */

typedef struct cursor {
    const gm_file *f;
    uint64_t pos;        /* absolute offset of the next byte */
    uint8_t buf[1 << 16];
    uint64_t buf_start;  /* file offset of buf[0] */
    uint64_t buf_len;
} cursor;

static gm_status cur_read(cursor *c, void *dst, uint64_t n, const char *what) {
    uint8_t *out = dst;
    if (c->pos > c->f->size || n > c->f->size - c->pos)
        return gm_fail(GM_ERR_FORMAT, "%s: truncated at offset %llu reading %s (%llu bytes wanted, file is %llu)",
                       c->f->path, (unsigned long long)c->pos, what, (unsigned long long)n,
                       (unsigned long long)c->f->size);
    while (n > 0) {
        if (c->pos >= c->buf_start && c->pos < c->buf_start + c->buf_len) {
            uint64_t off = c->pos - c->buf_start, take = c->buf_len - off;
            if (take > n) take = n;
            memcpy(out, c->buf + off, take);
            out += take;
            c->pos += take;
            n -= take;
            continue;
        }
        uint64_t len = c->f->size - c->pos;
        if (len > sizeof c->buf) len = sizeof c->buf;
        GM_TRY(gm_file_read(c->f, c->pos, c->buf, len));
        c->buf_start = c->pos;
        c->buf_len = len;
    }
    return GM_OK;
}

static uint64_t cur_left(const cursor *c) { return c->pos <= c->f->size ? c->f->size - c->pos : 0; }

/* A fixed-size field: copied in place when the buffer holds it, else through cur_read (Gemma's 262144 string
 * lengths parse in 2 ms instead of 5) */
static inline gm_status cur_fixed(cursor *c, void *v, uint64_t n, const char *what) {
    if (c->pos >= c->buf_start && c->pos + n <= c->buf_start + c->buf_len) {
        memcpy(v, c->buf + (c->pos - c->buf_start), n);
        c->pos += n;
        return GM_OK;
    }
    return cur_read(c, v, n, what);
}

static gm_status cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_fixed(c, v, 4, what); }
static gm_status cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_fixed(c, v, 8, what); }

/* GGUF v1 used 32-bit counts; v2/v3 use 64-bit. We accept v2 and v3. */
static gm_status cur_string(cursor *c, char **out, uint64_t *len_out, uint64_t max_len, const char *what) {
    uint64_t start = c->pos, len;
    GM_TRY(cur_u64(c, &len, what));
    if (len > max_len || len > cur_left(c))
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: %s has length %llu (limit %llu, %llu bytes left)",
                       c->f->path, (unsigned long long)start, what, (unsigned long long)len,
                       (unsigned long long)max_len, (unsigned long long)cur_left(c));
    char *s = malloc(len + 1);
    if (!s) return gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %llu bytes for %s", c->f->path,
                           (unsigned long long)len, what);
    gm_status st = cur_read(c, s, len, what);
    if (st != GM_OK) {
        free(s);
        return st;
    }
    s[len] = 0;
    *out = s;
    if (len_out) *len_out = len;
    return GM_OK;
}

static const uint8_t scalar_size[GGUF_TYPE_COUNT] = {
    [GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2, [GGUF_U32] = 4, [GGUF_I32] = 4,
    [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};

const char *gm_gguf_type_name(uint32_t type) {
    static const char *names[GGUF_TYPE_COUNT] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                                 "bool", "string", "array", "u64", "i64", "f64"};
    return type < GGUF_TYPE_COUNT ? names[type] : "unknown";
}

static void store_scalar(gguf_kv *kv, uint32_t type, const uint8_t *raw) {
    switch (type) {
    case GGUF_U8: kv->num.u = raw[0]; break; /* num is a union: set exactly one member */
    case GGUF_BOOL: kv->num.u = raw[0] != 0; break;
    case GGUF_I8: { int8_t v; memcpy(&v, raw, 1); kv->num.i = v; } break;
    case GGUF_U16: { uint16_t v; memcpy(&v, raw, 2); kv->num.u = v; } break;
    case GGUF_I16: { int16_t v; memcpy(&v, raw, 2); kv->num.i = v; } break;
    case GGUF_U32: { uint32_t v; memcpy(&v, raw, 4); kv->num.u = v; } break;
    case GGUF_I32: { int32_t v; memcpy(&v, raw, 4); kv->num.i = v; } break;
    case GGUF_F32: { float v; memcpy(&v, raw, 4); kv->num.f = v; } break;
    case GGUF_U64: { uint64_t v; memcpy(&v, raw, 8); kv->num.u = v; } break;
    case GGUF_I64: { int64_t v; memcpy(&v, raw, 8); kv->num.i = v; } break;
    case GGUF_F64: { double v; memcpy(&v, raw, 8); kv->num.f = v; } break;
    default: break;
    }
}

/* Skip a nested array's elements (we keep no nested arrays: no Gemma key uses them). */
static gm_status skip_array(cursor *c, int depth);

static gm_status skip_value(cursor *c, uint32_t type, int depth) {
    if (type == GGUF_STRING) {
        uint64_t len;
        GM_TRY(cur_u64(c, &len, "string length"));
        if (len > cur_left(c)) return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: string of %llu bytes past the end",
                                              c->f->path, (unsigned long long)c->pos, (unsigned long long)len);
        c->pos += len;
        return GM_OK;
    }
    if (type == GGUF_ARRAY) return skip_array(c, depth + 1);
    if (type >= GGUF_TYPE_COUNT || !scalar_size[type])
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: unknown value type %u", c->f->path,
                       (unsigned long long)c->pos, type);
    if (scalar_size[type] > cur_left(c)) return gm_fail(GM_ERR_FORMAT, "%s: truncated value", c->f->path);
    c->pos += scalar_size[type];
    return GM_OK;
}

static gm_status skip_array(cursor *c, int depth) {
    if (depth > 8) return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: arrays nested deeper than 8", c->f->path,
                                  (unsigned long long)c->pos);
    uint32_t et;
    uint64_t n;
    GM_TRY(cur_u32(c, &et, "array type"));
    GM_TRY(cur_u64(c, &n, "array count"));
    if (n > cur_left(c)) return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: array count %llu exceeds the file",
                                        c->f->path, (unsigned long long)c->pos, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) GM_TRY(skip_value(c, et, depth));
    return GM_OK;
}

/* count elements of type et at the cursor into a (strings: a blob of NUL-terminated copies). */
static gm_status read_elements(cursor *c, uint32_t et, uint64_t n, const char *key, gm_gguf_array *a) {
    memset(a, 0, sizeof *a);
    a->type = et;
    a->count = n;
    if (et == GGUF_STRING) {
        a->strs = calloc(n ? n : 1, sizeof(char *));
        a->lens = calloc(n ? n : 1, sizeof(uint32_t));
        uint64_t cap = 1 << 16, used = 0;
        a->blob = malloc(cap);
        uint64_t *offs = malloc((n ? n : 1) * sizeof(uint64_t));
        if (!a->strs || !a->lens || !a->blob || !offs) {
            free(offs);
            gm_gguf_array_free(a);
            return gm_fail(GM_ERR_NOMEM, "%s: key '%s': cannot allocate %llu strings", c->f->path, key,
                           (unsigned long long)n);
        }
        for (uint64_t i = 0; i < n; i++) {
            uint64_t len;
            gm_status st = cur_u64(c, &len, "string length");
            if (st == GM_OK && (len > cur_left(c) || len > UINT32_MAX))
                st = gm_fail(GM_ERR_FORMAT, "%s: offset %llu: key '%s' element %llu: string length %llu past the end",
                             c->f->path, (unsigned long long)c->pos, key, (unsigned long long)i,
                             (unsigned long long)len);
            if (st == GM_OK && used + len + 1 > cap) {
                while (used + len + 1 > cap) cap *= 2;
                char *nb = realloc(a->blob, cap);
                if (!nb) st = gm_fail(GM_ERR_NOMEM, "%s: key '%s': out of memory", c->f->path, key);
                else a->blob = nb;
            }
            if (st == GM_OK) st = cur_read(c, a->blob + used, len, "string");
            if (st != GM_OK) {
                free(offs);
                gm_gguf_array_free(a);
                return st;
            }
            a->blob[used + len] = 0;
            offs[i] = used;
            a->lens[i] = (uint32_t)len;
            used += len + 1;
        }
        for (uint64_t i = 0; i < n; i++) a->strs[i] = a->blob + offs[i];
        free(offs);
        return GM_OK;
    }
    uint64_t es = scalar_size[et];
    a->data = malloc(n > 0 ? n * es : 1);
    if (!a->data) return gm_fail(GM_ERR_NOMEM, "%s: key '%s': out of memory", c->f->path, key);
    gm_status st = cur_read(c, a->data, n * es, key);
    if (st != GM_OK) gm_gguf_array_free(a);
    return st;
}

/* Step over n strings, checking each lies inside the file (as read_elements would). */
static gm_status skip_strings(cursor *c, uint64_t n, const char *key) {
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        GM_TRY(cur_u64(c, &len, "string length"));
        if (len > cur_left(c) || len > UINT32_MAX)
            return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: key '%s' element %llu: string length %llu past the end",
                           c->f->path, (unsigned long long)c->pos, key, (unsigned long long)i,
                           (unsigned long long)len);
        c->pos += len;
    }
    return GM_OK;
}

static gm_status read_array(cursor *c, gguf_kv *kv) {
    uint64_t start = c->pos;
    GM_TRY(cur_u32(c, &kv->arr_type, "array element type"));
    GM_TRY(cur_u64(c, &kv->arr_count, "array count"));
    uint32_t et = kv->arr_type;
    uint64_t n = kv->arr_count;
    kv->arr_offset = c->pos;
    if (et == GGUF_ARRAY) { /* nested: keep the key, drop the payload */
        kv->arr_count = 0;
        for (uint64_t i = 0; i < n; i++) GM_TRY(skip_array(c, 1));
        return GM_OK;
    }
    if (et != GGUF_STRING && (et >= GGUF_TYPE_COUNT || !scalar_size[et]))
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: key '%s': unknown array element type %u", c->f->path,
                       (unsigned long long)start, kv->key, et);
    /* every string needs at least its 8-byte length: reject absurd counts before allocating */
    uint64_t es = et == GGUF_STRING ? 8 : scalar_size[et];
    if (n > cur_left(c) / es && et == GGUF_STRING)
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: key '%s': %llu strings cannot fit in the %llu bytes left",
                       c->f->path, (unsigned long long)start, kv->key, (unsigned long long)n,
                       (unsigned long long)cur_left(c));
    if (n > cur_left(c) / es)
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: key '%s': array of %llu %s elements exceeds the file",
                       c->f->path, (unsigned long long)start, kv->key, (unsigned long long)n, gm_gguf_type_name(et));
    if (n > GM_GGUF_EAGER_MAX) { /* left in the file until gm_gguf_read_array */
        kv->arr_deferred = true;
        if (et == GGUF_STRING) return skip_strings(c, n, kv->key);
        c->pos += n * es;
        return GM_OK;
    }
    gm_gguf_array a;
    GM_TRY(read_elements(c, et, n, kv->key, &a));
    kv->arr_data = a.data;
    kv->arr_strs = a.strs;
    kv->arr_str_lens = a.lens;
    kv->arr_blob = a.blob;
    return GM_OK;
}

gm_status gm_gguf_read_array(const gm_gguf *g, const gguf_kv *kv, gm_gguf_array *out) {
    memset(out, 0, sizeof *out);
    if (kv->type != GGUF_ARRAY || kv->arr_type == GGUF_ARRAY)
        return gm_fail(GM_ERR_FORMAT, "%s: key '%s' is not an array of strings or numbers", g->file.path, kv->key);
    cursor *c = calloc(1, sizeof *c); /* its own: other threads may read the file at the same time */
    if (!c) return gm_fail(GM_ERR_NOMEM, "%s: out of memory", g->file.path);
    c->f = &g->file;
    c->pos = kv->arr_offset;
    gm_status st = read_elements(c, kv->arr_type, kv->arr_count, kv->key, out);
    free(c);
    return st;
}

void gm_gguf_array_free(gm_gguf_array *a) {
    free(a->data);
    free(a->strs);
    free(a->lens);
    free(a->blob);
    memset(a, 0, sizeof *a);
}

static gm_status read_kv(cursor *c, gguf_kv *kv) {
    GM_TRY(cur_string(c, &kv->key, NULL, 65535, "metadata key"));
    GM_TRY(cur_u32(c, &kv->type, "metadata value type"));
    if (kv->type == GGUF_STRING) return cur_string(c, &kv->str, &kv->str_len, 1u << 30, kv->key);
    if (kv->type == GGUF_ARRAY) return read_array(c, kv);
    if (kv->type >= GGUF_TYPE_COUNT || !scalar_size[kv->type])
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: key '%s' has unknown value type %u", c->f->path,
                       (unsigned long long)c->pos, kv->key, kv->type);
    uint8_t raw[8];
    GM_TRY(cur_read(c, raw, scalar_size[kv->type], kv->key));
    store_scalar(kv, kv->type, raw);
    return GM_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const gm_tensor_info *x = *(const gm_tensor_info *const *)a, *y = *(const gm_tensor_info *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static gm_status read_tensor_info(cursor *c, gm_gguf *g, gm_tensor_info *t, uint64_t index) {
    uint64_t start = c->pos;
    char *name = NULL;
    uint64_t name_len;
    GM_TRY(cur_string(c, &name, &name_len, sizeof t->name - 1, "tensor name"));
    memcpy(t->name, name, name_len + 1);
    free(name);
    uint32_t n_dims, type;
    GM_TRY(cur_u32(c, &n_dims, "tensor n_dims"));
    if (n_dims < 1 || n_dims > 4)
        return gm_fail(GM_ERR_FORMAT, "%s: offset %llu: tensor %llu '%s' has %u dimensions (1 to 4 allowed)",
                       c->f->path, (unsigned long long)start, (unsigned long long)index, t->name, n_dims);
    t->n_dims = (int)n_dims;
    uint64_t count = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        GM_TRY(cur_u64(c, &t->ne[d], "tensor dimension"));
        if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || count > UINT64_MAX / t->ne[d])
            return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': dimension %u = %llu is zero or overflows the element count",
                           c->f->path, t->name, d, (unsigned long long)t->ne[d]);
        count *= t->ne[d];
    }
    GM_TRY(cur_u32(c, &type, "tensor type"));
    const gm_dtype_info *di = gm_dtype_get(type);
    if (!di) return gm_fail(GM_ERR_UNSUPPORTED, "%s: tensor '%s' has type %u, which this build does not read",
                            c->f->path, t->name, type);
    t->type = (gm_dtype)type;
    if (!gm_dtype_row_bytes(t->type, t->ne[0], &t->row_bytes))
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': row of %llu elements is not a whole number of %s blocks (%u)",
                       c->f->path, t->name, (unsigned long long)t->ne[0], di->name, di->block);
    uint64_t rows = count / t->ne[0];
    if (rows > UINT64_MAX / t->row_bytes)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->f->path, t->name);
    t->nbytes = rows * t->row_bytes;
    GM_TRY(cur_u64(c, &t->offset, "tensor offset"));
    if (t->offset % g->alignment)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %u",
                       c->f->path, t->name, (unsigned long long)t->offset, g->alignment);
    return GM_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Names must be unique; sorting keeps this O(n log n) for hostile files with huge counts. */
static gm_status check_unique(const char *path, const char *what, const void *items, uint64_t n, size_t stride,
                              size_t field, bool field_is_pointer) {
    if (n < 2) return GM_OK;
    const char **names = malloc(n * sizeof *names);
    if (!names) return gm_fail(GM_ERR_NOMEM, "%s: out of memory checking %llu %s names", path, (unsigned long long)n, what);
    for (uint64_t i = 0; i < n; i++) {
        const char *p = (const char *)items + i * stride + field;
        names[i] = field_is_pointer ? *(const char *const *)p : p;
    }
    qsort(names, n, sizeof *names, cmp_str);
    gm_status st = GM_OK;
    for (uint64_t i = 1; i < n && st == GM_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = gm_fail(GM_ERR_FORMAT, "%s: %s '%s' appears twice", path, what, names[i]);
    free(names);
    return st;
}

gm_status gm_gguf_open(gm_gguf *g, const char *path) {
    memset(g, 0, sizeof *g);
    g->file.fd = -1;
    GM_TRY(gm_file_open(&g->file, path));
    cursor *c = calloc(1, sizeof *c);
    if (!c) {
        gm_gguf_close(g);
        return gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
    }
    c->f = &g->file;
    gm_status st = GM_OK;
    char magic[4];
    st = cur_read(c, magic, 4, "magic");
    if (st == GM_OK && memcmp(magic, "GGUF", 4) != 0)
        st = gm_fail(GM_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x, expected 'GGUF')", path,
                     (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    if (st == GM_OK) st = cur_u32(c, &g->version, "version");
    if (st == GM_OK && (g->version < 2 || g->version > 3))
        st = gm_fail(GM_ERR_UNSUPPORTED, "%s: GGUF version %u (2 and 3 are supported)", path, g->version);
    if (st == GM_OK) st = cur_u64(c, &g->n_tensors, "tensor count");
    if (st == GM_OK) st = cur_u64(c, &g->n_kv, "metadata count");
    /* a key-value pair needs >= 13 bytes, a tensor info >= 29: reject counts the file cannot hold */
    if (st == GM_OK && (g->n_kv > cur_left(c) / 13 || g->n_tensors > cur_left(c) / 29))
        st = gm_fail(GM_ERR_FORMAT, "%s: header claims %llu metadata entries and %llu tensors, more than a %llu-byte file can hold",
                     path, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors,
                     (unsigned long long)g->file.size);
    if (st == GM_OK) {
        g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
        g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
        if (!g->kv || !g->tensors) st = gm_fail(GM_ERR_NOMEM, "%s: out of memory for the directory", path);
    }
    for (uint64_t i = 0; st == GM_OK && i < g->n_kv; i++) {
        st = read_kv(c, &g->kv[i]);
    }
    if (st == GM_OK) st = check_unique(path, "metadata key", g->kv, g->n_kv, sizeof *g->kv, offsetof(gguf_kv, key), true);
    g->alignment = 32;
    if (st == GM_OK) {
        const gguf_kv *al = gm_gguf_find(g, "general.alignment");
        if (al) {
            if (al->type != GGUF_U32 || al->num.u == 0 || al->num.u % 8 || al->num.u > (1u << 20))
                st = gm_fail(GM_ERR_FORMAT, "%s: general.alignment must be a u32 multiple of 8 (got type %s)", path,
                             gm_gguf_type_name(al->type));
            else
                g->alignment = (uint32_t)al->num.u;
        }
    }
    for (uint64_t i = 0; st == GM_OK && i < g->n_tensors; i++) {
        st = read_tensor_info(c, g, &g->tensors[i], i);
    }
    if (st == GM_OK)
        st = check_unique(path, "tensor", g->tensors, g->n_tensors, sizeof *g->tensors, offsetof(gm_tensor_info, name), false);
    if (st == GM_OK) {
        uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
        g->data_offset = c->pos + pad;
        const gm_tensor_info **sorted = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *sorted);
        if (!sorted) st = gm_fail(GM_ERR_NOMEM, "%s: out of memory sorting tensors", path);
        for (uint64_t i = 0; st == GM_OK && i < g->n_tensors; i++) {
            gm_tensor_info *t = &g->tensors[i];
            if (t->offset > g->file.size || g->data_offset > g->file.size - t->offset ||
                t->nbytes > g->file.size - g->data_offset - t->offset)
                st = gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' (%llu bytes at data offset %llu) runs past the end of the file (%llu bytes)",
                             path, t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                             (unsigned long long)g->file.size);
            else {
                t->offset += g->data_offset;
                sorted[i] = t;
            }
        }
        if (st == GM_OK && g->n_tensors > 1) {
            qsort(sorted, g->n_tensors, sizeof *sorted, cmp_offset);
            for (uint64_t i = 1; st == GM_OK && i < g->n_tensors; i++)
                if (sorted[i - 1]->offset + sorted[i - 1]->nbytes > sorted[i]->offset)
                    st = gm_fail(GM_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap (offsets %llu and %llu)", path,
                                 sorted[i - 1]->name, sorted[i]->name, (unsigned long long)sorted[i - 1]->offset,
                                 (unsigned long long)sorted[i]->offset);
        }
        free(sorted);
    }
    free(c);
    if (st != GM_OK) gm_gguf_close(g);
    return st;
}

void gm_gguf_close(gm_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        free(kv->key);
        free(kv->str);
        free(kv->arr_data);
        free(kv->arr_strs);
        free(kv->arr_str_lens);
        free(kv->arr_blob);
    }
    free(g->kv);
    free(g->tensors);
    gm_file_close(&g->file);
    memset(g, 0, sizeof *g);
    g->file.fd = -1;
}

const gguf_kv *gm_gguf_find(const gm_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const gm_tensor_info *gm_gguf_tensor(const gm_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

gm_status gm_gguf_get_int(const gm_gguf *g, const char *key, int64_t *out) {
    const gguf_kv *kv = gm_gguf_find(g, key);
    if (!kv) return GM_ERR_RANGE;
    switch (kv->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_BOOL:
        *out = (int64_t)kv->num.u;
        return GM_OK;
    case GGUF_U64:
        if (kv->num.u > INT64_MAX) break;
        *out = (int64_t)kv->num.u;
        return GM_OK;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64:
        *out = kv->num.i;
        return GM_OK;
    default: break;
    }
    return gm_fail(GM_ERR_FORMAT, "%s: key '%s' has type %s, an integer was expected", g->file.path, key,
                   gm_gguf_type_name(kv->type));
}

gm_status gm_gguf_get_float(const gm_gguf *g, const char *key, double *out) {
    const gguf_kv *kv = gm_gguf_find(g, key);
    if (!kv) return GM_ERR_RANGE;
    if (kv->type == GGUF_F32 || kv->type == GGUF_F64) {
        *out = kv->num.f;
        return GM_OK;
    }
    int64_t i;
    if (kv->type != GGUF_STRING && kv->type != GGUF_ARRAY && gm_gguf_get_int(g, key, &i) == GM_OK) {
        *out = (double)i;
        return GM_OK;
    }
    return gm_fail(GM_ERR_FORMAT, "%s: key '%s' has type %s, a number was expected", g->file.path, key,
                   gm_gguf_type_name(kv->type));
}

gm_status gm_gguf_get_bool(const gm_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv = gm_gguf_find(g, key);
    if (!kv) return GM_ERR_RANGE;
    if (kv->type == GGUF_BOOL) {
        *out = kv->num.u != 0;
        return GM_OK;
    }
    return gm_fail(GM_ERR_FORMAT, "%s: key '%s' has type %s, bool was expected", g->file.path, key,
                   gm_gguf_type_name(kv->type));
}

const char *gm_gguf_get_str(const gm_gguf *g, const char *key) {
    const gguf_kv *kv = gm_gguf_find(g, key);
    return kv && kv->type == GGUF_STRING ? kv->str : NULL;
}

gm_status gm_gguf_read_rows(const gm_gguf *g, const gm_tensor_info *t, uint64_t row0, uint64_t nrows, void *dst) {
    uint64_t total_rows = t->nbytes / t->row_bytes;
    if (row0 > total_rows || nrows > total_rows - row0)
        return gm_fail(GM_ERR_RANGE, "%s: tensor '%s': rows [%llu, %llu) outside its %llu rows", g->file.path,
                       t->name, (unsigned long long)row0, (unsigned long long)(row0 + nrows),
                       (unsigned long long)total_rows);
    return gm_file_read(&g->file, t->offset + row0 * t->row_bytes, dst, nrows * t->row_bytes);
}

void gm_gguf_release_arrays(gm_gguf *g, const char *prefix) {
    size_t n = strlen(prefix);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        if (kv->type != GGUF_ARRAY || strncmp(kv->key, prefix, n) != 0) continue;
        free(kv->arr_data);
        free(kv->arr_strs);
        free(kv->arr_str_lens);
        free(kv->arr_blob);
        kv->arr_data = NULL;
        kv->arr_strs = NULL;
        kv->arr_str_lens = NULL;
        kv->arr_blob = NULL;
        kv->arr_count = 0;
    }
}
