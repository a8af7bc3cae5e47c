/* Scalar reference of the non-matrix operations (ops.h), and the entry points that dispatch to the
 * SIMD versions. */
#include "kernels/ops.h"

#include <math.h>

#include "kernels/kernels_internal.h"
#include "kernels/matvec.h"
#include "kernels/packed.h"

void gm_rmsnorm_ref(float *out, const float *x, const float *w, size_t n, float eps) {
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

void gm_rope_table(float *cs, size_t H, int pos, const float *inv_freq) {
    size_t half = H / 2;
    for (size_t i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        cs[i] = cosf(ang);
        cs[half + i] = sinf(ang);
    }
}

void gm_rope_apply(float *head, size_t H, const float *cs) {
    size_t half = H / 2;
    for (size_t i = 0; i < half; i++) {
        float c = cs[i], s = cs[half + i];
        float a = head[i], b = head[i + half];
        head[i] = a * c - b * s;
        head[i + half] = b * c + a * s;
    }
}

void gm_rope(float *head, size_t H, int pos, const float *inv_freq) {
    float cs[1024];
    if (H > 1024) {
        for (size_t i = 0; i < H / 2; i++) {
            float ang = (float)pos * inv_freq[i];
            float c = cosf(ang), s = sinf(ang);
            float a = head[i], b = head[i + H / 2];
            head[i] = a * c - b * s;
            head[i + H / 2] = b * c + a * s;
        }
        return;
    }
    gm_rope_table(cs, H, pos, inv_freq);
    gm_rope_apply(head, H, cs);
}

void gm_geglu_ref(float *out, const float *gate, const float *up, size_t n) {
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

/* q . (key row s) and y += w (value row s), the row f32 or f16 */
static float dot_kv(const float *q, const void *K, size_t off, bool f16, size_t H) {
    if (!f16) return gm_dot_f32(q, (const float *)K + off, H);
    const uint16_t *k = (const uint16_t *)K + off;
    float s = 0;
    for (size_t c = 0; c < H; c++) s += q[c] * gm_f16_to_f32(k[c]);
    return s;
}

static void axpy_kv(float *y, float w, const void *V, size_t off, bool f16, size_t H) {
    if (!f16) {
        gm_axpy_f32(y, w, (const float *)V + off, H);
        return;
    }
    const uint16_t *v = (const uint16_t *)V + off;
    for (size_t c = 0; c < H; c++) y[c] += w * gm_f16_to_f32(v[c]);
}

void gm_attention_rows_ref(const gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots, size_t H,
                           float softcap, float *scores) {
    int lo = a->first[0], hi = a->last[0];
    for (int i = 1; i < a->n; i++) {
        if (a->first[i] < lo) lo = a->first[i];
        if (a->last[i] > hi) hi = a->last[i];
    }
    for (int i = 0; i < a->n; i++) {
        size_t len = hi >= lo ? (size_t)(hi - lo + 1) : 0;
        float *sc = scores + (size_t)i * len; /* sc[s - lo] for s in [first, last] */
        float mx = -INFINITY;
        for (int s = a->first[i]; s <= a->last[i]; s++) {
            float v = dot_kv(a->q[i], K, (size_t)(s % slots) * stride, a->kv_f16, H);
            if (softcap > 0) v = softcap * tanhf(v / softcap);
            sc[s - lo] = v;
            if (v > mx) mx = v;
        }
        double sum = 0;
        for (int s = a->first[i]; s <= a->last[i]; s++) {
            float e = expf(sc[s - lo] - mx);
            sc[s - lo] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        if (a->max_out) { /* a piece: unnormalized */
            a->max_out[i] = mx;
            a->sum_out[i] = (float)sum;
            inv = 1.0f;
        }
        for (size_t c = 0; c < H; c++) a->out[i][c] = 0.0f;
        for (int s = a->first[i]; s <= a->last[i]; s++)
            axpy_kv(a->out[i], sc[s - lo] * inv, V, (size_t)(s % slots) * stride, a->kv_f16, H);
    }
}

/* an empty piece weighs nothing; anything else (NaN included) goes through */
static float piece_weight(float max, float sum, float m) { return max == -INFINITY && sum == 0 ? 0.0f : expf(max - m); }

void gm_attention_merge(float *out, const float *part, size_t part_stride, const float *maxes, const float *sums, int n,
                        size_t H) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = maxes[i] > m ? maxes[i] : m;
    double total = 0;
    for (int i = 0; i < n; i++) total += (double)piece_weight(maxes[i], sums[i], m) * sums[i];
    float inv = (float)(1.0 / total);
    for (size_t c = 0; c < H; c++) out[c] = 0.0f;
    for (int i = 0; i < n; i++) {
        float w = piece_weight(maxes[i], sums[i], m);
        if (w != 0.0f) gm_axpy_f32(out, w * inv, part + (size_t)i * part_stride, H);
    }
}

size_t gm_argmax_f32_ref(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void gm_exp_sums_f32_ref(const float *x, size_t n, float max, const float *floors, int nf, double *sums) {
    for (int j = 0; j <= nf; j++) sums[j] = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = exp((double)x[i] - (double)max);
        sums[nf] += e;
        for (int j = 0; j < nf; j++)
            if (x[i] >= floors[j]) sums[j] += e;
    }
}

/* The largest lower and upper bound of n rows (a NaN lower bound left out, a NaN upper bound: +inf) */
static void panel_rows_bounds(const float *y, const float *bound, size_t n, double *lo, double *hi) {
    double l = -INFINITY, h = -INFINITY;
    bool nan = false;
    for (size_t r = 0; r < n; r++) {
        double v = (double)y[r], d = (double)bound[r], down = v - d, up = v + d;
        l = down > l ? down : l; /* a NaN compares false: left out */
        h = up > h ? up : h;
        nan |= up != up;
    }
    *lo = l;
    *hi = nan ? INFINITY : h;
}

static void panel_bounds_ref(const float *y, const float *bound, size_t panels, double *lo, double *hi) {
    for (size_t p = 0; p < panels; p++)
        panel_rows_bounds(y + GM_PANEL_ROWS * p, bound + GM_PANEL_ROWS * p, GM_PANEL_ROWS, lo + p, hi + p);
}

const gm_vec_ops gm_vec_scalar = {gm_rmsnorm_ref, gm_geglu_ref, gm_attention_rows_ref, gm_argmax_f32_ref,
                                  gm_exp_sums_f32_ref, panel_bounds_ref};

/* Runs of whole panels go to the chosen kernel, a panel cut at a or b to the loop over its rows */
void gm_panel_bounds(size_t a, size_t b, const float *y, const float *bound, double *lo, double *hi) {
    const size_t P = GM_PANEL_ROWS, p0 = a / P;
    const gm_vec_ops *ops = gm_vec_ops_chosen();
    for (size_t p = p0; p * P < b;) {
        size_t s, e;
        gm_panel_rows(p, a, b, &s, &e);
        if (e - s == P) { /* s = p P: the whole panels from p on */
            size_t n = (b - s) / P;
            ops->panel_bounds(y + (s - a), bound + (s - a), n, lo + (p - p0), hi + (p - p0));
            p += n;
        } else {
            panel_rows_bounds(y + (s - a), bound + (s - a), e - s, lo + (p - p0), hi + (p - p0));
            p++;
        }
    }
}

size_t gm_argmax_f32(const float *x, size_t n) { return gm_vec_ops_chosen()->argmax(x, n); }

void gm_exp_sums_f32(const float *x, size_t n, float max, const float *floors, int nf, double *sums) {
    gm_vec_ops_chosen()->exp_sums(x, n, max, floors, nf, sums);
}

void gm_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps) {
    gm_vec_ops_chosen()->rmsnorm(out, x, w, n, eps);
}

void gm_geglu(float *out, const float *gate, const float *up, size_t n) { gm_vec_ops_chosen()->geglu(out, gate, up, n); }

void gm_attention_rows(const gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots, size_t H,
                       float softcap, float *scores) {
    if (a->n < 1) return;
    gm_vec_ops_chosen()->attention_rows(a, K, V, stride, slots, H, softcap, scores);
}
