/* The JAX `gemma` sharding tutorial, step by step, through the C API.
 *
 *   build/example_tutorial MODEL.gguf [DEVICES] [PLOT.png]
 *
 * 1. load the parameters sharded over devices by the FSDP rule;
 * 2. chat (greedy, one turn, the Gemma 3 template);
 * 3. tokenize 'My name is' with BOS;
 * 4. next-token logits of the last position;
 * 5. sample one token like jax.random.categorical(jax.random.key(1), logits) and decode it;
 * 6. plot the top-30 next-token distribution. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if ((call) != GM_OK) {                                                                                         \
            fprintf(stderr, "%s failed: %s\n", #call, gm_last_error());                                                \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

static bool print_text(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [DEVICES] [PLOT.png]\n", argv[0]);
        return 2;
    }
    const char *plot = argc > 3 ? argv[3] : "tutorial_logits.png";

    /* 1. params = gm.ckpts.load_params(..., sharding=kd.sharding.FSDPSharding()) */
    gm_load_options opt;
    gm_load_options_default(&opt);
    opt.devices = argc > 2 ? atoi(argv[2]) : 2;
    opt.sharding = GM_SHARDING_FSDP;
    gm_model *model;
    CHECK(gm_model_load(argv[1], &opt, &model));
    if (gm_model_rank(model) != 0) { /* under mpirun, other ranks follow rank 0 */
        gm_status st = gm_model_serve(model);
        gm_model_free(model);
        gm_shutdown();
        return st == GM_OK ? 0 : 1;
    }
    printf("1. loaded, sharded (fsdp) over %d devices\n", gm_model_devices(model));

    /* 2. gm.text.ChatSampler(model=model, params=params).chat('...') */
    gm_chat *chat;
    CHECK(gm_chat_new(model, &chat));
    gm_generate_options gen = {.max_new_tokens = 48, .on_text = print_text};
    gm_generate_result res;
    printf("2. chat: ");
    CHECK(gm_chat_turn(chat, "Tell me an unknown interesting biology fact about the brain.", &gen, NULL, &res));
    printf("\n   (%d tokens, stop: %s)\n", res.n_generated, gm_stop_reason_name(res.stop));
    gm_chat_free(chat);

    /* 3. prompt = tokenizer.encode('My name is', add_bos=True) */
    const gm_tokenizer *tok = gm_model_tokenizer(model);
    int32_t *ids;
    size_t n;
    CHECK(gm_tokenizer_encode(tok, "My name is", strlen("My name is"), true, &ids, &n));
    printf("3. tokens:");
    for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");

    /* 4. out = model.apply({'params': params}, tokens=prompt, return_last_only=True) */
    int V = gm_model_config(model)->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    gm_session *session;
    CHECK(gm_session_new(model, &session));
    CHECK(gm_session_forward(session, ids, n, logits, NULL));
    printf("4. logits of the last position: %d values\n", V);

    /* 5. next_token = jax.random.categorical(jax.random.key(1), out.logits); tokenizer.decode(next_token) */
    int32_t next;
    CHECK(gm_sample_categorical(1, logits, (size_t)V, &next));
    char *text;
    CHECK(gm_tokenizer_decode(tok, &next, 1, &text));
    printf("5. sampled with key(1): %d '%s'\n", next, text);
    gm_free(text);

    /* 6. tokenizer.plot_logits(out.logits) */
    gm_token_prob top[30];
    size_t n_top;
    CHECK(gm_logits_top_k(logits, (size_t)V, 30, top, &n_top));
    int32_t top_ids[30];
    double probs[30];
    const char *labels[30];
    for (size_t i = 0; i < n_top; i++) {
        top_ids[i] = top[i].id;
        probs[i] = top[i].prob;
        labels[i] = gm_tokenizer_piece(tok, top[i].id);
    }
    CHECK(gm_plot_logits_png(plot, top_ids, labels, probs, n_top, NULL));
    char *bars;
    CHECK(gm_plot_logits_text(top_ids, labels, probs, n_top < 10 ? n_top : 10, 30, &bars));
    printf("6. top of the distribution (picture: %s)\n%s", plot, bars);
    gm_free(bars);

    gm_free(ids);
    free(logits);
    gm_session_free(session);
    gm_model_free(model);
    gm_shutdown();
    return 0;
}
