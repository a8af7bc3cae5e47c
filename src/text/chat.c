/* Gemma 3 chat turns on top of a session (the template of the seed library's ChatSampler, without
 * its one-slot offset: the previous answer is closed with "<end_of_turn>\n" so slots and positions agree). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

struct gm_chat {
    gm_model *model;
    gm_session *session;
    int turns;
};

gm_status gm_chat_new(gm_model *m, gm_chat **out) {
    *out = NULL;
    if (!gm_model_tokenizer(m)) return gm_fail(GM_ERR_STATE, "chat needs a tokenizer, and this model has none");
    gm_chat *c = calloc(1, sizeof *c);
    if (!c) return gm_fail(GM_ERR_NOMEM, "out of memory");
    c->model = m;
    gm_status st = gm_session_new(m, &c->session);
    if (st != GM_OK) {
        free(c);
        return st;
    }
    *out = c;
    return GM_OK;
}

void gm_chat_free(gm_chat *c) {
    if (!c) return;
    gm_session_free(c->session);
    free(c);
}

void gm_chat_reset(gm_chat *c) {
    gm_session_reset(c->session);
    c->turns = 0;
}

gm_session *gm_chat_session(gm_chat *c) { return c->session; }

gm_status gm_chat_template(const char *user_text, bool first_turn, char **out) {
    *out = NULL;
    if (!user_text) return gm_fail(GM_ERR_ARG, "no prompt text");
    const char *head = first_turn ? "<bos><start_of_turn>user\n" : "<end_of_turn>\n<start_of_turn>user\n";
    const char *tail = "<end_of_turn>\n<start_of_turn>model\n";
    size_t n = strlen(head) + strlen(user_text) + strlen(tail) + 1;
    char *s = malloc(n);
    if (!s) return gm_fail(GM_ERR_NOMEM, "out of memory");
    snprintf(s, n, "%s%s%s", head, user_text, tail);
    *out = s;
    return GM_OK;
}

gm_status gm_chat_format_turn(const gm_chat *c, const char *user_text, char **out) {
    return gm_chat_template(user_text, c->turns == 0, out);
}

gm_status gm_chat_turn(gm_chat *c, const char *user_text, const gm_generate_options *opt, char **reply,
                       gm_generate_result *res) {
    if (reply) *reply = NULL;
    if (!user_text || !*user_text) return gm_fail(GM_ERR_ARG, "empty prompt");
    char *text;
    GM_TRY(gm_chat_format_turn(c, user_text, &text));
    int32_t *ids;
    size_t n;
    /* the template's markers are added tokens: the tokenizer cuts them out of the text as single ids */
    gm_status st = gm_tokenizer_encode(gm_model_tokenizer(c->model), text, strlen(text), false, &ids, &n);
    free(text);
    if (st != GM_OK) return st;
    st = gm_generate(c->session, ids, n, opt, reply, res);
    gm_free(ids);
    if (st == GM_OK) c->turns++;
    return st;
}
