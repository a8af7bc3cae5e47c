#define _GNU_SOURCE
#include "base/threads.h"

#include <sched.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

enum { SPIN_ITERS = 4000, YIELD_ITERS = 200 };

gm_status gm_barrier_init(gm_barrier *b, int n) {
    if (n < 1) return gm_fail(GM_ERR_ARG, "barrier of %d participants", n);
    b->n = n;
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    atomic_init(&b->sleepers, 0);
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
    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(&b->generation, memory_order_acquire) != gen) return;
        CPU_RELAX();
    }
    for (int i = 0; i < YIELD_ITERS; i++) {
        if (atomic_load_explicit(&b->generation, memory_order_acquire) != gen) return;
        sched_yield();
    }
    pthread_mutex_lock(&b->mu);
    atomic_fetch_add(&b->sleepers, 1);
    while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen) pthread_cond_wait(&b->cv, &b->mu);
    atomic_fetch_sub(&b->sleepers, 1);
    pthread_mutex_unlock(&b->mu);
}

struct gm_pool {
    int n;
    pthread_t *threads;
    gm_barrier start, done;
    gm_pool_fn fn;
    void *ctx;
    bool quit;
};

typedef struct worker_arg {
    gm_pool *p;
    int index;
} worker_arg;

static void *worker_main(void *arg) {
    worker_arg *w = arg;
    gm_pool *p = w->p;
    int index = w->index;
    free(w);
    for (;;) {
        gm_barrier_wait(&p->start);
        if (p->quit) break;
        p->fn(p->ctx, index, p->n);
        gm_barrier_wait(&p->done);
    }
    return NULL;
}

gm_status gm_pool_create(int n_threads, gm_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024) return gm_fail(GM_ERR_ARG, "thread count %d out of range 1..1024", n_threads);
    gm_pool *p = calloc(1, sizeof *p);
    if (!p) return gm_fail(GM_ERR_NOMEM, "out of memory");
    p->n = n_threads;
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads || gm_barrier_init(&p->start, n_threads) != GM_OK) {
        free(p->threads);
        free(p);
        return gm_fail(GM_ERR_NOMEM, "cannot create a thread pool");
    }
    if (gm_barrier_init(&p->done, n_threads) != GM_OK) {
        gm_barrier_destroy(&p->start);
        free(p->threads);
        free(p);
        return gm_fail(GM_ERR_NOMEM, "cannot create a thread pool");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w || pthread_create(&p->threads[i], NULL, worker_main, (w->p = p, w->index = i, w)) != 0) {
            free(w);
            /* Rare: undo. Started workers sleep in the start barrier (a cancellation point). */
            for (int j = 1; j < i; j++) pthread_cancel(p->threads[j]);
            for (int j = 1; j < i; j++) pthread_join(p->threads[j], NULL);
            gm_barrier_destroy(&p->start);
            gm_barrier_destroy(&p->done);
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
    p->quit = true;
    gm_barrier_wait(&p->start);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    gm_barrier_destroy(&p->start);
    gm_barrier_destroy(&p->done);
    free(p->threads);
    free(p);
}

int gm_pool_size(const gm_pool *p) { return p ? p->n : 1; }

void gm_pool_run(gm_pool *p, gm_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    gm_barrier_wait(&p->start);
    fn(ctx, 0, p->n);
    gm_barrier_wait(&p->done);
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
