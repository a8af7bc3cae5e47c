/* A device: a worker that owns a slice of the weights, a share of the compute and its KV caches.
 * All devices of a mesh run the same forward code (SPMD) and meet in collectives. */
#ifndef GM_MODEL_DEVICE_H
#define GM_MODEL_DEVICE_H

#include "base/threads.h"
#include "model/weights.h"
#include "shard/comm.h"

#define GM_PREFILL_CHUNK 128 /* tokens per forward step; local KV rings hold window + this */
/* Positions up to which a prefill's attention scratch lets GM_ATTN_ROWS_MAX rows share one call (past
 * it fewer, down to four rows, one token's heads, at any position up to cache_length) */
#define GM_ATTN_WIDE_SPAN 16384
#define GM_MAX_DEVICES 256
#define GM_ATTN_PIECES_MAX 16 /* split decoding: pieces of one token's positions */

typedef struct gm_kv_layer {
    void *k, *v;   /* [slots][K*H] f32, or IEEE half in an f16 cache */
    int slots;     /* cache_length for global layers, min(cache_length, window + chunk) for local ones */
} gm_kv_layer;

typedef struct gm_kv_cache {
    gm_kv_layer *layers; /* [n_layers] */
    int n_layers;
    uint64_t bytes;
    bool f16;            /* keys and values rounded to half precision (--precision fast, as llama.cpp) */
} gm_kv_cache;

typedef struct gm_device {
    int local, global, n_devices;
    const gm_config *cfg;
    gm_comm *comm;
    gm_pool *pool;              /* threads inside this device */
    gm_device_weights w;
    float *inv_freq_local;      /* [H/2] */
    float *inv_freq_global;     /* [H/2] */
    float *rope_local, *rope_global; /* [T][H] cos, sin of this chunk's positions (gm_rope_table) */
    /* scratch for a chunk of T <= GM_PREFILL_CHUNK tokens */
    float *x;                   /* [T][D] residual stream */
    float *xn;                  /* [T][D] normed input of a sublayer */
    float *q;                   /* [T][N*H] */
    float *k, *v;               /* [T][K*H] */
    float *att;                 /* [T][N*H] attention output */
    float *y;                   /* [T][max(D, F)] projection output */
    float *gate, *up;           /* [T][F] */
    float *pack;                /* [T][max(D, F, N*H)] column slices / device-major gathers */
    float *scores;              /* attention scratch: [threads][score_cap] */
    size_t score_cap;           /* floats per thread: rows x positions of one attention call */
    float *attn_part;           /* split decoding: [N][pieces][H] unnormalized outputs of the pieces */
    float *attn_max, *attn_sum; /* [N][pieces] their largest score and sum of e^(score - max) */
    gm_xq xq;                   /* [T][max(D, F, N*H)] quantized inputs of the packed products */
    bool fast;                  /* --precision fast: llama.cpp's activation rounding (gm_xq.fast) */
    int cache_length;
    uint64_t activation_bytes;
    /* the tokens of the current step: position and KV cache of each (one sequence, or batch rows) */
    int tok_pos[GM_PREFILL_CHUNK];
    gm_kv_cache *tok_kv[GM_PREFILL_CHUNK];
    /* rows mode (batched prompts split by rows over devices): device g holds rows
     * [rows_off[g], rows_off[g+1]) of the rows_total tokens of this step */
    bool rows_mode;
    int rows_total;
    size_t rows_off[GM_MAX_DEVICES + 1];
    float *xa, *ya;             /* [GM_PREFILL_CHUNK][max(D, F, N*H)] all devices' rows */
    /* the screened vocabulary product (vocab_screen.h), allocated at its first use */
    float *screen_bound;        /* [screen_cap] the bounds of this device's vocabulary rows */
    double *screen_lo;          /* [2 screen_panels] each panel's largest lower bound, then its largest upper
                                 * bound (gm_panel_bounds) */
    size_t screen_panels;
    double *screen_heap;        /* [screen_top] */
    float *screen_eb;           /* [vocabulary matrix columns / 32] per-block errors (gm_packed_screen_errors) */
    size_t screen_cap;
    int screen_top;
    uint64_t screen_steps, screen_exact_rows; /* screened products, and rows they computed exactly */
} gm_device;

gm_status gm_device_init(gm_device *d, const gm_config *cfg, int local, int global, int n_devices, gm_comm *comm,
                         int threads, int cache_length);
void gm_device_free(gm_device *d);

gm_status gm_kv_cache_init(gm_kv_cache *kv, const gm_config *cfg, int cache_length, bool f16);
void gm_kv_cache_free(gm_kv_cache *kv);

/* Run tokens [T] at positions pos0.. through the model on this device. logits_last [V] and/or
 * logits_all (position t at logits_all + t * all_stride; stride 0 reuses one [V] buffer) are filled on
 * every device; NULL skips them (all devices of a mesh must pass the same NULL-ness and top). top > 0
 * (logits_all NULL): only the top largest of logits_last need be exact (gm_session_forward_top). */
gm_status gm_device_forward(gm_device *d, gm_kv_cache *kv, const int32_t *tokens, int T, int pos0, float *logits_last,
                            float *logits_all, size_t all_stride, int top);

/* Rows mode, one step: this device runs T tokens of its own rows (token t at pos[t] in cache kv[t]);
 * the projections are shared with the other devices, which may hold any number of tokens (0 too).
 * Then the final logits of this device's rows logit_rows[0..n_logits) go to logits [n_logits][V]
 * (the buffer needs one spare [V] row at the end). *n_logits_all: logit rows over all devices. Every
 * device of the mesh must call this the same number of times. */
gm_status gm_device_rows_step(gm_device *d, const int32_t *tokens, const int *pos, gm_kv_cache *const *kv, int T,
                              const int *logit_rows, int n_logits, float *logits, int *n_logits_all);

#endif
