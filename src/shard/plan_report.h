#ifndef GM_SHARD_PLAN_REPORT_H
#define GM_SHARD_PLAN_REPORT_H

#include "shard/plan.h"

/* The plan of tensor t and the bytes device `dev` of `n` holds of it. */
gm_status gm_plan_slice_bytes(const gm_config *cfg, const gm_tensor_info *t, gm_sharding rule, int n, int dev,
                              gm_tensor_plan *plan, uint64_t *bytes);

#endif
