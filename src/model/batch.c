/* Batched prompts split by rows over devices (the seed's FIRST_DIM sharding of the batch). Each device
 * owns rows [g * per, (g + 1) * per) of the padded batch: their KV caches, their sampling, their stops.
 * Every step each device brings up to GM_PREFILL_CHUNK / devices tokens of its rows (prompt chunks
 * first, then one token per decoding row) and gm_device_rows_step runs them through the shared model. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemma3_constants.h"
#include "model/model_internal.h"

typedef struct row_state {
    const int32_t *prompt;
    size_t len, fed;        /* prompt tokens, prompt tokens already run */
    int pos;                /* tokens in the cache */
    int32_t next;           /* token to run next while decoding */
    int32_t *gen;           /* [max_new] */
    int n_gen;
    gm_stop_reason stop;    /* GM_STOP_NONE while active */
    gm_kv_cache kv;
    gm_sampler *sampler;
} row_state;

typedef struct batch_job {
    gm_model *m;
    const int32_t *const *prompts;
    const size_t *lens;
    size_t n, padded, per;  /* real rows, padded rows, rows per device */
    gm_batch_options opt;
    float *out;             /* [padded][2 + max_new]: count, stop, ids (as float bit patterns) */
    size_t stride;
    gm_status st[GM_MAX_DEVICES];
    char err[GM_MAX_DEVICES][256];
} batch_job;

static const int32_t pad_prompt[1] = {GEMMA3_BOS};

static gm_status run_rows(batch_job *j, int local, row_state *rows, float *logits) {
    gm_model *m = j->m;
    gm_device *d = &m->dev[local];
    int g = d->global, N = d->n_devices, per = (int)j->per, V = m->cfg.vocab_size;
    int quota = GM_PREFILL_CHUNK / N > 0 ? GM_PREFILL_CHUNK / N : 1;
    int32_t toks[GM_PREFILL_CHUNK];
    int pos[GM_PREFILL_CHUNK], want[GM_PREFILL_CHUNK], want_row[GM_PREFILL_CHUNK];
    gm_kv_cache *kvs[GM_PREFILL_CHUNK];
    for (;;) {
        int T = 0, nl = 0;
        for (int r = 0; r < per && T < quota; r++) {
            row_state *s = &rows[r];
            if (s->stop) continue;
            int k = s->fed < s->len ? (int)(s->len - s->fed) : 1;
            if (k > quota - T) k = quota - T;
            if (s->pos + k > m->opt.cache_length) {
                s->stop = GM_STOP_CACHE_FULL;
                continue;
            }
            for (int i = 0; i < k; i++) {
                toks[T + i] = s->fed < s->len ? s->prompt[s->fed + (size_t)i] : s->next;
                pos[T + i] = s->pos + i;
                kvs[T + i] = &s->kv;
            }
            bool finishes = s->fed >= s->len || s->fed + (size_t)k == s->len;
            if (s->fed < s->len) s->fed += (size_t)k;
            s->pos += k;
            T += k;
            if (finishes) {
                want[nl] = T - 1;
                want_row[nl++] = r;
            }
        }
        int total_logits = 0;
        GM_TRY(gm_device_rows_step(d, toks, pos, kvs, T, want, nl, logits, &total_logits));
        if (d->rows_total == 0 && total_logits == 0) break; /* every device is done */
        for (int i = 0; i < nl; i++) {
            row_state *s = &rows[want_row[i]];
            float *lg = logits + (size_t)i * (size_t)V;
            for (int v = gm_model_tokenizer(m) ? gm_tokenizer_vocab_size(gm_model_tokenizer(m)) : V; v < V; v++)
                lg[v] = -INFINITY;
            int32_t id;
            GM_TRY(gm_sampler_next(s->sampler, lg, (size_t)V, &id));
            s->gen[s->n_gen++] = id;
            s->next = id;
            if (id == m->cfg.eos_id) s->stop = GM_STOP_EOS;
            else if (id == m->cfg.end_of_turn_id) s->stop = GM_STOP_END_OF_TURN;
            else if (s->n_gen >= j->opt.max_new_tokens) s->stop = GM_STOP_MAX_TOKENS;
        }
    }
    /* results of this device's rows into the shared table, gathered to every device */
    for (int r = 0; r < per; r++) {
        float *o = j->out + ((size_t)g * (size_t)per + (size_t)r) * j->stride;
        int32_t head[2] = {rows[r].n_gen, (int32_t)rows[r].stop};
        memcpy(o, head, sizeof head);
        memcpy(o + 2, rows[r].gen, (size_t)rows[r].n_gen * sizeof(int32_t));
    }
    size_t off[GM_MAX_DEVICES + 1];
    for (int k = 0; k <= N; k++) off[k] = (size_t)k * (size_t)per * j->stride;
    return gm_comm_all_gather(m->comm, local, j->out, off);
}

static void batch_worker(void *ctx, int local, int n_local) {
    (void)n_local;
    batch_job *j = ctx;
    gm_model *m = j->m;
    int g = gm_comm_global_index(m->comm, local), per = (int)j->per, V = m->cfg.vocab_size;
    row_state *rows = calloc((size_t)per, sizeof *rows);
    float *logits = malloc(((size_t)GM_PREFILL_CHUNK + 1) * (size_t)V * sizeof *logits);
    gm_status st = rows && logits ? GM_OK : gm_fail(GM_ERR_NOMEM, "out of memory for %d batch rows", per);
    const int32_t forbidden[] = {GEMMA3_START_OF_IMAGE, GEMMA3_END_OF_IMAGE};
    for (int r = 0; st == GM_OK && r < per; r++) {
        size_t row = (size_t)g * (size_t)per + (size_t)r;
        row_state *s = &rows[r];
        bool real = row < j->n;
        s->prompt = real ? j->prompts[row] : pad_prompt;
        s->len = real ? j->lens[row] : 1;
        s->gen = malloc((size_t)j->opt.max_new_tokens * sizeof *s->gen);
        gm_sampler_config sc = j->opt.sampling;
        sc.seed += (int64_t)row;
        if (!s->gen) st = gm_fail(GM_ERR_NOMEM, "out of memory");
        if (st == GM_OK) st = gm_kv_cache_init(&s->kv, &m->cfg, m->opt.cache_length, gm_model_kv_f16(m));
        if (st == GM_OK) st = gm_sampler_create(&sc, forbidden, V > GEMMA3_END_OF_IMAGE ? 2 : 0, &s->sampler);
    }
    /* a device that could not set up still joins the steps with no tokens, so nobody waits */
    if (st != GM_OK)
        for (int r = 0; r < per && rows; r++) rows[r].stop = GM_STOP_CACHE_FULL;
    gm_status st2 = run_rows(j, local, rows, logits);
    if (st == GM_OK) st = st2;
    for (int r = 0; rows && r < per; r++) {
        gm_kv_cache_free(&rows[r].kv);
        gm_sampler_free(rows[r].sampler);
        free(rows[r].gen);
    }
    free(rows);
    free(logits);
    j->st[local] = st;
    if (st != GM_OK) snprintf(j->err[local], sizeof j->err[local], "%s", gm_last_error());
}

gm_status gm_batch_run(gm_model *m, const int32_t *const *prompts, const size_t *lens, size_t n,
                       const gm_batch_options *opt, gm_batch_row *rows) {
    size_t N = (size_t)gm_model_devices(m);
    batch_job *j = calloc(1, sizeof *j);
    if (!j) return gm_fail(GM_ERR_NOMEM, "out of memory");
    j->m = m;
    j->prompts = prompts;
    j->lens = lens;
    j->n = n;
    j->per = (n + N - 1) / N;
    j->padded = j->per * N;
    j->opt = *opt;
    j->stride = 2 + (size_t)opt->max_new_tokens;
    j->out = calloc(j->padded * j->stride, sizeof *j->out);
    if (!j->out) {
        free(j);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    gm_pool_run(m->devices, batch_worker, j);
    gm_status st = GM_OK;
    for (int i = 0; i < m->n_local && st == GM_OK; i++)
        if (j->st[i] != GM_OK) st = gm_fail(j->st[i], "device %d: %s", gm_comm_global_index(m->comm, i), j->err[i]);
    for (size_t r = 0; st == GM_OK && rows && r < n; r++) {
        int32_t head[2];
        memcpy(head, j->out + r * j->stride, sizeof head);
        rows[r].n_ids = (size_t)head[0];
        rows[r].stop = (gm_stop_reason)head[1];
        rows[r].ids = malloc((rows[r].n_ids ? rows[r].n_ids : 1) * sizeof(int32_t));
        if (!rows[r].ids) st = gm_fail(GM_ERR_NOMEM, "out of memory");
        else memcpy(rows[r].ids, j->out + r * j->stride + 2, rows[r].n_ids * sizeof(int32_t));
    }
    free(j->out);
    free(j);
    return st;
}

gm_status gm_generate_batch(gm_model *m, const int32_t *const *prompts, const size_t *lens, size_t n,
                            const gm_batch_options *opt_in, gm_batch_row *rows) {
    if (m->rank != 0) return gm_fail(GM_ERR_STATE, "only rank 0 starts a batch; other ranks run gm_model_serve");
    if (n == 0 || !prompts || !lens || !rows) return gm_fail(GM_ERR_ARG, "empty batch");
    gm_batch_options opt = {0};
    if (opt_in) opt = *opt_in;
    else opt.sampling = gm_sampler_config_default();
    if (opt.max_new_tokens == 0) opt.max_new_tokens = 256;
    if (opt.max_new_tokens < 0 || opt.max_new_tokens > (1 << 20))
        return gm_fail(GM_ERR_ARG, "max_new_tokens %d is out of range", opt.max_new_tokens);
    GM_TRY(gm_sampler_config_check(&opt.sampling));
    size_t total = 0;
    for (size_t r = 0; r < n; r++) {
        if (lens[r] == 0) return gm_fail(GM_ERR_ARG, "batch row %zu has an empty prompt", r);
        if (lens[r] > (size_t)m->opt.cache_length)
            return gm_fail(GM_ERR_RANGE, "batch row %zu has %zu prompt tokens; the cache holds %d", r, lens[r],
                           m->opt.cache_length);
        for (size_t i = 0; i < lens[r]; i++)
            if (prompts[r][i] < 0 || prompts[r][i] >= m->cfg.vocab_size)
                return gm_fail(GM_ERR_RANGE, "batch row %zu: token %d outside the vocabulary", r, prompts[r][i]);
        total += lens[r];
    }
    memset(rows, 0, n * sizeof *rows);
    if (m->n_ranks > 1) { /* ship the batch: command, options, lengths, then all tokens */
        if (n + total > (size_t)INT32_MAX) return gm_fail(GM_ERR_RANGE, "batch of %zu tokens is too large", total);
        gm_cmd c = {.op = GM_CMD_BATCH, .n = (int32_t)n, .pos0 = (int32_t)total};
        GM_TRY(gm_model_send_cmd(m, &c, NULL));
        GM_TRY(gm_mpi_broadcast(&opt, sizeof opt));
        int32_t *flat = malloc((n + total) * sizeof *flat);
        if (!flat) return gm_fail(GM_ERR_NOMEM, "out of memory");
        for (size_t r = 0, k = n; r < n; r++) {
            flat[r] = (int32_t)lens[r];
            memcpy(flat + k, prompts[r], lens[r] * sizeof *flat);
            k += lens[r];
        }
        gm_status st = gm_mpi_broadcast(flat, (n + total) * sizeof *flat);
        free(flat);
        GM_TRY(st);
    }
    return gm_batch_run(m, prompts, lens, n, &opt, rows);
}

gm_status gm_batch_serve(gm_model *m, const gm_cmd *cmd) {
    gm_batch_options opt;
    GM_TRY(gm_mpi_broadcast(&opt, sizeof opt));
    size_t n = (size_t)cmd->n, total = (size_t)cmd->pos0; /* rows, prompt tokens in all */
    if (cmd->n < 1 || cmd->pos0 < cmd->n) return gm_fail(GM_ERR_COMM, "rank %d: malformed batch command", m->rank);
    int32_t *flat = malloc((n + total) * sizeof *flat);
    const int32_t **prompts = malloc(n * sizeof *prompts);
    size_t *lens = malloc(n * sizeof *lens);
    gm_status st = flat && prompts && lens ? GM_OK : gm_fail(GM_ERR_NOMEM, "out of memory");
    if (st == GM_OK) st = gm_mpi_broadcast(flat, (n + total) * sizeof *flat);
    for (size_t r = 0, k = n; st == GM_OK && r < n; r++) {
        lens[r] = (size_t)flat[r];
        prompts[r] = flat + k;
        k += lens[r];
    }
    if (st == GM_OK) st = gm_batch_run(m, prompts, lens, n, &opt, NULL);
    free(flat);
    free(prompts);
    free(lens);
    return st;
}
