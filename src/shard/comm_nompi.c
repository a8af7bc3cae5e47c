/* Stand-ins used when the build has no MPI: a single-rank mesh never calls them. */
#ifndef GM_HAVE_MPI
#include "shard/comm.h"

static gm_status no_mpi(void) { return gm_fail(GM_ERR_UNSUPPORTED, "this build of gemma.c has no MPI support"); }
gm_status gm_mpi_init(gm_wait wait, int *rank, int *n_ranks) {
    (void)wait;
    *rank = 0;
    *n_ranks = 1;
    return GM_OK;
}
void gm_mpi_finalize(void) {}
gm_status gm_mpi_all_reduce(float *buf, size_t n) { (void)buf; (void)n; return no_mpi(); }
gm_status gm_mpi_all_gather(float *buf, const size_t *rank_off) { (void)buf; (void)rank_off; return no_mpi(); }
gm_status gm_mpi_broadcast(void *buf, size_t n) { (void)buf; (void)n; return no_mpi(); }
gm_status gm_mpi_barrier(void) { return no_mpi(); }
gm_status gm_mpi_reduce_scatter(const float *in, float *out, const size_t *rank_off) {
    (void)in, (void)out, (void)rank_off;
    return no_mpi();
}
bool gm_mpi_available(void) { return false; }
#else
typedef int gm_comm_nompi_unused;
#endif
