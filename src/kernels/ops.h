/* The non-matrix operations of the Gemma 3 forward pass, in f32, and the sampler's vocabulary passes.
 * rmsnorm, geglu, the attention rows, argmax, the top-p masses and the panel bounds have SIMD versions
 * picked at run time
 * (ops_avx512.c; the scalar code in ops.c is their reference); they differ from it only by summation
 * order and by exp / tanh accurate to a few ulp. */
#ifndef GM_KERNELS_OPS_H
#define GM_KERNELS_OPS_H

#include <stdbool.h>
#include <stddef.h>

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]  (w already holds 1 + scale) ; out may alias x */
void gm_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps);
/* Split-half RoPE on one head of dim H: pairs (i, i + H/2), angle = pos * inv_freq[i]. */
void gm_rope(float *head, size_t H, int pos, const float *inv_freq /* [H/2] */);
/* The same rotation from a table: cs[i] = cos(pos * inv_freq[i]), cs[H/2 + i] = sin(...), as gm_rope
 * computes them (gm_rope_table fills it), so both give identical results. */
void gm_rope_table(float *cs /* [H] */, size_t H, int pos, const float *inv_freq);
void gm_rope_apply(float *head, size_t H, const float *cs);
/* inv_freq[i] = 1 / (base^(2i/H) * scale), computed in f32 as transformers does. */
void gm_rope_inv_freq(float *inv_freq, size_t H, float base, float scale);
/* x = gelu_tanh(gate) * up, elementwise */
void gm_geglu(float *out, const float *gate, const float *up, size_t n);
float gm_dot_f32(const float *a, const float *b, size_t n);
/* The index of the first largest of x[0..n) (n >= 1), NaNs skipped (NaN at 0: 0), as the loop
 * `if (x[i] > x[best]) best = i` from best = 0 gives it: greedy decoding over the vocabulary. */
size_t gm_argmax_f32(const float *x, size_t n);
/* The softmax masses of a top-p search, in f64: sums[j] = the sum of e^(x[i] - max) over the i with
 * x[i] >= floors[j] (j < nf, nf <= GM_EXP_SUMS_MAX), and sums[nf] = the sum over all i. max must be
 * finite and >= every x[i]; -inf entries add 0. The SIMD version evaluates e^y to about 1 ulp of f64. */
#define GM_EXP_SUMS_MAX 8
void gm_exp_sums_f32(const float *x, size_t n, float max, const float *floors, int nf, double *sums);
/* y += a * x */
void gm_axpy_f32(float *y, float a, const float *x, size_t n);
/* The screened vocabulary product's panel summaries (model/vocab_screen.h): for each 16-row panel p of
 * rows [a, b) (y[r - a], bound[r - a]; whole panels but for a cut at a or b), lo[p - a / 16] = the largest
 * y - bound and hi[p - a / 16] the largest y + bound of its rows, in f64; a NaN lower bound is left out
 * (-inf when all are), a NaN upper bound makes hi +inf. */
void gm_panel_bounds(size_t a, size_t b, const float *y, const float *bound, double *lo, double *hi);

/* Attention of up to GM_ATTN_ROWS_MAX query rows that share one kv head: row i sees positions
 * [first[i], last[i]]; position s's key is at K + (s % slots) * stride elements (values likewise), f32 or
 * f16 (kv_f16). Row i's output out[i] = sum_s softmax_s(q_i . k_s [softcapped]) v_s. scores: n * (max
 * last - min first + 1) floats of scratch. Queries are already scaled. The rows are taken in groups of 4
 * (0-3, 4-7, ...) that the SIMD kernels treat as one: a prefill passes the query heads of a few
 * consecutive tokens, a group per token (or per two tokens of two heads each), so that every key and value
 * comes from memory once for all of them instead of once per token; each row's result (keys and values
 * finite) does not depend on which rows share its call.
 *
 * A piece of a row's positions (split decoding: threads take pieces of one long row, each reading its
 * part of the cache once): with max_out and sum_out set, row i's output is left unnormalized,
 * out[i] = sum_s e^(score_s - m) v_s with m = max_out[i] = its largest score and
 * sum_out[i] = sum_s e^(score_s - m); gm_attention_merge then combines the pieces. A row with
 * first > last is an empty piece: out 0, max -inf, sum 0. */
enum { GM_ATTN_ROWS_MAX = 32 };
typedef struct gm_attn_rows {
    int n;
    const float *q[GM_ATTN_ROWS_MAX];
    float *out[GM_ATTN_ROWS_MAX];
    int first[GM_ATTN_ROWS_MAX], last[GM_ATTN_ROWS_MAX];
    float *max_out, *sum_out; /* [n], or NULL for normalized outputs */
    bool kv_f16;              /* K and V hold IEEE half values (--precision fast), else f32 */
} gm_attn_rows;
void gm_attention_rows(const gm_attn_rows *a, const void *K, const void *V, size_t stride, int slots, size_t H,
                       float softcap, float *scores);
/* out[H] = the softmax-weighted sum of one row from the unnormalized outputs of its n pieces
 * (part + i * part_stride, with max_out and sum_out as gm_attention_rows left them). */
void gm_attention_merge(float *out, const float *part, size_t part_stride, const float *maxes, const float *sums, int n,
                        size_t H);

#endif
