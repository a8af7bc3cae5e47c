/* Kernel throughput: matvec GB/s (weight bytes streamed per second) and rows/s per type and ISA on
 * the Gemma 3 270M embedding shape (262144 x 640) and a 1B MLP layer shape (6912 x 1152), and matmul
 * GFLOP/s at T = 64 inputs on the layer shape: the int16 terms' product, and on the packed rows of the kinds
 * that have one the three int8 terms' product (quantize_x8 included), the one prefill takes. Single-threaded,
 * best of several runs. Rows: the file's layout ("avx2"), the packed one ("avx2P"), the screened product of
 * greedy decoding ("avx2S") and the --precision fast int8 product ("avx2F") where the kernels have them.
 *
 * With --pack: load-time packing GB/s (GGUF bytes per second) per type on an 8192 x 1024 matrix,
 * each type's fast path against the generic per-value one (gm_pack_rows_ref).
 *
 * --layer ROWSxCOLS replaces the layer shape (the K-quants want COLS a multiple of 256: the 1B's 1152
 * is not, and its files hold Q5_0 / Q8_0 there; e.g. the 270M's attn_output 640x1024, ffn_down
 * 640x2048, a 4B ffn_down 2560x10240).
 *
 * usage: bench_kernels [--types Q8_0,Q4_K,...] [--isa scalar,avx2,avx512] [--min-time SECONDS]
 *                      [--no-embed] [--layer ROWSxCOLS] [--pack] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/kernels_internal.h"
#include "kernels/packed.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* random codes with moderate f16 scales (the values matter little for speed, NaNs would) */
static uint8_t *make_weights(gm_dtype t, size_t rows, size_t cols, size_t *rb) {
    *rb = gm_kernels_bytes_of(t, cols);
    size_t n = rows * *rb;
    uint8_t *w = malloc(n);
    if (!w) return NULL;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t v = rnd();
        memcpy(w + i, &v, 4);
    }
    const gm_dtype_info *di = gm_dtype_get(t);
    uint16_t s = gm_f32_to_f16(0.01f);
    int offs[2] = {-1, -1};
    switch (t) {
    case GM_F32:
        for (size_t i = 0; i < rows * cols; i++) {
            float f = (float)(int)(rnd() % 2001 - 1000) * 1e-3f;
            memcpy(w + 4 * i, &f, 4);
        }
        return w;
    case GM_F16: case GM_BF16:
        for (size_t i = 0; i < rows * cols; i++) {
            float f = (float)(int)(rnd() % 2001 - 1000) * 1e-3f;
            uint16_t h = t == GM_F16 ? gm_f32_to_f16(f) : gm_f32_to_bf16(f);
            memcpy(w + 2 * i, &h, 2);
        }
        return w;
    case GM_Q6_K: offs[0] = 208; break;
    case GM_Q4_1: case GM_Q5_1: case GM_Q4_K: case GM_Q5_K: offs[0] = 0; offs[1] = 2; break;
    default: offs[0] = 0; break;
    }
    for (size_t b = 0; b < n / di->bytes; b++)
        for (int j = 0; j < 2; j++)
            if (offs[j] >= 0) memcpy(w + b * di->bytes + offs[j], &s, 2);
    return w;
}

/* The packed kinds a type runs as: the one it packs as where no kernels prefer another, and for Q5_0, Q4_K and
 * Q6_K also the others (the 8-bit tiles "Q5_0/D", AVX2's, and the row forms "Q5_0/R", "Q4_K/R" and "Q6_K/H",
 * AVX-512's; the crumbs "Q6_K/C", AVX2's). name[0]: the type's. */
typedef struct pack_kinds {
    gm_pack_kind k[3];
    int n;
    const char *name[3];
} pack_kinds;

static pack_kinds kinds_of(gm_dtype t) {
    if (t == GM_Q5_0) return (pack_kinds){{GM_PK_N5D, GM_PK_D16, GM_PK_N5R}, 3, {"Q5_0", "Q5_0/D", "Q5_0/R"}};
    if (t == GM_Q4_K) return (pack_kinds){{GM_PK_N4K, GM_PK_N4R}, 2, {"Q4_K", "Q4_K/R"}};
    if (t == GM_Q6_K) return (pack_kinds){{GM_PK_N6, GM_PK_N6C, GM_PK_N6H}, 3, {"Q6_K", "Q6_K/C", "Q6_K/H"}};
    return (pack_kinds){{gm_pack_kind_of(t), GM_PK_NONE}, 1, {gm_dtype_get(t)->name}};
}

static int listed(const char *list, const char *name) {
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

typedef struct shape {
    const char *name;
    size_t rows, cols;
} shape;

/* One matvec cell of the table: shape si's GB/s (of `bytes`, the GGUF matrix) and rows/s for the best time,
 * or dashes when best < 0 (no matrix). */
static void print_cell(const shape *shapes, int si, double bytes, double best) {
    if (best < 0) printf(" | %-*s %9s %12s", si == 0 ? 22 : 18, shapes[si].name, "-", "-");
    else
        printf(" | %-*s %9.2f %12.3g", si == 0 ? 22 : 18, shapes[si].name, bytes / best / 1e9,
               (double)shapes[si].rows / best);
}

/* One input's product on the packed rows of P as decode runs it: the input prepared, then the matvec, or
 * (RUN_SCREEN) the screened product with x's int8 term and the block errors, or (RUN_FAST, --precision
 * fast) the int8 matmul on that term alone. */
typedef enum { RUN_EXACT, RUN_SCREEN, RUN_FAST } run_mode;
typedef struct packed_run {
    const gm_packed_ops *ops;
    const gm_packed *P;
    gm_dtype t;
    const float *x;
    gm_xq *xq;
    float *y, *eb, *bound; /* eb, bound: the screen's */
    run_mode mode;
} packed_run;

static void packed_run_once(const packed_run *r) {
    size_t rows = r->P->rows, cols = r->P->cols;
    if (r->mode != RUN_EXACT) {
        r->ops->quantize_x8(r->x, cols, 1, cols, r->xq);
        r->xq->fast = r->mode == RUN_FAST;
        if (r->mode == RUN_FAST) {
            r->ops->matmul8(r->P, 0, rows, r->xq, 1, r->y, rows);
            return;
        }
        gm_packed_screen_errors(r->P, r->x, r->xq, r->eb, false);
        r->ops->screen(r->P, 0, rows, r->xq, r->eb, r->y, r->bound);
        return;
    }
    if (r->t == GM_BF16) gm_prepare_x_bf16(r->x, cols, 1, cols, false, r->xq);
    else if ((r->P->kind == GM_PK_N5R || r->P->kind == GM_PK_N4R || r->P->kind == GM_PK_N6H) && r->ops->row_form &&
             r->xq->b8) {
        /* as the engine: the int8 terms */
        r->ops->quantize_x8(r->x, cols, 1, cols, r->xq);
        r->xq->fast = false;
    } else r->ops->quantize_x(r->x, cols, 1, cols, r->xq);
    r->ops->matvec(r->P, 0, rows, r->xq, r->y);
}

/* The best time of runs lasting min_time in all (at least 2); unless first_counts, a first run under 50 ms
 * is left out (it warms the pages of a small matrix). */
static double packed_best(const packed_run *r, bool first_counts, double min_time) {
    double best = 1e30, start = gm_now_seconds();
    int runs = 0;
    do {
        double t0 = gm_now_seconds();
        packed_run_once(r);
        double dt = gm_now_seconds() - t0;
        if (runs > 0 || first_counts || dt > 0.05) best = dt < best ? dt : best;
        runs++;
    } while (gm_now_seconds() - start < min_time || runs < 2);
    return best;
}

/* One row: the screened product (gm_packed_screen) or the fast int8 one on both shapes, GB/s of GGUF bytes
 * as the packed rows; no matmul. */
static void bench_int8(const gm_packed_ops *pops, const char *pname, const shape *shapes, const gm_packed *P,
                       const float *x, const size_t *rb, float *y, double min_time, run_mode mode, const char *label) {
    gm_xq xq = {0};
    const size_t xc = shapes[1].cols > shapes[0].cols ? shapes[1].cols : shapes[0].cols;
    xq.b8 = aligned_alloc(64, 3 * xc), xq.e8 = malloc(xc / 32 * 4), xq.s8 = malloc(GM_X8_SUMS * xc / 32 * 4);
    xq.b8n = aligned_alloc(64, 3 * xc);
    float *eb = malloc(xc / 32 * sizeof *eb), *bound = malloc(262144 * sizeof *bound);
    printf("%-6s %-7s", pname, label);
    for (int si = 0; si < 2; si++) {
        if (!P[si].data) {
            print_cell(shapes, si, 0, -1);
            continue;
        }
        packed_run r = {pops, &P[si], P[si].from, x, &xq, y, eb, bound, mode};
        print_cell(shapes, si, (double)rb[si] * (double)shapes[si].rows, packed_best(&r, si == 1, min_time));
    }
    printf(" | %8s\n", "-");
    fflush(stdout);
    free(xq.b8), free(xq.b8n), free(xq.e8), free(xq.s8), free(eb), free(bound);
}

/* GB/s of GGUF bytes that fn packs, best of runs lasting min_time in all. */
static double pack_rate(void (*fn)(gm_packed *, const void *, size_t, size_t, size_t), gm_packed *P, const uint8_t *w,
                        size_t rb, double min_time) {
    double best = 1e30, start = gm_now_seconds();
    int runs = 0;
    do {
        double t0 = gm_now_seconds();
        fn(P, w, rb, 0, P->rows);
        double dt = gm_now_seconds() - t0;
        best = dt < best ? dt : best;
        runs++;
    } while (gm_now_seconds() - start < min_time || runs < 3);
    return (double)rb * (double)P->rows / best / 1e9;
}

static int bench_pack(const char *types_arg, double min_time) {
    static const gm_dtype types[] = {GM_BF16, GM_Q4_0, GM_Q4_1, GM_Q5_0, GM_Q5_1, GM_Q8_0, GM_Q4_K, GM_Q5_K, GM_Q6_K};
    const size_t rows = 8192, cols = 1024;
    printf("packing %zu x %zu, single thread, GB/s of GGUF bytes, best of runs >= %.2f s\n\n", rows, cols, min_time);
    printf("%-6s %10s %10s\n", "type", "fast", "generic");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        gm_dtype t = types[ti];
        if (!listed(types_arg, gm_dtype_get(t)->name)) continue;
        size_t rb;
        uint8_t *w = make_weights(t, rows, cols, &rb);
        /* each packed kind of the type (kinds_of) */
        pack_kinds pk = kinds_of(t);
        for (int ki = 0; ki < pk.n; ki++) {
            gm_packed P;
            gm_pack_describe_as(pk.k[ki], t, rows, cols, &P);
            P.data = aligned_alloc(64, (gm_packed_size(&P) + 63) / 64 * 64);
            if (!w || !P.data) {
                fprintf(stderr, "out of memory for %s\n", gm_dtype_get(t)->name);
                return 1;
            }
            double fast = pack_rate(gm_pack_rows, &P, w, rb, min_time), ref = pack_rate(gm_pack_rows_ref, &P, w, rb, min_time);
            printf("%-6s %10.2f %10.2f\n", pk.name[ki], fast, ref);
            free(P.data);
        }
        free(w);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *types_arg = NULL, *isa_arg = NULL;
    double min_time = 0.25;
    int embed = 1, pack = 0;
    char layer_name[64] = "1B layer 6912x1152";
    size_t layer_rows = 6912, layer_cols = 1152;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--types") && i + 1 < argc) types_arg = argv[++i];
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa_arg = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-embed")) embed = 0;
        else if (!strcmp(argv[i], "--pack")) pack = 1;
        else if (!strcmp(argv[i], "--layer") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%zux%zu", &layer_rows, &layer_cols) == 2 && layer_rows > 0 &&
                 layer_rows <= 262144 && layer_cols > 0 && layer_cols % 32 == 0 && layer_cols <= 65536)
            snprintf(layer_name, sizeof layer_name, "layer %s", argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--types Q8_0,Q4_K,...] [--isa scalar,avx2,avx512] [--min-time S] [--no-embed] "
                            "[--layer ROWSxCOLS: rows <= 262144, cols a multiple of 32 <= 65536] [--pack]\n", argv[0]);
            return 2;
        }
    }
    if (pack) return bench_pack(types_arg, min_time);
    static const gm_dtype types[] = {GM_F32,  GM_F16,  GM_BF16, GM_Q4_0, GM_Q4_1, GM_Q5_0,
                                     GM_Q5_1, GM_Q8_0, GM_Q4_K, GM_Q5_K, GM_Q6_K};
    static const char *isas[] = {"scalar", "avx2", "avx512"};
    const shape shapes[2] = {{"270M embed 262144x640", 262144, 640}, {layer_name, layer_rows, layer_cols}};
    const size_t T = 64;
    printf("dispatcher default: %s; single thread; best of runs >= %.2f s\n\n", gm_kernels_isa(), min_time);
    printf("%-6s %-7s | %-22s %9s %12s | %-18s %9s %12s | %s\n", "type", "isa", "matvec", "GB/s", "rows/s", "matvec",
           "GB/s", "rows/s", "matmul T=64 GFLOP/s (int16 terms | int8 terms, where the kind has them)");
    const size_t xcols = layer_cols > 640 ? layer_cols : 640;
    float *x = malloc(T * xcols * sizeof *x), *y = malloc(T * 262144 * sizeof *y);
    for (size_t i = 0; i < T * xcols; i++) x[i] = (float)(int)(rnd() % 2001 - 1000) * 1e-3f;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        gm_dtype t = types[ti];
        const char *tname = gm_dtype_get(t)->name;
        if (!listed(types_arg, tname)) continue;
        size_t rb[2];
        uint8_t *w[2] = {embed ? make_weights(t, shapes[0].rows, shapes[0].cols, &rb[0]) : NULL,
                         make_weights(t, shapes[1].rows, shapes[1].cols, &rb[1])};
        if ((embed && !w[0]) || !w[1]) {
            fprintf(stderr, "out of memory for %s\n", tname);
            return 1;
        }
        for (int ii = 0; ii < 3; ii++) {
            const gm_kernel_ops *ops = gm_kernels_lookup(isas[ii]);
            if (!ops || !listed(isa_arg, isas[ii])) continue;
            printf("%-6s %-7s", tname, isas[ii]);
            for (int si = 0; si < 2; si++) {
                if (!w[si]) {
                    print_cell(shapes, si, 0, -1);
                    continue;
                }
                double best = 1e30, start = gm_now_seconds();
                int runs = 0;
                do {
                    double t0 = gm_now_seconds();
                    ops->matvec(t, w[si], rb[si], shapes[si].rows, shapes[si].cols, x, y);
                    double dt = gm_now_seconds() - t0;
                    if (runs > 0 || si == 1 || dt > 0.05) best = dt < best ? dt : best; /* first big run warms pages */
                    runs++;
                } while (gm_now_seconds() - start < min_time || runs < 2);
                print_cell(shapes, si, (double)rb[si] * (double)shapes[si].rows, best);
            }
            double best = 1e30, start = gm_now_seconds();
            int runs = 0;
            do {
                double t0 = gm_now_seconds();
                ops->matmul(t, w[1], rb[1], shapes[1].rows, shapes[1].cols, x, T, y, shapes[1].rows);
                double dt = gm_now_seconds() - t0;
                best = dt < best ? dt : best;
                runs++;
            } while (gm_now_seconds() - start < min_time || runs < 2);
            printf(" | %8.2f\n", 2.0 * (double)shapes[1].rows * (double)shapes[1].cols * (double)T / best / 1e9);
            fflush(stdout);
        }
        /* the packed path (int16 activations): GB/s counts the bytes of the original GGUF matrix, so
         * the columns compare with the rows above */
        /* Q5_0 and Q6_K run as both of their packed kinds (kinds_of) */
        const pack_kinds pk = kinds_of(t);
        for (int ki = 0; ki < pk.n; ki++) {
            const char *pname = pk.name[ki];
            gm_packed P[2];
            for (int si = 0; si < 2; si++) {
                gm_pack_describe_as(pk.k[ki], t, shapes[si].rows, shapes[si].cols, &P[si]);
                size_t pb = gm_packed_size(&P[si]);
                P[si].data = pb && w[si] ? aligned_alloc(2u << 20, (pb + (2u << 20) - 1) / (2u << 20) * (2u << 20)) : NULL;
                if (P[si].data) gm_pack_rows(&P[si], w[si], rb[si], 0, shapes[si].rows);
            }
            gm_xq xq = {0};
            xq.q = aligned_alloc(64, T * xcols * 2), xq.q2 = aligned_alloc(64, T * xcols * 2);
            xq.d = malloc(T * xcols / 32 * 4), xq.s = malloc(T * xcols / 32 * 4), xq.qs = malloc(T * xcols / 8 * 4);
            xq.hi = aligned_alloc(64, T * xcols * 2), xq.mid = aligned_alloc(64, T * xcols * 2);
            xq.lo = aligned_alloc(64, T * xcols * 2);
            /* one input's pairs, as the engine's AVX2 matvec reads them; one input's int8 terms (the row-form
             * kinds' decode) */
            xq.xb = aligned_alloc(64, gm_xq_xb_bytes(xcols));
            xq.b8 = aligned_alloc(64, 3 * T * xcols), xq.b8n = aligned_alloc(64, 3 * T * xcols);
            xq.e8 = malloc(T * xcols / 32 * 4), xq.s8 = malloc(GM_X8_SUMS * T * xcols / 32 * 4);
            static const char *pisas[] = {"scalar", "avx2", "avx512", "amx"};
            for (int ii = 0; ii < 4 && P[1].data; ii++) {
                const gm_packed_ops *pops = gm_packed_lookup(pisas[ii]);
                if (!pops || !listed(isa_arg, pisas[ii]) || !gm_packed_ops_handles(pops, pk.k[ki])) continue;
                printf("%-6s %-7s", pname, ii == 0 ? "scalarP" : ii == 1 ? "avx2P" : ii == 2 ? "avx512P" : "amxP");
                for (int si = 0; si < 2; si++) {
                    if (!P[si].data) {
                        print_cell(shapes, si, 0, -1);
                        continue;
                    }
                    packed_run r = {pops, &P[si], t, x, &xq, y, NULL, NULL, RUN_EXACT};
                    print_cell(shapes, si, (double)rb[si] * (double)shapes[si].rows, packed_best(&r, si == 1, min_time));
                }
                double best = 1e30, start = gm_now_seconds();
                int runs = 0;
                const bool f32 = pops->matmul_f32 != NULL; /* as the engine: AVX2's batched products in f32 */
                do {
                    double t0 = gm_now_seconds();
                    if (t == GM_BF16 || ii == 3 || f32) gm_prepare_x_bf16(x, shapes[1].cols, T, shapes[1].cols, ii == 3, &xq);
                    else pops->quantize_x(x, shapes[1].cols, T, shapes[1].cols, &xq);
                    xq.f32 = f32;
                    if (f32) pops->matmul_f32(&P[1], 0, shapes[1].rows, &xq, T, y, shapes[1].rows);
                    else pops->matmul(&P[1], 0, shapes[1].rows, &xq, T, y, shapes[1].rows);
                    double dt = gm_now_seconds() - t0;
                    best = dt < best ? dt : best;
                    runs++;
                } while (gm_now_seconds() - start < min_time || runs < 2);
                printf(" | %8.2f", 2.0 * (double)shapes[1].rows * (double)shapes[1].cols * (double)T / best / 1e9);
                /* the engine's batched product where the kind has one: the three int8 terms (exact) */
                if (!f32 && ii != 3 && gm_packed_ops_int8(pops, P[1].kind, false)) {
                    best = 1e30, start = gm_now_seconds(), runs = 0;
                    do {
                        double t0 = gm_now_seconds();
                        pops->quantize_x8(x, shapes[1].cols, T, shapes[1].cols, &xq);
                        xq.fast = false;
                        pops->matmul8(&P[1], 0, shapes[1].rows, &xq, T, y, shapes[1].rows);
                        double dt = gm_now_seconds() - t0;
                        best = dt < best ? dt : best;
                        runs++;
                    } while (gm_now_seconds() - start < min_time || runs < 2);
                    printf(" | %8.2f", 2.0 * (double)shapes[1].rows * (double)shapes[1].cols * (double)T / best / 1e9);
                }
                printf("\n");
                fflush(stdout);
                const char *isa_short = ii == 1 ? "avx2" : ii == 2 ? "avx512" : "amx";
                char label[16];
                /* the screened product of greedy decoding, its inputs included (gm_packed_can_screen's kinds, and
                 * each Q6_K kind these kernels read) */
                if (pops->screen && (P[1].kind == GM_PK_D16 || gm_pack_kind_q6(P[1].kind))) {
                    snprintf(label, sizeof label, "%sS", isa_short);
                    bench_int8(pops, pname, shapes, P, x, rb, y, min_time, RUN_SCREEN, label);
                }
                if (gm_packed_ops_int8(pops, P[1].kind, true)) { /* --precision fast decode */
                    snprintf(label, sizeof label, "%sF", isa_short);
                    bench_int8(pops, pname, shapes, P, x, rb, y, min_time, RUN_FAST, label);
                }
            }
            free(xq.q);
            free(xq.q2);
            free(xq.d);
            free(xq.s);
            free(xq.qs);
            free(xq.hi);
            free(xq.mid);
            free(xq.lo);
            free(xq.xb);
            free(xq.b8), free(xq.b8n), free(xq.e8), free(xq.s8);
            free(P[0].data);
            free(P[1].data);
        }
        free(w[0]);
        free(w[1]);
    }
    free(x);
    free(y);
    return 0;
}
