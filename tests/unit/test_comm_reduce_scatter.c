/* gm_comm_reduce_scatter over in-process devices (1..4 threads) and, when launched by mpirun (see
 * tests/cli/train_mpi.sh), across MPI ranks with 2 devices each: every device contributes known values;
 * each must end up with the exact sum of its own segment (uneven segments, an empty one included), and
 * the existing all-gather must still put the segments back together, and a gather of three buffers at
 * once (gm_comm_all_gather_n, each split its own way) must leave every segment's owner values in each. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "shard/comm.h"
#include "test_util.h"

typedef struct job {
    gm_comm *c;
    int P, rank, n_local;
    size_t off[9], off2[9];
    int bad[8];
    gm_status st[8];
} job;

/* contribution of global device g at index i: small integers, so float sums are exact */
static float val(int g, size_t i) { return (float)((int)(i % 13) - 6 + 3 * g); }

static void worker(void *ctx, int local, int n) {
    (void)n;
    job *j = ctx;
    int g = j->rank * j->n_local + local;
    size_t total = j->off[j->P];
    float *buf = malloc((total + 1) * sizeof *buf);
    for (size_t i = 0; i < total; i++) buf[i] = val(g, i);
    j->st[local] = gm_comm_reduce_scatter(j->c, local, buf, j->off);
    for (size_t i = j->off[g]; i < j->off[g + 1]; i++) {
        float want = 0;
        for (int d = 0; d < j->P; d++) want += val(d, i);
        if (buf[i] != want) j->bad[local]++;
    }
    /* gather the summed segments back: every device then holds the whole sum */
    if (j->st[local] == GM_OK) j->st[local] = gm_comm_all_gather(j->c, local, buf, j->off);
    for (size_t i = 0; i < total; i++) {
        float want = 0;
        for (int d = 0; d < j->P; d++) want += val(d, i);
        if (buf[i] != want) j->bad[local]++;
    }
    free(buf);
    /* three buffers at once: each device writes only its segments, the rest is garbage before */
    float *bufs[3];
    const size_t *offs[3] = {j->off, j->off2, j->off};
    for (int k = 0; k < 3; k++) {
        size_t n = offs[k][j->P];
        bufs[k] = malloc((n + 1) * sizeof(float));
        for (size_t i = 0; i < n; i++) bufs[k][i] = i >= offs[k][g] && i < offs[k][g + 1] ? val(g, i) + 1000.0f * (float)k : -1.0f;
    }
    if (j->st[local] == GM_OK) j->st[local] = gm_comm_all_gather_n(j->c, local, bufs, offs, 3);
    for (int k = 0; k < 3; k++) {
        for (int d = 0; d < j->P; d++)
            for (size_t i = offs[k][d]; i < offs[k][d + 1]; i++) j->bad[local] += bufs[k][i] != val(d, i) + 1000.0f * (float)k;
        free(bufs[k]);
    }
}

static void run(int n_local, int rank, int n_ranks) {
    job j;
    memset(&j, 0, sizeof j);
    j.P = n_local * n_ranks, j.rank = rank, j.n_local = n_local;
    /* uneven: device 1 gets nothing when there are 3+ devices */
    size_t sizes[8] = {37, 0, 101, 5, 64, 1, 9, 30};
    if (j.P < 3) sizes[1] = 20;
    for (int d = 0; d < j.P; d++) j.off[d + 1] = j.off[d] + sizes[d];
    for (int d = 0; d < j.P; d++) j.off2[d + 1] = j.off2[d] + sizes[7 - d] + 2;
    CHECK(gm_comm_create(n_local, n_ranks, rank, &j.c) == GM_OK, "%s", gm_last_error());
    gm_pool *pool;
    CHECK(gm_pool_create(n_local, &pool) == GM_OK, "pool");
    gm_pool_run(pool, worker, &j);
    for (int d = 0; d < n_local; d++) {
        CHECK(j.st[d] == GM_OK, "%d ranks x %d devices: device %d: %s", n_ranks, n_local, d, gm_status_name(j.st[d]));
        CHECK(j.bad[d] == 0, "%d ranks x %d devices: device %d: %d wrong sums", n_ranks, n_local, d, j.bad[d]);
    }
    gm_comm_stats s = gm_comm_get_stats(j.c);
    if (j.P > 1) CHECK(s.calls == 3 && s.bytes > 0, "stats count the collectives (%llu calls)", (unsigned long long)s.calls);
    gm_pool_free(pool);
    gm_comm_free(j.c);
}

int main(void) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) {
        int rank, n;
        if (gm_mpi_init(GM_WAIT_AUTO, &rank, &n) != GM_OK || !gm_mpi_available()) {
            printf("no MPI in this build: skipped\n");
            return 77;
        }
        run(2, rank, n);
        run(1, rank, n);
        int rc = gm_test_finish();
        gm_mpi_finalize();
        return rc;
    }
    for (int n = 1; n <= 4; n++) run(n, 0, 1);
    return gm_test_finish();
}
