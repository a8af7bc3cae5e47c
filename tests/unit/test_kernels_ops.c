/* The SIMD versions of rmsnorm, geglu and attention (kernels/ops.h) against the scalar reference and
 * against f64 evaluations of the formulas, on random non-zero inputs: rmsnorm within 2e-7 relative,
 * geglu within 4e-7 of |gate * up| (the f64 GELU-tanh), attention rows within 1e-5 of sum |p v| with
 * windows, ring-buffer wrap-around, 1-32 rows (and each group of 4 alone: the same bits) and a softcap;
 * attention cut into pieces and merged (split decoding) against the f64 softmax; argmax against the
 * first-maximum loop; the top-p masses against f64 sums; the panel bounds against the f64 maxima of each
 * panel's rows (NaN, inf, ties, signed zeros, ranges cut inside panels); plus the RoPE table against gm_rope. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/matvec.h"
#include "kernels/ops.h"
#include "test_util.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rnd_nonzero(void) { return ((float)(rnd() & 0xffffff) + 0.5f) / 8388608.0f - 1.0f; }

static void test_rmsnorm(const gm_vec_ops *ops, const char *name) {
    static const size_t ns[] = {1, 15, 16, 17, 256, 640, 1152, 2051};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k];
        float *x = malloc(n * 4), *w = malloc(n * 4), *y = malloc((n + 4) * 4);
        for (size_t i = 0; i < n; i++) x[i] = rnd_nonzero() * 30.0f, w[i] = 1.0f + rnd_nonzero();
        for (size_t i = 0; i < n + 4; i++) y[i] = -777.0f;
        ops->rmsnorm(y, x, w, n, 1e-6f);
        double ss = 0;
        for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
        double inv = 1.0 / sqrt(ss / (double)n + 1e-6);
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            double want = x[i] * inv * w[i];
            bad += !(fabs(y[i] - want) <= 2e-7 * fabs(want) + 1e-30);
        }
        for (size_t i = n; i < n + 4; i++) bad += y[i] != -777.0f;
        CHECK(bad == 0, "%s rmsnorm n=%zu: %d values off", name, n, bad);
        ops->rmsnorm(x, x, w, n, 1e-6f); /* in place */
        int same = 1;
        for (size_t i = 0; i < n; i++) same &= x[i] == y[i];
        CHECK(same, "%s rmsnorm in place differs", name);
        free(x);
        free(w);
        free(y);
    }
}

static void test_geglu(const gm_vec_ops *ops, const char *name) {
    static const size_t ns[] = {1, 7, 16, 33, 2048};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k];
        float *g = malloc(n * 4), *u = malloc(n * 4), *y = malloc((n + 4) * 4);
        for (size_t i = 0; i < n; i++) g[i] = rnd_nonzero() * 8.0f, u[i] = rnd_nonzero() * 3.0f;
        g[0] = n > 3 ? -30.0f : g[0];
        for (size_t i = 0; i < n + 4; i++) y[i] = -777.0f;
        ops->geglu(y, g, u, n);
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            double x = g[i];
            double want = 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))) * u[i];
            bad += !(fabs(y[i] - want) <= 4e-7 * fabs(x * u[i]) + 1e-30);
        }
        for (size_t i = n; i < n + 4; i++) bad += y[i] != -777.0f;
        CHECK(bad == 0, "%s geglu n=%zu: %d values off", name, n, bad);
        free(g);
        free(u);
        free(y);
    }
}

/* Up to GM_ATTN_ROWS_MAX rows as a prefill passes them: groups of 4 rows (a token's query heads) whose positions end
 * one further per group (consecutive tokens), or rows ending at different positions inside a group. */
static void test_attention(const gm_vec_ops *ops, const char *name) {
    enum { R = GM_ATTN_ROWS_MAX };
    const size_t H = 256, KV = 2, stride = KV * H;
    const int slots = 48;
    float *K = malloc((size_t)slots * stride * 4), *V = malloc((size_t)slots * stride * 4);
    uint16_t *K16 = malloc((size_t)slots * stride * 2), *V16 = malloc((size_t)slots * stride * 2);
    for (size_t i = 0; i < (size_t)slots * stride; i++) {
        K16[i] = gm_f32_to_f16(rnd_nonzero() * 0.5f), V16[i] = gm_f32_to_f16(rnd_nonzero());
        K[i] = gm_f16_to_f32(K16[i]), V[i] = gm_f16_to_f32(V16[i]); /* the same values in both caches */
    }
    static float q[R][256], want[R][256], got[R][256], got16[R][256], alone[R][256];
    float *scores = malloc(R * 64 * 4);
    for (int trial = 0; trial < 48; trial++) {
        gm_attn_rows a = {0}, b, c;
        a.n = 1 + trial % R;
        int base = 30 + trial * 3; /* positions past `slots`: the ring wraps */
        for (int i = 0; i < a.n; i++) {
            for (size_t col = 0; col < H; col++) q[i][col] = rnd_nonzero() * 0.3f;
            a.q[i] = q[i];
            a.last[i] = base + (trial & 16 ? i / 2 : i / 4);
            a.first[i] = trial % 3 == 0 ? a.last[i] - 20 : trial % 3 == 1 ? a.last[i] : a.last[i] - 35;
        }
        float softcap = trial % 5 == 4 ? 3.0f : 0.0f;
        b = a;
        for (int i = 0; i < a.n; i++) a.out[i] = want[i], b.out[i] = got[i];
        c = b;
        for (int i = 0; i < a.n; i++) c.out[i] = got16[i];
        c.kv_f16 = true;
        const float *Kh = K + H * (size_t)(trial & 1), *Vh = V + H * (size_t)(trial & 1);
        gm_attention_rows_ref(&a, Kh, Vh, stride, slots, H, softcap, scores);
        /* outputs start as NaN (all bits set): every value must be written, none summed onto what was there */
        memset(got, 0xff, sizeof got);
        ops->attention_rows(&b, Kh, Vh, stride, slots, H, softcap, scores);
        /* the f16 cache holding the same values */
        memset(got16, 0xff, sizeof got16);
        memset(alone, 0xff, sizeof alone);
        ops->attention_rows(&c, K16 + H * (size_t)(trial & 1), V16 + H * (size_t)(trial & 1), stride, slots, H, softcap,
                            scores);
        /* each group of 4 rows on its own call: the very same values (ops.h: a row's result does not depend
         * on the rows beside it) */
        for (int g = 0; g < a.n; g += 4) {
            gm_attn_rows one = {0};
            for (int i = g; i < a.n && i < g + 4; i++, one.n++) {
                one.q[one.n] = a.q[i], one.out[one.n] = alone[i];
                one.first[one.n] = a.first[i], one.last[one.n] = a.last[i];
            }
            ops->attention_rows(&one, Kh, Vh, stride, slots, H, softcap, scores);
        }
        int bad = 0, bad16 = 0, moved = 0;
        for (int i = 0; i < a.n; i++)
            for (size_t col = 0; col < H; col++) {
                double mag = 0;
                for (int s = a.first[i]; s <= a.last[i]; s++) mag += fabs(Vh[(size_t)(s % slots) * stride + col]);
                bad += !(fabs(got[i][col] - want[i][col]) <= 1e-5 * mag);
                bad16 += !(fabs(got16[i][col] - want[i][col]) <= 1e-5 * mag);
                moved += memcmp(&got[i][col], &alone[i][col], sizeof(float)) != 0;
            }
        CHECK(bad == 0, "%s attention trial %d (%d rows): %d values off", name, trial, a.n, bad);
        CHECK(bad16 == 0, "%s attention on an f16 cache, trial %d (%d rows): %d values off", name, trial, a.n, bad16);
        CHECK(moved == 0, "%s attention trial %d (%d rows): %d values differ from the groups' own calls", name, trial,
              a.n, moved);
    }
    free(K);
    free(V);
    free(K16);
    free(V16);
    free(scores);
}

/* Split decoding: a row's positions cut into pieces (one of them empty), each piece's unnormalized
 * output from the kernel, merged by gm_attention_merge, against the softmax evaluated in f64 over all
 * positions at once. */
static void test_attention_pieces(const gm_vec_ops *ops, const char *name) {
    const size_t H = 256, stride = H;
    const int slots = 300;
    float *K = malloc((size_t)slots * stride * 4), *V = malloc((size_t)slots * stride * 4);
    for (size_t i = 0; i < (size_t)slots * stride; i++) K[i] = rnd_nonzero() * 0.5f, V[i] = rnd_nonzero();
    float q[4][256], got[4][256];
    float *scores = malloc(4 * (size_t)slots * 4), *part = malloc(4 * 8 * H * 4);
    for (int trial = 0; trial < 12; trial++) {
        int n = 1 + trial % 4, pieces = 1 + trial % 6, len = trial % 3 == 0 ? 7 : 150 + 11 * trial;
        int first = 250 + 13 * trial, last = first + len - 1; /* past `slots`: the ring wraps */
        float softcap = trial % 5 == 4 ? 3.0f : 0.0f;
        for (int i = 0; i < n; i++)
            for (size_t c = 0; c < H; c++) q[i][c] = rnd_nonzero() * 0.3f;
        float mx[4][8], sm[4][8];
        for (int k = 0; k < pieces + 1; k++) { /* piece `pieces` is empty */
            gm_attn_rows a = {0};
            float pm[4], ps[4];
            a.n = n, a.max_out = pm, a.sum_out = ps;
            for (int i = 0; i < n; i++) {
                a.q[i] = q[i];
                a.out[i] = part + ((size_t)i * 8 + (size_t)k) * H;
                a.first[i] = k < pieces ? first + len * k / pieces : last + 1;
                a.last[i] = k < pieces ? first + len * (k + 1) / pieces - 1 : last;
            }
            ops->attention_rows(&a, K, V, stride, slots, H, softcap, scores);
            for (int i = 0; i < n; i++) mx[i][k] = pm[i], sm[i][k] = ps[i];
        }
        int bad = 0;
        for (int i = 0; i < n; i++) {
            gm_attention_merge(got[i], part + (size_t)i * 8 * H, H, mx[i], sm[i], pieces + 1, H);
            double p[512], m = -INFINITY, z = 0;
            for (int s = first; s <= last; s++) {
                const float *k = K + (size_t)(s % slots) * stride;
                double dot = 0;
                for (size_t c = 0; c < H; c++) dot += (double)q[i][c] * k[c];
                if (softcap > 0) dot = softcap * tanh(dot / softcap);
                p[s - first] = dot, m = dot > m ? dot : m;
            }
            for (int s = 0; s < len; s++) z += (p[s] = exp(p[s] - m));
            for (size_t c = 0; c < H; c++) {
                double want = 0, mag = 0;
                for (int s = 0; s < len; s++) {
                    double v = V[(size_t)((first + s) % slots) * stride + c];
                    want += p[s] / z * v, mag += p[s] / z * fabs(v);
                }
                bad += !(fabs(got[i][c] - want) <= 2e-6 * mag + 1e-9);
            }
        }
        CHECK(bad == 0, "%s attention in %d pieces, trial %d (%d rows, %d positions): %d values off", name, pieces,
              trial, n, len, bad);
    }
    free(K);
    free(V);
    free(scores);
    free(part);
}

/* argmax against the first-maximum loop written out here: random values, repeated maxima (the first
 * wins), -0 beside +0, NaNs (skipped; at index 0: 0), all -inf, every length around the vector widths */
static size_t first_max(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void test_argmax(const gm_vec_ops *ops, const char *name) {
    enum { MAXN = 1000 };
    float *x = malloc(MAXN * sizeof *x);
    int bad = 0, cases = 0;
    for (size_t n = 1; n <= MAXN; n += n < 70 ? 1 : 37)
        for (int kind = 0; kind < 6; kind++, cases++) {
            for (size_t i = 0; i < n; i++) x[i] = kind == 5 ? -INFINITY : rnd_nonzero();
            size_t a = rnd() % n, b = rnd() % n;
            if (kind == 1) x[a] = x[b] = 2.0f;                      /* a tie */
            if (kind == 2) x[a] = NAN, x[b] = 3.0f;                 /* NaN skipped */
            if (kind == 3) x[0] = NAN, x[b] = 3.0f;                 /* NaN first */
            if (kind == 4) { /* the largest is zero, +0 at one place and -0 at another: the first wins */
                for (size_t i = 0; i < n; i++) x[i] = -fabsf(x[i]);
                x[a] = 0.0f, x[b] = -0.0f;
            }
            if (kind == 5 && n > 3) x[n / 2] = NAN;
            size_t want = first_max(x, n), got = ops->argmax(x, n);
            if (got != want && bad++ < 5) printf("%s argmax n=%zu kind %d: %zu, want %zu\n", name, n, kind, got, want);
        }
    CHECK(bad == 0, "%s argmax: %d of %d cases differ", name, bad, cases);
    free(x);
}

/* The top-p masses against f64 sums written out here, on widely spread values (distances from the max up
 * to ~800, so some terms underflow to 0), some -inf, bands at assorted floors, every length around the
 * vector widths: within 1e-14 relative (each term to ~1 ulp, summed in another order). */
static void test_exp_sums(const gm_vec_ops *ops, const char *name) {
    enum { MAXN = 3000, NF = GM_EXP_SUMS_MAX };
    float *x = malloc(MAXN * sizeof *x);
    int bad = 0, cases = 0;
    for (size_t n = 1; n <= MAXN; n += n < 70 ? 1 : 101)
        for (int spread = 0; spread < 3; spread++, cases++) {
            static const float scale[3] = {2.0f, 40.0f, 800.0f};
            float max = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                x[i] = rnd_nonzero() * scale[spread];
                if (rnd() % 13 == 0) x[i] = -INFINITY;
                max = x[i] > max ? x[i] : max;
            }
            if (!(max > -INFINITY)) x[0] = max = 0.5f;
            int nf = (int)(rnd() % (NF + 1));
            float floors[NF];
            for (int j = 0; j < nf; j++) floors[j] = max - scale[spread] * (float)(rnd() % 1000) / 500.0f;
            double want[NF + 1] = {0}, got[NF + 1];
            for (size_t i = 0; i < n; i++) {
                double e = exp((double)x[i] - (double)max);
                want[nf] += e;
                for (int j = 0; j < nf; j++) want[j] += x[i] >= floors[j] ? e : 0.0;
            }
            ops->exp_sums(x, n, max, floors, nf, got);
            for (int j = 0; j <= nf; j++)
                if (!(fabs(got[j] - want[j]) <= 1e-14 * want[j]) && bad++ < 5)
                    printf("%s exp_sums n=%zu spread %g sum %d: %.17g, want %.17g\n", name, n, (double)scale[spread], j,
                           got[j], want[j]);
        }
    CHECK(bad == 0, "%s exp_sums: %d of %d cases differ", name, bad, cases);
    free(x);
}

static void test_rope(void) {
    float inv[128], cs[256], a[256], b[256];
    gm_rope_inv_freq(inv, 256, 10000.0f, 1.0f);
    for (int pos = 0; pos < 5000; pos += 777) {
        for (int i = 0; i < 256; i++) a[i] = b[i] = rnd_nonzero();
        gm_rope(a, 256, pos, inv);
        gm_rope_table(cs, 256, pos, inv);
        gm_rope_apply(b, 256, cs);
        CHECK(memcmp(a, b, sizeof a) == 0, "rope table differs from gm_rope at position %d", pos);
        /* against the f64 rotation */
        int bad = 0;
        for (int i = 0; i < 128; i++) {
            double ang = (double)(float)((float)pos * inv[i]);
            bad += fabs(cs[i] - cos(ang)) > 1e-6 || fabs(cs[128 + i] - sin(ang)) > 1e-6;
        }
        CHECK(bad == 0, "rope table at position %d: %d entries off", pos, bad);
    }
}

/* Panel p's largest y - bound and y + bound over its rows within [a, b), as the formula says (a NaN lower
 * bound left out, a NaN upper bound making the panel's +inf); the number of the two that differ from lo, hi */
static int panel_bounds_off(const float *y, const float *bound, size_t a, size_t b, size_t p, double lo, double hi) {
    double l = -INFINITY, h = -INFINITY;
    bool nan = false;
    for (size_t r = p * 16 > a ? p * 16 : a; r < (p + 1) * 16 && r < b; r++) {
        double down = (double)y[r] - (double)bound[r], up = (double)y[r] + (double)bound[r];
        if (!isnan(down)) l = fmax(l, down);
        if (isnan(up)) nan = true;
        else h = fmax(h, up);
    }
    if (nan) h = INFINITY;
    return !(lo == l) + !(hi == h);
}

/* The kernel's whole panels, and gm_panel_bounds over ranges cut inside panels (the chosen kernel for the
 * whole ones between), against the formula */
static void test_panel_bounds(const gm_vec_ops *ops, const char *name) {
    enum { N = 1000 };
    float y[N], bound[N];
    double lo[N / 16 + 2], hi[N / 16 + 2];
    for (int trial = 0; trial < 300; trial++) {
        for (int i = 0; i < N; i++) {
            uint32_t k = rnd() % 64;
            y[i] = trial % 3 == 0 ? (float)(rnd() % 5) - 2.0f : rnd_nonzero() * 20.0f; /* ties every third trial */
            bound[i] = trial % 3 == 0 ? (float)(rnd() % 2) : fabsf(rnd_nonzero());
            if (k == 0) y[i] = NAN;
            else if (k == 1) bound[i] = NAN;
            else if (k == 2) y[i] = (rnd() & 1) ? INFINITY : -INFINITY;
            else if (k == 3) y[i] = (rnd() & 1) ? 0.0f : -0.0f, bound[i] = (rnd() & 1) ? 0.0f : -0.0f;
            if (trial % 7 == 1 && i % 16 < 15) y[i] = NAN; /* panels with one number left */
            if (trial % 11 == 2) bound[i] = NAN;          /* panels with none */
        }
        size_t p0 = rnd() % (N / 16), p1 = p0 + rnd() % (N / 16 - p0 + 1); /* whole panels [p0, p1) */
        ops->panel_bounds(y + 16 * p0, bound + 16 * p0, p1 - p0, lo, hi);
        int bad = 0;
        for (size_t p = p0; p < p1; p++) bad += panel_bounds_off(y, bound, 16 * p0, 16 * p1, p, lo[p - p0], hi[p - p0]);
        CHECK(bad == 0, "%s panel bounds, trial %d, panels [%zu, %zu): %d values off", name, trial, p0, p1, bad);
        size_t a = rnd() % N, b = a + 1 + rnd() % (N - a); /* rows [a, b), cut anywhere */
        gm_panel_bounds(a, b, y + a, bound + a, lo, hi);
        bad = 0;
        for (size_t p = a / 16; p * 16 < b; p++)
            bad += panel_bounds_off(y, bound, a, b, p, lo[p - a / 16], hi[p - a / 16]);
        CHECK(bad == 0, "panel bounds over rows [%zu, %zu), trial %d: %d values off", a, b, trial, bad);
    }
}

int main(void) {
    test_rope();
    const char *isas[] = {"scalar", "avx2", "avx512"};
    int ran = 0;
    for (int i = 0; i < 3; i++) {
        const gm_vec_ops *ops = gm_vec_lookup(isas[i]);
        if (!ops) {
            printf("%s: not supported by this CPU, skipped\n", isas[i]);
            continue;
        }
        ran++;
        test_rmsnorm(ops, isas[i]);
        test_geglu(ops, isas[i]);
        test_attention(ops, isas[i]);
        test_attention_pieces(ops, isas[i]);
        test_argmax(ops, isas[i]);
        test_exp_sums(ops, isas[i]);
        test_panel_bounds(ops, isas[i]);
    }
    printf("op paths tested: %d\n", ran);
    return gm_test_finish();
}
