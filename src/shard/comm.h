/* Collectives over the mesh's devices. Each device of this process calls the same collective with
 * its local index (SPMD); devices are threads here and, across processes, MPI ranks. In-process the
 * devices exchange through shared memory; the first device of each rank (which runs on the thread
 * that initialised MPI) then joins the ranks with MPI. Every call counts the bytes it moves. */
#ifndef GM_SHARD_COMM_H
#define GM_SHARD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threads.h"
#include "gemma.h"

typedef struct gm_comm gm_comm;

typedef struct gm_comm_stats {
    uint64_t calls;
    uint64_t bytes;    /* ring-equivalent bytes one device sends: all-reduce 2(P-1)/P·n, gather (P-1)/P·n */
    double seconds;    /* wall time inside collectives on device 0 */
} gm_comm_stats;

/* n_local devices in this process; n_ranks processes (1 = no MPI). */
gm_status gm_comm_create(int n_local, int n_ranks, int rank, gm_comm **out);
void gm_comm_free(gm_comm *c);
/* Spin iterations of the local devices' waits in collectives (base/threads.h). */
void gm_comm_set_spin(gm_comm *c, int iters);
/* The wait policy for `threads` busy threads in each process of this mesh (gm_wait): `asked` unless it
 * is AUTO, which becomes YIELD when they and those of the mesh's other ranks on this host (mpirun's
 * OMPI_COMM_WORLD_LOCAL_SIZE or MPICH's MPI_LOCALNRANKS) outnumber the CPUs, else SPIN. */
gm_wait gm_comm_wait_policy(const gm_comm *c, gm_wait asked, long threads);
/* How MPI's ranks wait for each other (gm_mpi_init), before the mesh exists: `asked` unless it is AUTO,
 * which becomes YIELD when the ranks on this host outnumber the CPUs, else SPIN. One thread of each
 * rank calls MPI, after the rank's other devices have reached their barrier (asleep or spinning on
 * their own cores), so only the ranks count. */
gm_wait gm_mpi_wait_policy(gm_wait asked);
/* Spin iterations under a resolved policy. */
static inline int gm_wait_spin(gm_wait w) { return w == GM_WAIT_YIELD ? 0 : GM_SPIN_DEFAULT; }

int gm_comm_devices(const gm_comm *c);              /* all devices in the mesh */
int gm_comm_local_devices(const gm_comm *c);
int gm_comm_rank(const gm_comm *c);
int gm_comm_ranks(const gm_comm *c);
int gm_comm_global_index(const gm_comm *c, int local); /* rank * n_local + local */

/* buf[0..n) summed over all devices, result everywhere. */
gm_status gm_comm_all_reduce(gm_comm *c, int local, float *buf, size_t n);
/* Device g owns buf[off[g] .. off[g+1]) (off has devices+1 entries); afterwards every device's buf
 * holds every segment. */
gm_status gm_comm_all_gather(gm_comm *c, int local, float *buf, const size_t *off);
/* The same for n <= GM_GATHER_MAX buffers at once (buffer i split by offs[i]): one synchronization
 * for all of them between the devices of a process. */
enum { GM_GATHER_MAX = 4 };
gm_status gm_comm_all_gather_n(gm_comm *c, int local, float *const *bufs, const size_t *const *offs, int n);
/* Device g's buf[0 .. off[devices]) holds its contribution; afterwards buf[off[g] .. off[g+1]) on device g
 * holds the sum over all devices of that segment (summed in device order, so every device count that
 * splits the same way gets the same floats); the rest of buf is unspecified. */
gm_status gm_comm_reduce_scatter(gm_comm *c, int local, float *buf, const size_t *off);
/* Copy n bytes from global device 0 to all. */
gm_status gm_comm_broadcast(gm_comm *c, int local, void *buf, size_t n);
gm_status gm_comm_barrier(gm_comm *c, int local);

gm_comm_stats gm_comm_get_stats(const gm_comm *c);
void gm_comm_reset_stats(gm_comm *c);

/* MPI backend hooks (src/shard/comm_mpi.c when built with MPI; otherwise they fail). */
/* Idempotent; MPI_THREAD_FUNNELED. When it starts MPI, `wait` (SPIN or YIELD; AUTO leaves MPI's own
 * default) sets OpenMPI's mpi_yield_when_idle unless the environment already does. */
gm_status gm_mpi_init(gm_wait wait, int *rank, int *n_ranks);
void gm_mpi_finalize(void);
gm_status gm_mpi_all_reduce(float *buf, size_t n);
gm_status gm_mpi_all_gather(float *buf, const size_t *rank_off); /* rank r owns [rank_off[r], rank_off[r+1]) */
gm_status gm_mpi_broadcast(void *buf, size_t n);
gm_status gm_mpi_barrier(void);
/* in[0 .. rank_off[n_ranks]) summed over ranks; rank r receives [rank_off[r], rank_off[r+1]) into out. */
gm_status gm_mpi_reduce_scatter(const float *in, float *out, const size_t *rank_off);
bool gm_mpi_available(void);

/* Do the ranks agree? Every rank passes its digest[0..n) (n <= GM_DIGEST_MAX); every rank learns the
 * lowest rank whose digest differs from rank 0's (first = -1 when all agree), how many differ, and
 * that rank's and rank 0's digests, so any rank can print the whole story (src/shard/agree.c). */
enum { GM_DIGEST_MAX = 16 };
typedef struct gm_disagreement {
    int first, count;
    uint64_t theirs[GM_DIGEST_MAX], root[GM_DIGEST_MAX];
} gm_disagreement;
gm_status gm_mpi_find_disagreement(const uint64_t *digest, int n, gm_disagreement *out);

#endif
