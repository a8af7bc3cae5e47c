/* The non-matrix operations of the Gemma 3 forward pass, in f32. */
#ifndef GM_KERNELS_OPS_H
#define GM_KERNELS_OPS_H

#include <stddef.h>

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]  (w already holds 1 + scale) ; out may alias x */
void gm_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps);
/* Split-half RoPE on one head of dim H: pairs (i, i + H/2), angle = pos * inv_freq[i]. */
void gm_rope(float *head, size_t H, int pos, const float *inv_freq /* [H/2] */);
/* inv_freq[i] = 1 / (base^(2i/H) * scale), computed in f32 as transformers does. */
void gm_rope_inv_freq(float *inv_freq, size_t H, float base, float scale);
/* x = gelu_tanh(gate) * up, elementwise */
void gm_geglu(float *out, const float *gate, const float *up, size_t n);
float gm_dot_f32(const float *a, const float *b, size_t n);
/* y += a * x */
void gm_axpy_f32(float *y, float a, const float *x, size_t n);

#endif
