/* Picks the kernel implementation once per process from what the CPU (and OS) support; the
 * environment variable GM_KERNELS=scalar|avx2|avx512 narrows the choice (a path the CPU cannot run
 * falls back to the best one it can, so forcing never crashes). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

typedef struct cpu_features {
    bool avx2, avx512, avx512vnni, bf16, amx;
    bool amd; /* AuthenticAMD: the prefetch distances differ (gm_packed_prefetch) */
} cpu_features;

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static cpu_features detect(void) {
    cpu_features f = {false, false, false, false, false, false};
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
    f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "Auth" "enti" "cAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1, f16c = c >> 29 & 1;
    if (!osxsave || !avx) return f;
    uint64_t xcr0 = xgetbv0();
    bool os_ymm = (xcr0 & 0x6) == 0x6, os_zmm = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, NULL) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    bool avx2 = b >> 5 & 1, avx512f = b >> 16 & 1, avx512dq = b >> 17 & 1, avx512bw = b >> 30 & 1,
         avx512vl = b >> 31 & 1;
    f.avx2 = os_ymm && avx2 && fma && f16c;
    /* The avx512 kernels use F, BW, VL and DQ only (VNNI / BF16 instructions are not emitted). */
    f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
    bool bmi2 = b >> 8 & 1;
    f.avx512vnni = f.avx512 && (c >> 11 & 1) && bmi2; /* the packed kernels' vpdpwssd / vpdpbusd, pdep */
    /* AVX512_BF16 (vdpbf16ps, vcvtneps2bf16): leaf 7 subleaf 1, EAX bit 5; Ice Lake and Cascade Lake
     * have VNNI without it */
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    if (a >= 1) __cpuid_count(7, 1, a1, b1, c1, d1);
    f.bf16 = f.avx512vnni && (a1 >> 5 & 1);
    bool amx_bf16 = d >> 22 & 1, amx_tile = d >> 24 & 1, os_tile = (xcr0 >> 17 & 3) == 3;
    f.amx = f.avx512vnni && amx_bf16 && amx_tile && os_tile; /* and the kernel's permission: init_once */
    return f;
}
#else
typedef struct cpu_features {
    bool avx2, avx512, avx512vnni, bf16, amx, amd;
} cpu_features;
static cpu_features detect(void) { return (cpu_features){false, false, false, false, false, false}; }
#endif

/* Written once under pthread_once, read-only afterwards. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cpu_features g_cpu;
static const gm_kernel_ops *g_chosen;
static const gm_packed_ops *g_packed;
static const gm_vec_ops *g_vec;
static gm_prefetch g_prefetch = {512, 3072}, g_prefetch_k = {512, 3072}; /* g_prefetch_k: compact K-quants */
static bool g_attn_l2;
static bool g_int16_matmul; /* GM_INT16_MATMUL=1: the int16 batched products, to compare */

/* A prefetch distance from the environment: anything but 0..65536 in steps of 64 keeps the default. */
static void prefetch_env(const char *name, size_t *dist) {
    const char *e = getenv(name);
    if (!e || !*e) return;
    char *end;
    unsigned long v = strtoul(e, &end, 10);
    if (!*end && v <= 65536 && v % 64 == 0) *dist = v;
}

static void init_once(void) {
    g_cpu = detect();
    if (getenv("GM_NO_BF16")) g_cpu.bf16 = false; /* as on a CPU without AVX512_BF16 (tests) */
    if (g_cpu.amx && (!g_cpu.bf16 || getenv("GM_NO_AMX") || !gm_amx_enable())) g_cpu.amx = false;
    const char *want = getenv("GM_KERNELS");
    const gm_kernel_ops *best = g_cpu.avx512 ? &gm_kernels_avx512 : g_cpu.avx2 ? &gm_kernels_avx2 : &gm_kernels_scalar;
    g_chosen = best;
    if (want && strcmp(want, "scalar") == 0) g_chosen = &gm_kernels_scalar;
    if (want && strcmp(want, "avx2") == 0 && g_cpu.avx2) g_chosen = &gm_kernels_avx2;
    g_packed = g_chosen == &gm_kernels_scalar ? &gm_packed_scalar
               : g_chosen == &gm_kernels_avx512 && g_cpu.amx        ? &gm_packed_amx
               : g_chosen == &gm_kernels_avx512 && g_cpu.avx512vnni ? &gm_packed_avx512
                                                                    : &gm_packed_avx2;
    g_vec = g_chosen == &gm_kernels_avx512 ? &gm_vec_avx512
            : g_chosen == &gm_kernels_avx2 ? &gm_vec_avx2
                                           : &gm_vec_scalar;
    /* Zen 4 (a 2-vCPU guest): the K-quant panels streamed at 16-17 GB/s with 512 / 3072 and 20-21 with
     * 0 / 8192, the 4B Q4_K_M decoded +25 % on one thread; the one-stream kinds (8-bit tiles, BF16) run
     * fastest on the hardware prefetcher alone: 1B BF16 +30 %, 270M and 1B Q8_0 +10 % on one thread */
    if (g_cpu.amd && g_cpu.avx512) g_prefetch = (gm_prefetch){0, 0}, g_prefetch_k = (gm_prefetch){0, 8192};
    g_attn_l2 = g_cpu.amd && g_cpu.avx512;
    const char *i16 = getenv("GM_INT16_MATMUL"); /* read once: prepare_inputs asks per matrix and step */
    g_int16_matmul = i16 && *i16 == '1';
    const char *kv = getenv("GM_KV_PREFETCH");
    if (kv && (strcmp(kv, "l1") == 0 || strcmp(kv, "l2") == 0)) g_attn_l2 = kv[1] == '2';
    prefetch_env("GM_PREFETCH", &g_prefetch.l1);
    prefetch_env("GM_PREFETCH_L2", &g_prefetch.l2);
    prefetch_env("GM_PREFETCH", &g_prefetch_k.l1);
    prefetch_env("GM_PREFETCH_L2", &g_prefetch_k.l2);
    prefetch_env("GM_PREFETCH_K", &g_prefetch_k.l1);
    prefetch_env("GM_PREFETCH_K_L2", &g_prefetch_k.l2);
}

static const gm_kernel_ops *ops(void) {
    pthread_once(&g_once, init_once);
    return g_chosen;
}

const gm_kernel_ops *gm_kernels_lookup(const char *isa) {
    pthread_once(&g_once, init_once);
    if (strcmp(isa, "scalar") == 0) return &gm_kernels_scalar;
    if (strcmp(isa, "avx2") == 0) return g_cpu.avx2 ? &gm_kernels_avx2 : NULL;
    if (strcmp(isa, "avx512") == 0) return g_cpu.avx512 ? &gm_kernels_avx512 : NULL;
    return NULL;
}

const gm_packed_ops *gm_packed_lookup(const char *isa) {
    pthread_once(&g_once, init_once);
    if (strcmp(isa, "scalar") == 0) return &gm_packed_scalar;
    if (strcmp(isa, "avx2") == 0) return g_cpu.avx2 ? &gm_packed_avx2 : NULL;
    if (strcmp(isa, "avx512") == 0) return g_cpu.avx512vnni ? &gm_packed_avx512 : NULL;
    if (strcmp(isa, "amx") == 0) return g_cpu.amx ? &gm_packed_amx : NULL;
    return NULL;
}

bool gm_packed_int8_matmul(void) {
    pthread_once(&g_once, init_once);
    return g_packed->matmul8 != NULL && !g_int16_matmul;
}

bool gm_packed_decode_int8(gm_pack_kind k) {
    return (k == GM_PK_N5R || k == GM_PK_N4R || k == GM_PK_N6H) && gm_packed_int8_matmul() && g_packed->row_form;
}

bool gm_packed_f32_matmul(void) {
    pthread_once(&g_once, init_once);
    return g_packed->matmul_f32 != NULL && !g_int16_matmul;
}

bool gm_packed_matvec_xb(void) {
    pthread_once(&g_once, init_once);
    return g_packed->matvec_xb;
}

bool gm_packed_ops_handles(const gm_packed_ops *o, gm_pack_kind k) {
    if (o == &gm_packed_scalar) return true;
    switch (k) {
    case GM_PK_N5R: case GM_PK_N4R: case GM_PK_N6H: return o->row_form; /* AVX-512 VNNI's */
    case GM_PK_N6: return !o->q6_k_as_n6c;                              /* AVX-512's, with or without AMX */
    case GM_PK_N6C: return o->q6_k_as_n6c;                              /* AVX2's */
    default: return true;
    }
}

bool gm_packed_kind_int8(gm_pack_kind k, bool fast) {
    /* Q6_K: vpmaddubsw keeps the two 16-column halves apart, each with its scale (vpdpbusd would sum 2
     * columns of each into one); on AVX2 (N6C) that is the cheaper product with any number of terms, on
     * AVX-512 (N6) only with one; N6H's steps lie within one half, but its three terms' six sums an input
     * leave too few registers for the batched exact product */
    return k == GM_PK_D16 || k == GM_PK_SM32 || k == GM_PK_N4SM || gm_pack_kind_q4k(k) || k == GM_PK_N5D ||
           k == GM_PK_N5R || k == GM_PK_N6C || (fast && (k == GM_PK_N6 || k == GM_PK_N6H));
}

bool gm_packed_ops_int8(const gm_packed_ops *o, gm_pack_kind k, bool fast) {
    /* Q6_K's, Q5_0's and Q4_K's kinds only as these kernels pack them (the reference has no matmul8) */
    return o->matmul8 != NULL && gm_packed_kind_int8(k, fast) && gm_packed_ops_handles(o, k);
}

gm_prefetch gm_packed_prefetch(gm_pack_kind k) {
    pthread_once(&g_once, init_once);
    return gm_pack_kind_compact(k) ? g_prefetch_k : g_prefetch;
}

bool gm_attn_prefetch_l2(void) {
    pthread_once(&g_once, init_once);
    return g_attn_l2;
}

bool gm_cpu_bf16(void) {
    pthread_once(&g_once, init_once);
    return g_cpu.bf16;
}

bool gm_packed_amx_matmul(void) {
    pthread_once(&g_once, init_once);
    return g_packed == &gm_packed_amx;
}

const gm_vec_ops *gm_vec_lookup(const char *isa) {
    pthread_once(&g_once, init_once);
    if (strcmp(isa, "scalar") == 0) return &gm_vec_scalar;
    if (strcmp(isa, "avx2") == 0) return g_cpu.avx2 ? &gm_vec_avx2 : NULL;
    if (strcmp(isa, "avx512") == 0) return g_cpu.avx512 ? &gm_vec_avx512 : NULL;
    return NULL;
}

const gm_vec_ops *gm_vec_ops_chosen(void) {
    pthread_once(&g_once, init_once);
    return g_vec;
}

const char *gm_kernels_isa(void) { return ops()->name; }

void gm_dequant_row(gm_dtype type, const void *row, float *out, size_t n) { ops()->dequant_row(type, row, out, n); }

void gm_matvec(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x, float *y) {
    ops()->matvec(type, W, row_bytes, rows, cols, x, y);
}

void gm_matmul(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X, size_t T,
               float *Y, size_t ldy) {
    ops()->matmul(type, W, row_bytes, rows, cols, X, T, Y, ldy);
}

static const gm_packed_ops *packed_ops(void) {
    pthread_once(&g_once, init_once);
    return g_packed;
}

const gm_packed_ops *gm_packed_ops_chosen(void) { return packed_ops(); }

void gm_quantize_x(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    packed_ops()->quantize_x(x, ldx, T, cols, xq);
    xq->has8 = false;
}

void gm_quantize_x8(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq) {
    packed_ops()->quantize_x8(x, ldx, T, cols, xq);
}

void gm_packed_matvec(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y) {
    packed_ops()->matvec(P, r0, r1, xq, y);
}

bool gm_packed_can_screen(gm_pack_kind k) {
    const gm_packed_ops *o = packed_ops();
    /* Q6_K in the kind these kernels pack it as (AVX2: N6C, AVX-512: N6H, AMX: N6) */
    return o->screen != NULL && (k == GM_PK_D16 || k == gm_packed_ops_q6_kind(o));
}

void gm_packed_screen(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y, float *bound) {
    if (!gm_packed_can_screen(P->kind)) return;
    /* N6H's screen reads the terms in column order: without them, the reference's (the same bound) */
    if (gm_pack_kind_reads_b8n(P->kind) && !xq->b8n) gm_packed_screen_ref(P, r0, r1, xq, eb, y, bound);
    else packed_ops()->screen(P, r0, r1, xq, eb, y, bound);
}

void gm_packed_matmul(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy) {
    const gm_packed_ops *o = packed_ops();
    if (T > 1 && xq->f32 && o->matmul_f32) o->matmul_f32(P, r0, r1, xq, T, Y, ldy);
    else if (gm_xq_int8_for(xq, P->kind) && gm_packed_ops_int8(o, P->kind, xq->fast))
        o->matmul8(P, r0, r1, xq, T, Y, ldy);
    else o->matmul(P, r0, r1, xq, T, Y, ldy);
}
