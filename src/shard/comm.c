#define _POSIX_C_SOURCE 200809L
#include "base/clock.h"
#include "shard/comm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threads.h"

struct gm_comm {
    int n_local, n_ranks, rank;
    gm_barrier barrier;
    void **slots;        /* [n_local] each device's published buffer */
    float **gslots;      /* [n_local][GM_GATHER_MAX] published buffers of a multi-buffer gather */
    float **scratch;     /* [n_local] private reduction outputs */
    size_t *scratch_cap;
    size_t *rank_off;    /* [n_ranks + 1] for MPI gathers */
    gm_comm_stats stats; /* updated by local device 0 only */
    int shared_failed;   /* reduce-scatter: device 0 could not size the shared scratch */
};

gm_status gm_comm_create(int n_local, int n_ranks, int rank, gm_comm **out) {
    *out = NULL;
    if (n_local < 1 || n_ranks < 1 || rank < 0 || rank >= n_ranks)
        return gm_fail(GM_ERR_ARG, "bad mesh: %d devices per rank, rank %d of %d", n_local, rank, n_ranks);
    gm_comm *c = calloc(1, sizeof *c);
    if (!c) return gm_fail(GM_ERR_NOMEM, "out of memory");
    c->n_local = n_local;
    c->n_ranks = n_ranks;
    c->rank = rank;
    c->slots = calloc((size_t)n_local, sizeof *c->slots);
    c->gslots = calloc((size_t)n_local * GM_GATHER_MAX, sizeof *c->gslots);
    c->scratch = calloc((size_t)n_local, sizeof *c->scratch);
    c->scratch_cap = calloc((size_t)n_local, sizeof *c->scratch_cap);
    c->rank_off = calloc((size_t)n_ranks + 1, sizeof *c->rank_off);
    if (!c->slots || !c->gslots || !c->scratch || !c->scratch_cap || !c->rank_off || gm_barrier_init(&c->barrier, n_local) != GM_OK) {
        free(c->slots);
        free(c->gslots);
        free(c->scratch);
        free(c->scratch_cap);
        free(c->rank_off);
        free(c);
        return gm_fail(GM_ERR_NOMEM, "out of memory for the mesh");
    }
    *out = c;
    return GM_OK;
}

void gm_comm_free(gm_comm *c) {
    if (!c) return;
    for (int i = 0; i < c->n_local; i++) free(c->scratch[i]);
    gm_barrier_destroy(&c->barrier);
    free(c->slots);
    free(c->gslots);
    free(c->scratch);
    free(c->scratch_cap);
    free(c->rank_off);
    free(c);
}

int gm_comm_devices(const gm_comm *c) { return c->n_local * c->n_ranks; }
int gm_comm_local_devices(const gm_comm *c) { return c->n_local; }
int gm_comm_rank(const gm_comm *c) { return c->rank; }
int gm_comm_ranks(const gm_comm *c) { return c->n_ranks; }
int gm_comm_global_index(const gm_comm *c, int local) { return c->rank * c->n_local + local; }

static void account(gm_comm *c, int local, double bytes, double t0) {
    if (local != 0) return;
    c->stats.calls++;
    c->stats.bytes += (uint64_t)bytes;
    c->stats.seconds += gm_now_seconds() - t0;
}

void gm_comm_set_spin(gm_comm *c, int iters) { gm_barrier_set_spin(&c->barrier, iters); }

static gm_wait wait_policy(gm_wait asked, long threads, bool multi_rank) {
    if (asked != GM_WAIT_AUTO) return asked;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!local) local = getenv("MPI_LOCALNRANKS");
    long here = multi_rank && local ? atol(local) : 1;
    return gm_threads_oversubscribed(threads, here < 1 ? 1 : here) ? GM_WAIT_YIELD : GM_WAIT_SPIN;
}

gm_wait gm_comm_wait_policy(const gm_comm *c, gm_wait asked, long threads) {
    return wait_policy(asked, threads, c->n_ranks > 1);
}

gm_wait gm_mpi_wait_policy(gm_wait asked) { return wait_policy(asked, 1, true); }

gm_status gm_comm_barrier(gm_comm *c, int local) {
    gm_barrier_wait(&c->barrier);
    if (c->n_ranks > 1 && local == 0) GM_TRY(gm_mpi_barrier());
    gm_barrier_wait(&c->barrier);
    return GM_OK;
}

gm_status gm_comm_all_reduce(gm_comm *c, int local, float *buf, size_t n) {
    int P = gm_comm_devices(c);
    if (P == 1) return GM_OK;
    double t0 = gm_now_seconds();
    gm_status st = GM_OK;
    if (c->n_local > 1) {
        if (c->scratch_cap[local] < n) {
            float *s = realloc(c->scratch[local], n * sizeof *s);
            if (!s) st = gm_fail(GM_ERR_NOMEM, "all-reduce: cannot allocate %zu floats", n);
            else {
                c->scratch[local] = s;
                c->scratch_cap[local] = n;
            }
        }
        c->slots[local] = buf;
        gm_barrier_wait(&c->barrier);
        /* Every device sums all published buffers into its private scratch (fixed order: the same
         * float result on every device), then copies back once all have read. */
        if (st == GM_OK) {
            float *acc = c->scratch[local];
            const float *b0 = c->slots[0];
            memcpy(acc, b0, n * sizeof *acc);
            for (int d = 1; d < c->n_local; d++) {
                const float *bd = c->slots[d];
                for (size_t i = 0; i < n; i++) acc[i] += bd[i];
            }
        }
        gm_barrier_wait(&c->barrier);
        if (st == GM_OK) memcpy(buf, c->scratch[local], n * sizeof *buf);
    }
    if (c->n_ranks > 1) {
        if (local == 0 && st == GM_OK) st = gm_mpi_all_reduce(buf, n);
        c->slots[local] = buf;
        gm_barrier_wait(&c->barrier);
        if (local != 0 && st == GM_OK) memcpy(buf, c->slots[0], n * sizeof *buf);
        gm_barrier_wait(&c->barrier);
    }
    account(c, local, 2.0 * (P - 1) / P * (double)n * sizeof(float), t0);
    return st;
}

gm_status gm_comm_all_gather_n(gm_comm *c, int local, float *const *bufs, const size_t *const *offs, int n) {
    int P = gm_comm_devices(c);
    if (P == 1 || n < 1) return GM_OK;
    if (n > GM_GATHER_MAX) return gm_fail(GM_ERR_ARG, "all-gather of %d buffers (at most %d)", n, GM_GATHER_MAX);
    double t0 = gm_now_seconds();
    gm_status st = GM_OK;
    int base = c->rank * c->n_local;
    float **mine = c->gslots + (size_t)local * GM_GATHER_MAX;
    for (int i = 0; i < n; i++) mine[i] = bufs[i];
    if (c->n_local > 1) { /* one pair of barriers for all the buffers */
        gm_barrier_wait(&c->barrier);
        for (int d = 0; d < c->n_local; d++) {
            if (d == local) continue;
            float *const *theirs = c->gslots + (size_t)d * GM_GATHER_MAX;
            for (int i = 0; i < n; i++) {
                size_t lo = offs[i][base + d], hi = offs[i][base + d + 1];
                memcpy(bufs[i] + lo, theirs[i] + lo, (hi - lo) * sizeof(float));
            }
        }
        gm_barrier_wait(&c->barrier);
    }
    if (c->n_ranks > 1) {
        if (local == 0)
            for (int i = 0; i < n && st == GM_OK; i++) {
                for (int r = 0; r <= c->n_ranks; r++) c->rank_off[r] = offs[i][r * c->n_local];
                st = gm_mpi_all_gather(bufs[i], c->rank_off);
            }
        gm_barrier_wait(&c->barrier);
        if (local != 0 && st == GM_OK) {
            float *const *root = c->gslots;
            for (int i = 0; i < n; i++) {
                size_t mine_lo = offs[i][base], mine_hi = offs[i][base + c->n_local];
                memcpy(bufs[i], root[i], mine_lo * sizeof(float));
                memcpy(bufs[i] + mine_hi, root[i] + mine_hi, (offs[i][P] - mine_hi) * sizeof(float));
            }
        }
        gm_barrier_wait(&c->barrier);
    }
    double bytes = 0;
    for (int i = 0; i < n; i++) bytes += (double)(P - 1) / P * (double)offs[i][P] * sizeof(float);
    account(c, local, bytes, t0);
    return st;
}

gm_status gm_comm_all_gather(gm_comm *c, int local, float *buf, const size_t *off) {
    return gm_comm_all_gather_n(c, local, &buf, &off, 1);
}

gm_status gm_comm_reduce_scatter(gm_comm *c, int local, float *buf, const size_t *off) {
    int P = gm_comm_devices(c);
    if (P == 1) return GM_OK;
    double t0 = gm_now_seconds();
    gm_status st = GM_OK;
    int base = c->rank * c->n_local;
    size_t total = off[P];
    if (c->n_ranks > 1 && local == 0) {
        /* device 0's scratch is shared here: the rank's local sum [total] and what MPI returns to the rank */
        size_t need = total + (off[base + c->n_local] - off[base]);
        c->shared_failed = 0;
        if (c->scratch_cap[0] < need) {
            float *sc = realloc(c->scratch[0], need * sizeof *sc);
            if (!sc) c->shared_failed = 1;
            else {
                c->scratch[0] = sc;
                c->scratch_cap[0] = need;
            }
        }
    }
    c->slots[local] = buf;
    gm_barrier_wait(&c->barrier);
    if (c->n_ranks == 1) {
        /* device d sums segment d of every buffer in device order and writes only its own buffer */
        size_t lo = off[local], hi = off[local + 1];
        for (size_t i = lo; i < hi; i++) {
            float acc = ((const float *)c->slots[0])[i];
            for (int d = 1; d < c->n_local; d++) acc += ((const float *)c->slots[d])[i];
            buf[i] = acc;
        }
        gm_barrier_wait(&c->barrier); /* nobody may touch its buffer while others still read it */
    } else {
        if (c->shared_failed) st = gm_fail(GM_ERR_NOMEM, "reduce-scatter: cannot allocate %zu floats", total);
        float *sum = c->scratch[0];
        if (st == GM_OK) {
            size_t a, b;
            gm_split_range(total, c->n_local, local, 16, &a, &b);
            for (size_t i = a; i < b; i++) {
                float acc = ((const float *)c->slots[0])[i];
                for (int d = 1; d < c->n_local; d++) acc += ((const float *)c->slots[d])[i];
                sum[i] = acc;
            }
        }
        gm_barrier_wait(&c->barrier);
        if (local == 0 && st == GM_OK) {
            for (int r = 0; r <= c->n_ranks; r++) c->rank_off[r] = off[r * c->n_local];
            st = gm_mpi_reduce_scatter(sum, sum + total, c->rank_off);
            c->shared_failed = st != GM_OK;
        }
        gm_barrier_wait(&c->barrier);
        if (c->shared_failed && st == GM_OK) st = gm_fail(GM_ERR_COMM, "reduce-scatter: the MPI exchange failed on device 0");
        int g = base + local;
        if (st == GM_OK) memcpy(buf + off[g], sum + total + (off[g] - off[base]), (off[g + 1] - off[g]) * sizeof *buf);
        gm_barrier_wait(&c->barrier);
    }
    account(c, local, (double)(P - 1) / P * (double)total * sizeof(float), t0);
    return st;
}

gm_status gm_comm_broadcast(gm_comm *c, int local, void *buf, size_t n) {
    if (gm_comm_devices(c) == 1) return GM_OK;
    double t0 = gm_now_seconds();
    gm_status st = GM_OK;
    if (c->n_ranks > 1 && local == 0) st = gm_mpi_broadcast(buf, n);
    c->slots[local] = buf;
    gm_barrier_wait(&c->barrier);
    if (local != 0) memcpy(buf, c->slots[0], n);
    gm_barrier_wait(&c->barrier);
    account(c, local, (double)n, t0);
    return st;
}

gm_comm_stats gm_comm_get_stats(const gm_comm *c) { return c->stats; }
void gm_comm_reset_stats(gm_comm *c) { memset(&c->stats, 0, sizeof c->stats); }
