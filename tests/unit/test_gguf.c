/* The GGUF reader (src/io/gguf.c) on files built in the test (tests/gguf_build.h): a valid file
 * parses with every value and tensor where it was put; every prefix of it, and each crafted defect
 * (bad magic/version, absurd counts, strings past the end, unknown types, bad dims, overflowing
 * sizes, offsets past the end, overlaps, misalignment, duplicates), is refused with the right status
 * and a message naming the file; single-byte corruptions never crash. Then the real 270M model
 * against what the gguf package reports (tests/reference/gen_gguf_fixture.py). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "gguf_build.h"
#include "io/gguf.h"
#include "test_util.h"

static char g_path[512]; /* one temp file, rewritten for each variant */

/* Open `len` bytes as a GGUF; returns the status, closing on success. The error message must name
 * the file whenever the open fails. */
static gm_status open_bytes(const uint8_t *data, size_t len, const char *what) {
    if (gguf_rewrite(g_path, data, len) != 0) {
        CHECK(0, "%s: cannot write %s", what, g_path);
        return GM_ERR_IO;
    }
    gm_fail(GM_OK, "sentinel");
    gm_gguf g;
    gm_status st = gm_gguf_open(&g, g_path);
    if (st == GM_OK) {
        /* whatever parsed must lie inside the file */
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const gm_tensor_info *t = &g.tensors[i];
            CHECK(t->offset >= g.data_offset && t->offset <= g.file.size && t->nbytes <= g.file.size - t->offset,
                  "%s: tensor %" PRIu64 " lies outside the file", what, i);
        }
        gm_gguf_close(&g);
    } else {
        CHECK(strstr(gm_last_error(), g_path) != NULL, "%s: error message does not name the file: %s", what,
              gm_last_error());
    }
    return st;
}

static void expect(gm_status want, const uint8_t *data, size_t len, const char *what, const char *needle) {
    gm_status st = open_bytes(data, len, what);
    CHECK(st == want, "%s: status %s, want %s (%s)", what, gm_status_name(st), gm_status_name(want), gm_last_error());
    if (needle && st != GM_OK)
        CHECK(strstr(gm_last_error(), needle) != NULL, "%s: message lacks '%s': %s", what, needle, gm_last_error());
}

static void expect_builder(gm_status want, const gguf_builder *b, const char *what, const char *needle) {
    size_t len;
    uint8_t *file = gguf_build(b, &len);
    expect(want, file, len, what, needle);
    free(file);
}

/* ---- the valid file ---- */

static float f32_data[8] = {1, -2, 3.5f, 0, 1e-3f, -7, 8, 9};
static uint8_t q8_data[2 * 34];
static uint16_t f16_data[12];

static void build_valid(gguf_builder *b) {
    gguf_builder_init(b);
    gguf_kv_str(b, "general.architecture", "gemma3");
    gguf_kv_u8(b, "t.u8", 200);
    gguf_kv_i8(b, "t.i8", -5);
    gguf_kv_u16(b, "t.u16", 60000);
    gguf_kv_i16(b, "t.i16", -30000);
    gguf_kv_u32(b, "t.u32", 4000000000u);
    gguf_kv_i32(b, "t.i32", -2000000000);
    gguf_kv_f32(b, "t.f32", 0.25f);
    gguf_kv_bool(b, "t.bool", 1);
    gguf_kv_u64(b, "t.u64", 1ull << 40);
    gguf_kv_i64(b, "t.i64", -(1ll << 40));
    gguf_kv_f64(b, "t.f64", -1.5);
    gguf_kv_str(b, "t.empty", "");
    static const char *const strs[] = {"<pad>", "", "hello world"};
    gguf_kv_str_array(b, "t.strs", strs, 3);
    int32_t ints[4] = {1, -2, 3, -4};
    gguf_kv_array(b, "t.ints", GGUFB_I32, ints, 4, 4);
    { /* a nested array: [[7, 8]] (kept as a key with no payload) */
        uint8_t raw[4 + 8 + 4 + 8 + 8];
        uint32_t outer = GGUFB_ARRAY, inner = GGUFB_I32;
        uint64_t one = 1, two = 2;
        int32_t v[2] = {7, 8};
        memcpy(raw, &outer, 4);
        memcpy(raw + 4, &one, 8);
        memcpy(raw + 12, &inner, 4);
        memcpy(raw + 16, &two, 8);
        memcpy(raw + 24, v, 8);
        gguf_kv_raw(b, "t.nested", GGUFB_ARRAY, raw, sizeof raw);
    }
    for (int i = 0; i < 2; i++) {
        uint16_t d = (uint16_t)(0x3c00 + i); /* 1.0, 1.0009765625 */
        memcpy(q8_data + 34 * i, &d, 2);
        for (int j = 0; j < 32; j++) q8_data[34 * i + 2 + j] = (uint8_t)(j * 7 + i);
    }
    for (int i = 0; i < 12; i++) f16_data[i] = (uint16_t)(0x3c00 + i);
    uint64_t ne_f32[1] = {8}, ne_q8[2] = {32, 2}, ne_f16[2] = {4, 3};
    gguf_add_tensor(b, "norm.weight", 1, ne_f32, 0, f32_data, sizeof f32_data);
    gguf_add_tensor(b, "blk.0.w", 2, ne_q8, 8, q8_data, sizeof q8_data);
    gguf_add_tensor(b, "blk.0.h", 2, ne_f16, 1, f16_data, sizeof f16_data);
}

static void test_valid(void) {
    gguf_builder b;
    build_valid(&b);
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    CHECK(gguf_rewrite(g_path, file, len) == 0, "write");
    gm_gguf g;
    gm_status st = gm_gguf_open(&g, g_path);
    CHECK(st == GM_OK, "valid file: %s", gm_last_error());
    if (st == GM_OK) {
        CHECK(g.version == 3 && g.n_kv == 16 && g.n_tensors == 3 && g.alignment == 32, "header");
        CHECK(g.data_offset == gguf_data_offset(&b), "data offset %" PRIu64 " want %zu", g.data_offset,
              gguf_data_offset(&b));
        int64_t i;
        double f;
        bool bo;
        CHECK(gm_gguf_get_int(&g, "t.u8", &i) == GM_OK && i == 200, "u8 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.i8", &i) == GM_OK && i == -5, "i8 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.u16", &i) == GM_OK && i == 60000, "u16 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.i16", &i) == GM_OK && i == -30000, "i16 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.u32", &i) == GM_OK && i == 4000000000ll, "u32 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.i32", &i) == GM_OK && i == -2000000000ll, "i32 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.u64", &i) == GM_OK && i == 1ll << 40, "u64 read as %" PRId64, i);
        CHECK(gm_gguf_get_int(&g, "t.i64", &i) == GM_OK && i == -(1ll << 40), "i64 read as %" PRId64, i);
        CHECK(gm_gguf_get_float(&g, "t.f32", &f) == GM_OK && f == 0.25, "f32 read as %g", f);
        CHECK(gm_gguf_get_float(&g, "t.f64", &f) == GM_OK && f == -1.5, "f64 read as %g", f);
        CHECK(gm_gguf_get_float(&g, "t.u8", &f) == GM_OK && f == 200.0, "u8 as float read as %g", f);
        CHECK(gm_gguf_get_bool(&g, "t.bool", &bo) == GM_OK && bo, "bool");
        CHECK(gm_gguf_get_int(&g, "t.missing", &i) == GM_ERR_RANGE, "absent key is GM_ERR_RANGE");
        CHECK(gm_gguf_get_int(&g, "general.architecture", &i) == GM_ERR_FORMAT, "string as int is refused");
        CHECK(gm_gguf_get_bool(&g, "t.u8", &bo) == GM_ERR_FORMAT, "u8 as bool is refused");
        const char *arch = gm_gguf_get_str(&g, "general.architecture"), *empty = gm_gguf_get_str(&g, "t.empty");
        CHECK(arch && strcmp(arch, "gemma3") == 0, "string value");
        CHECK(empty && *empty == 0, "empty string value");
        const gguf_kv *kv = gm_gguf_find(&g, "t.strs");
        CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING && kv->arr_count == 3 &&
                  strcmp(kv->arr_strs[0], "<pad>") == 0 && kv->arr_str_lens[1] == 0 &&
                  strcmp(kv->arr_strs[2], "hello world") == 0,
              "string array");
        kv = gm_gguf_find(&g, "t.ints");
        CHECK(kv && kv->arr_type == GGUF_I32 && kv->arr_count == 4 && memcmp(kv->arr_data, (int32_t[]){1, -2, 3, -4}, 16) == 0,
              "i32 array");
        CHECK(gm_gguf_find(&g, "t.nested") != NULL, "nested array key kept");
        const gm_tensor_info *t0 = gm_gguf_tensor(&g, "norm.weight"), *t1 = gm_gguf_tensor(&g, "blk.0.w"),
                             *t2 = gm_gguf_tensor(&g, "blk.0.h");
        CHECK(t0 && t0->type == GM_F32 && t0->n_dims == 1 && t0->ne[0] == 8 && t0->ne[1] == 1 && t0->nbytes == 32 &&
                  t0->offset == g.data_offset,
              "F32 tensor info");
        CHECK(t1 && t1->type == GM_Q8_0 && t1->n_dims == 2 && t1->ne[0] == 32 && t1->ne[1] == 2 &&
                  t1->row_bytes == 34 && t1->nbytes == 68 && t1->offset == g.data_offset + 32,
              "Q8_0 tensor info");
        CHECK(t2 && t2->type == GM_F16 && t2->row_bytes == 8 && t2->nbytes == 24 && t2->offset == g.data_offset + 128,
              "F16 tensor info");
        CHECK(gm_gguf_tensor(&g, "nope") == NULL, "absent tensor");
        if (t1 && t2) {
            uint8_t row[34];
            CHECK(gm_gguf_read_rows(&g, t1, 1, 1, row) == GM_OK && memcmp(row, q8_data + 34, 34) == 0, "read row 1");
            uint16_t rows[8];
            CHECK(gm_gguf_read_rows(&g, t2, 1, 2, rows) == GM_OK && memcmp(rows, f16_data + 4, 16) == 0, "read rows 1-2");
            CHECK(gm_gguf_read_rows(&g, t1, 2, 1, row) == GM_ERR_RANGE, "row past the end is GM_ERR_RANGE");
            CHECK(gm_gguf_read_rows(&g, t1, 1, UINT64_MAX, row) == GM_ERR_RANGE, "huge row count is GM_ERR_RANGE");
        }
        gm_gguf_close(&g);
    }
    /* version 2 is the same layout */
    file[GGUF_OFF_VERSION] = 2;
    expect(GM_OK, file, len, "version 2", NULL);
    free(file);
    gguf_builder_free(&b);
}

/* ---- truncation and corruption of the valid file ---- */

static void test_prefixes(void) {
    gguf_builder b;
    build_valid(&b);
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    int wrong = 0;
    for (size_t n = 0; n < len; n++) {
        gm_status st = open_bytes(file, n, "prefix");
        if (st != GM_ERR_FORMAT && wrong++ < 5)
            fprintf(stderr, "prefix of %zu / %zu bytes: %s (%s)\n", n, len, gm_status_name(st), gm_last_error());
    }
    CHECK(wrong == 0, "%d of %zu prefixes were not refused as GM_ERR_FORMAT", wrong, len);
    free(file);
    gguf_builder_free(&b);
}

static void test_byte_corruption(void) {
    gguf_builder b;
    build_valid(&b);
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    uint8_t *copy = malloc(len);
    size_t meta_end = GGUF_HEADER_BYTES + b.kv.len + b.info.len; /* data bytes cannot break the directory */
    static const uint8_t values[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    int ok = 0, refused = 0;
    for (size_t pos = 0; pos < meta_end; pos++)
        for (size_t v = 0; v < sizeof values; v++) {
            memcpy(copy, file, len);
            if (copy[pos] == values[v]) continue;
            copy[pos] = values[v];
            gm_status st = open_bytes(copy, len, "corrupt byte");
            if (st == GM_OK) ok++;
            else refused++;
            CHECK(st == GM_OK || st == GM_ERR_FORMAT || st == GM_ERR_UNSUPPORTED || st == GM_ERR_NOMEM,
                  "byte %zu = 0x%02x: status %s", pos, values[v], gm_status_name(st));
        }
    printf("single-byte corruptions: %d opened, %d refused\n", ok, refused);
    CHECK(refused > 0, "no corruption was refused");
    free(copy);
    free(file);
    gguf_builder_free(&b);
}

/* ---- crafted defects ---- */

static void patch_u32(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static void patch_u64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }

static void test_header(void) {
    gguf_builder b;
    build_valid(&b);
    size_t len;
    uint8_t *file = gguf_build(&b, &len), *copy = malloc(len);
#define VARIANT(stmt, want, what, needle)                                                                              \
    do {                                                                                                               \
        memcpy(copy, file, len);                                                                                       \
        stmt;                                                                                                          \
        expect(want, copy, len, what, needle);                                                                         \
    } while (0)
    VARIANT(memcpy(copy, "GGUG", 4), GM_ERR_FORMAT, "wrong magic", "magic");
    VARIANT(memcpy(copy, "FUGG", 4), GM_ERR_FORMAT, "reversed magic", "magic");
    VARIANT(patch_u32(copy, GGUF_OFF_VERSION, 1), GM_ERR_UNSUPPORTED, "version 1", "version 1");
    VARIANT(patch_u32(copy, GGUF_OFF_VERSION, 4), GM_ERR_UNSUPPORTED, "version 4", "version 4");
    VARIANT(patch_u32(copy, GGUF_OFF_VERSION, 0x03000000), GM_ERR_UNSUPPORTED, "big-endian version", "version");
    VARIANT(patch_u64(copy, GGUF_OFF_N_KV, UINT64_MAX), GM_ERR_FORMAT, "n_kv = 2^64-1", "metadata");
    VARIANT(patch_u64(copy, GGUF_OFF_N_KV, 1ull << 40), GM_ERR_FORMAT, "n_kv = 2^40", "metadata");
    VARIANT(patch_u64(copy, GGUF_OFF_N_TENSORS, UINT64_MAX), GM_ERR_FORMAT, "n_tensors = 2^64-1", "tensors");
    VARIANT(patch_u64(copy, GGUF_OFF_N_TENSORS, 1ull << 33), GM_ERR_FORMAT, "n_tensors = 2^33", "tensors");
    /* one more entry than present: the reader runs into the tensor infos / data and must fail */
    VARIANT(patch_u64(copy, GGUF_OFF_N_KV, b.n_kv + 1), GM_ERR_FORMAT, "n_kv + 1", NULL);
    VARIANT(patch_u64(copy, GGUF_OFF_N_TENSORS, b.n_tensors + 1), GM_ERR_FORMAT, "n_tensors + 1", NULL);
    /* a key's length field past the end of the file */
    VARIANT(patch_u64(copy, GGUF_HEADER_BYTES, len), GM_ERR_FORMAT, "key length past the end", "length");
    VARIANT(patch_u64(copy, GGUF_HEADER_BYTES, UINT64_MAX), GM_ERR_FORMAT, "key length 2^64-1", "length");
    /* first value type (after "general.architecture": 8 + 20 bytes) */
    VARIANT(patch_u32(copy, GGUF_HEADER_BYTES + 28, 13), GM_ERR_FORMAT, "value type 13", "type 13");
    VARIANT(patch_u32(copy, GGUF_HEADER_BYTES + 28, 0xffffffffu), GM_ERR_FORMAT, "value type 2^32-1", "type");
    /* first string value's length */
    VARIANT(patch_u64(copy, GGUF_HEADER_BYTES + 32, len), GM_ERR_FORMAT, "string length past the end", "length");
    VARIANT(patch_u64(copy, GGUF_HEADER_BYTES + 32, UINT64_MAX - 3), GM_ERR_FORMAT, "string length 2^64-4", "length");
#undef VARIANT
    expect(GM_ERR_FORMAT, file, 0, "empty file", NULL);
    free(copy);
    free(file);
    gguf_builder_free(&b);

    gm_gguf g;
    gm_fail(GM_OK, "sentinel");
    CHECK(gm_gguf_open(&g, "/nonexistent/dir/model.gguf") == GM_ERR_IO &&
              strstr(gm_last_error(), "/nonexistent/dir/model.gguf"),
          "missing file: %s", gm_last_error());
    CHECK(gm_gguf_open(&g, "/tmp") == GM_ERR_IO, "a directory is GM_ERR_IO");
}

static const uint64_t ne_q8[2] = {32, 2};

static void test_values(void) {
    gguf_builder b;
    {
        gguf_builder_init(&b);
        uint8_t raw[12];
        uint64_t big = 1000;
        memcpy(raw, &big, 8);
        memcpy(raw + 8, "abcd", 4);
        gguf_kv_raw(&b, "k", GGUFB_STRING, raw, sizeof raw);
        expect_builder(GM_ERR_FORMAT, &b, "string value 1000 bytes long in a short file", "length 1000");
        gguf_builder_free(&b);
    }
    {
        gguf_builder_init(&b);
        uint8_t raw[12];
        uint32_t et = 13;
        uint64_t n = 1;
        memcpy(raw, &et, 4);
        memcpy(raw + 4, &n, 8);
        gguf_kv_raw(&b, "arr", GGUFB_ARRAY, raw, sizeof raw);
        expect_builder(GM_ERR_FORMAT, &b, "array of unknown element type", "element type 13");
        gguf_builder_free(&b);
    }
    {
        gguf_builder_init(&b);
        uint8_t raw[16];
        uint32_t et = GGUFB_I32;
        uint64_t n = UINT64_MAX / 2;
        memcpy(raw, &et, 4);
        memcpy(raw + 4, &n, 8);
        memset(raw + 12, 0, 4);
        gguf_kv_raw(&b, "arr", GGUFB_ARRAY, raw, sizeof raw);
        expect_builder(GM_ERR_FORMAT, &b, "numeric array count 2^63", "exceeds");
        gguf_builder_free(&b);
    }
    {
        gguf_builder_init(&b);
        uint8_t raw[20];
        uint32_t et = GGUFB_STRING;
        uint64_t n = 1ull << 50, l = 0;
        memcpy(raw, &et, 4);
        memcpy(raw + 4, &n, 8);
        memcpy(raw + 12, &l, 8);
        gguf_kv_raw(&b, "arr", GGUFB_ARRAY, raw, sizeof raw);
        expect_builder(GM_ERR_FORMAT, &b, "string array count 2^50", "strings");
        gguf_builder_free(&b);
    }
    {
        gguf_builder_init(&b);
        uint8_t raw[28];
        uint32_t et = GGUFB_STRING;
        uint64_t n = 2, l0 = 3, l1 = 100;
        memcpy(raw, &et, 4);
        memcpy(raw + 4, &n, 8);
        memcpy(raw + 12, &l0, 8);
        memcpy(raw + 20, "abc", 3);
        memcpy(raw + 23, &l1, 5); /* truncated length field and no payload */
        gguf_kv_raw(&b, "arr", GGUFB_ARRAY, raw, sizeof raw);
        expect_builder(GM_ERR_FORMAT, &b, "string array element past the end", NULL);
        gguf_builder_free(&b);
    }
    { /* arrays nested 10 deep */
        gguf_builder_init(&b);
        uint8_t raw[10 * 12 + 12];
        size_t o = 0;
        for (int d = 0; d < 10; d++) {
            uint32_t et = GGUFB_ARRAY;
            uint64_t n = 1;
            memcpy(raw + o, &et, 4);
            memcpy(raw + o + 4, &n, 8);
            o += 12;
        }
        uint32_t et = GGUFB_U8;
        uint64_t n = 0;
        memcpy(raw + o, &et, 4);
        memcpy(raw + o + 4, &n, 8);
        gguf_kv_raw(&b, "deep", GGUFB_ARRAY, raw, sizeof raw);
        expect_builder(GM_ERR_FORMAT, &b, "arrays nested 10 deep", "nested");
        gguf_builder_free(&b);
    }
    { /* a key longer than 65535 bytes */
        gguf_builder_init(&b);
        char *key = malloc(70000);
        memset(key, 'k', 69999);
        key[69999] = 0;
        gguf_kv_u32(&b, key, 1);
        free(key);
        expect_builder(GM_ERR_FORMAT, &b, "70000-byte key", "key");
        gguf_builder_free(&b);
    }
    {
        gguf_builder_init(&b);
        gguf_kv_u32(&b, "a", 1);
        gguf_kv_u32(&b, "b", 2);
        gguf_kv_str(&b, "a", "again");
        expect_builder(GM_ERR_FORMAT, &b, "duplicate key", "'a' appears twice");
        gguf_builder_free(&b);
    }
    static const struct { int type; uint32_t value; const char *what; } aligns[] = {
        {GGUFB_U32, 0, "alignment 0"}, {GGUFB_U32, 12, "alignment 12"}, {GGUFB_U32, 1u << 30, "alignment 2^30"},
        {GGUFB_U64, 32, "alignment stored as u64"}, {GGUFB_I32, 32, "alignment stored as i32"}};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        gguf_builder_init(&b);
        if (aligns[i].type == GGUFB_U64) gguf_kv_u64(&b, "general.alignment", aligns[i].value);
        else if (aligns[i].type == GGUFB_I32) gguf_kv_i32(&b, "general.alignment", (int32_t)aligns[i].value);
        else gguf_kv_u32(&b, "general.alignment", aligns[i].value);
        expect_builder(GM_ERR_FORMAT, &b, aligns[i].what, "alignment");
        gguf_builder_free(&b);
    }
}

static void test_tensors(void) {
    gguf_builder b;
    uint8_t data[4096] = {0};
#define ONE_TENSOR(what, want, needle, n_dims, ne, type, off)                                                          \
    do {                                                                                                               \
        gguf_builder_init(&b);                                                                                         \
        gguf_kv_str(&b, "general.architecture", "gemma3");                                                             \
        gguf_add_tensor_info(&b, "t", n_dims, ne, type, off);                                                          \
        size_t len_;                                                                                                   \
        uint8_t *f_ = gguf_build(&b, &len_);                                                                           \
        size_t pad_ = gguf_data_offset(&b) - len_; /* data section: 4096 bytes after the padding */                   \
        uint8_t *g_ = calloc(1, len_ + pad_ + sizeof data);                                                            \
        memcpy(g_, f_, len_);                                                                                          \
        expect(want, g_, len_ + pad_ + sizeof data, what, needle);                                                     \
        free(f_);                                                                                                      \
        free(g_);                                                                                                      \
        gguf_builder_free(&b);                                                                                         \
    } while (0)
    uint64_t ok_ne[2] = {32, 4};
    ONE_TENSOR("a fitting tensor (control)", GM_OK, NULL, 2, ok_ne, 8, 0);
    ONE_TENSOR("tensor ending exactly at the end (control)", GM_OK, NULL, 1, (uint64_t[]){1024}, 0, 0);
    ONE_TENSOR("unknown tensor type 1000", GM_ERR_UNSUPPORTED, "type 1000", 2, ok_ne, 1000, 0);
    ONE_TENSOR("unread ggml type 20 (IQ4_NL)", GM_ERR_UNSUPPORTED, "type 20", 2, ok_ne, 20, 0);
    ONE_TENSOR("type 4 (removed Q4_2)", GM_ERR_UNSUPPORTED, "type 4", 2, ok_ne, 4, 0);
    ONE_TENSOR("n_dims 0", GM_ERR_FORMAT, "0 dimensions", 0, ok_ne, 0, 0);
    ONE_TENSOR("n_dims 5", GM_ERR_FORMAT, "5 dimensions", 5, ((uint64_t[]){4, 1, 1, 1, 1}), 0, 0);
    ONE_TENSOR("a zero dimension", GM_ERR_FORMAT, "dimension", 2, ((uint64_t[]){4, 0}), 0, 0);
    ONE_TENSOR("dimension 2^41", GM_ERR_FORMAT, "dimension", 1, ((uint64_t[]){1ull << 41}), 0, 0);
    ONE_TENSOR("element count overflows 64 bits", GM_ERR_FORMAT, "overflows", 3,
               ((uint64_t[]){1ull << 32, 1ull << 32, 1ull << 32}), 0, 0);
    ONE_TENSOR("byte size overflows 64 bits", GM_ERR_FORMAT, "overflows", 2, ((uint64_t[]){1ull << 40, 1ull << 22}), 0,
               0);
    ONE_TENSOR("row not a whole number of blocks", GM_ERR_FORMAT, "blocks", 2, ((uint64_t[]){33, 2}), 8, 0);
    ONE_TENSOR("huge tensor in a small file", GM_ERR_FORMAT, "past the end", 2, ((uint64_t[]){1ull << 20, 1ull << 10}),
               0, 0);
    ONE_TENSOR("offset past the end", GM_ERR_FORMAT, "past the end", 2, ok_ne, 8, 1ull << 40);
    ONE_TENSOR("offset 2^64-32", GM_ERR_FORMAT, "past the end", 2, ok_ne, 8, UINT64_MAX - 31);
    ONE_TENSOR("data one byte past the end", GM_ERR_FORMAT, "past the end", 1, ((uint64_t[]){1024}), 0, 32);
    ONE_TENSOR("misaligned offset", GM_ERR_FORMAT, "alignment", 2, ok_ne, 8, 4);
    ONE_TENSOR("offset off by 16", GM_ERR_FORMAT, "alignment", 2, ok_ne, 8, 48);
#undef ONE_TENSOR
    { /* offset 32 is fine for alignment 32 but not for 64 */
        gguf_builder_init(&b);
        gguf_kv_alignment(&b, 64);
        gguf_add_tensor_info(&b, "t", 2, ok_ne, 8, 32);
        size_t len;
        uint8_t *f = gguf_build(&b, &len), *g = calloc(1, gguf_data_offset(&b) + 4096);
        memcpy(g, f, len);
        expect(GM_ERR_FORMAT, g, gguf_data_offset(&b) + 4096, "offset 32 with alignment 64", "alignment 64");
        free(f);
        free(g);
        gguf_builder_free(&b);
    }
    { /* tensors overlapping: the same offset, then a partial overlap, then adjacent (fine) */
        static const struct { uint64_t off2; gm_status want; const char *what; } cases[] = {
            {0, GM_ERR_FORMAT, "two tensors at offset 0"},
            {64, GM_ERR_FORMAT, "second tensor inside the first"},
            {160, GM_OK, "adjacent tensors (control)"}};
        for (size_t i = 0; i < 3; i++) {
            gguf_builder_init(&b);
            gguf_add_tensor_info(&b, "first", 1, (uint64_t[]){40}, 0, 0); /* 160 bytes */
            gguf_add_tensor_info(&b, "second", 2, ok_ne, 8, cases[i].off2);
            size_t len;
            uint8_t *f = gguf_build(&b, &len), *g = calloc(1, gguf_data_offset(&b) + 4096);
            memcpy(g, f, len);
            expect(cases[i].want, g, gguf_data_offset(&b) + 4096, cases[i].what, "overlap");
            free(f);
            free(g);
            gguf_builder_free(&b);
        }
    }
    { /* duplicate tensor names */
        gguf_builder_init(&b);
        gguf_add_tensor(&b, "w", 2, ne_q8, 8, data, 68);
        gguf_add_tensor(&b, "v", 2, ne_q8, 8, data, 68);
        gguf_add_tensor(&b, "w", 2, ne_q8, 8, data, 68);
        expect_builder(GM_ERR_FORMAT, &b, "duplicate tensor name", "'w' appears twice");
        gguf_builder_free(&b);
    }
    { /* a 200-byte tensor name */
        char name[201];
        memset(name, 'n', 200);
        name[200] = 0;
        gguf_builder_init(&b);
        gguf_add_tensor(&b, name, 2, ne_q8, 8, data, 68);
        expect_builder(GM_ERR_FORMAT, &b, "200-byte tensor name", "tensor name");
        gguf_builder_free(&b);
    }
}

/* ---- the real model against the gguf package ---- */

static void hex_decode(const char *hex, char *out, size_t n) {
    size_t i = 0;
    if (strcmp(hex, "-") != 0)
        for (; hex[2 * i] && hex[2 * i + 1] && i + 1 < n; i++) {
            unsigned v;
            sscanf(hex + 2 * i, "%2x", &v);
            out[i] = (char)v;
        }
    out[i] = 0;
}

static void test_real_model(const char *model) {
    char path[1024];
    FILE *fx = fopen(gm_test_fixture("gguf/gemma3_270m_q4_k_m.txt", path, sizeof path), "r");
    CHECK(fx != NULL, "cannot open %s", path);
    if (!fx) return;
    gm_gguf g;
    gm_status st = gm_gguf_open(&g, model);
    CHECK(st == GM_OK, "open %s: %s", model, gm_last_error());
    if (st != GM_OK) {
        fclose(fx);
        return;
    }
    char line[4096], kind[16], name[512], val[2048], want_s[1024];
    int n_tensor_lines = 0, n_kv_lines = 0;
    while (fgets(line, sizeof line, fx)) {
        if (sscanf(line, "%15s", kind) != 1) continue;
        if (!strcmp(kind, "header")) {
            uint64_t ver, nt, nkv, al, doff;
            CHECK(sscanf(line, "header %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &ver, &nt, &nkv, &al,
                         &doff) == 5,
                  "header line");
            CHECK(g.version == ver && g.n_tensors == nt && g.n_kv == nkv && g.alignment == al && g.data_offset == doff,
                  "header: ours v%u %" PRIu64 " tensors %" PRIu64 " kv align %u data %" PRIu64, g.version, g.n_tensors,
                  g.n_kv, g.alignment, g.data_offset);
        } else if (!strcmp(kind, "kv")) {
            unsigned type;
            if (sscanf(line, "kv %511s %u %2047s", name, &type, val) != 3) continue;
            n_kv_lines++;
            const gguf_kv *kv = gm_gguf_find(&g, name);
            CHECK(kv && kv->type == type, "key %s: type %u expected", name, type);
            if (!kv || kv->type != type) continue;
            if (type == GGUF_STRING) {
                hex_decode(val, want_s, sizeof want_s);
                CHECK(kv->str && strcmp(kv->str, want_s) == 0, "key %s: '%s' want '%s'", name, kv->str, want_s);
            } else if (type == GGUF_F32 || type == GGUF_F64) {
                double f;
                CHECK(gm_gguf_get_float(&g, name, &f) == GM_OK && (float)f == (float)atof(val), "key %s: %g want %s",
                      name, f, val);
            } else {
                int64_t i;
                CHECK(gm_gguf_get_int(&g, name, &i) == GM_OK && i == strtoll(val, NULL, 10), "key %s: %" PRId64 " want %s",
                      name, i, val);
            }
        } else if (!strcmp(kind, "arr")) {
            unsigned et;
            uint64_t count;
            if (sscanf(line, "arr %511s %u %" SCNu64 " %2047s", name, &et, &count, val) != 4) continue;
            n_kv_lines++;
            const gguf_kv *kv = gm_gguf_find(&g, name);
            CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_type == et && kv->arr_count == count,
                  "array %s: type %u count %" PRIu64 " expected", name, et, count);
            if (!kv || kv->arr_count != count || count == 0) continue;
            /* large arrays stay in the file until read (the vocabulary's): read every array that way */
            CHECK(kv->arr_deferred == (count > GM_GGUF_EAGER_MAX), "array %s: deferred %d with %" PRIu64 " elements",
                  name, kv->arr_deferred, count);
            gm_gguf_array a;
            if (gm_gguf_read_array(&g, kv, &a) != GM_OK) {
                CHECK(0, "array %s: %s", name, gm_last_error());
                continue;
            }
            CHECK(a.type == et && a.count == count, "array %s: read back as type %u count %" PRIu64, name, a.type, a.count);
            if (et == GGUF_STRING) {
                hex_decode(val, want_s, sizeof want_s);
                CHECK(strcmp(a.strs[0], want_s) == 0, "array %s[0]: '%s' want '%s'", name, a.strs[0], want_s);
                CHECK(kv->arr_deferred || (kv->arr_strs && !strcmp(kv->arr_strs[0], a.strs[0])), "array %s kept", name);
            } else if (et == GGUF_F32) {
                float f;
                memcpy(&f, a.data, 4);
                CHECK(f == (float)atof(val), "array %s[0]: %g want %s", name, f, val);
            } else if (et == GGUF_I32) {
                int32_t v;
                memcpy(&v, a.data, 4);
                CHECK(v == atoi(val), "array %s[0]: %d want %s", name, v, val);
            }
            gm_gguf_array_free(&a);
        } else if (!strcmp(kind, "tensor")) {
            unsigned type, n_dims;
            uint64_t ne[4], off, nbytes;
            if (sscanf(line, "tensor %511s %u %u %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                       name, &type, &n_dims, &ne[0], &ne[1], &ne[2], &ne[3], &off, &nbytes) != 9)
                continue;
            n_tensor_lines++;
            const gm_tensor_info *t = gm_gguf_tensor(&g, name);
            CHECK(t != NULL, "tensor %s missing", name);
            if (!t) continue;
            CHECK((unsigned)t->type == type && (unsigned)t->n_dims == n_dims && t->ne[0] == ne[0] && t->ne[1] == ne[1] &&
                      t->ne[2] == ne[2] && t->ne[3] == ne[3] && t->offset == off && t->nbytes == nbytes,
                  "tensor %s: ours type %u dims %d [%" PRIu64 " %" PRIu64 "] offset %" PRIu64 " bytes %" PRIu64, name,
                  (unsigned)t->type, t->n_dims, t->ne[0], t->ne[1], t->offset, t->nbytes);
        }
    }
    fclose(fx);
    CHECK(n_tensor_lines == (int)g.n_tensors && n_kv_lines == (int)g.n_kv,
          "fixture covers %d tensors / %d keys, the file has %" PRIu64 " / %" PRIu64, n_tensor_lines, n_kv_lines,
          g.n_tensors, g.n_kv);
    gm_gguf_close(&g);
}

/* ---- arrays over GM_GGUF_EAGER_MAX elements stay in the file until read ---- */

static void test_deferred_arrays(void) {
    enum { N = GM_GGUF_EAGER_MAX * 4 + 3 };
    static char text[N][16];
    static const char *strs[N];
    static float vals[N];
    for (int i = 0; i < N; i++) {
        if (i % 7) snprintf(text[i], sizeof text[i], "piece%d", i);
        else text[i][0] = '\0'; /* some empty strings too */
        strs[i] = text[i];
        vals[i] = (float)i * 0.5f - 3;
    }
    gguf_builder b;
    gguf_builder_init(&b);
    gguf_kv_str(&b, "general.architecture", "gemma3");
    gguf_kv_str_array(&b, "big.strs", strs, N);
    gguf_kv_array(&b, "big.f32", GGUFB_F32, vals, N, 4);
    gguf_kv_u32(&b, "after", 77); /* read after both: the parse stepped over them exactly */
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    CHECK(gguf_rewrite(g_path, file, len) == 0, "write");
    gm_gguf g;
    if (gm_gguf_open(&g, g_path) == GM_OK) {
        const gguf_kv *ks = gm_gguf_find(&g, "big.strs"), *kf = gm_gguf_find(&g, "big.f32");
        int64_t after = 0;
        CHECK(gm_gguf_get_int(&g, "after", &after) == GM_OK && after == 77, "the key after the arrays: %lld",
              (long long)after);
        CHECK(ks && ks->arr_deferred && !ks->arr_strs && ks->arr_count == N, "string array deferred");
        CHECK(kf && kf->arr_deferred && !kf->arr_data && kf->arr_count == N, "f32 array deferred");
        gm_gguf_array a, f;
        if (ks && gm_gguf_read_array(&g, ks, &a) == GM_OK) {
            int bad = 0;
            for (int i = 0; i < N; i++) bad += strcmp(a.strs[i], text[i]) != 0 || a.lens[i] != strlen(text[i]);
            CHECK(a.count == N && a.type == GGUF_STRING && bad == 0, "%d of %d strings read back wrong", bad, N);
            gm_gguf_array_free(&a);
        } else {
            CHECK(0, "read the string array: %s", gm_last_error());
        }
        if (kf && gm_gguf_read_array(&g, kf, &f) == GM_OK) {
            CHECK(f.count == N && memcmp(f.data, vals, sizeof vals) == 0, "f32 array read back");
            gm_gguf_array_free(&f);
        } else {
            CHECK(0, "read the f32 array: %s", gm_last_error());
        }
        gm_gguf_close(&g);
    } else {
        CHECK(0, "open: %s", gm_last_error());
    }
    /* a deferred array is still checked at open: a string running past the end, its offset named */
    size_t at = 0;
    for (size_t i = 0; i + 12 <= len; i++)
        if (!memcmp(file + i, "piece1000", 9)) at = i - 8; /* its length field */
    CHECK(at > 0, "string 1000 found");
    uint8_t *bad = malloc(len);
    memcpy(bad, file, len);
    memcpy(bad + at, &(uint64_t){1ull << 40}, 8);
    expect(GM_ERR_FORMAT, bad, len, "a deferred string longer than the file", "past the end");
    char needle[64];
    snprintf(needle, sizeof needle, "offset %zu", at + 8);
    expect(GM_ERR_FORMAT, bad, len, "a deferred string longer than the file (offset)", needle);
    expect(GM_ERR_FORMAT, file, at + 4, "cut inside a deferred array", "truncated");
    free(bad);
    free(file);
    gguf_builder_free(&b);
}

int main(void) {
    uint8_t empty = 0;
    CHECK(gguf_write_temp(&empty, 0, g_path, sizeof g_path) == 0, "cannot create a temp file");
    test_valid();
    test_prefixes();
    test_byte_corruption();
    test_header();
    test_values();
    test_tensors();
    test_deferred_arrays();
    remove(g_path);
    const char *model = gm_test_model_path();
    if (model) test_real_model(model);
    else printf("real model not found: its checks skipped\n");
    int rc = gm_test_finish();
    return rc == 0 && !model ? 77 : rc;
}
