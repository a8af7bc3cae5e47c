/* Sharding plans: for each weight, which axis is split over the mesh's devices (or why not).
 *
 * Rules (--sharding):
 *   fsdp        kauldron's FSDPSharding, applied to each weight's shape in the JAX `gemma` layout
 *               (embedding [V,D], q [N,D,H], kv [2,K,D,H], attn_vec [N,H,D], gating [2,F,D], linear [F,D]):
 *               <= 4 MiB (as bf16, the seed's dtype) -> replicated; else the largest axis divisible by the
 *               device count, ties to the later axis; none -> replicated. Extended: a split that would cut
 *               a quantization block, or that is not contiguous in our row-major layout, counts as not
 *               divisible.
 *   tp          Megatron: q/k/v and gate/up split by output (heads, F), attn_output and down split by input,
 *               embedding by vocabulary; k/v replicated when there are fewer kv heads than devices.
 *   replicated  every device holds everything (compute is still split by rows).
 * A split is on ggml dims: COLS = ne[0] (the contraction axis), ROWS = ne[1] (the output axis). */
#ifndef GM_SHARD_PLAN_H
#define GM_SHARD_PLAN_H

#include <stdint.h>

#include "gemma.h"
#include "io/gguf.h"

typedef enum gm_split { GM_SPLIT_NONE = -1, GM_SPLIT_COLS = 0, GM_SPLIT_ROWS = 1 } gm_split;

typedef struct gm_tensor_plan {
    gm_split split;
    uint64_t unit;        /* split granularity in elements along the split dim (e.g. head_dim) */
    char jax_axis[8];     /* the seed library's axis name that is split ("V", "D", "F", "N", "K") */
    char reason[120];     /* why replicated, or a note */
} gm_tensor_plan;

gm_status gm_plan_tensor(const gm_config *cfg, const gm_tensor_info *t, gm_sharding rule, int n_devices,
                         gm_tensor_plan *out);
/* Device i's range [lo, hi) along the split dim (whole dim for GM_SPLIT_NONE). */
void gm_plan_range(const gm_tensor_plan *p, const gm_tensor_info *t, int n_devices, int i, uint64_t *lo, uint64_t *hi);
const char *gm_sharding_name(gm_sharding s);
gm_status gm_sharding_parse(const char *s, gm_sharding *out);

#endif
