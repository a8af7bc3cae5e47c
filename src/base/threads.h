/* Barrier and a small fork-join pool. Waiting spins briefly, then yields, then sleeps on a condition
 * variable, so an oversubscribed 2-core machine (another process, or more devices than cores)
 * degrades gently instead of collapsing the way pure spin-waiting does; where waits keep running
 * long (another process holds a core), waiters spin only a few microseconds, then sleep. When the
 * caller knows there are more busy threads than cores, it sets the spin to 0: a waiter then sleeps at
 * once, leaving its core to the thread it waits for (gm_model_load does so: gm_load_options.wait). */
#ifndef GM_BASE_THREADS_H
#define GM_BASE_THREADS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/status.h"

/* Pause iterations a waiter spins before it starts to yield (about 70 us on current x86). */
#define GM_SPIN_DEFAULT 4000

typedef struct gm_barrier {
    int n;
    atomic_int spin;
    atomic_int arrived;
    atomic_uint generation;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int sleepers;
    atomic_int late; /* how its waits end (threads.c, waiter) */
} gm_barrier;

gm_status gm_barrier_init(gm_barrier *b, int n);
void gm_barrier_destroy(gm_barrier *b);
void gm_barrier_wait(gm_barrier *b);
/* Spin iterations before yielding (>= 0; GM_SPIN_DEFAULT after init). Not while threads wait. */
void gm_barrier_set_spin(gm_barrier *b, int iters);
/* Whether its waits have been running long (another process holding a core, most likely), so that a
 * waiter spins a few microseconds and sleeps rather than spin, yield, sleep (threads.c, waiter). */
bool gm_barrier_waits_briefly(const gm_barrier *b);

/* Fork-join pool of n threads (the caller is one of them).
 * gm_pool_run calls fn(ctx, i, n) for i in [0, n) on n concurrent participants (the caller is
 * participant 0; participants may wait for each other) and returns when all are done.
 * gm_pool_run_chunks calls fn(ctx, c, slot) once for every chunk c in [0, nchunks), on whichever
 * threads are running (slot in [0, n): the thread, for per-thread scratch; chunks must not wait for
 * each other): when another process holds a core, the other threads take its chunks.
 * Waiting threads (workers for a job, the caller for its end) spin briefly, then yield, then sleep
 * (or spin a few microseconds and sleep, where their waits keep running long); with a spin of 0 they
 * sleep at once. */
typedef struct gm_pool gm_pool;
typedef void (*gm_pool_fn)(void *ctx, int index, int count);
typedef void (*gm_pool_chunk_fn)(void *ctx, int chunk, int slot);

gm_status gm_pool_create(int n_threads, gm_pool **out);
void gm_pool_free(gm_pool *p);
int gm_pool_size(const gm_pool *p);
void gm_pool_run(gm_pool *p, gm_pool_fn fn, void *ctx);
void gm_pool_run_chunks(gm_pool *p, gm_pool_chunk_fn fn, void *ctx, int nchunks);
/* Spin iterations of waiting workers and callers before they yield (>= 0; GM_SPIN_DEFAULT after
 * create; 0: they sleep at once). Safe between jobs. */
void gm_pool_set_spin(gm_pool *p, int iters);
/* The same as gm_barrier_waits_briefly for the caller's waits for the end of its jobs. */
bool gm_pool_waits_briefly(const gm_pool *p);

/* CPUs this process may run on (its affinity mask; the online CPUs if that cannot be read). */
int gm_cpus_available(void);
/* Whether `threads` busy threads in each of `processes_here` processes of one job on this host (this one
 * included) outnumber the CPUs: this process's affinity mask, shared by all of them unless the launcher
 * bound each process to CPUs of its own (the mask is then smaller than the host). */
bool gm_threads_oversubscribed(long threads, long processes_here);

/* Split [0, n) into `parts` nearly equal pieces, aligned to `align`; piece i is [*lo, *hi). */
void gm_split_range(size_t n, int parts, int i, size_t align, size_t *lo, size_t *hi);

#endif
