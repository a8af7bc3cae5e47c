/* Scalar dequantization, one function per ggml block type, written to compute exactly what the gguf
 * package's numpy dequantizers (and ggml-quants.c) compute. Every product below (f16 scale x small
 * integer) is exact in f32, so only the "+ min" / "- min" steps round, once, as in the references. */
#include "kernels/kernels_internal.h"

#define F16(p) gm_f16_to_f32(gm_kernels_le16(p))

/* Q4_0: {f16 d; u8 qs[16]} -> y[j] = d * ((qs[j] & 15) - 8), y[j + 16] = d * ((qs[j] >> 4) - 8). */
static void block_q4_0(const uint8_t *b, float *y) {
    float d = F16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 15) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

/* Q4_1: {f16 d, m; u8 qs[16]} -> y = d * q + m. */
static void block_q4_1(const uint8_t *b, float *y) {
    float d = F16(b), m = F16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 15) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* Q5_0: {f16 d; u8 qh[4]; u8 qs[16]}; bit j of the little-endian qh word is element j's 5th bit. */
static void block_q5_0(const uint8_t *b, float *y) {
    float d = F16(b);
    uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* Q5_1: {f16 d, m; u8 qh[4]; u8 qs[16]} -> y = d * q + m. */
static void block_q5_1(const uint8_t *b, float *y) {
    float d = F16(b), m = F16(b + 2);
    uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* Q8_0: {f16 d; i8 qs[32]} -> y = d * q. */
static void block_q8_0(const uint8_t *b, float *y) {
    float d = F16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = d * (float)qs[j];
}

/* The 8 6-bit (scale, min) pairs of Q4_K / Q5_K packed in 12 bytes (ggml get_scale_min_k4). */
static void scale_min_k4(const uint8_t *q, uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 15) | ((q[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

/* Q4_K: {f16 d, dmin; u8 scales[12]; u8 qs[128]}. Sub-block s (32 values) = d*sc[s]*q - dmin*m[s];
 * sub-blocks 2c and 2c+1 take the low and high nibbles of qs[32c .. 32c+31]. */
static void block_q4_k(const uint8_t *b, float *y) {
    float d = F16(b), dmin = F16(b + 2);
    uint8_t sc[8], m[8];
    scale_min_k4(b + 4, sc, m);
    const uint8_t *qs = b + 16;
    for (int s = 0; s < 8; s++) {
        float ds = d * (float)sc[s], dm = dmin * (float)m[s];
        const uint8_t *q = qs + 32 * (s / 2);
        int shift = 4 * (s & 1);
        for (int l = 0; l < 32; l++) y[32 * s + l] = ds * (float)((q[l] >> shift) & 15) - dm;
    }
}

/* Q5_K: {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K plus bit s of qh[l] as 16. */
static void block_q5_k(const uint8_t *b, float *y) {
    float d = F16(b), dmin = F16(b + 2);
    uint8_t sc[8], m[8];
    scale_min_k4(b + 4, sc, m);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int s = 0; s < 8; s++) {
        float ds = d * (float)sc[s], dm = dmin * (float)m[s];
        const uint8_t *q = qs + 32 * (s / 2);
        int shift = 4 * (s & 1);
        for (int l = 0; l < 32; l++) {
            int v = ((q[l] >> shift) & 15) | ((qh[l] >> s) & 1) << 4;
            y[32 * s + l] = ds * (float)v - dm;
        }
    }
}

/* Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} (d last). Chunk k of 32 values (half h = k/4,
 * kk = k%4): low 4 bits from ql[64h + 32(kk&1) + l] (low nibble for kk < 2, high otherwise), top 2
 * bits from qh[32h + l] >> 2kk; value - 32, times d * scales[8h + 2kk + l/16]. */
static void block_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = F16(b + 208);
    for (int k = 0; k < 8; k++) {
        int h = k / 4, kk = k % 4;
        const uint8_t *lo = ql + 64 * h + 32 * (kk & 1), *hi = qh + 32 * h;
        int shift = kk < 2 ? 0 : 4;
        for (int l = 0; l < 32; l++) {
            int v = ((lo[l] >> shift) & 15) | ((hi[l] >> (2 * kk)) & 3) << 4;
            float ds = d * (float)sc[8 * h + 2 * kk + l / 16];
            y[32 * k + l] = ds * (float)(v - 32);
        }
    }
}

void gm_dequant_row_ref(gm_dtype type, const void *row, float *out, size_t n) {
    const uint8_t *p = row;
    switch (type) {
    case GM_F32:
        for (size_t i = 0; i < n; i++) {
            union { uint32_t u; float f; } v = {(uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                                                (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24};
            out[i] = v.f;
        }
        return;
    case GM_F16:
        for (size_t i = 0; i < n; i++) out[i] = gm_f16_to_f32(gm_kernels_le16(p + 2 * i));
        return;
    case GM_BF16:
        for (size_t i = 0; i < n; i++) out[i] = gm_bf16_to_f32(gm_kernels_le16(p + 2 * i));
        return;
    case GM_Q4_0: for (size_t i = 0; i < n / 32; i++) block_q4_0(p + 18 * i, out + 32 * i); return;
    case GM_Q4_1: for (size_t i = 0; i < n / 32; i++) block_q4_1(p + 20 * i, out + 32 * i); return;
    case GM_Q5_0: for (size_t i = 0; i < n / 32; i++) block_q5_0(p + 22 * i, out + 32 * i); return;
    case GM_Q5_1: for (size_t i = 0; i < n / 32; i++) block_q5_1(p + 24 * i, out + 32 * i); return;
    case GM_Q8_0: for (size_t i = 0; i < n / 32; i++) block_q8_0(p + 34 * i, out + 32 * i); return;
    case GM_Q4_K: for (size_t i = 0; i < n / 256; i++) block_q4_k(p + 144 * i, out + 256 * i); return;
    case GM_Q5_K: for (size_t i = 0; i < n / 256; i++) block_q5_k(p + 176 * i, out + 256 * i); return;
    case GM_Q6_K: for (size_t i = 0; i < n / 256; i++) block_q6_k(p + 210 * i, out + 256 * i); return;
    default: /* not a weight type (loaders refuse these first): defined output rather than garbage */
        for (size_t i = 0; i < n; i++) out[i] = 0.0f;
        return;
    }
}
