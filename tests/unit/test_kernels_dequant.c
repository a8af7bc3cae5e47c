/* Dequantization of every weight type, by every kernel path this CPU runs, against values the gguf
 * package's numpy dequantizers computed (tests/reference/gen_quant_fixtures.py), bit for bit; matvec
 * and matmul of small matrices against numpy's float64 products of those dequantized weights; and
 * f16 / bf16 conversions against numpy and (f16) the CPU's F16C instructions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "test_util.h"

typedef struct fixture {
    uint32_t type, n_values, n_bytes;
    uint8_t *blocks;
    float *values;
} fixture;

static void *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int load_fixture(const char *name, fixture *fx) {
    char path[1024], file[64];
    snprintf(file, sizeof file, "quant/%s.bin", name);
    size_t len;
    uint8_t *buf = read_all(gm_test_fixture(file, path, sizeof path), &len);
    CHECK(buf != NULL, "cannot read fixture %s", path);
    if (!buf) return 0;
    uint32_t hdr[3];
    int ok = len >= 16 && memcmp(buf, "GMQF", 4) == 0;
    if (ok) {
        memcpy(hdr, buf + 4, 12);
        ok = len == 16 + (size_t)hdr[2] + 4 * (size_t)hdr[1];
    }
    CHECK(ok, "fixture %s is malformed", path);
    if (!ok) {
        free(buf);
        return 0;
    }
    fx->type = hdr[0];
    fx->n_values = hdr[1];
    fx->n_bytes = hdr[2];
    fx->blocks = malloc(fx->n_bytes);
    fx->values = malloc(4 * (size_t)fx->n_values);
    memcpy(fx->blocks, buf + 16, fx->n_bytes);
    memcpy(fx->values, buf + 16 + fx->n_bytes, 4 * (size_t)fx->n_values);
    free(buf);
    return 1;
}

/* Equal bits, or both NaN (NaN payloads may legitimately differ after arithmetic). */
static int same_float(float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub || (isnan(a) && isnan(b));
}

static void test_type(const char *name, gm_dtype type) {
    fixture fx;
    if (!load_fixture(name, &fx)) return;
    const gm_dtype_info *di = gm_dtype_get(type);
    CHECK(fx.type == (uint32_t)type, "%s: fixture holds type %u", name, fx.type);
    uint64_t want_bytes = 0;
    CHECK(gm_dtype_row_bytes(type, fx.n_values, &want_bytes) && want_bytes == fx.n_bytes,
          "%s: %u values should take %llu bytes, fixture has %u", name, fx.n_values, (unsigned long long)want_bytes,
          fx.n_bytes);
    CHECK(gm_kernels_bytes_of(type, fx.n_values) == fx.n_bytes, "%s: gm_kernels_bytes_of disagrees", name);
    float *out = malloc(4 * (size_t)fx.n_values + 64);
    const char *isas[] = {"scalar", "avx2", "avx512", NULL};
    for (int i = 0; i < 4; i++) {
        const gm_kernel_ops *ops = isas[i] ? gm_kernels_lookup(isas[i]) : NULL;
        if (isas[i] && !ops) {
            printf("%s: %s not supported by this CPU, skipped\n", name, isas[i]);
            continue;
        }
        const char *label = isas[i] ? isas[i] : "dispatched";
        /* whole buffer, then block by block at a time, with a canary after the row */
        memset(out, 0x55, 4 * (size_t)fx.n_values + 64);
        if (ops) ops->dequant_row(type, fx.blocks, out, fx.n_values);
        else gm_dequant_row(type, fx.blocks, out, fx.n_values);
        int bad = 0;
        for (uint32_t j = 0; j < fx.n_values; j++) {
            if (!same_float(out[j], fx.values[j])) {
                if (bad++ < 5)
                    fprintf(stderr, "%s/%s: value %u: got %.9g want %.9g\n", name, label, j, out[j], fx.values[j]);
            }
        }
        CHECK(bad == 0, "%s/%s: %d of %u values differ from gguf.quants", name, label, bad, fx.n_values);
        uint8_t canary[64];
        memset(canary, 0x55, sizeof canary);
        CHECK(memcmp((uint8_t *)(out + fx.n_values), canary, 64) == 0, "%s/%s: wrote past the row", name, label);
        if (ops && di->block > 1) { /* a single block at an odd position */
            uint32_t nb = fx.n_values / di->block, b = nb / 2 + 1 < nb ? nb / 2 + 1 : 0;
            ops->dequant_row(type, fx.blocks + (size_t)b * di->bytes, out, di->block);
            int bad1 = 0;
            for (uint32_t j = 0; j < di->block; j++) bad1 += !same_float(out[j], fx.values[b * di->block + j]);
            CHECK(bad1 == 0, "%s/%s: block %u alone: %d values differ", name, label, b, bad1);
        }
    }
    free(out);
    free(fx.blocks);
    free(fx.values);
}

/* W (rows x cols of `type`) . x against numpy in float64, within 1e-5 of sum |w| |x| */
static void test_matvec_fixture(const char *name, gm_dtype type) {
    char path[1024], file[64];
    snprintf(file, sizeof file, "quant/%s_matvec.bin", name);
    size_t len;
    uint8_t *buf = read_all(gm_test_fixture(file, path, sizeof path), &len);
    CHECK(buf != NULL, "cannot read fixture %s", path);
    if (!buf) return;
    uint32_t hdr[4] = {0};
    if (len >= 20) memcpy(hdr, buf + 4, 16);
    uint32_t rows = hdr[1], cols = hdr[2], nbytes = hdr[3];
    int ok = len >= 20 && memcmp(buf, "GMMV", 4) == 0 && hdr[0] == (uint32_t)type &&
             len == 20 + (size_t)nbytes + 4 * (size_t)cols + 16 * (size_t)rows &&
             gm_kernels_bytes_of(type, cols) * rows == nbytes;
    CHECK(ok, "fixture %s is malformed", path);
    if (!ok) {
        free(buf);
        return;
    }
    const uint8_t *W = buf + 20;
    size_t rb = gm_kernels_bytes_of(type, cols);
    float *x = malloc(4 * (size_t)cols * 3), *y = malloc(4 * (size_t)rows * 3);
    double *want = malloc(8 * (size_t)rows), *absdot = malloc(8 * (size_t)rows);
    memcpy(x, W + nbytes, 4 * (size_t)cols);
    memcpy(want, W + nbytes + 4 * (size_t)cols, 8 * (size_t)rows);
    memcpy(absdot, W + nbytes + 4 * (size_t)cols + 8 * (size_t)rows, 8 * (size_t)rows);
    for (int t = 1; t < 3; t++) memcpy(x + (size_t)t * cols, x, 4 * (size_t)cols); /* T = 3 identical inputs */
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        const gm_kernel_ops *ops = gm_kernels_lookup(isas[i]);
        if (!ops) continue;
        for (int mm = 0; mm < 2; mm++) {
            if (mm) ops->matmul(type, W, rb, rows, cols, x, 3, y, rows);
            else ops->matvec(type, W, rb, rows, cols, x, y);
            int bad = 0;
            for (uint32_t r = 0; r < rows * (mm ? 3u : 1u); r++) {
                double err = fabs((double)y[r] - want[r % rows]);
                if (!(err <= 1e-5 * absdot[r % rows] + 1e-30) && bad++ < 3)
                    fprintf(stderr, "%s/%s %s: row %u: got %.9g want %.9g\n", name, isas[i], mm ? "matmul" : "matvec",
                            r % rows, y[r], want[r % rows]);
            }
            CHECK(bad == 0, "%s/%s %s: %d of %u outputs differ from numpy", name, isas[i], mm ? "matmul" : "matvec", bad,
                  rows);
        }
    }
    gm_matvec(type, W, rb, rows, cols, x, y);
    int bad = 0;
    for (uint32_t r = 0; r < rows; r++) bad += !(fabs((double)y[r] - want[r]) <= 1e-5 * absdot[r] + 1e-30);
    CHECK(bad == 0, "%s: dispatched gm_matvec: %d of %u outputs differ from numpy", name, bad, rows);
    free(x);
    free(y);
    free(want);
    free(absdot);
    free(buf);
}

static void test_fp16_fixture(void) {
    char path[1024];
    size_t len;
    uint8_t *buf = read_all(gm_test_fixture("quant/fp16.bin", path, sizeof path), &len);
    CHECK(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    uint32_t n = 0;
    if (len >= 8) memcpy(&n, buf + 4, 4);
    CHECK(len >= 8 && memcmp(buf, "GMHF", 4) == 0 && len == 8 + (size_t)n * 8, "%s is malformed", path);
    if (len != 8 + (size_t)n * 8) {
        free(buf);
        return;
    }
    const uint8_t *xs = buf + 8, *hs = xs + 4 * (size_t)n, *bs = hs + 2 * (size_t)n;
    int bad_h = 0, bad_b = 0;
    for (uint32_t i = 0; i < n; i++) {
        float x;
        uint16_t h, b;
        memcpy(&x, xs + 4 * i, 4);
        memcpy(&h, hs + 2 * i, 2);
        memcpy(&b, bs + 2 * i, 2);
        uint16_t gh = gm_f32_to_f16(x), gb = gm_f32_to_bf16(x);
        /* numpy keeps a NaN's payload bits; we force quiet NaNs: compare NaN-ness then */
        int h_ok = gh == h || (isnan(x) && (gh & 0x7c00) == 0x7c00 && (gh & 0x3ff) && (h & 0x7c00) == 0x7c00 && (h & 0x3ff));
        if (!h_ok && bad_h++ < 5) fprintf(stderr, "f32 %.9g (0x%08x) -> f16 0x%04x, numpy 0x%04x\n", x,
                                          *(uint32_t *)(xs + 4 * i), gh, h);
        if (gb != b && bad_b++ < 5) fprintf(stderr, "f32 %.9g -> bf16 0x%04x, gguf 0x%04x\n", x, gb, b);
    }
    CHECK(n > 1000, "fp16 fixture has only %u values", n);
    CHECK(bad_h == 0, "%d f32 -> f16 conversions differ from numpy", bad_h);
    CHECK(bad_b == 0, "%d f32 -> bf16 conversions differ from gguf.quants", bad_b);
    free(buf);
}

/* ---- the CPU's own conversions as a second, independent reference (F16C) ---- */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) { return (uint16_t)_cvtss_sh(f, 0); }

static void test_f16_hardware(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) { /* F16C ships with every AVX2 CPU */
        printf("no F16C: hardware f16 comparison skipped\n");
        return;
    }
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = gm_f16_to_f32((uint16_t)h), b = hw_h2f((uint16_t)h);
        uint32_t ua, ub;
        memcpy(&ua, &a, 4);
        memcpy(&ub, &b, 4);
        if (ua != ub && !(isnan(a) && isnan(b) && (ua | 0x400000) == ub) && bad++ < 5)
            fprintf(stderr, "f16 0x%04x -> 0x%08x, F16C 0x%08x\n", h, ua, ub);
    }
    CHECK(bad == 0, "%d of 65536 f16 -> f32 conversions differ from F16C", bad);
    bad = 0;
    /* every f32 exponent, a stride of mantissas, both signs */
    for (uint64_t u = 0; u < (1ull << 32); u += 0x3f1u) {
        float f;
        uint32_t v = (uint32_t)u;
        memcpy(&f, &v, 4);
        uint16_t a = gm_f32_to_f16(f), b = hw_f2h(f);
        if (a != b && bad++ < 5) fprintf(stderr, "f32 0x%08x -> f16 0x%04x, F16C 0x%04x\n", v, a, b);
    }
    CHECK(bad == 0, "%d f32 -> f16 conversions differ from F16C", bad);
}
#else
static void test_f16_hardware(void) {}
#endif

int main(void) {
    static const struct { const char *name; gm_dtype type; } types[] = {
        {"F32", GM_F32},   {"F16", GM_F16},   {"BF16", GM_BF16}, {"Q4_0", GM_Q4_0}, {"Q4_1", GM_Q4_1}, {"Q5_0", GM_Q5_0},
        {"Q5_1", GM_Q5_1}, {"Q8_0", GM_Q8_0}, {"Q4_K", GM_Q4_K}, {"Q5_K", GM_Q5_K}, {"Q6_K", GM_Q6_K},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        test_type(types[i].name, types[i].type);
        test_matvec_fixture(types[i].name, types[i].type);
    }
    test_fp16_fixture();
    test_f16_hardware();
    printf("kernels chosen: %s\n", gm_kernels_isa());
    return gm_test_finish();
}
