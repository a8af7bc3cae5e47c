/* The thread pool (base/threads.h): chunked jobs run every chunk exactly once with a valid thread slot,
 * over thousands of back-to-back jobs of varying sizes (the stale-worker paths), with more threads
 * than cores; static jobs run every participant once, concurrently (they meet in a barrier); a
 * 1-thread pool runs inline; and a pool with a sleeping worker still finishes chunked jobs. Each with
 * the default spin and with spin 0 (waiters sleep at once, as on an oversubscribed machine). Waits that
 * keep running long switch a barrier and a pool's caller to brief waits, and short ones switch them
 * back (checked where the machine let the short waits stay short). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

/* Sleep (long waits for the other side) or spin (short ones) for `us` microseconds. */
static void delay_us(int us, bool sleep) {
    if (sleep) {
        struct timespec ts = {0, 1000L * us};
        nanosleep(&ts, NULL);
        return;
    }
    for (double end = now_us() + us; now_us() < end;) {
    }
}

typedef struct late_side {
    gm_barrier *b;
    int rounds, us;
    bool sleep;
} late_side;

/* The barrier's last arrival, `us` late each round: the other side waits that long. */
static void *late_arrivals(void *arg) {
    late_side *l = arg;
    for (int r = 0; r < l->rounds; r++) {
        delay_us(l->us, l->sleep);
        gm_barrier_wait(l->b);
    }
    return NULL;
}

/* Rounds of a barrier whose other side arrives `us` late; returns how many of this side's waits took
 * over 200 us (the threshold of a long wait). */
static int barrier_rounds(gm_barrier *b, int rounds, int us, bool sleep) {
    late_side l = {b, rounds, us, sleep};
    pthread_t t;
    if (pthread_create(&t, NULL, late_arrivals, &l) != 0) return -1;
    int long_waits = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_us();
        gm_barrier_wait(b);
        long_waits += now_us() - t0 > 200;
    }
    pthread_join(t, NULL);
    return long_waits;
}

static void late_participant(void *ctx, int i, int n) {
    (void)n;
    const late_side *l = ctx;
    if (i == 1) delay_us(l->us, l->sleep);
}

static int pool_rounds(gm_pool *p, int rounds, int us, bool sleep) {
    late_side l = {NULL, rounds, us, sleep};
    int long_waits = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_us();
        gm_pool_run(p, late_participant, &l);
        long_waits += now_us() - t0 > 200;
    }
    return long_waits;
}

static void check_adaptive_waits(void) {
    gm_barrier b;
    CHECK(gm_barrier_init(&b, 2) == GM_OK, "barrier: %s", gm_last_error());
    CHECK(!gm_barrier_waits_briefly(&b), "a new barrier must start with the full spin");
    barrier_rounds(&b, 40, 400, true);
    CHECK(gm_barrier_waits_briefly(&b), "40 waits of 400 us must switch the barrier to brief waits");
    int disturbed = barrier_rounds(&b, 1000, 2, false);
    if (disturbed <= 10)
        CHECK(!gm_barrier_waits_briefly(&b), "1000 waits of ~2 us (%d over 200 us) must switch it back", disturbed);
    else
        printf("skip: the machine stretched %d of 1000 short barrier waits past 200 us\n", disturbed);
    gm_barrier_destroy(&b);

    gm_pool *p = NULL;
    CHECK(gm_pool_create(2, &p) == GM_OK, "pool: %s", gm_last_error());
    if (!p) return;
    CHECK(!gm_pool_waits_briefly(p), "a new pool's caller must start with the full spin");
    pool_rounds(p, 40, 400, true);
    CHECK(gm_pool_waits_briefly(p), "40 waits of 400 us must switch the pool's caller to brief waits");
    disturbed = pool_rounds(p, 1000, 2, false);
    if (disturbed <= 10)
        CHECK(!gm_pool_waits_briefly(p), "1000 jobs of ~2 us (%d over 200 us) must switch it back", disturbed);
    else
        printf("skip: the machine stretched %d of 1000 short jobs past 200 us\n", disturbed);
    gm_pool_free(p);
    /* the YIELD policy: sleep at once, never brief, never scored */
    CHECK(gm_pool_create(2, &p) == GM_OK, "pool: %s", gm_last_error());
    if (!p) return;
    gm_pool_set_spin(p, 0);
    pool_rounds(p, 40, 400, true);
    CHECK(!gm_pool_waits_briefly(p), "waits under spin 0 must not be scored");
    gm_pool_free(p);
}

int main(void) {
    check_adaptive_waits();
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
