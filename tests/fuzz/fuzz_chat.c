/* libFuzzer harness: the chat-template path with arbitrary user text, on the tiny random model with a
 * tokenizer (tests/fixtures/hf_tiny_chat, loaded once, KV cache of 48 positions so long prompts and
 * multi-turn conversations run into the cache limit).
 * Input: byte 0 = options (bits 0-1 max new tokens 1..4, bit 2 reset between turns, bit 3 sampler
 * top-p instead of greedy, bit 4 a stop string), byte 1 = the stop string length; then turns separated
 * by 0x00. Properties: gm_chat_format_turn contains the text verbatim between the template markers; a
 * turn either succeeds (stop reason set, at most max tokens, text NUL-terminated) or fails with
 * GM_ERR_RANGE (prompt longer than the room left) / GM_ERR_ARG (empty), after which the chat still works
 * once reset. Seeds: tests/fuzz/corpus/fuzz_chat. */
#include "fuzz/fuzz_util.h"

#include "gemma.h"

static gm_model *model;
static gm_chat *chat;
static gm_sampler *sampler;

static int32_t pick(void *ctx, float *logits, int vocab) {
    int32_t id = 0;
    if (gm_sampler_next(ctx, logits, (size_t)vocab, &id) != GM_OK) {
        fprintf(stderr, "fuzz_chat: sampler: %s\n", gm_last_error());
        abort();
    }
    return id;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char p[1024];
    gm_load_options o;
    gm_load_options_default(&o);
    o.cache_length = 48;
    o.use_mpi = false;
    if (gm_model_load(fz_fixture("hf_tiny_chat", p, sizeof p), &o, &model) != GM_OK ||
        gm_chat_new(model, &chat) != GM_OK) {
        fprintf(stderr, "fuzz_chat: %s\n", gm_last_error());
        abort();
    }
    gm_sampler_config sc = gm_sampler_config_default();
    sc.method = GM_SAMPLE_TOP_P;
    sc.top_p = 0.9f;
    sc.seed = 7;
    if (gm_sampler_create(&sc, NULL, 0, &sampler) != GM_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t opt = data[0];
    size_t stop_len = data[1] % 8;
    data += 2, size -= 2;
    char stop[8] = {0};
    if (opt & 16) {
        if (stop_len > size) stop_len = size;
        memcpy(stop, data, stop_len);
        data += stop_len, size -= stop_len;
    }
    const char *stops[1] = {stop};
    gm_generate_options go = {.max_new_tokens = 1 + (opt & 3), .stop_strings = stops,
                              .n_stop_strings = (opt & 16) && stop[0] ? 1 : 0};
    if (opt & 8) {
        go.pick = pick;
        go.pick_ctx = sampler;
        gm_sampler_reseed(sampler, 7);
    }
    char *buf = malloc(size + 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    buf[size] = 0;
    gm_chat_reset(chat);
    size_t at = 0;
    for (int turn = 0; turn < 6 && at <= size; turn++) {
        const char *text = buf + at;
        at += strlen(text) + 1;
        char *prompt = NULL;
        FZ_ASSERT(gm_chat_format_turn(chat, text, &prompt) == GM_OK, "format: %s", gm_last_error());
        FZ_ASSERT(strstr(prompt, text) != NULL, "template lost the text");
        static const char tail[] = "<end_of_turn>\n<start_of_turn>model\n";
        size_t pl = strlen(prompt), tl = sizeof tail - 1;
        FZ_ASSERT(pl >= tl && strcmp(prompt + pl - tl, tail) == 0, "template does not end with the model turn");
        gm_free(prompt);
        char *reply = NULL;
        gm_generate_result res = {0};
        int before = gm_session_position(gm_chat_session(chat));
        gm_status st = gm_chat_turn(chat, text, &go, &reply, &res);
        if (st == GM_OK) {
            FZ_ASSERT(reply != NULL && res.stop != GM_STOP_NONE, "no reply or stop reason");
            FZ_ASSERT(res.n_generated >= 1 && res.n_generated <= go.max_new_tokens, "%d tokens", res.n_generated);
            FZ_ASSERT(strlen(reply) <= (size_t)res.n_generated * 64, "reply too long");
            FZ_ASSERT(gm_session_position(gm_chat_session(chat)) <= gm_session_capacity(gm_chat_session(chat)),
                      "cache overrun");
        } else {
            FZ_ASSERT(st == GM_ERR_RANGE || (st == GM_ERR_ARG && !*text), "turn failed with %s: %s", gm_status_name(st),
                      gm_last_error());
            FZ_ASSERT(reply == NULL, "reply on failure");
            if (st == GM_ERR_RANGE)
                FZ_ASSERT(gm_session_position(gm_chat_session(chat)) == before, "a refused prompt changed the cache");
            gm_chat_reset(chat);
        }
        gm_free(reply);
        if (opt & 4) gm_chat_reset(chat);
    }
    free(buf);
    return 0;
}
