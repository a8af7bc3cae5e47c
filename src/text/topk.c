#include "text/topk.h"

#include <math.h>
#include <stdlib.h>

#include "base/status.h"
#include "kernels/ops.h"

/* a ranks before b: larger value, or equal value and smaller index. */
static inline int ranks_before(const float *v, int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
}

/* Min-heap on rank: the root is the worst kept entry. */
static void sift_down(const float *v, int32_t *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && ranks_before(v, h[w], h[l])) w = l;
        if (r < n && ranks_before(v, h[w], h[r])) w = r;
        if (w == i) return;
        int32_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void sift_up(const float *v, int32_t *h, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ranks_before(v, h[p], h[i])) return;
        int32_t t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

void gm_topk_indices(const float *v, size_t n, size_t k, int32_t *idx) {
    if (k == 0) return;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m == k && i % 64 == 0 && n - i >= 64) {
            /* Once the heap is full, skip whole blocks with nothing above its worst entry (a loop the
             * compiler vectorizes). Equal values never displace it: their index is larger. */
            float worst = v[idx[0]];
            int above = 0;
            for (size_t j = 0; j < 64; j++) above |= v[i + j] > worst;
            if (!above) {
                i += 63;
                continue;
            }
        }
        int32_t c = (int32_t)i;
        if (m < k) {
            idx[m] = c;
            sift_up(v, idx, m++);
        } else if (ranks_before(v, c, idx[0])) {
            idx[0] = c;
            sift_down(v, idx, m, 0);
        }
    }
    /* Heap sort in place: repeatedly move the worst to the end, so idx ends best-first. */
    for (size_t end = m; end > 1; end--) {
        int32_t t = idx[0];
        idx[0] = idx[end - 1];
        idx[end - 1] = t;
        sift_down(v, idx, end - 1, 0);
    }
}

gm_status gm_check_logits(const float *v, size_t n, const char *what) {
    /* First a branch-free pass in blocks of 64 (the compiler vectorizes it: NaN and +inf are the values
     * not below +inf): a 262144-entry vocabulary in ~30 us instead of ~400 with a branch per value. */
    int bad = 0;
    size_t i = 0;
    for (; i + 64 <= n && !bad; i += 64)
        for (size_t j = 0; j < 64; j++) bad |= !(v[i + j] < INFINITY);
    for (; i < n; i++) bad |= !(v[i] < INFINITY);
    if (!bad) return GM_OK;
    for (i = 0; i < n; i++) { /* name the first one */
        if (isnan(v[i])) return gm_fail(GM_ERR_ARG, "%s[%zu] is NaN", what, i);
        if (isinf(v[i]) && v[i] > 0) return gm_fail(GM_ERR_ARG, "%s[%zu] is +inf", what, i);
    }
    return GM_OK;
}

gm_status gm_logits_top_k(const float *logits, size_t vocab, size_t k, gm_token_prob *out, size_t *n_out) {
    if (n_out) *n_out = 0;
    if (!logits || !out || !n_out) return gm_fail(GM_ERR_ARG, "gm_logits_top_k: logits, out and n_out must not be NULL");
    if (vocab == 0 || vocab > INT32_MAX) return gm_fail(GM_ERR_ARG, "gm_logits_top_k: vocab %zu out of range", vocab);
    GM_TRY(gm_check_logits(logits, vocab, "logits"));
    if (k > vocab) k = vocab;
    float max = logits[gm_argmax_f32(logits, vocab)];
    /* Stable softmax: exp(x - max) <= 1, summed in double over the whole vocabulary. */
    double sum = 0.0;
    if (max > -INFINITY) gm_exp_sums_f32(logits, vocab, max, NULL, 0, &sum);
    int32_t *idx = malloc((k ? k : 1) * sizeof *idx);
    if (!idx) return gm_fail(GM_ERR_NOMEM, "gm_logits_top_k: %zu entries", k);
    gm_topk_indices(logits, vocab, k, idx);
    for (size_t j = 0; j < k; j++) {
        float x = logits[idx[j]];
        out[j].id = idx[j];
        out[j].logit = x;
        out[j].prob = sum > 0.0 ? exp((double)x - (double)max) / sum : 0.0;
    }
    free(idx);
    *n_out = k;
    return GM_OK;
}
