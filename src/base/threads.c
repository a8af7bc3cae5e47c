#define _GNU_SOURCE
#include "base/threads.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

enum { YIELD_ITERS = 200 };

/* How a thread waits: spin, then yield, then sleep on a condition variable. With no spin (the YIELD
 * policy: more busy threads than cores) it sleeps at once: a yielding thread stays runnable, and where a
 * process that is not ours shares the core the scheduler runs that one until its next tick (milliseconds)
 * at every wait, while a sleeper's wake-up preempts it (2 ranks x 2 devices of the 270M with one core
 * busy, MPI polling: 4.1 tok/s yielding, ~20 sleeping; docs/BENCHMARKS.md).
 *
 * With a spin (the SPIN policy: a core per thread) the waiter adapts to how its waits end. On a quiet
 * machine 1-2 % of the waits that outlast 16 pauses run past LONG_WAIT_NS (270M decode: 0.9 % at the
 * devices' barrier, 1.6 % of the workers' waits); with another process on one of two cores 9-27 % do,
 * the peer being off its core. Then the long spin and the yields keep the peer, or the other process,
 * off this core, and a waiter does better to spin SHORT_SPIN_US and sleep, which frees its core at once.
 * `late` scores the waits of one barrier, of a pool's workers or of its caller: +LATE_UP for each over
 * LONG_WAIT_NS, -1 for each shorter one that outlasted 16 pauses, within [0, LATE_MAX]; it climbs past
 * LATE_ON, where the short spin applies, while more than 1 in 25 run long (one core busy: 2 devices of the
 * 270M decode 20 -> 26 tok/s, 2 threads 30 -> 32; quiet: unchanged; docs/BENCHMARKS.md, "Waiting on a
 * loaded machine"). */
enum { SHORT_SPIN_US = 8, LATE_UP = 24, LATE_MAX = 256, LATE_ON = 128 };
#define LONG_WAIT_NS 200000

typedef struct waiter {
    atomic_int *late; /* the score this wait reads and updates */
    int spin;         /* pause iterations (the long spin), 0 under the YIELD policy */
    bool brief;       /* the short spin then sleep */
    int64_t start_ns; /* when the clock was first read (after 16 pauses), 0 before */
    int64_t end_ns;   /* brief: when the spin ends */
    int yields;       /* yields done */
} waiter;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static bool late_now(const atomic_int *late) { return atomic_load_explicit(late, memory_order_relaxed) > LATE_ON; }

static waiter wait_begin(atomic_int *late, int spin) {
    waiter w = {late, spin, spin > 0 && late_now(late), 0, 0, 0};
    return w;
}

/* Whether the waiter spins or yields once more (step i of its wait); false: sleep now. */
static bool wait_step(waiter *w, int i) {
    if (w->spin <= 0) return false;
    if (i == 15) w->start_ns = now_ns(), w->end_ns = w->start_ns + SHORT_SPIN_US * 1000;
    if (w->brief) {
        CPU_RELAX();
        /* the clock every 16 steps; its first reading (step 15) starts the short spin */
        return i <= 15 || (i & 15) != 15 || now_ns() < w->end_ns;
    }
    if (i < w->spin) {
        CPU_RELAX();
        return true;
    }
    if (w->yields >= YIELD_ITERS) return false;
    w->yields++;
    sched_yield();
    return true;
}

/* Score the wait that just ended. */
static void wait_end(waiter *w) {
    if (w->spin <= 0 || !w->start_ns) return;
    int s = atomic_load_explicit(w->late, memory_order_relaxed);
    s = now_ns() - w->start_ns > LONG_WAIT_NS ? (s + LATE_UP < LATE_MAX ? s + LATE_UP : LATE_MAX) : (s > 0 ? s - 1 : 0);
    atomic_store_explicit(w->late, s, memory_order_relaxed); /* a heuristic: a lost update is harmless */
}

gm_status gm_barrier_init(gm_barrier *b, int n) {
    if (n < 1) return gm_fail(GM_ERR_ARG, "barrier of %d participants", n);
    b->n = n;
    atomic_init(&b->spin, GM_SPIN_DEFAULT);
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    atomic_init(&b->sleepers, 0);
    atomic_init(&b->late, 0);
    if (pthread_mutex_init(&b->mu, NULL) != 0) return gm_fail(GM_ERR_NOMEM, "cannot create a mutex");
    if (pthread_cond_init(&b->cv, NULL) != 0) {
        pthread_mutex_destroy(&b->mu);
        return gm_fail(GM_ERR_NOMEM, "cannot create a condition variable");
    }
    return GM_OK;
}

void gm_barrier_destroy(gm_barrier *b) {
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

void gm_barrier_set_spin(gm_barrier *b, int iters) { atomic_store(&b->spin, iters < 0 ? 0 : iters); }

bool gm_barrier_waits_briefly(const gm_barrier *b) { return late_now(&b->late); }

void gm_barrier_wait(gm_barrier *b) {
    if (b->n == 1) return;
    unsigned gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        pthread_mutex_lock(&b->mu);
        atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
        if (atomic_load(&b->sleepers)) pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return;
    }
    waiter w = wait_begin(&b->late, atomic_load_explicit(&b->spin, memory_order_relaxed));
    for (int i = 0; atomic_load_explicit(&b->generation, memory_order_acquire) == gen; i++) {
        if (wait_step(&w, i)) continue;
        pthread_mutex_lock(&b->mu);
        atomic_fetch_add(&b->sleepers, 1);
        while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen) pthread_cond_wait(&b->cv, &b->mu);
        atomic_fetch_sub(&b->sleepers, 1);
        pthread_mutex_unlock(&b->mu);
    }
    wait_end(&w);
}

/* The pool publishes one job at a time under a generation number. A job is either "static" (every
 * participant i of n runs fn(ctx, i, n), concurrently: callers may synchronize inside it) or
 * "chunked" (chunks 0 .. nchunks-1 are claimed one by one by whichever threads are running, so a
 * thread that another process keeps off its core costs at most the chunk it holds, not its share).
 * Workers wait for a new generation as a waiter does (above); a worker that wakes after a chunked job
 * is over finds nothing left to claim.
 *
 * The job description lives in two slots (by generation parity) written before the generation is
 * published; a worker copies its slot and re-checks the slot's generation (a seqlock), so a stale
 * worker never runs a job twice or runs half of another. Chunk claims are tagged with the
 * generation, so a stale worker can never claim a chunk of a newer job. */
typedef struct pool_slot {
    atomic_uint_fast64_t seq;  /* generation of the job held, 0 while being rewritten */
    _Atomic(gm_pool_fn) fn;
    _Atomic(gm_pool_chunk_fn) cfn;
    _Atomic(void *) ctx;
    atomic_int nchunks;        /* chunked jobs; 0 for static ones */
    atomic_bool quit;
} pool_slot;

struct gm_pool {
    int n;
    atomic_int spin;            /* pause iterations before yielding */
    pthread_t *threads;
    atomic_uint_fast64_t gen;   /* generation of the current job */
    atomic_uint_fast64_t claim; /* chunked jobs: (generation << 32) | next chunk */
    atomic_int done;            /* participants (static) or chunks (chunked) finished */
    atomic_int target;          /* done's value when the job is complete */
    pool_slot slot[2];
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* workers sleep here for a new generation */
    atomic_int sleepers;
    pthread_cond_t done_cv;     /* the caller sleeps here for its job's end */
    atomic_bool caller_sleeps;
    atomic_int late_workers;    /* how the workers' / the caller's waits end (waiter) */
    atomic_int late_caller;
};

typedef struct worker_arg {
    gm_pool *p;
    int index;
} worker_arg;

/* Count one participant or chunk done, and wake the caller if it sleeps on the job's end. seq_cst
 * with wait_done: either this sees the sleeper or the sleeper sees the count. */
static void finish_one(gm_pool *p) {
    if (atomic_fetch_add(&p->done, 1) + 1 >= atomic_load_explicit(&p->target, memory_order_relaxed) &&
        atomic_load(&p->caller_sleeps)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Claim and run chunks of job g until none is left (or a newer job replaced it). */
static void run_chunks(gm_pool *p, uint64_t g, gm_pool_chunk_fn fn, void *ctx, int nchunks, int slot) {
    for (;;) {
        uint64_t v = atomic_load_explicit(&p->claim, memory_order_acquire);
        if ((v >> 32) != (g & 0xffffffffu) || (int)(v & 0xffffffffu) >= nchunks) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &v, v + 1, memory_order_acq_rel, memory_order_relaxed))
            continue;
        fn(ctx, (int)(v & 0xffffffffu), slot);
        finish_one(p);
    }
}

static void *worker_main(void *arg) {
    worker_arg *w = arg;
    gm_pool *p = w->p;
    int index = w->index;
    free(w);
    uint64_t seen = 0;
    for (;;) {
        /* wait for a generation we have not handled */
        uint64_t g;
        waiter wt = wait_begin(&p->late_workers, atomic_load_explicit(&p->spin, memory_order_relaxed));
        for (int i = 0; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen; i++) {
            if (wait_step(&wt, i)) continue;
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            /* seq_cst with publish(): either it sees this sleeper or this sees its generation */
            while (atomic_load(&p->gen) == seen) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        wait_end(&wt);
        /* copy the job (seqlock: the slot must hold generation g before and after) */
        pool_slot *s = &p->slot[g & 1];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != g) {
            seen = g; /* rewritten already: this job is over for us */
            continue;
        }
        gm_pool_fn fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
        gm_pool_chunk_fn cfn = atomic_load_explicit(&s->cfn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&s->ctx, memory_order_relaxed);
        int nchunks = atomic_load_explicit(&s->nchunks, memory_order_relaxed);
        bool quit = atomic_load_explicit(&s->quit, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        seen = g;
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != g) continue;
        if (quit) break;
        if (cfn) {
            run_chunks(p, g, cfn, ctx, nchunks, index);
        } else {
            fn(ctx, index, p->n);
            finish_one(p);
        }
    }
    return NULL;
}

/* Publish a job (the previous one is complete) and wake sleeping workers. */
static uint64_t publish(gm_pool *p, gm_pool_fn fn, gm_pool_chunk_fn cfn, void *ctx, int nchunks, bool quit) {
    atomic_store_explicit(&p->target, cfn ? nchunks : p->n - 1, memory_order_relaxed);
    uint64_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    pool_slot *s = &p->slot[g & 1];
    atomic_store_explicit(&s->seq, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&s->cfn, cfn, memory_order_relaxed);
    atomic_store_explicit(&s->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&s->nchunks, nchunks, memory_order_relaxed);
    atomic_store_explicit(&s->quit, quit, memory_order_relaxed);
    atomic_store_explicit(&s->seq, g, memory_order_release);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (g & 0xffffffffu) << 32, memory_order_relaxed);
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return g;
}

/* Wait until the job's participants / chunks are done (spin, yield, sleep: waiter), woken from sleep by
 * the thread that finishes the last one. */
static void wait_done(gm_pool *p) {
    int target = atomic_load_explicit(&p->target, memory_order_relaxed);
    waiter w = wait_begin(&p->late_caller, atomic_load_explicit(&p->spin, memory_order_relaxed));
    for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) < target; i++) {
        if (wait_step(&w, i)) continue;
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_sleeps, true);
        while (atomic_load(&p->done) < target) pthread_cond_wait(&p->done_cv, &p->mu);
        atomic_store(&p->caller_sleeps, false);
        pthread_mutex_unlock(&p->mu);
    }
    wait_end(&w);
}

gm_status gm_pool_create(int n_threads, gm_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024) return gm_fail(GM_ERR_ARG, "thread count %d out of range 1..1024", n_threads);
    gm_pool *p = calloc(1, sizeof *p);
    if (!p) return gm_fail(GM_ERR_NOMEM, "out of memory");
    p->n = n_threads;
    atomic_init(&p->spin, GM_SPIN_DEFAULT);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->threads);
        free(p);
        return gm_fail(GM_ERR_NOMEM, "cannot create a thread pool");
    }
    bool cv = pthread_cond_init(&p->cv, NULL) == 0, done_cv = cv && pthread_cond_init(&p->done_cv, NULL) == 0;
    if (!done_cv) {
        if (cv) pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p->threads);
        free(p);
        return gm_fail(GM_ERR_NOMEM, "cannot create a thread pool");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w || pthread_create(&p->threads[i], NULL, worker_main, (w->p = p, w->index = i, w)) != 0) {
            free(w);
            /* Rare: undo. Started workers leave on a quit job. */
            publish(p, NULL, NULL, NULL, 0, true);
            for (int j = 1; j < i; j++) pthread_join(p->threads[j], NULL);
            pthread_cond_destroy(&p->done_cv);
            pthread_cond_destroy(&p->cv);
            pthread_mutex_destroy(&p->mu);
            free(p->threads);
            free(p);
            return gm_fail(GM_ERR_NOMEM, "cannot start thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return GM_OK;
}

void gm_pool_free(gm_pool *p) {
    if (!p) return;
    publish(p, NULL, NULL, NULL, 0, true);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

int gm_pool_size(const gm_pool *p) { return p ? p->n : 1; }

bool gm_pool_waits_briefly(const gm_pool *p) { return p && late_now(&p->late_caller); }

void gm_pool_set_spin(gm_pool *p, int iters) {
    if (p) atomic_store(&p->spin, iters < 0 ? 0 : iters);
}

int gm_cpus_available(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

bool gm_threads_oversubscribed(long threads, long processes_here) {
    int cpus = gm_cpus_available();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (processes_here > 1 && cpus >= online) threads *= processes_here;
    return threads > cpus;
}

void gm_pool_run(gm_pool *p, gm_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    publish(p, fn, NULL, ctx, 0, false);
    fn(ctx, 0, p->n);
    wait_done(p);
}

void gm_pool_run_chunks(gm_pool *p, gm_pool_chunk_fn fn, void *ctx, int nchunks) {
    if (nchunks <= 0) return;
    if (!p || p->n == 1 || nchunks == 1) {
        for (int c = 0; c < nchunks; c++) fn(ctx, c, 0);
        return;
    }
    uint64_t g = publish(p, NULL, fn, ctx, nchunks, false);
    run_chunks(p, g, fn, ctx, nchunks, 0);
    wait_done(p);
}

void gm_split_range(size_t n, int parts, int i, size_t align, size_t *lo, size_t *hi) {
    if (align < 1) align = 1;
    size_t units = (n + align - 1) / align;
    size_t per = units / (size_t)parts, extra = units % (size_t)parts;
    size_t a = (size_t)i * per + ((size_t)i < extra ? (size_t)i : extra);
    size_t b = a + per + ((size_t)i < extra ? 1 : 0);
    *lo = a * align < n ? a * align : n;
    *hi = b * align < n ? b * align : n;
}
