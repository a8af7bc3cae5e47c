/* gm_model and gm_session internals shared by model.c (loading) and session.c (forward, MPI follow). */
#ifndef GM_MODEL_MODEL_INTERNAL_H
#define GM_MODEL_MODEL_INTERNAL_H

#include "gemma.h"
#include "io/source.h"
#include "model/device.h"

#define GM_MAX_SESSIONS 64

struct gm_session {
    gm_model *model;
    int id;               /* same id on every rank */
    int pos;              /* tokens in the cache */
    gm_kv_cache *kv;      /* [n_local] one cache per local device */
};

struct gm_model {
    gm_config cfg;
    gm_load_options opt;
    gm_sharding sharding;     /* resolved rule */
    gm_source *src;
    gm_tokenizer *tok;        /* NULL when the model folder has no tokenizer */
    gm_comm *comm;
    int n_local, rank, n_ranks;
    gm_device *dev;           /* [n_local] */
    gm_pool *devices;         /* one participant per local device; the caller's thread is device 0 */
    float *scratch_logits;    /* [n_local][V] logits targets of devices other than 0 */
    gm_session *sessions[GM_MAX_SESSIONS];
    bool serving;             /* rank > 0 inside gm_model_serve */
    const char *weight_cache; /* gm_model_weight_cache() */
    const char *tokenizer_cache; /* gm_model_tokenizer_cache() */
    gm_wait wait;             /* resolved: GM_WAIT_SPIN or GM_WAIT_YIELD */
};

/* Commands rank 0 sends to the other ranks (MPI): each API call that touches devices sends one. */
enum gm_cmd_op { GM_CMD_QUIT = 1, GM_CMD_SESSION_NEW, GM_CMD_SESSION_FREE, GM_CMD_FORWARD, GM_CMD_BATCH };
typedef struct gm_cmd {
    int32_t op, session, n, pos0, want_all, want_last, top; /* top: gm_session_forward_top's */
} gm_cmd;

/* Whether this model's KV caches hold half-precision keys and values (gm_model_kv_type). */
static inline bool gm_model_kv_f16(const gm_model *m) { return gm_model_kv_type(m) == GM_KV_F16; }

gm_status gm_model_send_cmd(gm_model *m, const gm_cmd *cmd, const int32_t *tokens);
gm_status gm_session_create_local(gm_model *m, int id, gm_session **out);
void gm_session_destroy_local(gm_session *s);
gm_status gm_model_run_forward(gm_model *m, gm_session *s, const int32_t *tokens, int n, int pos0, float *logits_last,
                               float *logits_all, int top);

/* The batch generation every rank runs (rank 0 from gm_generate_batch, others from gm_model_serve).
 * rows may be NULL on ranks other than 0. */
gm_status gm_batch_run(gm_model *m, const int32_t *const *prompts, const size_t *lens, size_t n,
                       const gm_batch_options *opt, gm_batch_row *rows);
gm_status gm_batch_serve(gm_model *m, const gm_cmd *cmd);

#endif
