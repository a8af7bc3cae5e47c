/* Per-device bytes of a plan without loading anything: what `gemma info --devices N` prints. */
#include "shard/plan_report.h"

#include <string.h>

gm_status gm_plan_slice_bytes(const gm_config *cfg, const gm_tensor_info *t, gm_sharding rule, int n, int dev,
                              gm_tensor_plan *plan, uint64_t *bytes) {
    GM_TRY(gm_plan_tensor(cfg, t, rule, n, plan));
    uint64_t lo, hi;
    gm_plan_range(plan, t, n, dev, &lo, &hi);
    if (plan->split == GM_SPLIT_NONE) *bytes = t->nbytes;
    else if (plan->split == GM_SPLIT_ROWS) *bytes = (hi - lo) * t->row_bytes * t->ne[2] * t->ne[3];
    else {
        const gm_dtype_info *d = gm_dtype_get(t->type);
        *bytes = t->ne[1] * ((hi - lo) / d->block * d->bytes);
    }
    return GM_OK;
}
