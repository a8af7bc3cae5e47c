/* Private to src/kernels and its tests: one table of entry points per instruction set, so the
 * dispatcher can pick one and tests can compare every path the CPU runs against the reference. */
#ifndef GM_KERNELS_INTERNAL_H
#define GM_KERNELS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/matvec.h"
#include "kernels/packed.h"

typedef struct gm_kernel_ops {
    const char *name; /* "scalar", "avx2", "avx512" */
    void (*dequant_row)(gm_dtype type, const void *row, float *out, size_t n);
    void (*matvec)(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x,
                   float *y);
    void (*matmul)(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X,
                   size_t T, float *Y, size_t ldy);
} gm_kernel_ops;

/* The packed-weight kernels (packed.h) of one instruction set. */
typedef struct gm_packed_ops {
    void (*quantize_x)(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
    /* rows t < T of x into hi / mid / lo (row stride cols) and their 32-value sums (row stride cols / 32);
     * rows T .. Tpad - 1 of hi / mid / lo zero */
    void (*split_bf16)(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
    void (*matvec)(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y);
    void (*matmul)(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
    /* the same with the int8 terms (xq->has8, a kind of gm_packed_kind_int8(k, xq->fast)); NULL where not faster */
    void (*matmul8)(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
    /* gm_quantize_x8, bit for bit as gm_quantize_x8_ref */
    void (*quantize_x8)(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
    /* T > 1 f32 inputs (xq->x, xq->f32) times the decoded weights of any kind; NULL where the integer
     * products are faster */
    void (*matmul_f32)(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
    /* quantize_x fills xq->xb (T = 1, where the caller gave it room) and matvec reads it */
    bool matvec_xb;
    /* Q5_0 packs as 8-bit GM_PK_D16 tiles rather than GM_PK_N5D (gm_pack_kind_of) */
    bool q5_0_as_d16;
    /* Q6_K packs as GM_PK_N6C (4-bit codes and 2-bit pairs) rather than GM_PK_N6 or N6H (row form) */
    bool q6_k_as_n6c;
    /* Q5_0, Q4_K and Q6_K pack in row form (GM_PK_N5R, GM_PK_N4R, GM_PK_N6H) rather than as GM_PK_N5D, GM_PK_N4K
     * and GM_PK_N6, and their single-token exact products read the int8 terms where the caller prepared them
     * (xq->has8) */
    bool row_form;
    /* gm_packed_screen for GM_PK_D16 (NULL: these kernels do not screen) */
    void (*screen)(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y, float *bound);
} gm_packed_ops;

/* Whether these kernels take packed matrices of kind k: the reference every kind; the others every kind but
 * Q6_K's N6C (AVX2's alone) and N6 (not AVX2's), and the row-form kinds N5R / N4R / N6H only where they pack
 * in row form (AVX-512 VNNI without AMX). */
bool gm_packed_ops_handles(const gm_packed_ops *ops, gm_pack_kind k);
/* The kind these kernels pack Q6_K as (q6_k_as_n6c): the one their Q6_K int8 products and screen take. */
static inline gm_pack_kind gm_packed_ops_q6_kind(const gm_packed_ops *o) {
    return o->q6_k_as_n6c ? GM_PK_N6C : o->row_form ? GM_PK_N6H : GM_PK_N6;
}
/* Whether these kernels' matmul8 takes kind k with xq->fast = fast: gm_packed_kind_int8, Q6_K only in the kind
 * they pack it as (AVX2's int8 product has no N6, AVX-512's no N6C). */
bool gm_packed_ops_int8(const gm_packed_ops *o, gm_pack_kind k, bool fast);

extern const gm_packed_ops gm_packed_scalar;
extern const gm_packed_ops gm_packed_avx2;
extern const gm_packed_ops gm_packed_avx512; /* needs AVX-512 VNNI */
extern const gm_packed_ops gm_packed_amx;    /* gm_packed_avx512 with AMX-BF16 for BF16 matmuls */
void gm_packed_matmul_f32_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                               size_t ldy);
void gm_packed_matmul8_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
void gm_packed_screen_avx2(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y,
                           float *bound);
void gm_packed_matvec_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y);
void gm_packed_matmul_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
void gm_packed_matmul8_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y,
                              size_t ldy);
void gm_quantize_x_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
void gm_quantize_x8_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
void gm_packed_screen_avx512(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y,
                             float *bound);
/* Whether this CPU has AVX512_BF16 (false under GM_NO_BF16): the AVX-512 kernels' bf16 conversions and
 * dot products (--precision fast BF16 matmuls; without it they stay exact) */
bool gm_cpu_bf16(void);
/* How far ahead the packed matvecs (decode) of kind k prefetch their weight stream, in bytes: to L1 512 by
 * default (GM_PREFETCH), to L2 3072 (GM_PREFETCH_L2), each 0..65536 in steps of 64, 0 to switch it off
 * (docs/BENCHMARKS.md, "Prefetching the decode stream"). On AMD CPUs with AVX-512 (Zen 4) the compact K-quant
 * kinds take 0 and 8192 and the others none ("Prefetch distances per kind on Zen 4"); GM_PREFETCH_K /
 * GM_PREFETCH_K_L2 set the K-quants' alone, the other two both. Read once. */
typedef struct gm_prefetch {
    size_t l1, l2;
} gm_prefetch;
gm_prefetch gm_packed_prefetch(gm_pack_kind k);
/* Whether the AVX-512 attention asks for the keys and values ahead into L2 (8 positions ahead) instead of
 * L1 (4 ahead): on AMD with AVX-512 (Zen 4), where requests into L1 held the stream to 9 GB/s (bench_attention,
 * 512 positions, cold: 117 -> 72 us per layer); GM_KV_PREFETCH=l1|l2 picks. Read once. */
bool gm_attn_prefetch_l2(void);
/* AMX needs the kernel's permission for the tile data state (Linux arch_prctl); false if refused. */
bool gm_amx_enable(void);

/* The packed kernels named `isa` when this CPU can run them, else NULL. */
const gm_packed_ops *gm_packed_lookup(const char *isa);

/* The SIMD-able operations of ops.h. */
struct gm_attn_rows;
typedef struct gm_vec_ops {
    void (*rmsnorm)(float *out, const float *x, const float *w, size_t n, float eps);
    void (*geglu)(float *out, const float *gate, const float *up, size_t n);
    void (*attention_rows)(const struct gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots,
                           size_t H, float softcap, float *scores);
    size_t (*argmax)(const float *x, size_t n);
    void (*exp_sums)(const float *x, size_t n, float max, const float *floors, int nf, double *sums);
    /* gm_panel_bounds over `panels` whole panels (rows 16 p .. 16 p + 15 at y + 16 p; gm_panel_bounds takes
     * the panels cut at a or b) */
    void (*panel_bounds)(const float *y, const float *bound, size_t panels, double *lo, double *hi);
} gm_vec_ops;

extern const gm_vec_ops gm_vec_scalar;
extern const gm_vec_ops gm_vec_avx2;
extern const gm_vec_ops gm_vec_avx512;
const gm_vec_ops *gm_vec_lookup(const char *isa);
const gm_vec_ops *gm_vec_ops_chosen(void);
void gm_rmsnorm_ref(float *out, const float *x, const float *w, size_t n, float eps);
void gm_geglu_ref(float *out, const float *gate, const float *up, size_t n);
void gm_attention_rows_ref(const struct gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots,
                           size_t H, float softcap, float *scores);
size_t gm_argmax_f32_ref(const float *x, size_t n);
void gm_exp_sums_f32_ref(const float *x, size_t n, float max, const float *floors, int nf, double *sums);

extern const gm_kernel_ops gm_kernels_scalar;
extern const gm_kernel_ops gm_kernels_avx2;
extern const gm_kernel_ops gm_kernels_avx512;

/* The implementation named `isa` ("scalar", "avx2", "avx512") when this CPU can run it, else NULL. */
const gm_kernel_ops *gm_kernels_lookup(const char *isa);

/* Scalar reference pieces (dequant_ref.c, matvec_ref.c). */
void gm_dequant_row_ref(gm_dtype type, const void *row, float *out, size_t n);
void gm_matvec_ref(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x,
                   float *y);
void gm_matmul_ref(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X,
                   size_t T, float *Y, size_t ldy);

void gm_quantize_x_ref(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
void gm_split_bf16_ref(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
void gm_split_bf16_avx512(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
const gm_packed_ops *gm_packed_ops_chosen(void);
/* Code of pair p, lane i of a packed tile (pack.c). */
int gm_packed_code(gm_pack_kind k, const uint8_t *t, int p, int i);
void gm_packed_matvec_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y);
void gm_packed_matmul_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
/* The int8-term product: exact integer dots per tile, scaled and summed in f64. */
void gm_packed_matmul8_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);
void gm_quantize_x8_ref(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
/* One block's int8 terms into q, its scale into *e, its sums into sum[GM_X8_SUMS] (gm_xq.s8). */
void gm_x8_block_ref(const float *v, float amax, int8_t *q, float *e, int32_t *sum);
/* One block's three int8 terms (96 bytes) from lane order (q) to column order (qn: xq->b8n) */
void gm_x8_to_columns(const int8_t *q, int8_t *qn);
/* Half sums a (columns 0-15) and b (16-31) of a term, |each| <= 16 x 127, as gm_xq.s8 keeps them: two int16. */
static inline int32_t gm_x8_half_pair(int a, int b) {
    return (int32_t)((uint32_t)(uint16_t)(int16_t)a | (uint32_t)(uint16_t)(int16_t)b << 16);
}
/* Position of column c (< 32) of a block in the int8 terms' lane order. */
static inline int gm_x8_pos(int c) { return c < 16 ? 4 * (c / 2) + (c & 1) : 4 * ((c - 16) / 2) + 2 + (c & 1); }

/* The end of quantizing one 32-value block v whose max |v| is amax (every path finds amax its own
 * way, then computes exactly this, so all paths agree bit for bit): d = amax / 32767,
 * q1 = rint(v * (32767 / amax)), r = fmaf(-d, q1, v), q2 = rint(r * (32767 / amax * 32768)),
 * s = d * (sum q1 + sum q2 / 32768), qs = sums of q1 over values 0-15 and 16-31, then of q2.
 * A block with a NaN or infinity gets d = NaN (the outputs become NaN, as the f32 kernels' would);
 * a block below 1e-30 in magnitude counts as zero. */
static inline void gm_xq_block_finish(const float *v, float amax, int16_t *q, int16_t *q2, float *d, float *s,
                                      int32_t *qs) {
    int bad = !(amax <= 3.4028235e38f);
    for (int i = 0; i < 32; i++) bad |= v[i] != v[i];
    if (bad || amax < 1e-30f) {
        for (int i = 0; i < 32; i++) q[i] = q2[i] = 0;
        *d = bad ? __builtin_nanf("") : 0.0f;
        *s = *d;
        qs[0] = qs[1] = qs[2] = qs[3] = 0;
        return;
    }
    float inv = 32767.0f / amax, inv2 = inv * 32768.0f, dd = amax / 32767.0f;
    int32_t sum[4] = {0, 0, 0, 0};
    for (int i = 0; i < 32; i++) {
        float r1 = __builtin_rintf(v[i] * inv);
        float r2 = __builtin_rintf(__builtin_fmaf(-dd, r1, v[i]) * inv2);
        r2 = r2 > 32767.0f ? 32767.0f : r2 < -32767.0f ? -32767.0f : r2;
        q[i] = (int16_t)r1;
        q2[i] = (int16_t)r2;
        sum[i / 16] += q[i];
        sum[2 + i / 16] += q2[i];
    }
    *d = dd;
    *s = dd * ((float)(sum[0] + sum[1]) + (float)(sum[2] + sum[3]) * 0x1p-15f);
    for (int k = 0; k < 4; k++) qs[k] = sum[k];
}

/* Bytes of the first n elements of a row of `type` (n a multiple of the block). */
static inline size_t gm_kernels_bytes_of(gm_dtype type, size_t n) {
    switch (type) {
    case GM_F32: return n * 4;
    case GM_F16: case GM_BF16: return n * 2;
    case GM_Q4_0: return n / 32 * 18;
    case GM_Q4_1: return n / 32 * 20;
    case GM_Q5_0: return n / 32 * 22;
    case GM_Q5_1: return n / 32 * 24;
    case GM_Q8_0: return n / 32 * 34;
    case GM_Q4_K: return n / 256 * 144;
    case GM_Q5_K: return n / 256 * 176;
    case GM_Q6_K: return n / 256 * 210;
    default: return 0;
    }
}

/* Little-endian u32 at p. */
static inline uint32_t gm_kernels_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Little-endian f16 field at p (block scales are not 2-byte aligned in general). */
static inline uint16_t gm_kernels_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

#endif
