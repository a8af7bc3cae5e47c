/* Packed weights and int16 activations: the fast path of every quantized (and BF16) matrix product.
 *
 * At load time each quantized matrix is re-laid out, losslessly, into panels of 16 rows. A panel holds
 * cols/32 tiles, one per 32 columns. Element (row r, column 32b + 2p + j) of a tile is "pair p,
 * lane i = 2r + j": pairs 0-7 are the tile's first 16 columns, pairs 8-15 the last 16. Codes:
 *
 *   8-bit  int8 [16 pairs][32 lanes]                       (GM_PK_D16, GM_PK_SM32)
 *   4-bit  u8 [8 groups][32 lanes]: low nibble = pair g, high nibble = pair g + 8
 *   5-bit  the 4-bit bytes, then u32 [16 pairs]: bit i = bit 4 of lane i's code
 *   6-bit  (N6C) the 4-bit bytes, then u8 [4][32 lanes] of 2-bit high parts: byte 32k + i holds bits 4-5
 *          of lane i's codes of pairs k, k + 4, k + 8, k + 12 in its bits 0-1, 2-3, 4-5, 6-7
 *   6-bit  (N6, "row form": each row's codes of a step g = 0..7 in one 32-bit lane, slots k = 0..3 =
 *          columns 2g, 2g + 1, 2g + 16, 2g + 17) u8 [4 step pairs m][16 rows][4 slots]: low nibble =
 *          bits 0-3 of step 2m's code, high nibble = step 2m + 1's; then u8 [2 step quads q][16 rows]
 *          [4 slots]: bits 2s, 2s + 1 = bits 4-5 of step 4q + s's code
 *   5-bit  (N5R, row form as N6) u8 [4 step pairs m][16 rows][4 slots] of nibbles as N6's, then u64 [8 steps
 *          g]: bit 4r + s = bit 4 of row r's code in slot s of step g
 *   4-bit  (N4R, row form as N6) u8 [4 step pairs m][16 rows][4 slots] of nibbles as N6's
 *   6-bit  (N6H, N6's bytes, each step within one half: slot k of step g = column 4g + k, steps 0-3 the
 *          first 16 columns, 4-7 the last 16)
 *
 * then the scales (w = the weight the GGUF block stores, bit for bit what gm_dequant_row gives):
 *
 *   kind         codes  scales                         w                          from
 *   GM_PK_D16    8-bit  f16 d[16]                      d[r] * q                   Q8_0, Q4_0 (q - 8)
 *   GM_PK_SM32   8-bit  f32 s[16], m[16]               s[r] * q + m[r]            Q5_1, Q5_K (s = d*sc, m = -dmin*m)
 *   GM_PK_N4SM   4-bit  f32 s[16], m[16]               s[r] * q + m[r]            Q4_1
 *   GM_PK_N5D    5-bit  f16 d[16]                      d[r] * (q - 16)            Q5_0
 *   GM_PK_N5R    5-bit  as GM_PK_N5D                   as GM_PK_N5D               Q5_0
 *   GM_PK_N4K    4-bit  u8 sc[16], mn[16]; per 8 tiles  (d sc) q - (dmin mn)       Q4_K
 *                       f16 d[16], -dmin[16]
 *   GM_PK_N4R    4-bit  as GM_PK_N4K                    as GM_PK_N4K               Q4_K
 *   GM_PK_N6     6-bit  i8 sc[2][16] (per 16 columns);  (d sc[c / 16]) (q - 32)   Q6_K
 *                       per 8 tiles f16 d[16]
 *   GM_PK_N6C    6-bit  as GM_PK_N6                     as GM_PK_N6                Q6_K
 *   GM_PK_N6H    6-bit  as GM_PK_N6                     as GM_PK_N6                Q6_K
 *
 * The two K-quant kinds keep their scales compact, as the GGUF does (6-bit scales under one f16 per
 * 256 values): f32 scales in the tiles would add 2 bits per weight, a third more bytes than a Q4_K
 * file. Their tiles hold codes only (tile_bytes 256 / 384); after a panel's tiles come the tiles'
 * 32 bytes of scale codes (at sc_at: tile b's at sc_at + 32 b), then one sb_bytes record of f16 row
 * scales per 256 columns (at sb_at + sb_bytes (b / 8)), the panel padded to 64 bytes. Kernels form
 * s = d * sc (and m = -dmin * mn) in f32: the very products an f32 layout would store, so every kind's
 * w is still bit for bit the GGUF's. (Q4_1's and Q5_K's per-block f16 scales are not products of a
 * small integer and a shared scale: they keep f32 s and m in the tile.)
 *
 * so the 16 lanes of a 512-bit register are 16 rows, one broadcast input pair feeds them all, and each
 * block scale is applied once per 16 rows x 16 or 32 columns. Rows past the end of the last panel are
 * zero. The code offsets (-16, -32) are applied to the integer dot through the input's block sums.
 *
 * Q5_0 also packs as GM_PK_D16 (codes q - 16, d verbatim) where the chosen kernels say so (AVX2:
 * unpacking the fifth bits costs more vector-pipe work than the 8-bit tiles' extra bytes cost there,
 * docs/BENCHMARKS.md "Q5_0 as 8-bit tiles on AVX2"); gm_pack_kind_of says which.
 *
 * On AVX-512 VNNI (not AMX) Q5_0 packs as GM_PK_N5R and Q4_K as GM_PK_N4R, the row form: a step's 64 codes
 * are one 512-bit load, an AND (and a shift for odd steps) and, for N5R, a masked add of 16 from the step's 64
 * plane bits, in the order vpdpbusd wants them; their single-token products take the three int8 terms too
 * (N5D's int16 ones spend more in widening and in the fifth bits' two masked adds per step than the dot
 * products do; N4K's 8-bit tiles a widening, a shift and a vpternlogd a step; docs/BENCHMARKS.md "Q5_0 in row
 * form on AVX-512", "Q4_K in row form"). Their int16 pairs come from the same step bytes through the two byte
 * shuffles N6 takes.
 *
 * Q6_K packs as GM_PK_N6C for the AVX2 kernels (one shift, AND and OR per 32 codes for their high
 * parts) and as GM_PK_N6 for AMX, whose 512-bit loads take a step's 64 codes (16 rows x 4 slots) in
 * the order vpmaddubsw and vpdpwssd want them: a shift, an AND and a vpternlogd per step, no widening
 * (docs/BENCHMARKS.md "Q6_K in row form on AVX-512"). AVX-512 VNNI without AMX packs it as GM_PK_N6H, the
 * same bytes with each step's four columns in one 16-column half (one scale): vpdpbusd sums them into that
 * half's int32 sums, so its int8 products take the inputs' int8 terms in column order (xq->b8n) with one
 * vpdpbusd a step and term (docs/BENCHMARKS.md "Q6_K by halves on AVX-512"). Each kind is read by its
 * kernels and the reference alone (gm_packed_ops_handles).
 *
 * BF16 matrices are packed the same way with the bf16 values in place of the codes (a 1 KiB tile
 * [16 pairs][16 rows][2] bf16, no scales: GM_PK_BF16), which is also the B-operand layout of AMX
 * TDPBF16PS. Their matvec is exact f32 (x in f32); their matmul splits x into three bf16 terms
 * x = hi + mid + lo (all 24 bits of an f32) for AMX, or uses the f32 x on CPUs without AMX.
 *
 * Activations are quantized per 32 values to two int16 terms: x ~ d q1 + (d / 2^15) q2 with
 * d = max|x| / 32767, q1 = round(x / d) and q2 = round((x - d q1) 2^15 / d), so each value is kept to
 * within 2^-31 of its block's largest (f32 keeps 2^-24 of each value) and a product is two exact
 * integer dots (vpdpwssd / vpmaddwd) times d_w d_x: the packed kernels are as accurate as f32 ones
 * (tests/unit/test_reference_270m.c holds them to Hugging Face's logits). The f32 kernels of matvec.h
 * on the file's layout remain (GM_EXACT=1).
 *
 * Batched products (T > 1) on AVX-512 VNNI without AMX take the inputs as three int8 terms instead,
 * x ~ e (b1 + b2 / 254 + b3 / 254^2) with e = max|x| / 127 per 32 values (within 2^-23 of the block's
 * largest), so vpdpbusd multiplies 16 rows x 4 columns of codes (as u8) by 4 broadcast input bytes:
 * 24 instructions per tile and input where the int16 terms take 32. In a block the terms' bytes are
 * ordered as the codes of one lane, step g = 0..7: columns 2g, 2g + 1, 2g + 16, 2g + 17 (pairs g and
 * g + 8). Kinds D16, SM32, N4SM, N5D. Q6_K's scales change at column 16 and vpdpbusd sums two columns of
 * either half: vpmaddubsw leaves columns (2g, 2g + 1) and (2g + 16, 2g + 17) in separate int16 sums, and
 * vpmaddwd / vpdpwssd weigh them with the two 16-column scales. That is AVX2's int8 product for N6C, and
 * AVX-512's for N6 with the first term alone (--precision fast, the screened vocabulary product); N6's
 * exact batched products keep the int16 terms (three int8 terms would cost 1.5 times their vpdpwssd).
 * N6H's int8 products read xq->b8n, the same terms in column order (bytes 4g .. 4g + 3 of a term: columns
 * 4g .. 4g + 3), where its steps' columns are; its exact batched products keep the int16 terms too (six
 * int32 sums an input).
 *
 * Batched products on AVX2 without VNNI decode each panel's weights to f32, exactly, and multiply the f32
 * inputs (xq->f32): no rounding of x, and one FMA per weight and input where the int16 terms take two
 * vpmaddwd (packed_matmul_avx2.c). */
#ifndef GM_KERNELS_PACKED_H
#define GM_KERNELS_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/dtype.h"

enum { GM_PANEL_ROWS = 16, GM_XQ_BLOCK = 32, GM_X8_SUMS = 6 /* gm_xq.s8 per block */ };
/* Bumped whenever the packed layout of any kind changes: weight caches (model/weight_cache.h) written
 * by another layout are ignored. */
enum { GM_PACK_LAYOUT_VERSION = 3 };

typedef enum gm_pack_kind {
    GM_PK_NONE = 0,
    GM_PK_D16,
    GM_PK_SM32,
    GM_PK_N4SM,
    GM_PK_N5D,
    GM_PK_N6,
    GM_PK_BF16,
    GM_PK_N4K,
    GM_PK_N6C,
    GM_PK_N5R,
    GM_PK_N4R,
    GM_PK_N6H
} gm_pack_kind;

typedef struct gm_packed {
    gm_pack_kind kind;
    gm_dtype from;        /* the GGUF type it was packed from */
    size_t rows, cols;    /* cols is a multiple of 32 */
    size_t tile_bytes;    /* bytes of one 16 x 32 tile (its codes alone for the compact kinds) */
    size_t panel_bytes;   /* tiles * tile_bytes, plus the scale sections of the compact kinds */
    size_t sc_at, sb_at;  /* compact kinds: where a panel's scale codes and its f16 row scales start */
    size_t sb_bytes;      /* bytes of one 256-column record of f16 row scales (64: d, -dmin; 32: d) */
    uint8_t *data;        /* [ceil(rows/16)][cols/32] tiles */
} gm_packed;

/* The packed kind the chosen kernels want for a weight type (GM_PK_NONE for float types: they keep the
 * f32 kernels). */
gm_pack_kind gm_pack_kind_of(gm_dtype type);
/* Whether `kind` holds `type` losslessly: gm_pack_kind_of's answer on some kernels (Q5_0: GM_PK_N5D,
 * GM_PK_N5R or GM_PK_D16; Q4_K: GM_PK_N4K or GM_PK_N4R; Q6_K: GM_PK_N6, GM_PK_N6C or GM_PK_N6H). */
bool gm_pack_kind_holds(gm_pack_kind kind, gm_dtype type);
/* Bytes of the packed form (gm_pack_kind_of's kind) of a rows x cols matrix of `type` (0 when the type is
 * not packed or cols is not a multiple of its block). */
size_t gm_packed_bytes(gm_dtype type, size_t rows, size_t cols);
/* Describe the packed form of a rows x cols matrix of `type` (P->data left NULL). */
void gm_pack_describe(gm_dtype type, size_t rows, size_t cols, gm_packed *P);
/* The same as `kind` (one that gm_pack_kind_holds for the type), whatever the chosen kernels want: the
 * tests and benchmarks of every Q5_0 and Q6_K layout. */
void gm_pack_describe_as(gm_pack_kind kind, gm_dtype type, size_t rows, size_t cols, gm_packed *P);
/* Bytes of P's packed data. */
static inline size_t gm_packed_size(const gm_packed *P) {
    return (P->rows + GM_PANEL_ROWS - 1) / GM_PANEL_ROWS * P->panel_bytes;
}
/* Whether kind k holds Q6_K (codes q + 32, a scale per 16 columns), in row form (by halves) or with crumb pairs */
static inline bool gm_pack_kind_q6(gm_pack_kind k) { return k == GM_PK_N6 || k == GM_PK_N6C || k == GM_PK_N6H; }
/* Whether kind k keeps the compact K-quant scales (packed.h's header), and where tile b's are in a panel. */
static inline bool gm_pack_kind_compact(gm_pack_kind k) {
    return k == GM_PK_N4K || k == GM_PK_N4R || gm_pack_kind_q6(k);
}
/* Whether kind k holds Q4_K (codes q, a scale and a min per 32 columns), in row form or as 8-bit tiles */
static inline bool gm_pack_kind_q4k(gm_pack_kind k) { return k == GM_PK_N4K || k == GM_PK_N4R; }

/* Rows [*s, *e) of 16-row panel p within rows [a, b) */
static inline void gm_panel_rows(size_t p, size_t a, size_t b, size_t *s, size_t *e) {
    *s = p * GM_PANEL_ROWS < a ? a : p * GM_PANEL_ROWS;
    *e = (p + 1) * GM_PANEL_ROWS < b ? (p + 1) * GM_PANEL_ROWS : b;
}
static inline const uint8_t *gm_packed_sc(const gm_packed *P, const uint8_t *panel, size_t b) {
    return panel + P->sc_at + 32 * b;
}
static inline const uint8_t *gm_packed_sb(const gm_packed *P, const uint8_t *panel, size_t b) {
    return panel + P->sb_at + P->sb_bytes * (b / 8);
}
/* A place in one of a packed matrix's streams that run on from panel to panel (the compact kinds' codes, in
 * bytes, or their tiles' scales, in tiles; `per` of them in a panel): the panel and the place in it. The
 * decode prefetch (quant_x86.h) keeps its leads as these and steps them, instead of working each line's
 * place out from the start of the panel. */
typedef struct gm_lead {
    const uint8_t *panel;
    size_t at;
} gm_lead;
/* `at` units on from the start of `panel` */
static inline gm_lead gm_lead_start(const gm_packed *P, const uint8_t *panel, size_t per, size_t at) {
    gm_lead L = {panel, at};
    for (; L.at >= per; L.at -= per) L.panel += P->panel_bytes;
    return L;
}
/* n more units on (n <= per) */
static inline void gm_lead_step(gm_lead *L, const gm_packed *P, size_t per, size_t n) {
    L->at += n;
    if (L->at >= per) L->at -= per, L->panel += P->panel_bytes;
}
/* Row i's f32 scales in tile b of a compact panel: GM_PK_N4K / N4R s = d sc, m = -dmin mn in out[0], out[1];
 * GM_PK_N6 / N6C / N6H s of columns 0-15 and 16-31. The reference for the kernels' vector forms. */
void gm_packed_k_scales(const gm_packed *P, const uint8_t *panel, size_t b, int i, float out[2]);
/* Bytes of one tile of kind k (P->tile_bytes; a constant the kernels' loops unroll on). */
static inline size_t gm_pack_tile_bytes(gm_pack_kind k) {
    switch (k) {
    case GM_PK_D16: return 512 + 32;
    case GM_PK_SM32: return 512 + 128;
    case GM_PK_N4SM: return 256 + 128;
    case GM_PK_N5D: case GM_PK_N5R: return 256 + 64 + 32;
    case GM_PK_N4K: case GM_PK_N4R: return 256; /* the codes: the scales follow the panel's tiles */
    case GM_PK_N6: case GM_PK_N6C: case GM_PK_N6H: return 256 + 128;
    case GM_PK_BF16: return 1024;
    default: return 0;
    }
}
/* Pack rows [r0, r1) of the matrix into P (P->data holds gm_packed_bytes(...)): W points at row r0
 * of the row-major GGUF data, rows `row_bytes` apart. r0 is a multiple of 16 and so is r1 unless
 * r1 == rows, so loaders can pack in chunks and threads disjoint ranges. */
void gm_pack_rows(gm_packed *P, const void *W, size_t row_bytes, size_t r0, size_t r1);
/* The same through the generic per-value path (BF16 has only its fast one): the test reference. */
void gm_pack_rows_ref(gm_packed *P, const void *W, size_t row_bytes, size_t r0, size_t r1);
/* Row r of P as f32, identical to gm_dequant_row of the original row. */
void gm_packed_row(const gm_packed *P, size_t r, float *out);
/* The screening copy of a packed BF16 matrix (the screened vocabulary product reads it in place of the
 * BF16 panels, half the bytes): dst described as gm_pack_describe_as(GM_PK_D16, GM_Q8_0, rows, cols),
 * each row's 32 values of a tile w ~ d q with d = max |w| / 127 rounded up to an f16 and q = rint(w / d),
 * so |w - d q| <= d / 2 (gm_packed_screen_errors with `copy` adds that to the screen's bound). Panels of rows
 * [r0, r1) (r0 a multiple of 16). False where a value is not finite or d would pass the f16 range: no
 * copy then. */
bool gm_pack_screen_copy(const gm_packed *src, gm_packed *dst, size_t r0, size_t r1);

/* T activation vectors prepared for the packed kernels (cols a multiple of 32): quantized per 32
 * values for the quantized kinds, the f32 values and their bf16 split for GM_PK_BF16. A view of
 * columns [c0, c0 + n) (c0 a multiple of 32) offsets q, q2, x, hi, mid, lo by c0, d, s by c0 / 32, qs by
 * c0 / 8, xb by 8 c0. */
typedef struct gm_xq {
    int16_t *q;      /* [T][ldq]: q1 = round(x / d), 4-byte aligned */
    int16_t *q2;     /* [T][ldq]: q2 = round((x - d q1) 32768 / d) */
    float *d;        /* [T][ldd] per 32 values: max |x| / 32767 (0 for an all-zero block) */
    float *s;        /* [T][ldd] d (sum(q1) + sum(q2) / 32768): the block sum for the "+ m" terms */
    int32_t *qs;     /* [T][4 ldd] per block: sum(q1) of values 0-15, 16-31, then sum(q2) of each */
    size_t cols;
    size_t ldq, ldd; /* row strides of q (elements) and of d, s (blocks) */
    const float *x;  /* [T][ldx] the f32 inputs (GM_PK_BF16) */
    size_t ldx;
    uint16_t *hi, *mid, *lo; /* [Tpad][ldq] bf16 split x = hi + mid + lo (the AMX matmuls); rows up to a
                              * multiple of 16 are zero */
    bool split;        /* hi / mid / lo hold this batch (the AMX matmul uses them, else x) */
    int8_t *b8;        /* [T][ld8] per block 96 bytes: terms b1, b2, b3, 32 bytes each in lane order */
    int8_t *b8n;       /* NULL, or [T][ld8] the same terms in column order (GM_PK_N6H's int8 products) */
    float *e8;         /* [T][ldd] per block: max |x| / 127 (0 for an all-zero block, NaN for a bad one) */
    int32_t *s8;       /* [T][GM_X8_SUMS ldd] per block: the sum of each term's 32 values, then each term's
                        * half sums (columns 0-15 in the low int16, 16-31 in the high: Q6_K's offset 32
                        * takes them per 16-column scale) */
    size_t ld8;        /* row stride of b8, b8n in bytes (a view of columns [c0, ..) offsets each by 3 c0, e8 by
                        * c0 / 32, s8 by GM_X8_SUMS c0 / 32) */
    bool has8;         /* b8 / e8 / s8 (and b8n where there is one) hold this batch (gm_quantize_x8) */
    bool f32;          /* the batched products (T > 1) of every kind read x: decoded weights times the f32
                        * inputs (gm_packed_f32_matmul) */
    bool fast;         /* llama.cpp's rounding (--precision fast): the int8 products use the first term b1
                        * alone (x rounded to 8 bits per 32 values), and the BF16 matmul (T > 1, with the
                        * split) the bf16 hi alone; never set with the AMX matmul */
    int32_t *xb;       /* [cols / 2][2][8], 32-byte aligned, room for gm_xq_xb_bytes (NULL: none): one input's
                        * column pairs as the AVX2 matvec's vpmaddwd wants them, the (q1, q1') int16 pair of
                        * columns 2p, 2p + 1 in all 8 lanes, then the (q2, q2') pair */
    bool has_xb;       /* xb holds this input (gm_quantize_x with T = 1 on kernels that read it) */
} gm_xq;

/* Whether kind k's int8 products also read the terms in column order (xq->b8n): GM_PK_N6H's. */
static inline bool gm_pack_kind_reads_b8n(gm_pack_kind k) { return k == GM_PK_N6H; }
/* Whether xq has room for the int8 terms kind k's int8 products read: b8, and b8n where k reads it. Where
 * not, k's products read the int16 terms, which the caller then prepares. */
static inline bool gm_xq_room8_for(const gm_xq *xq, gm_pack_kind k) {
    return xq->b8 && (xq->b8n || !gm_pack_kind_reads_b8n(k));
}
/* ... and they hold this batch (has8) */
static inline bool gm_xq_int8_for(const gm_xq *xq, gm_pack_kind k) { return xq->has8 && gm_xq_room8_for(xq, k); }
/* Bytes of xq->xb for inputs of `cols` columns. */
static inline size_t gm_xq_xb_bytes(size_t cols) { return cols / 2 * 2 * 8 * sizeof(int32_t); }

/* Quantize T rows of x (row t at x + t * ldx) into xq, contiguously (sets cols, ldq = cols,
 * ldd = cols / 32). The same on every path, bit for bit. */
void gm_quantize_x(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);

/* The three int8 terms of T rows of x (sets cols, ldd = cols / 32, ld8 = 3 cols and has8; the int16
 * terms are untouched), bit for bit the same on every path. */
void gm_quantize_x8(const float *x, size_t ldx, size_t T, size_t cols, gm_xq *xq);
/* A view of xq whose row 0 is row t0 of a batch of `cols`-column inputs as gm_quantize_x and gm_quantize_x8
 * lay it out (their terms, scales and sums; xb NULL: a batch has no one input's pairs). Threads quantize
 * disjoint rows of one batch through such views, then a call of each with T = 0 on xq itself sets its
 * layout (cols, strides, has8) as one call over all rows would. */
gm_xq gm_xq_rows(const gm_xq *xq, size_t cols, size_t t0);
/* Whether the chosen kernels multiply packed matrices of the kinds above by several inputs with the
 * int8 terms: gm_packed_matmul then uses them when xq->has8 (and the int16 terms for GM_PK_N6 and GM_PK_N6H
 * unless fast). */
bool gm_packed_int8_matmul(void);
/* Whether kind k's products take the int8 terms, with all three (fast false) or the first alone (fast, as
 * xq->fast): GM_PK_N6 only with one, where vpmaddubsw + vpdpwssd per step cost half the int16 terms' vpdpwssd
 * (with three, 1.5 times); GM_PK_N6H also only with one (three terms' six sums an input leave too few
 * registers to share a tile among inputs). */
bool gm_packed_kind_int8(gm_pack_kind k, bool fast);
/* Whether the chosen kernels' exact single-token product (gm_packed_matvec) of kind k is faster with the
 * int8 terms: the row-form kinds GM_PK_N5R, GM_PK_N4R and GM_PK_N6H (packed.h's header). Its matvec reads them
 * where gm_xq_int8_for says they are all there, else the int16 terms; callers quantize the int8 terms of a
 * single input where this says so. */
bool gm_packed_decode_int8(gm_pack_kind k);

/* Points xq at f32 inputs and, with `split`, fills hi / mid / lo (T rounded up to a multiple of 16
 * rows, the extra rows zero; they need room for that), the 32-value sums of x in s, and sets
 * xq->split. */
void gm_prepare_x_bf16(const float *x, size_t ldx, size_t T, size_t cols, bool split, gm_xq *xq);
/* Whether the chosen kernels multiply packed matrices by several inputs with AMX: gm_packed_matmul
 * then wants every kind's inputs prepared by gm_prepare_x_bf16 with the split (matvec still wants
 * gm_quantize_x for the quantized kinds). Inputs quantized instead (no split) take the AVX-512 VNNI
 * products, int8 or int16 terms, as on a CPU without AMX. */
bool gm_packed_amx_matmul(void);
/* The fewest inputs from which AMX multiplies a packed matrix of kind k faster than the VNNI products:
 * AMX converts every code to bf16 whether it serves 1 token or 16, the VNNI products' work grows with
 * the tokens; the K-quants' codes cost more to convert (docs/BENCHMARKS.md, "Short prompts without
 * AMX": a 4B-shaped Q4_K_M's 4-token prefill 1.8x faster). BF16 keeps AMX throughout. */
enum { GM_AMX_MIN_TOKENS_MAX = 13 };
static inline size_t gm_packed_amx_min_tokens(gm_pack_kind k) {
    return k == GM_PK_BF16 ? 2 : gm_pack_kind_q4k(k) ? GM_AMX_MIN_TOKENS_MAX : 7;
}

/* Whether the chosen kernels multiply packed matrices of every kind by several inputs in f32, the
 * weights decoded to f32 a panel at a time (AVX2 without VNNI, where that beats the int16 terms):
 * gm_packed_matmul then wants x set by gm_prepare_x_bf16 (no split) and xq->f32. GM_INT16_MATMUL=1
 * turns it off, to compare. */
bool gm_packed_f32_matmul(void);

/* Whether the chosen kernels' single-input products read xq->xb (gm_quantize_x fills it when it is
 * there): callers that keep an xq for one-token products give it gm_xq_xb_bytes of room. */
bool gm_packed_matvec_xb(void);

/* y[r - r0] = sum_c W[r][c] * xhat[c] for r in [r0, r1): rows of the packed matrix against the
 * prepared vector (token 0 of xq). */
void gm_packed_matvec(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, float *y);
/* Y[t * ldy + r - r0] for T quantized inputs. */
void gm_packed_matmul(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, size_t T, float *Y, size_t ldy);

/* Screening a product for its largest rows (greedy and top-k decoding, model/vocab_screen.c): y[r - r0]
 * = row r times the first int8 term of x alone (xq->has8: x rounded to 8 bits per 32 values, as
 * --precision fast), and bound[r - r0] = sum over blocks b of |d[r][b]| eb[b] >= |y[r - r0] - the exact
 * value gm_packed_matvec gives row r| (d[r][b]: the row's scale in block b; Q6_K's the larger of its two
 * 16-column scales there, d sc), with eb from gm_packed_screen_errors: a row whose y + bound falls
 * below another's y - bound cannot be the larger. Only where gm_packed_can_screen(P->kind) (GM_PK_D16, and
 * Q6_K in the kind the kernels pack it as: N6C on AVX2, N6H on AVX-512): on other kinds and kernels it writes
 * nothing. N6H's screen reads xq->b8n; an xq without them takes the reference's (the same values, slowly). */
bool gm_packed_can_screen(gm_pack_kind k);
void gm_packed_screen(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y, float *bound);
/* The same in f64 on the scalar path (the tests' reference; the scalar kernels do not screen). */
void gm_packed_screen_ref(const gm_packed *P, size_t r0, size_t r1, const gm_xq *xq, const float *eb, float *y,
                          float *bound);
/* eb[b] for the P->cols / 32 blocks of x (quantized in xq, int8 terms): the largest |code| of P's kind
 * times sum |x - x's first int8 term| over the block, plus a slack for the f32 roundings of the screen
 * and of the exact product (docs/DESIGN.md, "The screened vocabulary product"); with `copy` (P is a
 * screening copy, gm_pack_screen_copy) also the copy's rounding, half a scale per value: sum |x| / 2. */
void gm_packed_screen_errors(const gm_packed *P, const float *x, const gm_xq *xq, float *eb, bool copy);

#endif
