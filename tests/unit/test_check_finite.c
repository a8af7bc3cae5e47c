/* gm_source_check_finite (`gemma info --check`): GGUF files built here with a NaN or infinity planted at a
 * known element of an F32, F16, BF16 or Q8_0 tensor (a NaN block scale poisons its whole block); the scan
 * must name that tensor and element, pick the first bad tensor in file order, and pass clean files. The
 * real model, when present, must be all finite. HF folders are covered by tests/cli/info_check.sh. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_build.h"
#include "io/source.h"
#include "model/check.h"
#include "test_util.h"

enum { T_F32 = 0, T_F16 = 1, T_Q8_0 = 8, T_BF16 = 30 };

static float embd[32 * 4];          /* token_embd.weight [32, 4] */
static uint16_t f16[3 * 8];         /* "a.f16" [8, 3] */
static uint8_t q8[2 * 2 * 34];      /* "b.q8" [64, 2]: 2 rows of 2 blocks */
static uint16_t bf16[4];            /* "c.bf16" [4] */

static void fill_clean(void) {
    for (int i = 0; i < 32 * 4; i++) embd[i] = (float)i * 0.01f - 0.5f;
    for (int i = 0; i < 24; i++) f16[i] = (uint16_t)(0x3c00 + i);             /* 1.0 .. */
    for (int b = 0; b < 4; b++) {
        uint16_t d = 0x2000;                                                    /* 2^-7 */
        memcpy(q8 + 34 * b, &d, 2);
        for (int j = 0; j < 32; j++) q8[34 * b + 2 + j] = (uint8_t)(j * 5 + b);
    }
    for (int i = 0; i < 4; i++) bf16[i] = (uint16_t)(0x3f80 + i);             /* 1.0 .. */
}

/* A minimal gemma3 file: enough config for gm_source_open, then the four tensors in this order. */
static gm_source *open_built(char *path, size_t path_n) {
    gguf_builder b;
    gguf_builder_init(&b);
    gguf_kv_str(&b, "general.architecture", "gemma3");
    gguf_kv_u32(&b, "gemma3.block_count", 1);
    gguf_kv_u32(&b, "gemma3.embedding_length", 32);
    gguf_kv_u32(&b, "gemma3.feed_forward_length", 32);
    gguf_kv_u32(&b, "gemma3.attention.head_count", 1);
    uint64_t ne_e[2] = {32, 4}, ne_a[2] = {8, 3}, ne_b[2] = {64, 2}, ne_c[1] = {4};
    gguf_add_tensor(&b, "token_embd.weight", 2, ne_e, T_F32, embd, sizeof embd);
    gguf_add_tensor(&b, "a.f16", 2, ne_a, T_F16, f16, sizeof f16);
    gguf_add_tensor(&b, "b.q8", 2, ne_b, T_Q8_0, q8, sizeof q8);
    gguf_add_tensor(&b, "c.bf16", 1, ne_c, T_BF16, bf16, sizeof bf16);
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    gguf_builder_free(&b);
    int w = gguf_write_temp(file, len, path, path_n);
    free(file);
    if (w != 0) return NULL;
    gm_source *src = NULL;
    if (gm_source_open(path, &src) != GM_OK) {
        fprintf(stderr, "open: %s\n", gm_last_error());
        return NULL;
    }
    return src;
}

static void expect_hit(const char *what, const char *tensor, uint64_t index, uint64_t row, uint64_t col, int sign) {
    char path[256];
    gm_source *src = open_built(path, sizeof path);
    CHECK(src != NULL, "%s: file did not open", what);
    if (!src) return;
    gm_nonfinite hit;
    gm_status st = gm_source_check_finite(src, &hit);
    CHECK(st == GM_OK, "%s: status %s", what, gm_status_name(st));
    if (!tensor) {
        CHECK(!hit.found, "%s: reported %s[%llu] on a clean file", what, hit.tensor, (unsigned long long)hit.index);
        CHECK(hit.tensors_scanned == 4 && hit.values_scanned == 32 * 4 + 24 + 128 + 4, "%s: scanned %llu tensors, %llu values",
              what, (unsigned long long)hit.tensors_scanned, (unsigned long long)hit.values_scanned);
    } else {
        CHECK(hit.found, "%s: nothing found", what);
        CHECK(!strcmp(hit.tensor, tensor), "%s: tensor '%s', want '%s'", what, hit.tensor, tensor);
        CHECK(hit.index == index && hit.row == row && hit.col == col, "%s: element %llu (row %llu, col %llu), want %llu (%llu, %llu)",
              what, (unsigned long long)hit.index, (unsigned long long)hit.row, (unsigned long long)hit.col,
              (unsigned long long)index, (unsigned long long)row, (unsigned long long)col);
        if (sign == 0) CHECK(isnan(hit.value), "%s: value %g, want NaN", what, hit.value);
        else CHECK(isinf(hit.value) && (hit.value > 0) == (sign > 0), "%s: value %g, want %cinf", what, hit.value,
                   sign > 0 ? '+' : '-');
    }
    gm_source_close(src);
    remove(path);
}

int main(void) {
    fill_clean();
    expect_hit("clean", NULL, 0, 0, 0, 0);

    fill_clean();
    f16[13] = 0x7c00; /* +inf at row 1, column 5 of [8, 3] */
    expect_hit("f16 +inf", "a.f16", 13, 1, 5, 1);

    fill_clean();
    uint16_t nan16 = 0x7e00;
    memcpy(q8 + 34 * 3, &nan16, 2); /* row 1, block 1: the scale is NaN, so elements 96..127 are NaN */
    expect_hit("q8_0 NaN scale", "b.q8", 96, 1, 32, 0);

    fill_clean();
    bf16[2] = 0xff80; /* -inf */
    expect_hit("bf16 -inf", "c.bf16", 2, 0, 2, -1);

    fill_clean();
    uint32_t nan32 = 0x7fc00001;
    memcpy(&embd[32 * 3 + 31], &nan32, 4); /* last element of the first tensor, and a later bad one too */
    f16[0] = 0xfc00;
    expect_hit("first bad tensor in file order", "token_embd.weight", 127, 3, 31, 0);

    const char *model = gm_test_model_path();
    if (model) {
        gm_source *src;
        CHECK(gm_source_open(model, &src) == GM_OK, "real model: %s", gm_last_error());
        gm_nonfinite hit;
        CHECK(gm_source_check_finite(src, &hit) == GM_OK && !hit.found && hit.tensors_scanned == gm_source_tensor_count(src),
              "real model: found=%d in %s", hit.found, hit.tensor);
        /* every element of every tensor, as the gguf package lists the shapes (tests/fixtures/gguf) */
        char fx[512];
        FILE *f = fopen(gm_test_fixture("gguf/gemma3_270m_q4_k_m.txt", fx, sizeof fx), "r");
        CHECK(f != NULL, "fixture %s", fx);
        unsigned long long want = 0, ne[4];
        char line[1024], name[256];
        int type, nd;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "tensor %255s %d %d %llu %llu %llu %llu", name, &type, &nd, &ne[0], &ne[1], &ne[2], &ne[3]) == 7)
                want += ne[0] * ne[1] * ne[2] * ne[3];
        if (f) fclose(f);
        CHECK(want > 0 && hit.values_scanned == want, "real model: %llu values scanned, the gguf package lists %llu",
              (unsigned long long)hit.values_scanned, want);
        gm_source_close(src);
    }
    return gm_test_finish();
}
