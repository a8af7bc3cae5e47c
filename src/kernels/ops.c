#include "kernels/ops.h"

#include <math.h>

void gm_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps) {
    double ss = 0; /* double: the sum over 5376 squares must not depend on summation order much */
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (size_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

void gm_rope_inv_freq(float *inv_freq, size_t H, float base, float scale) {
    for (size_t i = 0; i < H / 2; i++) {
        float expo = (float)(2 * i) / (float)H;
        inv_freq[i] = 1.0f / powf(base, expo) / scale;
    }
}

void gm_rope(float *head, size_t H, int pos, const float *inv_freq) {
    size_t half = H / 2;
    for (size_t i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        float c = cosf(ang), s = sinf(ang);
        float a = head[i], b = head[i + half];
        head[i] = a * c - b * s;
        head[i + half] = b * c + a * s;
    }
}

void gm_geglu(float *out, const float *gate, const float *up, size_t n) {
    const float k0 = 0.7978845608028654f; /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        float t = tanhf(k0 * (g + 0.044715f * g * g * g));
        out[i] = 0.5f * g * (1.0f + t) * up[i];
    }
}

float gm_dot_f32(const float *a, const float *b, size_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

void gm_axpy_f32(float *y, float a, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}
