/* The decode loop: prefill the prompt, then pick, stream and feed back one token at a time. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/status.h"
#include "kernels/ops.h"
#include "model/gemma3_constants.h"
#include "text/utf8.h"

const char *gm_stop_reason_name(gm_stop_reason r) {
    switch (r) {
    case GM_STOP_NONE: return "none";
    case GM_STOP_EOS: return "eos";
    case GM_STOP_END_OF_TURN: return "end_of_turn";
    case GM_STOP_TOKEN: return "stop_token";
    case GM_STOP_STRING: return "stop_string";
    case GM_STOP_MAX_TOKENS: return "max_tokens";
    case GM_STOP_CACHE_FULL: return "cache_full";
    case GM_STOP_INTERRUPTED: return "interrupted";
    case GM_STOP_CALLBACK: return "callback";
    }
    return "?";
}

/* Text already decoded and how much of it the caller has seen. Text is held back while it could
 * still be the start of a stop string, or ends inside a UTF-8 sequence that byte pieces will finish. */
typedef struct stream {
    char *text;
    size_t len, cap, emitted;
} stream;

static const char *memmem_simple(const char *hay, size_t n, const char *needle, size_t m) {
    for (size_t i = 0; m <= n && i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0) return hay + i;
    return NULL;
}

static size_t holdback(const stream *st, const gm_generate_options *o) {
    size_t hold = gm_utf8_incomplete_tail(st->text, st->len);
    for (int i = 0; i < o->n_stop_strings; i++) {
        const char *ss = o->stop_strings[i];
        size_t sl = strlen(ss);
        /* longest suffix of text that is a proper prefix of the stop string */
        for (size_t k = sl > 1 ? sl - 1 : 0; k > hold; k--)
            if (k <= st->len && memcmp(st->text + st->len - k, ss, k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

gm_status gm_generate(gm_session *s, const int32_t *prompt, size_t n_prompt, const gm_generate_options *opt_in,
                      char **text_out, gm_generate_result *res) {
    gm_generate_options opt = {0};
    if (opt_in) opt = *opt_in;
    if (opt.max_new_tokens == 0) opt.max_new_tokens = 2048;
    if (opt.max_new_tokens < 0) return gm_fail(GM_ERR_ARG, "max_new_tokens %d is negative", opt.max_new_tokens);
    gm_generate_result r = {0};
    r.n_prompt = (int)n_prompt;
    if (text_out) *text_out = NULL;
    if (n_prompt == 0) return gm_fail(GM_ERR_ARG, "empty prompt: at least one token is needed");
    const gm_config *cfg = gm_model_config(gm_session_model(s));
    const gm_tokenizer *tok = gm_model_tokenizer(gm_session_model(s));
    int V = cfg->vocab_size;
    if ((size_t)gm_session_position(s) + n_prompt > (size_t)gm_session_capacity(s))
        return gm_fail(GM_ERR_RANGE, "the prompt has %zu tokens but the cache has room for %d (cache length %d): use a "
                       "shorter prompt or a larger --cache-length", n_prompt, gm_session_capacity(s) - gm_session_position(s),
                       gm_session_capacity(s));
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t *gen = malloc(((size_t)opt.max_new_tokens + 1) * sizeof *gen);
    stream st = {0};
    if (!logits || !gen) {
        free(logits);
        free(gen);
        return gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    /* the rows forced to -inf below are not picked, so the screen keeps that many more exact */
    int n_tok = tok ? gm_tokenizer_vocab_size(tok) : V, forbidden = (V > GEMMA3_END_OF_IMAGE ? 2 : 0) + (n_tok < V ? V - n_tok : 0);
    int top = opt.logits_top > 0 && opt.logits_top <= V ? opt.logits_top + forbidden : 0; /* beyond 1024: all exact */
    double t0 = gm_now_seconds();
    gm_status status = gm_session_forward_top(s, prompt, n_prompt, top, logits);
    r.prefill_seconds = gm_now_seconds() - t0;
    t0 = gm_now_seconds();
    while (status == GM_OK) {
        if (opt.interrupt && *opt.interrupt) {
            r.stop = GM_STOP_INTERRUPTED;
            break;
        }
        if (r.n_generated >= opt.max_new_tokens) {
            r.stop = GM_STOP_MAX_TOKENS;
            break;
        }
        /* the seed's forbidden tokens: image markers are never sampled */
        if (V > GEMMA3_END_OF_IMAGE) logits[GEMMA3_START_OF_IMAGE] = logits[GEMMA3_END_OF_IMAGE] = -INFINITY;
        /* embedding rows past the tokenizer's vocabulary (262208 vs 262144 in multimodal checkpoints) */
        for (int i = n_tok; i < V; i++) logits[i] = -INFINITY;
        int32_t id = opt.pick ? opt.pick(opt.pick_ctx, logits, V) : (int32_t)gm_argmax_f32(logits, (size_t)V);
        if (id < 0 || id >= V) {
            status = gm_fail(GM_ERR_STATE, "the sampler returned token %d outside the vocabulary", id);
            break;
        }
        gen[r.n_generated++] = id;
        if (id == cfg->eos_id) r.stop = GM_STOP_EOS;
        else if (id == cfg->end_of_turn_id) r.stop = GM_STOP_END_OF_TURN;
        for (int i = 0; i < opt.n_stop_ids && !r.stop; i++)
            if (id == opt.stop_ids[i]) r.stop = GM_STOP_TOKEN;
        if (tok && !r.stop) {
            /* append this token's raw bytes; text is final up to a UTF-8 boundary and stop-string prefix */
            size_t blen = 0;
            const char *bytes = gm_tokenizer_token_bytes(tok, id, &blen);
            if (bytes && blen) {
                if (st.len + blen + 1 > st.cap) {
                    size_t cap = st.cap ? st.cap * 2 : 256;
                    while (cap < st.len + blen + 1) cap *= 2;
                    char *nt = realloc(st.text, cap);
                    if (!nt) {
                        status = gm_fail(GM_ERR_NOMEM, "out of memory");
                        break;
                    }
                    st.text = nt;
                    st.cap = cap;
                }
                memcpy(st.text + st.len, bytes, blen);
                st.len += blen;
                st.text[st.len] = 0;
            }
            for (int i = 0; i < opt.n_stop_strings && st.text; i++) {
                const char *ss = opt.stop_strings[i];
                size_t sl = strlen(ss), from = st.emitted > sl ? st.emitted - sl : 0;
                const char *hit = sl ? memmem_simple(st.text + from, st.len - from, ss, sl) : NULL;
                if (hit && (size_t)(hit - st.text) < st.len) {
                    st.len = (size_t)(hit - st.text);
                    r.stop = GM_STOP_STRING;
                }
            }
            size_t final_len = r.stop ? st.len : st.len - holdback(&st, &opt);
            if (final_len > st.emitted && opt.on_text && !opt.on_text(opt.user, st.text + st.emitted, final_len - st.emitted))
                r.stop = GM_STOP_CALLBACK;
            if (final_len > st.emitted) st.emitted = final_len;
        }
        if (r.stop) break;
        if (gm_session_position(s) >= gm_session_capacity(s)) {
            r.stop = GM_STOP_CACHE_FULL;
            break;
        }
        status = gm_session_forward_top(s, &id, 1, top, logits);
    }
    r.decode_seconds = gm_now_seconds() - t0;
    if (status == GM_OK && tok && !st.text) { /* only stop tokens, or no tokenizer output yet */
        st.text = calloc(1, 1);
        if (!st.text) status = gm_fail(GM_ERR_NOMEM, "out of memory");
    }
    if (status == GM_OK && st.text && st.len > st.emitted && opt.on_text) opt.on_text(opt.user, st.text + st.emitted, st.len - st.emitted);
    if (status == GM_OK && st.text) st.text[st.len] = 0;
    free(logits);
    free(gen);
    if (res) *res = r;
    if (status == GM_OK && text_out) *text_out = st.text;
    else free(st.text);
    return status;
}
