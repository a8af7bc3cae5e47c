/* Weight sanity check for `gemma info --check`: every tensor of a source dequantized to f32 and scanned
 * for NaN and infinities. */
#ifndef GM_MODEL_CHECK_H
#define GM_MODEL_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "io/source.h"

typedef struct gm_nonfinite {
    bool found;
    char tensor[128];  /* name of the first tensor (in file order) holding a NaN/Inf */
    uint64_t index;    /* flat element index in storage order (ggml: row * ne[0] + column) */
    uint64_t row, col; /* the same as (row, column) of a 2-D tensor (row = index / ne[0]) */
    float value;       /* the value itself: NaN, +inf or -inf */
    uint64_t tensors_scanned, values_scanned;
} gm_nonfinite;

/* Scan tensors in file order and stop at the first non-finite value (hit->found); GM_OK either way,
 * an error only when a tensor cannot be read. */
gm_status gm_source_check_finite(const gm_source *src, gm_nonfinite *hit);

#endif
