/* Sessions (one KV cache per device) and the forward call. Under MPI, rank 0 drives: every call that
 * touches devices is first broadcast as a gm_cmd, and the other ranks replay it in gm_model_serve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

gm_status gm_model_send_cmd(gm_model *m, const gm_cmd *cmd, const int32_t *tokens) {
    if (m->n_ranks == 1) return GM_OK;
    gm_cmd c = *cmd;
    GM_TRY(gm_mpi_broadcast(&c, sizeof c));
    if (c.op == GM_CMD_FORWARD && c.n > 0) GM_TRY(gm_mpi_broadcast((void *)tokens, (size_t)c.n * sizeof *tokens));
    return GM_OK;
}

gm_status gm_session_create_local(gm_model *m, int id, gm_session **out) {
    *out = NULL;
    if (id < 0 || id >= GM_MAX_SESSIONS || m->sessions[id]) return gm_fail(GM_ERR_STATE, "session slot %d is in use", id);
    gm_session *s = calloc(1, sizeof *s);
    if (!s) return gm_fail(GM_ERR_NOMEM, "out of memory");
    s->model = m;
    s->id = id;
    s->kv = calloc((size_t)m->n_local, sizeof *s->kv);
    if (!s->kv) {
        free(s);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < m->n_local; i++) {
        gm_status st = gm_kv_cache_init(&s->kv[i], &m->cfg, m->opt.cache_length, gm_model_kv_f16(m));
        if (st != GM_OK) {
            gm_session_destroy_local(s);
            return st;
        }
    }
    m->sessions[id] = s;
    *out = s;
    return GM_OK;
}

void gm_session_destroy_local(gm_session *s) {
    if (!s) return;
    gm_model *m = s->model;
    for (int i = 0; s->kv && i < m->n_local; i++) gm_kv_cache_free(&s->kv[i]);
    free(s->kv);
    if (m->sessions[s->id] == s) m->sessions[s->id] = NULL;
    free(s);
}

gm_status gm_session_new(gm_model *m, gm_session **out) {
    *out = NULL;
    if (m->rank != 0 && !m->serving) return gm_fail(GM_ERR_STATE, "only rank 0 creates sessions; other ranks run gm_model_serve");
    int id = 0;
    while (id < GM_MAX_SESSIONS && m->sessions[id]) id++;
    if (id == GM_MAX_SESSIONS) return gm_fail(GM_ERR_RANGE, "at most %d sessions per model", GM_MAX_SESSIONS);
    gm_cmd c = {.op = GM_CMD_SESSION_NEW, .session = id};
    GM_TRY(gm_model_send_cmd(m, &c, NULL));
    return gm_session_create_local(m, id, out);
}

void gm_session_free(gm_session *s) {
    if (!s) return;
    gm_cmd c = {.op = GM_CMD_SESSION_FREE, .session = s->id};
    gm_model_send_cmd(s->model, &c, NULL);
    gm_session_destroy_local(s);
}

void gm_session_reset(gm_session *s) { s->pos = 0; }
int gm_session_position(const gm_session *s) { return s->pos; }
int gm_session_capacity(const gm_session *s) { return s->model->opt.cache_length; }
gm_model *gm_session_model(const gm_session *s) { return s->model; }

uint64_t gm_session_kv_bytes(const gm_session *s) {
    uint64_t b = 0;
    for (int i = 0; i < s->model->n_local; i++) b += s->kv[i].bytes;
    return b;
}

typedef struct fwd_job {
    gm_model *m;
    gm_session *s;
    const int32_t *tokens;
    int n, pos0, top;
    float *logits_last, *logits_all;
    gm_status st[GM_MAX_DEVICES];
    char err[GM_MAX_DEVICES][256];
} fwd_job;

static void fwd_worker(void *ctx, int i, int n_dev) {
    (void)n_dev;
    fwd_job *j = ctx;
    gm_model *m = j->m;
    size_t V = (size_t)m->cfg.vocab_size;
    /* every device joins the same logits collectives; only device 0 keeps the results */
    float *scratch = m->scratch_logits + (size_t)i * V;
    float *last = j->logits_last ? (i == 0 ? j->logits_last : scratch) : NULL;
    float *all = j->logits_all ? (i == 0 ? j->logits_all : scratch) : NULL;
    gm_status st = gm_device_forward(&m->dev[i], &j->s->kv[i], j->tokens, j->n, j->pos0, last, all, i == 0 ? V : 0, j->top);
    j->st[i] = st;
    if (st != GM_OK) snprintf(j->err[i], sizeof j->err[i], "%s", gm_last_error());
}

gm_status gm_model_run_forward(gm_model *m, gm_session *s, const int32_t *tokens, int n, int pos0, float *logits_last,
                               float *logits_all, int top) {
    fwd_job *j = calloc(1, sizeof *j);
    if (!j) return gm_fail(GM_ERR_NOMEM, "out of memory");
    *j = (fwd_job){.m = m, .s = s, .tokens = tokens, .n = n, .pos0 = pos0, .logits_last = logits_last, .logits_all = logits_all,
                   .top = top};
    gm_pool_run(m->devices, fwd_worker, j);
    gm_status st = GM_OK;
    for (int i = 0; i < m->n_local && st == GM_OK; i++)
        if (j->st[i] != GM_OK) st = gm_fail(j->st[i], "device %d: %s", gm_comm_global_index(m->comm, i), j->err[i]);
    free(j);
    return st;
}

static gm_status forward(gm_session *s, const int32_t *tokens, size_t n, float *logits_last, float *logits_all, int top) {
    gm_model *m = s->model;
    if (n == 0) return gm_fail(GM_ERR_ARG, "no tokens to run");
    if (!tokens) return gm_fail(GM_ERR_ARG, "tokens is NULL");
    if ((size_t)s->pos + n > (size_t)m->opt.cache_length)
        return gm_fail(GM_ERR_RANGE, "%zu tokens at position %d do not fit the cache of %d (raise --cache-length)", n,
                       s->pos, m->opt.cache_length);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab_size)
            return gm_fail(GM_ERR_RANGE, "token %zu has id %d, outside the vocabulary of %d", i, tokens[i], m->cfg.vocab_size);
    gm_cmd c = {.op = GM_CMD_FORWARD, .session = s->id, .n = (int32_t)n, .pos0 = s->pos, .want_all = logits_all != NULL,
                .want_last = logits_last != NULL, .top = top};
    GM_TRY(gm_model_send_cmd(m, &c, tokens));
    GM_TRY(gm_model_run_forward(m, s, tokens, (int)n, s->pos, logits_last, logits_all, top));
    s->pos += (int)n;
    return GM_OK;
}

gm_status gm_session_forward(gm_session *s, const int32_t *tokens, size_t n, float *logits_last, float *logits_all) {
    if (!s) return gm_fail(GM_ERR_ARG, "session is NULL");
    return forward(s, tokens, n, logits_last, logits_all, 0);
}

gm_status gm_session_forward_top(gm_session *s, const int32_t *tokens, size_t n, int top, float *logits_last) {
    if (!s) return gm_fail(GM_ERR_ARG, "session is NULL");
    if (!logits_last) return gm_fail(GM_ERR_ARG, "gm_session_forward_top: logits_last is NULL");
    return forward(s, tokens, n, logits_last, NULL, top > 0 ? top : 0);
}

gm_status gm_model_serve(gm_model *m) {
    if (m->rank == 0) return GM_OK;
    m->serving = true;
    int32_t *tokens = NULL;
    size_t cap = 0;
    float *all = NULL;
    gm_status st = GM_OK;
    for (;;) {
        gm_cmd c;
        st = gm_mpi_broadcast(&c, sizeof c);
        if (st != GM_OK || c.op == GM_CMD_QUIT) break;
        if (c.op == GM_CMD_SESSION_NEW) {
            gm_session *s;
            st = gm_session_create_local(m, c.session, &s);
        } else if (c.op == GM_CMD_SESSION_FREE) {
            if (c.session >= 0 && c.session < GM_MAX_SESSIONS) gm_session_destroy_local(m->sessions[c.session]);
        } else if (c.op == GM_CMD_BATCH) {
            st = gm_batch_serve(m, &c);
        } else if (c.op == GM_CMD_FORWARD) {
            if (c.n < 1 || c.session < 0 || c.session >= GM_MAX_SESSIONS || !m->sessions[c.session]) {
                st = gm_fail(GM_ERR_COMM, "rank %d: malformed command from rank 0", m->rank);
                break;
            }
            if ((size_t)c.n > cap) {
                int32_t *nt = realloc(tokens, (size_t)c.n * sizeof *tokens);
                if (!nt) {
                    st = gm_fail(GM_ERR_NOMEM, "out of memory");
                    break;
                }
                tokens = nt;
                cap = (size_t)c.n;
            }
            st = gm_mpi_broadcast(tokens, (size_t)c.n * sizeof *tokens);
            if (st == GM_OK && c.want_all) {
                free(all);
                all = malloc((size_t)c.n * (size_t)m->cfg.vocab_size * sizeof(float));
                if (!all) st = gm_fail(GM_ERR_NOMEM, "out of memory for logits");
            }
            if (st == GM_OK)
                /* the same logits requests as rank 0, so every rank runs the same collectives */
                st = gm_model_run_forward(m, m->sessions[c.session], tokens, c.n, c.pos0,
                                          c.want_last ? m->scratch_logits : NULL, c.want_all ? all : NULL, c.top);
        }
        if (st != GM_OK) break;
    }
    free(tokens);
    free(all);
    m->serving = false;
    return st;
}
