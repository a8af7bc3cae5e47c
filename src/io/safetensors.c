#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/dtype.h"

typedef struct st_dtype {
    const char *name;
    uint32_t bytes;  /* 0: a sub-byte type this reader does not size */
    int gm;          /* gm_dtype, or -1 */
} st_dtype;

/* The dtypes of the safetensors spec; only the float types the engine computes with map to a gm_dtype. */
static const st_dtype DTYPES[] = {
    {"F32", 4, GM_F32},   {"F16", 2, GM_F16},     {"BF16", 2, GM_BF16},   {"F64", 8, -1},
    {"I64", 8, -1},       {"I32", 4, -1},         {"I16", 2, -1},         {"I8", 1, -1},
    {"U64", 8, -1},       {"U32", 4, -1},         {"U16", 2, -1},         {"U8", 1, -1},
    {"BOOL", 1, -1},      {"F8_E4M3", 1, -1},     {"F8_E5M2", 1, -1},     {"E8M0", 1, -1},
    {"F4", 0, -1},        {"F6_E2M3", 0, -1},     {"F6_E3M2", 0, -1},
};

static const st_dtype *find_dtype(const char *name) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(DTYPES[i].name, name) == 0) return &DTYPES[i];
    return NULL;
}

/* A JSON number that is a whole number in [0, 2^53] (exact in a double). */
static bool json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

void gm_safetensors_free(gm_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->tensors);
    memset(st, 0, sizeof *st);
}

const gm_st_tensor *gm_safetensors_find(const gm_safetensors *st, const char *name) {
    for (size_t i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

/* One "name": {dtype, shape, data_offsets} entry into *t (t->name is set by the caller). */
static gm_status parse_entry(const cJSON *e, uint64_t data_len, uint64_t data_start, const char *path,
                             gm_st_tensor *t) {
    const char *name = t->name;
    if (!cJSON_IsObject(e)) return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': 'dtype' missing or not a string", path, name);
    if (!cJSON_IsArray(sh)) return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': 'shape' missing or not an array", path, name);
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': 'data_offsets' is not a [begin, end] pair", path, name);

    const st_dtype *d = find_dtype(dt->valuestring);
    if (!d) return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", path, name, dt->valuestring);
    if (d->bytes == 0)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported", path, name, d->name);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", d->name);
    t->dtype = d->gm;
    t->elem_bytes = d->bytes;

    int nd = cJSON_GetArraySize(sh);
    if (nd > GM_ST_MAX_DIMS)
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions (at most %d)", path, name, nd,
                       GM_ST_MAX_DIMS);
    t->n_dims = nd;
    uint64_t count = 1;
    for (int i = 0; i < nd; i++) {
        uint64_t v;
        if (!json_u64(cJSON_GetArrayItem(sh, i), &v))
            return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, i);
        t->shape[i] = v;
        if (v != 0 && count > UINT64_MAX / v)
            return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': element count overflows", path, name);
        count *= v;
    }
    uint64_t begin, end;
    if (!json_u64(cJSON_GetArrayItem(off, 0), &begin) || !json_u64(cJSON_GetArrayItem(off, 1), &end))
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", path, name);
    if (begin > end)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] run backwards", path, name,
                       (unsigned long long)begin, (unsigned long long)end);
    if (end > data_len)
        return gm_fail(GM_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%llu bytes)", path,
                       name, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_len);
    if (count > UINT64_MAX / d->bytes || count * d->bytes != end - begin)
        return gm_fail(GM_ERR_FORMAT, "%s: tensor '%s': shape holds %llu %s elements but data_offsets span %llu bytes",
                       path, name, (unsigned long long)count, d->name, (unsigned long long)(end - begin));
    t->offset = data_start + begin;
    t->nbytes = end - begin;
    return GM_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const gm_st_tensor *const *)a)->name, (*(const gm_st_tensor *const *)b)->name);
}

static int cmp_offset(const void *a, const void *b) {
    const gm_st_tensor *x = *(const gm_st_tensor *const *)a, *y = *(const gm_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Duplicate names and overlapping byte ranges, both found by sorting. */
static gm_status check_unique(const gm_safetensors *st, const char *path) {
    if (st->n_tensors < 2) return GM_OK;
    gm_st_tensor **v = malloc(st->n_tensors * sizeof *v);
    if (!v) return gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < st->n_tensors; i++) v[i] = &st->tensors[i];
    gm_status s = GM_OK;
    qsort(v, st->n_tensors, sizeof *v, cmp_name);
    for (size_t i = 1; i < st->n_tensors && s == GM_OK; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            s = gm_fail(GM_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", path, v[i]->name);
    qsort(v, st->n_tensors, sizeof *v, cmp_offset);
    for (size_t i = 1; i < st->n_tensors && s == GM_OK; i++) {
        const gm_st_tensor *a = v[i - 1], *b = v[i];
        if (a->nbytes && b->nbytes && b->offset < a->offset + a->nbytes)
            s = gm_fail(GM_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap (bytes %llu..%llu and %llu..%llu)", path,
                        a->name, b->name, (unsigned long long)a->offset, (unsigned long long)(a->offset + a->nbytes),
                        (unsigned long long)b->offset, (unsigned long long)(b->offset + b->nbytes));
    }
    free(v);
    return s;
}

gm_status gm_safetensors_parse(const char *json, size_t len, uint64_t file_size, const char *path,
                               gm_safetensors *out) {
    memset(out, 0, sizeof *out);
    if (file_size < 8 || len > file_size - 8)
        return gm_fail(GM_ERR_FORMAT, "%s: header of %zu bytes does not fit in the file (%llu bytes)", path, len,
                       (unsigned long long)file_size);
    size_t lead = 0;
    while (lead < len && (json[lead] == ' ' || json[lead] == '\n' || json[lead] == '\t' || json[lead] == '\r')) lead++;
    if (lead == len || json[lead] != '{')
        return gm_fail(GM_ERR_FORMAT, "%s: header is not a JSON object (not a safetensors file?)", path);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        /* on failure cJSON points `end` at the error */
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        cJSON_Delete(root);
        return gm_fail(GM_ERR_FORMAT, "%s: header is not valid JSON (near file offset %zu)", path, 8 + at);
    }
    for (const char *p = end; p < json + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            cJSON_Delete(root);
            return gm_fail(GM_ERR_FORMAT, "%s: header has trailing bytes after the JSON object (byte %zu)", path,
                           (size_t)(8 + (p - json)));
        }

    out->file_size = file_size;
    out->data_start = 8 + (uint64_t)len;
    uint64_t data_len = file_size - out->data_start;
    size_t n = 0;
    for (const cJSON *e = root->child; e; e = e->next) n++;
    out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
    gm_status s = out->tensors ? GM_OK : gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
    for (const cJSON *e = root->child; e && s == GM_OK; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) s = gm_fail(GM_ERR_FORMAT, "%s: '__metadata__' is not a JSON object", path);
            continue;
        }
        if (!e->string[0]) {
            s = gm_fail(GM_ERR_FORMAT, "%s: a tensor has an empty name", path);
            break;
        }
        gm_st_tensor *t = &out->tensors[out->n_tensors];
        size_t nl = strlen(e->string);
        t->name = malloc(nl + 1);
        if (t->name) memcpy(t->name, e->string, nl + 1);
        if (!t->name) {
            s = gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        out->n_tensors++;
        s = parse_entry(e, data_len, out->data_start, path, t);
    }
    cJSON_Delete(root);
    if (s == GM_OK) s = check_unique(out, path);
    if (s != GM_OK) gm_safetensors_free(out);
    return s;
}

gm_status gm_safetensors_read(const gm_file *f, gm_safetensors *out) {
    memset(out, 0, sizeof *out);
    if (f->size < 8)
        return gm_fail(GM_ERR_FORMAT, "%s: %llu bytes is too short for a safetensors file (no header length)", f->path,
                       (unsigned long long)f->size);
    uint8_t b[8];
    GM_TRY(gm_file_read(f, 0, b, 8));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    if (n > GM_ST_MAX_HEADER)
        return gm_fail(GM_ERR_FORMAT, "%s: header length %llu is larger than the %u bytes allowed (not a safetensors file?)",
                       f->path, (unsigned long long)n, GM_ST_MAX_HEADER);
    if (n > f->size - 8)
        return gm_fail(GM_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%llu bytes): truncated?",
                       f->path, (unsigned long long)n, (unsigned long long)f->size);
    char *json = malloc(n + 1);
    if (!json) return gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %llu bytes for the header", f->path, (unsigned long long)n);
    gm_status s = gm_file_read(f, 8, json, n);
    if (s == GM_OK) {
        json[n] = 0;
        s = gm_safetensors_parse(json, (size_t)n, f->size, f->path, out);
    }
    free(json);
    return s;
}
