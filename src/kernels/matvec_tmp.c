/* TEMPORARY scalar kernels (replaced by the kernels branch). */
#include <math.h>
#include <string.h>

#include "kernels/matvec.h"

float gm_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        if (m == 0) bits = s;
        else {
            float f = ldexpf((float)m, -24);
            return s ? -f : f;
        }
    } else if (e == 31) bits = s | 0x7f800000u | (m << 13);
    else bits = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
uint16_t gm_f32_to_f16(float f) { (void)f; return 0; }
float gm_bf16_to_f32(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
uint16_t gm_f32_to_bf16(float f) { uint32_t b; memcpy(&b, &f, 4); return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16); }

static float h2f(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return gm_f16_to_f32(h); }

static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

void gm_dequant_row(gm_dtype type, const void *row, float *y, size_t n) {
    const uint8_t *p = row;
    switch (type) {
    case GM_F32: memcpy(y, row, n * 4); return;
    case GM_F16: for (size_t i = 0; i < n; i++) y[i] = h2f(p + 2 * i); return;
    case GM_BF16: for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); y[i] = gm_bf16_to_f32(h); } return;
    case GM_Q8_0:
        for (size_t b = 0; b < n / 32; b++, p += 34) { float d = h2f(p); for (int j = 0; j < 32; j++) y[b * 32 + j] = d * (int8_t)p[2 + j]; }
        return;
    case GM_Q5_0:
        for (size_t b = 0; b < n / 32; b++, p += 22) {
            float d = h2f(p); uint32_t qh; memcpy(&qh, p + 2, 4); const uint8_t *qs = p + 6;
            for (int j = 0; j < 16; j++) {
                int x0 = (qs[j] & 15) | (((qh >> j) << 4) & 0x10), x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
                y[b * 32 + j] = d * (x0 - 16); y[b * 32 + j + 16] = d * (x1 - 16);
            }
        }
        return;
    case GM_Q4_K:
        for (size_t b = 0; b < n / 256; b++, p += 144) {
            float d = h2f(p), dmin = h2f(p + 2); const uint8_t *sc = p + 4, *q = p + 16; float *o = y + b * 256;
            for (int c = 0, is = 0; c < 4; c++, is += 2, q += 32) {
                uint8_t s0, m0, s1, m1; scale_min_k4(is, sc, &s0, &m0); scale_min_k4(is + 1, sc, &s1, &m1);
                for (int l = 0; l < 32; l++) *o++ = d * s0 * (q[l] & 15) - dmin * m0;
                for (int l = 0; l < 32; l++) *o++ = d * s1 * (q[l] >> 4) - dmin * m1;
            }
        }
        return;
    case GM_Q6_K:
        for (size_t b = 0; b < n / 256; b++, p += 210) {
            const uint8_t *ql = p, *qh = p + 128; const int8_t *sc = (const int8_t *)(p + 192); float d = h2f(p + 208);
            float *o = y + b * 256;
            for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, o += 128)
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = (int)((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = (int)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    o[l] = d * sc[is] * q1; o[l + 32] = d * sc[is + 2] * q2; o[l + 64] = d * sc[is + 4] * q3; o[l + 96] = d * sc[is + 6] * q4;
                }
        }
        return;
    default: memset(y, 0, n * 4); return;
    }
}

void gm_matvec(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *x, float *y) {
    float tmp[32768];
    for (size_t r = 0; r < rows; r++) {
        gm_dequant_row(type, (const uint8_t *)W + r * row_bytes, tmp, cols);
        double s = 0;
        for (size_t c = 0; c < cols; c++) s += (double)tmp[c] * x[c];
        y[r] = (float)s;
    }
}

void gm_matmul(gm_dtype type, const void *W, size_t row_bytes, size_t rows, size_t cols, const float *X, size_t T, float *Y, size_t ldy) {
    float tmp[32768];
    for (size_t r = 0; r < rows; r++) {
        gm_dequant_row(type, (const uint8_t *)W + r * row_bytes, tmp, cols);
        for (size_t t = 0; t < T; t++) {
            double s = 0;
            for (size_t c = 0; c < cols; c++) s += (double)tmp[c] * X[t * cols + c];
            Y[t * ldy + r] = (float)s;
        }
    }
}

const char *gm_kernels_isa(void) { return "tmp-scalar"; }
