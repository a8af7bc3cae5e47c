/* One device's weights: its slice of every matrix (per the sharding plan) and the replicated vectors. */
#ifndef GM_MODEL_WEIGHTS_H
#define GM_MODEL_WEIGHTS_H

#include <stdint.h>

#include "base/threads.h"
#include "io/source.h"
#include "kernels/packed.h"
#include "shard/plan.h"

typedef struct gm_matrix {
    const char *name;      /* GGUF name of the full tensor */
    gm_dtype type;
    uint64_t full_rows;    /* ne[1]: outputs */
    uint64_t full_cols;    /* ne[0]: inputs (contraction) */
    gm_tensor_plan plan;
    uint64_t lo, hi;       /* this device's range along the split dim (rows for NONE/ROWS, cols for COLS) */
    uint64_t rows, cols;   /* local slice shape */
    size_t row_bytes;      /* bytes of one local row (as stored in the file) */
    void *data;            /* [rows][row_bytes] as stored in the file, or NULL when packed */
    gm_packed packed;      /* quantized types: the local slice as 16-row panels (packed.data != NULL) */
    gm_packed screen8;     /* the vocabulary matrix in BF16: its int8 screening copy (gm_pack_screen_copy), which
                            * the screened product reads instead (screen8.data NULL: none; gm_matrix_screened) */
    uint64_t *off;         /* [n_devices + 1] output ranges per device for the gather (NONE/ROWS) */
    bool screen8_borrowed; /* screen8.data points into the weight cache's mapping */
    bool borrowed;         /* data / packed.data point into the weight cache's mapping or the device's
                            * arena of small matrices: not freed one by one */
} gm_matrix;

/* What the screened product of m reads: its screening copy where it has one, else its packed panels. */
static inline const gm_packed *gm_matrix_screened(const gm_matrix *m) {
    return m->screen8.data ? &m->screen8 : &m->packed;
}

typedef struct gm_layer_weights {
    float *attn_norm;      /* [D] (1 + w) */
    float *post_attn_norm; /* [D] */
    float *ffn_norm;       /* [D] */
    float *post_ffw_norm;  /* [D] */
    float *q_norm;         /* [H] */
    float *k_norm;         /* [H] */
    gm_matrix q;           /* [N*H rows][D cols] */
    gm_matrix k, v;        /* [K*H rows][D cols] */
    gm_matrix o;           /* [D rows][N*H cols] */
    gm_matrix gate, up;    /* [F rows][D cols] */
    gm_matrix down;        /* [D rows][F cols] */
} gm_layer_weights;

/* Matrices under 4 MiB (ARENA_MIN_OWN in weights.c; every layer matrix of the 270M) are carved out of shared
 * chunks, 2 MiB aligned, so that they sit in transparent huge pages like the large ones. */
typedef struct gm_weight_arena {
    void **chunks;         /* [n_chunks] */
    int n_chunks, cap_chunks;
    size_t used;           /* bytes handed out of the newest chunk (each holds 32 MiB) */
} gm_weight_arena;

typedef struct gm_device_weights {
    gm_matrix embed;       /* token_embd: [V rows][D cols]; also the tied output projection */
    float *final_norm;     /* [D] */
    gm_layer_weights *layers;
    uint64_t bytes;        /* bytes this device holds */
    gm_weight_arena arena; /* small matrices (`borrowed`) */
    void *cache_map;       /* the weight cache file, mapped (`borrowed` matrices may point into it) */
    size_t cache_map_bytes;
    int cache_hits, cache_misses; /* matrices mapped from the weight cache / packed anew */
    char cache_note[320];  /* why the weight cache could not be written ("" when it could) */
} gm_device_weights;

/* Load device `device` of `n_devices`: only its slices are read from the source. Quantized matrices
 * are packed for the int16-activation kernels unless the environment sets GM_EXACT=1 (then every
 * product runs the f32 kernels of matvec.h on the file's layout). `pool` (the device's threads, may
 * be NULL) shares the reading and packing. With `cache_dir` (may be NULL) the packed matrices come
 * from the device's weight cache file there when it is valid, and the file is (re)written when not
 * (model/weight_cache.h); a failure to write it is not an error: w->cache_note says why. */
gm_status gm_weights_load(const gm_source *src, gm_sharding rule, int n_devices, int device, gm_pool *pool,
                          const char *cache_dir, gm_device_weights *w);
void gm_weights_free(gm_device_weights *w, int n_layers);
/* Row r of a local slice as f32 (packed or not). */
void gm_matrix_row(const gm_matrix *m, uint64_t r, float *out);

#endif
