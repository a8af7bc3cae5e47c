/* The thread pool (base/threads.h): chunked jobs run every chunk exactly once with a valid thread slot,
 * over thousands of back-to-back jobs of varying sizes (the stale-worker paths), with more threads
 * than cores; static jobs run every participant once, concurrently (they meet in a barrier); a
 * 1-thread pool runs inline; and a pool with a sleeping worker still finishes chunked jobs. Each with
 * the default spin and with spin 0 (waiters yield at once, as on an oversubscribed machine). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threads.h"
#include "test_util.h"

enum { MAXC = 200 };

typedef struct chunk_job {
    atomic_int count[MAXC];
    atomic_int bad_slot;
    int slots;
} chunk_job;

static void chunk_fn(void *ctx, int c, int slot) {
    chunk_job *j = ctx;
    if (c >= 0 && c < MAXC) atomic_fetch_add(&j->count[c], 1);
    if (slot < 0 || slot >= j->slots) atomic_fetch_add(&j->bad_slot, 1);
}

typedef struct static_job {
    gm_barrier barrier;
    atomic_int seen[16];
} static_job;

static void static_fn(void *ctx, int i, int n) {
    static_job *j = ctx;
    if (i >= 0 && i < 16 && n <= 16) atomic_fetch_add(&j->seen[i], 1);
    gm_barrier_wait(&j->barrier); /* deadlocks unless all participants run at once */
}

static void check_pool(int threads, int spin) {
    gm_pool *p = NULL;
    CHECK(gm_pool_create(threads, &p) == GM_OK, "pool of %d: %s", threads, gm_last_error());
    if (!p) return;
    gm_pool_set_spin(p, spin);
    CHECK(gm_pool_size(p) == threads, "pool size %d, wanted %d", gm_pool_size(p), threads);
    int wrong = 0, bad_slots = 0;
    chunk_job *j = calloc(1, sizeof *j);
    for (int rep = 0; rep < 3000; rep++) {
        int n = 1 + (rep * 37) % MAXC;
        if (rep % 7 == 0) n = 1;
        memset(j, 0, sizeof *j);
        j->slots = threads;
        gm_pool_run_chunks(p, chunk_fn, j, n);
        for (int c = 0; c < MAXC; c++) wrong += atomic_load(&j->count[c]) != (c < n ? 1 : 0);
        bad_slots += atomic_load(&j->bad_slot);
        if (rep % 500 == 0) { /* let the workers fall asleep now and then */
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK(wrong == 0, "%d threads: %d chunk run counts differ from 1", threads, wrong);
    CHECK(bad_slots == 0, "%d threads: %d chunks ran with a slot outside [0, n)", threads, bad_slots);
    gm_pool_run_chunks(p, chunk_fn, j, 0); /* nothing to do */
    free(j);
    static_job *s = calloc(1, sizeof *s);
    int bad = 0;
    for (int rep = 0; rep < 300 && threads <= 16; rep++) {
        for (int i = 0; i < 16; i++) atomic_store(&s->seen[i], 0);
        gm_barrier_init(&s->barrier, threads);
        gm_barrier_set_spin(&s->barrier, spin);
        gm_pool_run(p, static_fn, s);
        gm_barrier_destroy(&s->barrier);
        for (int i = 0; i < 16; i++) bad += atomic_load(&s->seen[i]) != (i < threads ? 1 : 0);
        /* interleave with chunked jobs: both kinds share the workers */
        chunk_job c = {0};
        c.slots = threads;
        gm_pool_run_chunks(p, chunk_fn, &c, 5);
        for (int k = 0; k < 5; k++) bad += atomic_load(&c.count[k]) != 1;
    }
    CHECK(bad == 0, "%d threads: static participants or interleaved chunks ran %d times wrong", threads, bad);
    free(s);
    gm_pool_free(p);
}

int main(void) {
    int sizes[] = {1, 2, 3, 5, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        check_pool(sizes[i], GM_SPIN_DEFAULT);
        check_pool(sizes[i], 0);
    }
    CHECK(gm_cpus_available() >= 1, "gm_cpus_available() = %d", gm_cpus_available());
    gm_pool *p = NULL;
    CHECK(gm_pool_create(0, &p) != GM_OK && p == NULL, "a pool of 0 threads must be refused");
    return gm_test_finish();
}
