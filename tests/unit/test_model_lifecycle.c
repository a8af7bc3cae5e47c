/* Model lifecycle and limits through the public API, on the tiny random models (tests/fixtures):
 *   - load + chat + free 1000 times in one process: resident memory stays flat (no leak, no growth);
 *     under the sanitizer build LeakSanitizer checks every cycle instead (RSS is not meaningful there);
 *   - a prompt longer than the room left in the KV cache, or holding an id outside the vocabulary, is refused
 *     with GM_ERR_RANGE and changes nothing;
 *   - the chat markers come from the tokenizer (<end_of_turn> is 960 in tokenizer_tiny, by HF tokenizers:
 *     tests/reference/gen_tiny_chat_model.py asserts it), so a turn stops there;
 *   - a tokenizer with more tokens than the embedding has rows is refused at load;
 *   - the wait policy: an explicit one is kept, AUTO resolves to SPIN or YIELD (YIELD exactly when more
 *     device threads than CPUs this process may use), an unknown value is refused. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemma.h"
#include "test_util.h"

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* CPUs in this process's affinity mask, counted here (not through the library) */
static int gm_cpus_for_test(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
}

static gm_model *load(const char *dir, int cache) {
    gm_load_options o;
    gm_load_options_default(&o);
    o.cache_length = cache;
    o.use_mpi = false;
    gm_model *m = NULL;
    gm_status st = gm_model_load(dir, &o, &m);
    CHECK(st == GM_OK, "load %s: %s", dir, gm_last_error());
    return m;
}

/* One full cycle: load, a chat turn of 4 tokens, free. */
static void cycle(const char *dir) {
    gm_model *m = load(dir, 64);
    if (!m) return;
    gm_chat *c = NULL;
    char *reply = NULL;
    gm_generate_options go = {.max_new_tokens = 4};
    gm_generate_result res;
    if (gm_chat_new(m, &c) == GM_OK && gm_chat_turn(c, "Hello there", &go, &reply, &res) != GM_OK)
        CHECK(0, "chat turn: %s", gm_last_error());
    gm_free(reply);
    gm_chat_free(c);
    gm_model_free(m);
}

static void test_cycles(const char *chat_dir) {
    bool sanitized = getenv("GM_SANITIZED") && atoi(getenv("GM_SANITIZED"));
    int warm = 50, n = sanitized ? 100 : 1000;
    for (int i = 0; i < warm; i++) cycle(chat_dir);
    long before = rss_kib();
    for (int i = 0; i < n; i++) cycle(chat_dir);
    long after = rss_kib();
    printf("%d load/chat/free cycles: RSS %ld KiB -> %ld KiB\n", n, before, after);
    /* a cycle allocates hundreds of KiB (weights, tokenizer tables, caches, threads): leaking any part of
     * that 1000 times shows here; small leaks are LeakSanitizer's job (sanitizer build) */
    if (!sanitized) CHECK(after - before < 2048, "RSS grew by %ld KiB over %d cycles", after - before, n);
}

static void test_cache_limit(const char *chat_dir) {
    gm_model *m = load(chat_dir, 16);
    if (!m) return;
    gm_session *s = NULL;
    CHECK(gm_session_new(m, &s) == GM_OK, "session: %s", gm_last_error());
    int32_t toks[20];
    for (int i = 0; i < 20; i++) toks[i] = 2 + i;
    int32_t bad[2] = {2, 962}; /* 962 = the vocabulary size */
    CHECK(gm_session_forward(s, bad, 2, NULL, NULL) == GM_ERR_RANGE && strstr(gm_last_error(), "962"),
          "id 962 of a 962-token vocabulary: %s", gm_last_error());
    bad[1] = -1;
    CHECK(gm_session_forward(s, bad, 2, NULL, NULL) == GM_ERR_RANGE, "id -1 accepted");
    CHECK(gm_session_position(s) == 0, "a refused forward moved the position to %d", gm_session_position(s));
    CHECK(gm_session_forward(s, toks, 17, NULL, NULL) == GM_ERR_RANGE, "17 tokens in a 16-position cache accepted");
    CHECK(gm_session_position(s) == 0, "a refused forward moved the position to %d", gm_session_position(s));
    CHECK(gm_session_forward(s, toks, 10, NULL, NULL) == GM_OK, "10 tokens: %s", gm_last_error());
    CHECK(gm_session_forward(s, toks, 7, NULL, NULL) == GM_ERR_RANGE, "10 + 7 tokens in 16 accepted");
    CHECK(gm_session_position(s) == 10, "position %d after a refused forward, want 10", gm_session_position(s));
    gm_generate_result r;
    CHECK(gm_generate(s, toks, 7, NULL, NULL, &r) == GM_ERR_RANGE, "generate past the cache accepted");
    CHECK(strstr(gm_last_error(), "cache") != NULL, "message: %s", gm_last_error());
    /* what fits runs until the cache is full */
    gm_generate_options go = {.max_new_tokens = 100};
    CHECK(gm_generate(s, toks, 2, &go, NULL, &r) == GM_OK && r.stop == GM_STOP_CACHE_FULL &&
              gm_session_position(s) == 16,
          "status %s, stop %s, position %d", gm_last_error(), gm_stop_reason_name(r.stop), gm_session_position(s));
    gm_session_free(s);
    gm_model_free(m);
}

static void test_markers(const char *chat_dir) {
    gm_model *m = load(chat_dir, 32);
    if (!m) return;
    const gm_config *c = gm_model_config(m);
    CHECK(c->start_of_turn_id == 959 && c->end_of_turn_id == 960, "markers %d %d, want 959 960", c->start_of_turn_id,
          c->end_of_turn_id);
    gm_model_free(m);
}

static void test_vocab_mismatch(const char *fix) {
    char dir[] = "/tmp/gm_test_mismatch_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    const char *files[][2] = {{"hf_tiny/config.json", "config.json"}, {"hf_tiny/model.safetensors", "model.safetensors"},
                              {"tokenizer_tiny/tokenizer.json", "tokenizer.json"}};
    char src[2048], dst[1024];
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/%s", fix, files[i][0]);
        char *abs = realpath(src, NULL);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i][1]);
        CHECK(abs && symlink(abs, dst) == 0, "link %s", src);
        free(abs);
    }
    gm_load_options o;
    gm_load_options_default(&o);
    o.use_mpi = false;
    gm_model *m = NULL;
    gm_status st = gm_model_load(dir, &o, &m);
    CHECK(st == GM_ERR_FORMAT && m == NULL, "962-token tokenizer on a 512-row embedding: %s", gm_status_name(st));
    CHECK(strstr(gm_last_error(), "962 tokens") && strstr(gm_last_error(), "512 rows"), "message: %s", gm_last_error());
    gm_model_free(m);
    for (int i = 0; i < 3; i++) {
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i][1]);
        unlink(dst);
    }
    rmdir(dir);
}

static void test_wait(const char *chat_dir) {
    gm_load_options o;
    gm_load_options_default(&o);
    o.use_mpi = false;
    o.cache_length = 16;
    CHECK(o.wait == GM_WAIT_AUTO, "default wait %d", (int)o.wait);
    gm_model *m = NULL;
    static const gm_wait told[2] = {GM_WAIT_SPIN, GM_WAIT_YIELD};
    for (int i = 0; i < 2; i++) {
        o.wait = told[i];
        CHECK(gm_model_load(chat_dir, &o, &m) == GM_OK && gm_model_wait(m) == told[i], "wait %d kept: %s", (int)told[i],
              gm_last_error());
        gm_model_free(m), m = NULL;
    }
    /* AUTO with more devices than this process's CPUs (at most 8 devices: skip on larger machines) */
    int cpus = gm_cpus_for_test();
    o.wait = GM_WAIT_AUTO;
    if (cpus < 8) {
        o.devices = cpus + 1;
        CHECK(gm_model_load(chat_dir, &o, &m) == GM_OK && gm_model_wait(m) == GM_WAIT_YIELD,
              "%d devices on %d CPUs: wait %d (%s)", o.devices, cpus, m ? (int)gm_model_wait(m) : -1, gm_last_error());
        gm_model_free(m), m = NULL;
    }
    o.devices = 1;
    CHECK(gm_model_load(chat_dir, &o, &m) == GM_OK && gm_model_wait(m) == GM_WAIT_SPIN, "1 device: wait %d",
          m ? (int)gm_model_wait(m) : -1);
    gm_model_free(m), m = NULL;
    o.wait = (gm_wait)7;
    CHECK(gm_model_load(chat_dir, &o, &m) == GM_ERR_ARG && m == NULL && strstr(gm_last_error(), "wait"),
          "wait 7: %s", gm_last_error());
}

int main(void) {
    char chat[1024], fix[1024];
    gm_test_fixture("hf_tiny_chat", chat, sizeof chat);
    gm_test_fixture("", fix, sizeof fix);
    test_markers(chat);
    test_cache_limit(chat);
    test_vocab_mismatch(fix);
    test_wait(chat);
    test_cycles(chat);
    return gm_test_finish();
}
