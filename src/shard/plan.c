#include "shard/plan.h"

#include <stdio.h>
#include <string.h>

#include "base/threads.h"

#define FSDP_MIN_BYTES (4ull << 20) /* kauldron: min_size_to_shard_mb = 4 */
#define JAX_ITEMSIZE 2ull           /* the seed's params are bf16 */

/* One axis of a weight in the seed library's layout, and where it lives in ours. */
typedef struct jax_axis {
    const char *name;
    uint64_t size;
    gm_split split;   /* the ggml dim it maps to, or NONE if a split would not be contiguous */
    uint64_t unit;    /* elements per index of this axis along that dim */
} jax_axis;

typedef struct jax_shape {
    int n;
    jax_axis ax[4];
    uint64_t leaf_elems; /* elements of the whole JAX leaf (k and v are one kv_einsum leaf, gate and up one gating) */
} jax_shape;

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Map a GGUF-named weight to its seed-library shape. false for vectors and unknown names. */
static bool jax_shape_of(const gm_config *c, const gm_tensor_info *t, jax_shape *js) {
    uint64_t V = (uint64_t)c->vocab_size, D = (uint64_t)c->d_model, F = (uint64_t)c->d_ff;
    uint64_t N = (uint64_t)c->n_heads, K = (uint64_t)c->n_kv_heads, H = (uint64_t)c->head_dim;
    memset(js, 0, sizeof *js);
    if (t->n_dims != 2) return false;
#define AX(i, nm, sz, sp, un) js->ax[i] = (jax_axis){nm, sz, sp, un}
    if (!strcmp(t->name, "token_embd.weight")) {
        js->n = 2, AX(0, "V", V, GM_SPLIT_ROWS, 1), AX(1, "D", D, GM_SPLIT_COLS, 1);
        js->leaf_elems = V * D;
    } else if (ends_with(t->name, ".attn_q.weight")) {
        js->n = 3, AX(0, "N", N, GM_SPLIT_ROWS, H), AX(1, "D", D, GM_SPLIT_COLS, 1), AX(2, "H", H, GM_SPLIT_NONE, 1);
        js->leaf_elems = N * D * H;
    } else if (ends_with(t->name, ".attn_k.weight") || ends_with(t->name, ".attn_v.weight")) {
        /* kv_einsum [2, K, D, H]: axis "2" (k vs v) is our choice of tensor, never split */
        js->n = 4, AX(0, "2", 2, GM_SPLIT_NONE, 1), AX(1, "K", K, GM_SPLIT_ROWS, H), AX(2, "D", D, GM_SPLIT_COLS, 1),
        AX(3, "H", H, GM_SPLIT_NONE, 1);
        js->leaf_elems = 2 * K * D * H;
    } else if (ends_with(t->name, ".attn_output.weight")) {
        js->n = 3, AX(0, "N", N, GM_SPLIT_COLS, H), AX(1, "H", H, GM_SPLIT_NONE, 1), AX(2, "D", D, GM_SPLIT_ROWS, 1);
        js->leaf_elems = N * H * D;
    } else if (ends_with(t->name, ".ffn_gate.weight") || ends_with(t->name, ".ffn_up.weight")) {
        js->n = 3, AX(0, "2", 2, GM_SPLIT_NONE, 1), AX(1, "F", F, GM_SPLIT_ROWS, 1), AX(2, "D", D, GM_SPLIT_COLS, 1);
        js->leaf_elems = 2 * F * D;
    } else if (ends_with(t->name, ".ffn_down.weight")) {
        js->n = 2, AX(0, "F", F, GM_SPLIT_COLS, 1), AX(1, "D", D, GM_SPLIT_ROWS, 1);
        js->leaf_elems = F * D;
    } else {
        return false;
    }
#undef AX
    return true;
}


/* Can dim `split` of t be cut into n equal contiguous parts of whole `unit`s without cutting a block? */
static bool cuttable(const gm_tensor_info *t, gm_split split, uint64_t unit, uint64_t axis_size, int n) {
    if (split == GM_SPLIT_NONE || axis_size % (uint64_t)n) return false;
    if (split == GM_SPLIT_COLS) {
        uint64_t part = axis_size / (uint64_t)n * unit;
        const gm_dtype_info *d = gm_dtype_get(t->type);
        if (!d || part % d->block) return false;
    }
    return true;
}

static gm_status plan_fsdp(const gm_config *c, const gm_tensor_info *t, int n, gm_tensor_plan *p) {
    jax_shape js;
    if (!jax_shape_of(c, t, &js)) {
        snprintf(p->reason, sizeof p->reason, "replicated (vector, %llu elements)", (unsigned long long)t->ne[0]);
        return GM_OK;
    }
    uint64_t bytes = js.leaf_elems * JAX_ITEMSIZE;
    if (bytes <= FSDP_MIN_BYTES) {
        snprintf(p->reason, sizeof p->reason, "replicated (%llu bytes as bf16 <= 4 MiB)", (unsigned long long)bytes);
        return GM_OK;
    }
    /* axes by size descending, ties -> later axis first (np.argsort(shape)[::-1]) */
    int order[4];
    for (int i = 0; i < js.n; i++) order[i] = i;
    for (int i = 0; i < js.n; i++)
        for (int j = i + 1; j < js.n; j++) {
            jax_axis *a = &js.ax[order[i]], *b = &js.ax[order[j]];
            if (b->size > a->size || (b->size == a->size && order[j] > order[i])) {
                int tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
        }
    char skipped[80] = "";
    for (int k = 0; k < js.n; k++) {
        jax_axis *a = &js.ax[order[k]];
        if (a->size % (uint64_t)n) continue; /* kauldron: not divisible -> next axis */
        if (!cuttable(t, a->split, a->unit, a->size, n)) {
            /* divisible, but not contiguous here or it would cut a quantization block */
            size_t used = strlen(skipped);
            snprintf(skipped + used, sizeof skipped - used, "%s%s", used ? "," : "", a->name);
            continue;
        }
        p->split = a->split;
        p->unit = a->unit;
        snprintf(p->jax_axis, sizeof p->jax_axis, "%s", a->name);
        if (skipped[0]) snprintf(p->reason, sizeof p->reason, "axis %s (%s skipped: not contiguous or cuts a block)", a->name, skipped);
        else snprintf(p->reason, sizeof p->reason, "axis %s", a->name);
        return GM_OK;
    }
    p->split = GM_SPLIT_NONE;
    p->unit = 1;
    if (skipped[0])
        snprintf(p->reason, sizeof p->reason, "replicated (axes %s divide by %d but are not contiguous or cut a block)",
                 skipped, n);
    else
        snprintf(p->reason, sizeof p->reason, "replicated (no axis divisible by %d devices)", n);
    return GM_OK;
}

static gm_status plan_tp(const gm_config *c, const gm_tensor_info *t, int n, gm_tensor_plan *p) {
    jax_shape js;
    if (!jax_shape_of(c, t, &js)) {
        snprintf(p->reason, sizeof p->reason, "replicated (vector)");
        p->split = GM_SPLIT_NONE, p->unit = 1;
        return GM_OK;
    }
    const char *want = NULL;
    if (!strcmp(t->name, "token_embd.weight")) want = "V";
    else if (ends_with(t->name, ".attn_q.weight") || ends_with(t->name, ".attn_output.weight")) want = "N";
    else if (ends_with(t->name, ".attn_k.weight") || ends_with(t->name, ".attn_v.weight")) want = "K";
    else want = "F";
    for (int k = 0; k < js.n; k++) {
        jax_axis *a = &js.ax[k];
        if (strcmp(a->name, want)) continue;
        if (a->size < (uint64_t)n) {
            p->split = GM_SPLIT_NONE, p->unit = 1;
            snprintf(p->reason, sizeof p->reason, "replicated (%llu %s < %d devices)", (unsigned long long)a->size,
                     !strcmp(want, "K") ? "kv heads" : "units", n);
            return GM_OK;
        }
        /* uneven splits allowed (whole units); a column split must keep quantization blocks whole */
        const gm_dtype_info *d = gm_dtype_get(t->type);
        uint64_t unit = a->unit;
        if (a->split == GM_SPLIT_COLS && d && unit % d->block) {
            uint64_t u = unit;
            while (u % d->block) u += unit;
            unit = u;
        }
        p->split = a->split;
        p->unit = unit;
        snprintf(p->jax_axis, sizeof p->jax_axis, "%s", want);
        snprintf(p->reason, sizeof p->reason, "axis %s%s", want, a->size % (uint64_t)n ? " (uneven)" : "");
        return GM_OK;
    }
    p->split = GM_SPLIT_NONE, p->unit = 1;
    snprintf(p->reason, sizeof p->reason, "replicated");
    return GM_OK;
}

gm_status gm_plan_tensor(const gm_config *c, const gm_tensor_info *t, gm_sharding rule, int n, gm_tensor_plan *p) {
    memset(p, 0, sizeof *p);
    p->split = GM_SPLIT_NONE;
    p->unit = 1;
    if (n < 1) return gm_fail(GM_ERR_ARG, "device count %d", n);
    if (rule == GM_SHARDING_AUTO) rule = n > 1 ? GM_SHARDING_FSDP : GM_SHARDING_REPLICATED;
    if (n == 1 || rule == GM_SHARDING_REPLICATED) {
        snprintf(p->reason, sizeof p->reason, n == 1 ? "whole (one device)" : "replicated (rule)");
        return GM_OK;
    }
    if (rule == GM_SHARDING_FSDP) return plan_fsdp(c, t, n, p);
    if (rule == GM_SHARDING_TP) return plan_tp(c, t, n, p);
    return gm_fail(GM_ERR_ARG, "unknown sharding rule %d", (int)rule);
}

void gm_plan_range(const gm_tensor_plan *p, const gm_tensor_info *t, int n, int i, uint64_t *lo, uint64_t *hi) {
    if (p->split == GM_SPLIT_NONE) {
        *lo = 0;
        *hi = t->ne[1];
        return;
    }
    uint64_t len = p->split == GM_SPLIT_ROWS ? t->ne[1] : t->ne[0];
    size_t a, b;
    gm_split_range((size_t)len, n, i, (size_t)p->unit, &a, &b);
    *lo = a;
    *hi = b;
}

const char *gm_sharding_name(gm_sharding s) {
    switch (s) {
    case GM_SHARDING_AUTO: return "auto";
    case GM_SHARDING_FSDP: return "fsdp";
    case GM_SHARDING_TP: return "tp";
    case GM_SHARDING_REPLICATED: return "replicated";
    }
    return "?";
}

gm_status gm_sharding_parse(const char *s, gm_sharding *out) {
    if (!strcmp(s, "fsdp")) *out = GM_SHARDING_FSDP;
    else if (!strcmp(s, "tp")) *out = GM_SHARDING_TP;
    else if (!strcmp(s, "replicated")) *out = GM_SHARDING_REPLICATED;
    else if (!strcmp(s, "auto")) *out = GM_SHARDING_AUTO;
    else return gm_fail(GM_ERR_ARG, "--sharding '%s': expected fsdp, tp or replicated", s);
    return GM_OK;
}
