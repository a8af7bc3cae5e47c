/* The safetensors parser: a file written by the safetensors library (offsets read back by Python's json,
 * values by torch), then crafted broken files: every length and offset must be caught, with a message
 * naming the file and the tensor. */
#define _GNU_SOURCE /* mkstemp */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/dtype.h"
#include "io/safetensors.h"
#include "test_util.h"

static float f16_to_f32(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static cJSON *load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

static void check_mixed(void) {
    char path[1024], jpath[1024];
    gm_test_fixture("safetensors_mixed.safetensors", path, sizeof path);
    gm_test_fixture("hf_tiny_expected.json", jpath, sizeof jpath);
    cJSON *all = load_json(jpath);
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(all, "safetensors_mixed");
    CHECK(exp != NULL, "no expectations in %s", jpath);
    if (!exp) {
        cJSON_Delete(all);
        return;
    }
    gm_file f;
    gm_safetensors st;
    CHECK(gm_file_open(&f, path) == GM_OK, "%s", gm_last_error());
    gm_status s = gm_safetensors_read(&f, &st);
    CHECK(s == GM_OK, "%s", gm_last_error());
    if (s != GM_OK) {
        gm_file_close(&f);
        cJSON_Delete(all);
        return;
    }
    CHECK(st.data_start == 8 + (uint64_t)cJSON_GetObjectItem(exp, "header_len")->valuedouble, "data_start %llu",
          (unsigned long long)st.data_start);
    CHECK(st.file_size == (uint64_t)cJSON_GetObjectItem(exp, "file_size")->valuedouble, "file size");
    const cJSON *tensors = cJSON_GetObjectItem(exp, "tensors");
    CHECK(st.n_tensors == (size_t)cJSON_GetArraySize(tensors), "%zu tensors (__metadata__ is not one)", st.n_tensors);
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        const gm_st_tensor *t = gm_safetensors_find(&st, name);
        CHECK(t != NULL, "tensor %s missing", name);
        if (!t) continue;
        const char *dtype = cJSON_GetObjectItem(e, "dtype")->valuestring;
        CHECK(strcmp(t->dtype_name, dtype) == 0, "%s dtype %s", name, t->dtype_name);
        int want_type = !strcmp(dtype, "F32") ? GM_F32 : !strcmp(dtype, "F16") ? GM_F16 : GM_BF16;
        CHECK(t->dtype == want_type, "%s gm type %d", name, t->dtype);
        const cJSON *shape = cJSON_GetObjectItem(e, "shape");
        CHECK(t->n_dims == cJSON_GetArraySize(shape), "%s: %d dims", name, t->n_dims);
        for (int d = 0; d < t->n_dims && d < cJSON_GetArraySize(shape); d++)
            CHECK(t->shape[d] == (uint64_t)cJSON_GetArrayItem(shape, d)->valuedouble, "%s shape[%d]", name, d);
        CHECK(t->offset == (uint64_t)cJSON_GetObjectItem(e, "offset")->valuedouble, "%s offset %llu", name,
              (unsigned long long)t->offset);
        CHECK(t->nbytes == (uint64_t)cJSON_GetObjectItem(e, "nbytes")->valuedouble, "%s nbytes", name);
        uint8_t raw[64];
        CHECK(t->nbytes <= sizeof raw && gm_file_read(&f, t->offset, raw, t->nbytes) == GM_OK, "%s read", name);
        int i = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(e, "values")) {
            float got;
            if (t->elem_bytes == 4) {
                memcpy(&got, raw + 4 * i, 4);
            } else {
                uint16_t h;
                memcpy(&h, raw + 2 * i, 2);
                got = t->dtype == GM_F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            CHECK(got == (float)v->valuedouble, "%s[%d] = %.9g, expected %.9g", name, i, got, v->valuedouble);
            i++;
        }
    }
    gm_safetensors_free(&st);
    gm_file_close(&f);
    cJSON_Delete(all);
}

/* ---- crafted files ---- */

static char tmp_path[64];

/* Write [u64 header_len][header][data_len zero bytes] (header_len given, or strlen(header) when ~0). */
static void write_file(uint64_t header_len, const char *header, size_t data_len) {
    FILE *f = fopen(tmp_path, "wb");
    uint64_t n = header_len == ~0ull ? strlen(header) : header_len;
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_len; i++) fputc(0, f);
    fclose(f);
}

static gm_status parse_file(gm_safetensors *st) {
    gm_file f;
    GM_TRY(gm_file_open(&f, tmp_path));
    gm_status s = gm_safetensors_read(&f, st);
    gm_file_close(&f);
    return s;
}

static void expect(const char *what, uint64_t header_len, const char *header, size_t data_len, gm_status want,
                   const char *needle) {
    write_file(header_len, header, data_len);
    gm_safetensors st;
    gm_status s = parse_file(&st);
    CHECK(s == want, "%s: status %s, expected %s (%s)", what, gm_status_name(s), gm_status_name(want),
          s ? gm_last_error() : "");
    if (s == GM_OK) {
        gm_safetensors_free(&st);
    } else {
        CHECK(strstr(gm_last_error(), tmp_path) != NULL, "%s: message '%s' must name the file", what, gm_last_error());
        CHECK(strstr(gm_last_error(), needle) != NULL, "%s: message '%s' should mention '%s'", what, gm_last_error(),
              needle);
        CHECK(st.tensors == NULL && st.n_tensors == 0, "%s: nothing left allocated", what);
    }
}

#define ANY (~0ull)
#define T(name, dtype, shape, b, e) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void crafted(void) {
    /* good ones first, so a parser that rejects everything fails here */
    expect("two tensors", ANY, "{" T("a", "F32", "[2,2]", 0, 16) "," T("b", "BF16", "[3]", 16, 22) "}", 22, GM_OK, "");
    expect("metadata", ANY, "{\"__metadata__\":{\"format\":\"pt\"}," T("a", "F16", "[4]", 0, 8) "}", 8, GM_OK, "");
    expect("padded header", ANY, "{" T("a", "F32", "[1]", 0, 4) "}      ", 4, GM_OK, "");
    expect("no tensors", ANY, "{}", 0, GM_OK, "");
    expect("0-d tensor", ANY, "{" T("s", "F32", "[]", 0, 4) "}", 4, GM_OK, "");
    expect("empty tensor", ANY, "{" T("z", "F32", "[0,5]", 0, 0) "," T("a", "F32", "[1]", 0, 4) "}", 4, GM_OK, "");
    expect("other dtypes parse", ANY, "{" T("i", "I64", "[2]", 0, 16) "," T("u", "U8", "[3]", 16, 19) "}", 19, GM_OK, "");
    {
        write_file(ANY, "{" T("w", "BF16", "[3,2]", 4, 16) "," T("i", "I32", "[1]", 0, 4) "}", 16);
        gm_safetensors st;
        CHECK(parse_file(&st) == GM_OK, "%s", gm_last_error());
        const gm_st_tensor *w = gm_safetensors_find(&st, "w"), *i = gm_safetensors_find(&st, "i");
        CHECK(w && w->dtype == GM_BF16 && w->n_dims == 2 && w->shape[0] == 3 && w->shape[1] == 2 && w->nbytes == 12 &&
                  w->offset == st.data_start + 4,
              "tensor w as declared");
        CHECK(i && i->dtype == -1 && i->elem_bytes == 4, "I32 parses with no gm type");
        CHECK(gm_safetensors_find(&st, "x") == NULL, "no such tensor");
        gm_safetensors_free(&st);
    }

    /* broken ones */
    FILE *f = fopen(tmp_path, "wb");
    fwrite("\x10\0\0", 1, 3, f);
    fclose(f);
    gm_safetensors st;
    CHECK(parse_file(&st) == GM_ERR_FORMAT && strstr(gm_last_error(), "too short"), "3-byte file: %s", gm_last_error());
    expect("header length past the end", 100, "{}", 0, GM_ERR_FORMAT, "past the end");
    expect("truncated header", 60, "{" T("a", "F32", "[1]", 0, 4), 0, GM_ERR_FORMAT, "past the end");
    expect("absurd header length", 1ull << 40, "{}", 0, GM_ERR_FORMAT, "larger than");
    expect("absurd header length 2^64-1", ~1ull, "{}", 0, GM_ERR_FORMAT, "larger than");
    expect("not JSON", ANY, "hello", 0, GM_ERR_FORMAT, "not a JSON object");
    expect("JSON array", ANY, "[1,2]", 0, GM_ERR_FORMAT, "not a JSON object");
    expect("broken JSON", ANY, "{\"a\":{\"dtype\":", 0, GM_ERR_FORMAT, "not valid JSON");
    expect("trailing garbage", ANY, "{}xyz", 0, GM_ERR_FORMAT, "trailing");
    expect("offsets past the end", ANY, "{" T("a", "F32", "[4]", 0, 16) "}", 12, GM_ERR_FORMAT, "past the end");
    expect("offsets far past the end", ANY, "{" T("a", "U8", "[1]", 1099511627776, 1099511627777) "}", 12,
           GM_ERR_FORMAT, "past the end");
    expect("overlapping", ANY, "{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", 12, GM_ERR_FORMAT,
           "overlap");
    expect("same range twice", ANY, "{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 0, 8) "}", 8,
           GM_ERR_FORMAT, "overlap");
    expect("wrong byte size", ANY, "{" T("a", "F32", "[2,2]", 0, 12) "}", 12, GM_ERR_FORMAT, "span 12 bytes");
    expect("unknown dtype", ANY, "{" T("a", "Q7", "[2]", 0, 2) "}", 2, GM_ERR_FORMAT, "unknown dtype");
    expect("sub-byte dtype", ANY, "{" T("a", "F4", "[2]", 0, 1) "}", 1, GM_ERR_UNSUPPORTED, "F4");
    expect("duplicate name", ANY, "{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[1]", 4, 8) "}", 8, GM_ERR_FORMAT,
           "twice");
    expect("offsets backwards", ANY, "{" T("a", "F32", "[0]", 8, 4) "}", 8, GM_ERR_FORMAT, "backwards");
    expect("negative offset", ANY, "{" T("a", "F32", "[1]", -4, 0) "}", 8, GM_ERR_FORMAT, "non-negative");
    expect("fractional shape", ANY, "{" T("a", "F32", "[1.5]", 0, 6) "}", 8, GM_ERR_FORMAT, "shape[0]");
    expect("huge offset", ANY, "{" T("a", "U8", "[1]", 1e300, 1e300) "}", 8, GM_ERR_FORMAT, "non-negative integers");
    expect("shape overflow", ANY, "{" T("a", "F32", "[4294967296,4294967296,4294967296]", 0, 4) "}", 8, GM_ERR_FORMAT,
           "overflows");
    expect("shape x bytes overflow", ANY, "{" T("a", "F32", "[4611686018427387904,2]", 0, 4) "}", 8, GM_ERR_FORMAT, "'a'");
    expect("too many dims", ANY, "{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, GM_ERR_UNSUPPORTED,
           "dimensions");
    expect("entry not an object", ANY, "{\"a\":[1,2]}", 0, GM_ERR_FORMAT, "not a JSON object");
    expect("no dtype", ANY, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, GM_ERR_FORMAT, "dtype");
    expect("shape not an array", ANY, "{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4,
           GM_ERR_FORMAT, "shape");
    expect("three offsets", ANY, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
           GM_ERR_FORMAT, "data_offsets");
    expect("metadata not an object", ANY, "{\"__metadata__\":3}", 0, GM_ERR_FORMAT, "__metadata__");
    expect("empty name", ANY, "{" T("", "F32", "[1]", 0, 4) "}", 4, GM_ERR_FORMAT, "empty name");

    /* the in-memory entry point checks the header fits the file it claims to come from */
    CHECK(gm_safetensors_parse("{}", 2, 9, "mem", &st) == GM_ERR_FORMAT, "header longer than the file");
    CHECK(gm_safetensors_parse("{}", 2, 10, "mem", &st) == GM_OK, "%s", gm_last_error());
    gm_safetensors_free(&st);
    gm_safetensors_free(NULL);
}

int main(void) {
    check_mixed();
    snprintf(tmp_path, sizeof tmp_path, "/tmp/gm_test_st_XXXXXX");
    int fd = mkstemp(tmp_path);
    CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
    if (fd >= 0) {
        close(fd);
        crafted();
        unlink(tmp_path);
    }
    return gm_test_finish();
}
