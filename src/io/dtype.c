#include "io/dtype.h"

#include <stddef.h>

static const gm_dtype_info infos[GM_DTYPE_COUNT] = {
    [GM_F32] = {"F32", 1, 4},      [GM_F16] = {"F16", 1, 2},      [GM_BF16] = {"BF16", 1, 2},
    [GM_Q4_0] = {"Q4_0", 32, 18},  [GM_Q4_1] = {"Q4_1", 32, 20},  [GM_Q5_0] = {"Q5_0", 32, 22},
    [GM_Q5_1] = {"Q5_1", 32, 24},  [GM_Q8_0] = {"Q8_0", 32, 34},  [GM_Q4_K] = {"Q4_K", 256, 144},
    [GM_Q5_K] = {"Q5_K", 256, 176}, [GM_Q6_K] = {"Q6_K", 256, 210},
};

const gm_dtype_info *gm_dtype_get(uint32_t type) {
    if (type >= GM_DTYPE_COUNT || infos[type].name == NULL) return NULL;
    return &infos[type];
}

bool gm_dtype_row_bytes(gm_dtype type, uint64_t n, uint64_t *bytes) {
    const gm_dtype_info *d = gm_dtype_get(type);
    if (!d || n % d->block) return false;
    uint64_t blocks = n / d->block;
    if (blocks > UINT64_MAX / d->bytes) return false;
    *bytes = blocks * d->bytes;
    return true;
}
