#define _POSIX_C_SOURCE 200809L /* setenv */
/* MPI backend: the cross-process half of the collectives. Only the thread that called MPI_Init
 * (device 0 of each rank) makes MPI calls, so MPI_THREAD_FUNNELED suffices. Errors return instead of
 * aborting, so the caller can name what failed; a lost rank makes mpirun stop the others. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shard/comm.h"

static gm_status mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return GM_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return gm_fail(GM_ERR_COMM, "MPI %s failed: %.*s", what, len, msg);
}

bool gm_mpi_available(void) { return true; }

gm_status gm_mpi_init(gm_wait wait, int *rank, int *n_ranks) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* OpenMPI's ranks poll while they wait for each other. Yielding in that loop is what a host with
         * more busy threads than CPUs needs; on one that has enough, a rank whose core another process
         * shares hands that process its time slice at every wait: 2 ranks decoding the 270M with one core
         * busy ran at 5-7 tok/s yielding, 26 polling (docs/BENCHMARKS.md). A value set by the user stays. */
        if (wait != GM_WAIT_AUTO) setenv("OMPI_MCA_mpi_yield_when_idle", wait == GM_WAIT_YIELD ? "1" : "0", 0);
        int provided;
        GM_TRY(mpi_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), "init"));
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, n_ranks);
    return GM_OK;
}

void gm_mpi_finalize(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Finalize();
}

gm_status gm_mpi_all_reduce(float *buf, size_t n) {
    while (n > 0) { /* MPI counts are int */
        int chunk = n > (size_t)INT32_MAX / 2 ? INT32_MAX / 2 : (int)n;
        GM_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "all-reduce"));
        buf += chunk;
        n -= (size_t)chunk;
    }
    return GM_OK;
}

gm_status gm_mpi_all_gather(float *buf, const size_t *rank_off) {
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int *counts = malloc((size_t)n * sizeof *counts), *displs = malloc((size_t)n * sizeof *displs);
    if (!counts || !displs) {
        free(counts);
        free(displs);
        return gm_fail(GM_ERR_NOMEM, "all-gather: out of memory");
    }
    for (int r = 0; r < n; r++) {
        counts[r] = (int)(rank_off[r + 1] - rank_off[r]);
        displs[r] = (int)rank_off[r];
    }
    gm_status st = mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT,
                                            MPI_COMM_WORLD), "all-gather");
    free(counts);
    free(displs);
    return st;
}

gm_status gm_mpi_reduce_scatter(const float *in, float *out, const size_t *rank_off) {
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int *counts = malloc((size_t)n * sizeof *counts);
    if (!counts) return gm_fail(GM_ERR_NOMEM, "reduce-scatter: out of memory");
    for (int r = 0; r < n; r++) counts[r] = (int)(rank_off[r + 1] - rank_off[r]);
    gm_status st = mpi_check(MPI_Reduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "reduce-scatter");
    free(counts);
    return st;
}

gm_status gm_mpi_broadcast(void *buf, size_t n) {
    return mpi_check(MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD), "broadcast");
}

gm_status gm_mpi_barrier(void) { return mpi_check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }
