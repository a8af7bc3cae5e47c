/* NaN / Inf scan over every tensor of a model file, in bounded memory: rows are read and dequantized
 * in chunks of about 4 MiB, so a 27B checkpoint is checked with the same footprint as a tiny one. */
#include "model/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matvec.h"

#define CHUNK_BYTES ((uint64_t)4 << 20)

gm_status gm_source_check_finite(const gm_source *src, gm_nonfinite *hit) {
    memset(hit, 0, sizeof *hit);
    size_t n = gm_source_tensor_count(src);
    gm_status st = GM_OK;
    uint8_t *raw = NULL;
    float *vals = NULL;
    uint64_t raw_cap = 0, vals_cap = 0;
    for (size_t i = 0; i < n && st == GM_OK && !hit->found; i++) {
        const gm_tensor_info *t = gm_source_tensor_at(src, i);
        uint64_t rows = t->nbytes / t->row_bytes, ne0 = t->ne[0];
        uint64_t chunk = CHUNK_BYTES / t->row_bytes;
        if (chunk < 1) chunk = 1;
        if (chunk > rows) chunk = rows;
        if (chunk * t->row_bytes > raw_cap || ne0 > vals_cap) {
            free(raw);
            free(vals);
            if (chunk * t->row_bytes > raw_cap) raw_cap = chunk * t->row_bytes;
            if (ne0 > vals_cap) vals_cap = ne0;
            raw = malloc(raw_cap ? raw_cap : 1);
            vals = malloc((vals_cap ? vals_cap : 1) * sizeof *vals);
            if (!raw || !vals) {
                st = gm_fail(GM_ERR_NOMEM, "%s: cannot allocate %llu bytes to check tensor '%s'", gm_source_path(src),
                             (unsigned long long)(raw_cap + vals_cap * sizeof *vals), t->name);
                break;
            }
        }
        for (uint64_t r0 = 0; r0 < rows && st == GM_OK && !hit->found; r0 += chunk) {
            uint64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
            st = gm_source_read_rows(src, t, r0, nr, raw);
            for (uint64_t r = 0; r < nr && st == GM_OK; r++) {
                gm_dequant_row(t->type, raw + r * t->row_bytes, vals, (size_t)ne0);
                for (uint64_t c = 0; c < ne0; c++)
                    if (!isfinite(vals[c])) {
                        hit->found = true;
                        snprintf(hit->tensor, sizeof hit->tensor, "%s", t->name);
                        hit->row = r0 + r;
                        hit->col = c;
                        hit->index = (r0 + r) * ne0 + c;
                        hit->value = vals[c];
                        break;
                    }
                if (hit->found) break;
                hit->values_scanned += ne0;
            }
        }
        if (st == GM_OK) hit->tensors_scanned++;
    }
    free(raw);
    free(vals);
    return st;
}
