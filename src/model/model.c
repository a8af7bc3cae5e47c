/* Loading a model onto a mesh: MPI ranks x in-process devices, each device reading its own slices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model_internal.h"
#include "model/config.h"
#include "shard/plan_report.h"
#include "model/tokenizer_job.h"

void gm_load_options_default(gm_load_options *o) {
    memset(o, 0, sizeof *o);
    o->devices = 1;
    o->threads_per_device = 1;
    o->sharding = GM_SHARDING_AUTO;
    o->cache_length = 4096;
    o->use_mpi = true;
}

static bool launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

typedef struct load_job {
    gm_model *m;
    gm_status st[GM_MAX_DEVICES];
    char err[GM_MAX_DEVICES][512];
} load_job;

/* Bytes of weights global device `dev` holds under the model's plan. */
static uint64_t device_weight_bytes(const gm_model *m, int dev) {
    uint64_t sum = 0;
    int total = gm_comm_devices(m->comm);
    for (size_t t = 0; t < gm_source_tensor_count(m->src); t++) {
        gm_tensor_plan plan;
        uint64_t b = 0;
        if (gm_plan_slice_bytes(&m->cfg, gm_source_tensor_at(m->src, t), m->sharding, total, dev, &plan, &b) == GM_OK)
            sum += b;
    }
    return sum;
}

static void load_worker(void *ctx, int i, int n) {
    (void)n;
    load_job *j = ctx;
    gm_model *m = j->m;
    int global = gm_comm_global_index(m->comm, i), total = gm_comm_devices(m->comm);
    /* weights first: they check every shape against the config, so a config with absurd sizes (that the
     * file's tensors do not back) is refused before activations are sized from it. Loading (copying out
     * of the page cache, first touch, packing) uses every core when this process has one device. */
    gm_device_weights w;
    memset(&w, 0, sizeof w);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int loaders = m->n_local == 1 && cpus > m->opt.threads_per_device ? (cpus > 64 ? 64 : (int)cpus)
                                                                       : m->opt.threads_per_device;
    gm_pool *loader = NULL;
    gm_status st = gm_pool_create(loaders, &loader);
    gm_pool_set_spin(loader, gm_wait_spin(m->wait));
    if (st == GM_OK) {
        st = gm_weights_load(m->src, m->sharding, total, global, loader, m->opt.weight_cache, &w);
        if (st == GM_ERR_NOMEM) /* say what the whole load needs, not only the allocation that failed */
            snprintf(j->err[i], sizeof j->err[i],
                     "out of memory: %s; device %d needs %llu bytes (%.1f MiB) of weights in all", gm_last_error(), global,
                     (unsigned long long)device_weight_bytes(m, global), device_weight_bytes(m, global) / 1048576.0);
        else if (st != GM_OK)
            snprintf(j->err[i], sizeof j->err[i], "%s", gm_last_error());
    } else {
        snprintf(j->err[i], sizeof j->err[i], "%s%s", st == GM_ERR_NOMEM ? "out of memory: " : "", gm_last_error());
    }
    gm_pool_free(loader);
    if (st == GM_OK) {
        st = gm_device_init(&m->dev[i], &m->cfg, i, global, total, m->comm, m->opt.threads_per_device,
                            m->opt.cache_length);
        if (st == GM_OK) {
            m->dev[i].w = w, m->dev[i].fast = m->opt.precision == GM_PRECISION_FAST;
            gm_pool_set_spin(m->dev[i].pool, gm_wait_spin(m->wait));
        } else {
            snprintf(j->err[i], sizeof j->err[i], "%s%s", st == GM_ERR_NOMEM ? "out of memory: " : "", gm_last_error());
        }
    }
    if (st != GM_OK) gm_weights_free(&w, m->cfg.n_layers); /* a partial load too */
    j->st[i] = st;
}

/* Sum up what the weight cache did on this process's devices; say why a file could not be written. */
static void note_weight_cache(gm_model *m) {
    m->weight_cache = "off";
    if (!m->opt.weight_cache) return;
    int hits = 0, misses = 0;
    bool unwritten = false;
    for (int i = 0; i < m->n_local; i++) {
        const gm_device_weights *w = &m->dev[i].w;
        hits += w->cache_hits;
        misses += w->cache_misses;
        if (w->cache_note[0]) {
            unwritten = true;
            if (m->opt.warn) m->opt.warn(m->opt.warn_user, w->cache_note);
        }
    }
    m->weight_cache = unwritten ? "unwritten" : misses == 0 && hits > 0 ? "mapped" : misses > 0 ? "written" : "off";
}

/* The tokenizer must fit the embedding (it may be smaller: multimodal checkpoints have 262208 rows for
 * 262144 tokens); the chat markers come from the tokenizer when it has them. */
static gm_status check_tokenizer(gm_model *m, const char *path) {
    if (!m->tok) return GM_OK;
    int V = gm_tokenizer_vocab_size(m->tok);
    if (V > m->cfg.vocab_size)
        return gm_fail(GM_ERR_FORMAT, "%s: the tokenizer has %d tokens but the embedding has only %d rows (vocab_size): "
                       "tokenizer and weights do not belong together", path, V, m->cfg.vocab_size);
    int32_t sot = gm_tokenizer_find(m->tok, "<start_of_turn>"), eot = gm_tokenizer_find(m->tok, "<end_of_turn>");
    if (sot >= 0) m->cfg.start_of_turn_id = sot;
    if (eot >= 0) m->cfg.end_of_turn_id = eot;
    return GM_OK;
}

/* Under MPI all ranks must run the same file with the same options: compare a digest of both. Every
 * rank learns which rank differs first and how, so the message is whole whichever rank prints it. */
static gm_status check_ranks_agree(gm_model *m) {
    if (m->n_ranks == 1) return GM_OK;
    uint64_t digest[6] = {gm_source_fingerprint(m->src), (uint64_t)m->opt.devices, (uint64_t)m->sharding,
                          (uint64_t)m->opt.cache_length, (uint64_t)m->opt.precision, (uint64_t)gm_model_kv_type(m)};
    gm_disagreement d;
    GM_TRY(gm_mpi_find_disagreement(digest, 6, &d));
    if (d.first < 0) return GM_OK;
    const uint64_t *x = d.theirs, *r = d.root;
    return gm_fail(GM_ERR_ARG,
                   "rank %d: model file or flags differ from rank 0 (file fingerprint %016llx vs %016llx, devices "
                   "%llu vs %llu, sharding %llu vs %llu, cache %llu vs %llu, precision %llu vs %llu, kv cache type "
                   "%llu vs %llu)%s; every rank must run the same command on the same file",
                   d.first, (unsigned long long)x[0], (unsigned long long)r[0], (unsigned long long)x[1],
                   (unsigned long long)r[1], (unsigned long long)x[2], (unsigned long long)r[2], (unsigned long long)x[3],
                   (unsigned long long)r[3], (unsigned long long)x[4], (unsigned long long)r[4], (unsigned long long)x[5],
                   (unsigned long long)r[5], d.count > 1 ? " and other ranks differ too" : "");
}

gm_status gm_model_load(const char *path, const gm_load_options *opt_in, gm_model **out) {
    *out = NULL;
    gm_tok_job tok;
    bool tok_started = false;
    gm_load_options opt;
    if (opt_in) opt = *opt_in;
    else gm_load_options_default(&opt);
    if (opt.devices < 1 || opt.devices > GM_MAX_DEVICES)
        return gm_fail(GM_ERR_ARG, "--devices %d: must be between 1 and %d", opt.devices, GM_MAX_DEVICES);
    if (opt.threads_per_device < 1 || opt.threads_per_device > 256)
        return gm_fail(GM_ERR_ARG, "--threads %d: must be between 1 and 256", opt.threads_per_device);
    if (opt.cache_length < 1 || opt.cache_length > (1 << 20))
        return gm_fail(GM_ERR_ARG, "--cache-length %d: must be between 1 and %d", opt.cache_length, 1 << 20);
    if (opt.precision != GM_PRECISION_EXACT && opt.precision != GM_PRECISION_FAST)
        return gm_fail(GM_ERR_ARG, "precision %d: must be GM_PRECISION_EXACT or GM_PRECISION_FAST", (int)opt.precision);
    if (opt.kv_type != GM_KV_AUTO && opt.kv_type != GM_KV_F32 && opt.kv_type != GM_KV_F16)
        return gm_fail(GM_ERR_ARG, "kv_type %d: must be GM_KV_AUTO, GM_KV_F32 or GM_KV_F16", (int)opt.kv_type);
    if (opt.wait != GM_WAIT_AUTO && opt.wait != GM_WAIT_SPIN && opt.wait != GM_WAIT_YIELD)
        return gm_fail(GM_ERR_ARG, "wait %d: must be GM_WAIT_AUTO, GM_WAIT_SPIN or GM_WAIT_YIELD", (int)opt.wait);
    gm_model *m = calloc(1, sizeof *m);
    if (!m) return gm_fail(GM_ERR_NOMEM, "out of memory");
    m->opt = opt;
    m->rank = 0;
    m->n_ranks = 1;
    gm_status st = GM_OK;
    if (opt.use_mpi && launched_by_mpirun())
        st = gm_mpi_init(gm_mpi_wait_policy(opt.wait), &m->rank, &m->n_ranks);
    if (st == GM_OK && m->n_ranks * opt.devices > GM_MAX_DEVICES)
        st = gm_fail(GM_ERR_ARG, "%d ranks x %d devices is more than %d devices", m->n_ranks, opt.devices, GM_MAX_DEVICES);
    if (st == GM_OK) st = gm_source_open(path, &m->src);
    if (st == GM_OK) {
        m->cfg = *gm_source_config(m->src);
        int total = m->n_ranks * opt.devices;
        m->sharding = opt.sharding == GM_SHARDING_AUTO ? (total > 1 ? GM_SHARDING_FSDP : GM_SHARDING_REPLICATED)
                                                        : opt.sharding;
        /* only rank 0 tokenizes; the others follow its token ids */
        if (m->rank == 0) {
            st = gm_tok_job_start(&tok, path, m->src, opt.weight_cache);
            tok_started = st == GM_OK;
        }
        if (st == GM_OK) st = check_ranks_agree(m); /* the fingerprint reads the directory, not the tokenizer arrays */
        if (!tok_started) gm_source_release_tokenizer_arrays(m->src);
    }
    if (st == GM_OK) st = gm_comm_create(opt.devices, m->n_ranks, m->rank, &m->comm);
    if (st == GM_OK) {
        m->wait = gm_comm_wait_policy(m->comm, opt.wait, (long)opt.devices * opt.threads_per_device);
        gm_comm_set_spin(m->comm, gm_wait_spin(m->wait));
        m->n_local = opt.devices;
        m->dev = calloc((size_t)m->n_local, sizeof *m->dev);
        m->scratch_logits = malloc((size_t)m->n_local * (size_t)m->cfg.vocab_size * sizeof(float));
        if (!m->dev || !m->scratch_logits) st = gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    if (st == GM_OK) st = gm_pool_create(m->n_local, &m->devices);
    if (st == GM_OK) gm_pool_set_spin(m->devices, gm_wait_spin(m->wait));
    if (st == GM_OK) {
        load_job *j = calloc(1, sizeof *j);
        if (!j) st = gm_fail(GM_ERR_NOMEM, "out of memory");
        else {
            j->m = m;
            gm_pool_run(m->devices, load_worker, j);
            for (int i = 0; i < m->n_local && st == GM_OK; i++)
                if (j->st[i] != GM_OK) st = gm_fail(j->st[i], "%s", j->err[i]);
            free(j);
        }
    }
    if (tok_started) {
        gm_tok_job_join(&tok);
        gm_source_release_tokenizer_arrays(m->src); /* the tokenizer has its own copy now */
        m->tok = tok.tok;
        m->tokenizer_cache = tok.cache_state;
        if (tok.why[0] && st == GM_OK && m->opt.warn) m->opt.warn(m->opt.warn_user, tok.why);
    }
    if (st == GM_OK) note_weight_cache(m);
    if (st == GM_OK) st = check_tokenizer(m, path); /* rank 0 only; a failure there aborts the job (CLI) */
    /* A rank that fails to load returns an error; the CLI then aborts the MPI job so no rank waits. */
    if (st != GM_OK) {
        gm_model_free(m);
        return st;
    }
    *out = m;
    return GM_OK;
}

void gm_model_free(gm_model *m) {
    if (!m) return;
    if (m->n_ranks > 1 && m->rank == 0 && m->dev) {
        gm_cmd quit = {.op = GM_CMD_QUIT};
        gm_model_send_cmd(m, &quit, NULL);
    }
    for (int i = 0; i < GM_MAX_SESSIONS; i++)
        if (m->sessions[i]) gm_session_destroy_local(m->sessions[i]);
    for (int i = 0; m->dev && i < m->n_local; i++) gm_device_free(&m->dev[i]);
    free(m->dev);
    free(m->scratch_logits);
    gm_pool_free(m->devices);
    gm_comm_free(m->comm);
    gm_tokenizer_free(m->tok);
    gm_source_close(m->src);
    free(m);
}

const gm_config *gm_model_config(const gm_model *m) { return &m->cfg; }
const gm_tokenizer *gm_model_tokenizer(const gm_model *m) { return m->tok; }
gm_kv_type gm_model_kv_type(const gm_model *m) {
    if (m->opt.kv_type != GM_KV_AUTO) return m->opt.kv_type;
    return m->opt.precision == GM_PRECISION_FAST ? GM_KV_F16 : GM_KV_F32;
}

gm_wait gm_model_wait(const gm_model *m) { return m->wait; }

const char *gm_model_weight_cache(const gm_model *m) { return m->weight_cache ? m->weight_cache : "off"; }
const char *gm_model_tokenizer_cache(const gm_model *m) { return m->tokenizer_cache ? m->tokenizer_cache : "off"; }
int gm_model_devices(const gm_model *m) { return m->n_local * m->n_ranks; }
int gm_model_rank(const gm_model *m) { return m->rank; }
int gm_model_ranks(const gm_model *m) { return m->n_ranks; }

uint64_t gm_model_weight_bytes(const gm_model *m) {
    uint64_t b = 0;
    for (int i = 0; i < m->n_local; i++) b += m->dev[i].w.bytes;
    return b;
}

uint64_t gm_model_read_bytes(const gm_model *m, bool screened) {
    uint64_t b = 0;
    for (int i = 0; i < m->n_local; i++) {
        const gm_matrix *E = &m->dev[i].w.embed;
        b += m->dev[i].w.bytes;
        if (E->screen8.data) b -= screened ? gm_packed_size(&E->packed) : gm_packed_size(&E->screen8);
    }
    return b;
}

uint64_t gm_model_activation_bytes(const gm_model *m) {
    uint64_t b = (uint64_t)m->n_local * (uint64_t)m->cfg.vocab_size * sizeof(float); /* logits scratch */
    for (int i = 0; i < m->n_local; i++) b += m->dev[i].activation_bytes;
    return b;
}

gm_comm_counters gm_model_comm_counters(const gm_model *m) {
    gm_comm_stats s = gm_comm_get_stats(m->comm);
    return (gm_comm_counters){s.calls, s.bytes, s.seconds};
}

gm_screen_counters gm_model_screen_counters(const gm_model *m) {
    gm_screen_counters c = {0, 0};
    for (int i = 0; m && i < m->n_local; i++) {
        if (m->dev[i].screen_steps > c.steps) c.steps = m->dev[i].screen_steps; /* every device screens each step */
        c.exact_rows += m->dev[i].screen_exact_rows;
    }
    return c;
}

void gm_model_reset_comm_counters(gm_model *m) { gm_comm_reset_stats(m->comm); }

void gm_shutdown(void) { gm_mpi_finalize(); }
