/* JSONL training data against tests/fixtures/train_data/expected.json (gen_train_data_fixture.py: HF
 * `tokenizers` ids and the seed's Seq2SeqTask masks): every kept example's ids and loss mask, malformed
 * lines reported with their line numbers and skipped (or refused with strict), truncation counted,
 * examples left without response tokens skipped, and errors for missing or empty files. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"
#include "json_fixture.h"
#include "test_util.h"

typedef struct warns {
    char msg[32][320];
    int n;
} warns;

static void on_warn(void *user, const char *m) {
    warns *w = user;
    if (w->n < 32) snprintf(w->msg[w->n], sizeof w->msg[0], "%s", m);
    w->n++;
}

int main(void) {
    char tpath[1024], dpath[1024];
    gm_tokenizer *tok;
    gm_test_fixture("tokenizer_tiny/tokenizer.json", tpath, sizeof tpath);
    gm_test_fixture("train_data/sample.jsonl", dpath, sizeof dpath);
    if (gm_tokenizer_load(tpath, &tok) != GM_OK) {
        fprintf(stderr, "%s\n", gm_last_error());
        return 1;
    }
    cJSON *exp = gm_test_load_json("train_data/expected.json");
    int seq_len = cJSON_GetObjectItem(exp, "seq_len")->valueint;

    warns w = {0};
    gm_dataset_options o = {.seq_len = seq_len, .warn = on_warn, .user = &w};
    gm_dataset *d;
    CHECK(gm_dataset_load(dpath, tok, &o, &d) == GM_OK, "%s", gm_last_error());
    const cJSON *exs = cJSON_GetObjectItem(exp, "examples");
    CHECK(gm_dataset_size(d) == (size_t)cJSON_GetArraySize(exs), "%zu examples, expected %d", gm_dataset_size(d),
          cJSON_GetArraySize(exs));
    for (int i = 0; i < cJSON_GetArraySize(exs) && (size_t)i < gm_dataset_size(d); i++) {
        const cJSON *e = cJSON_GetArrayItem(exs, i), *ids = cJSON_GetObjectItem(e, "ids"), *mask = cJSON_GetObjectItem(e, "mask");
        const gm_train_example *x = gm_dataset_get(d, (size_t)i);
        int line = cJSON_GetObjectItem(e, "line")->valueint;
        CHECK(x->n == cJSON_GetArraySize(ids), "line %d: %d tokens, expected %d", line, x->n, cJSON_GetArraySize(ids));
        int bad = 0;
        for (int k = 0; k < x->n && k < cJSON_GetArraySize(ids); k++) bad += x->tokens[k] != cJSON_GetArrayItem(ids, k)->valueint;
        for (int k = 0; k < x->n - 1 && k < cJSON_GetArraySize(mask); k++)
            bad += x->loss_mask[k] != cJSON_GetArrayItem(mask, k)->valueint;
        CHECK(bad == 0, "line %d: %d ids or mask entries differ from HF tokenizers / Seq2SeqTask", line, bad);
    }
    /* every malformed and every skipped line reported once, with its line number, in file order */
    const cJSON *mal = cJSON_GetObjectItem(exp, "malformed_lines"), *nol = cJSON_GetObjectItem(exp, "no_loss_lines");
    CHECK(w.n == cJSON_GetArraySize(mal) + cJSON_GetArraySize(nol), "%d messages", w.n);
    for (int i = 0; i < cJSON_GetArraySize(mal); i++) {
        char want[64];
        snprintf(want, sizeof want, "sample.jsonl:%d: ", cJSON_GetArrayItem(mal, i)->valueint);
        int found = 0;
        for (int k = 0; k < w.n && k < 32; k++) found += strstr(w.msg[k], want) != NULL;
        CHECK(found == 1, "no message for malformed line (%s)", want);
    }
    for (int i = 0; i < cJSON_GetArraySize(nol); i++) {
        char want[64];
        snprintf(want, sizeof want, "sample.jsonl:%d: skipped", cJSON_GetArrayItem(nol, i)->valueint);
        int found = 0;
        for (int k = 0; k < w.n && k < 32; k++) found += strstr(w.msg[k], want) != NULL;
        CHECK(found == 1, "no message for the example without loss tokens (%s)", want);
    }
    const cJSON *sm = cJSON_GetObjectItem(exp, "summary");
    gm_dataset_summary s = gm_dataset_summary_of(d);
#define SAME(f) CHECK(s.f == (int64_t)cJSON_GetObjectItem(sm, #f)->valuedouble, #f " %lld, expected %g", (long long)s.f, cJSON_GetObjectItem(sm, #f)->valuedouble)
    SAME(lines); SAME(examples); SAME(blank); SAME(malformed); SAME(truncated); SAME(no_loss); SAME(tokens); SAME(loss_tokens);
#undef SAME
    gm_dataset_free(d);

    /* strict: the first malformed line stops the load, named */
    o.strict = true;
    w.n = 0;
    CHECK(gm_dataset_load(dpath, tok, &o, &d) == GM_ERR_FORMAT, "strict load must fail");
    char want[64];
    snprintf(want, sizeof want, "sample.jsonl:%d:", cJSON_GetArrayItem(mal, 0)->valueint);
    CHECK(strstr(gm_last_error(), want) != NULL, "strict error names the line: %s", gm_last_error());

    /* missing file, file with nothing usable, bad sequence length */
    o.strict = false;
    CHECK(gm_dataset_load("/nonexistent/train.jsonl", tok, &o, &d) == GM_ERR_IO, "missing file");
    CHECK(strstr(gm_last_error(), "/nonexistent/train.jsonl") != NULL, "message names the file: %s", gm_last_error());
    char tmp[] = "/tmp/gm_train_data_XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fdopen(fd, "w");
    fputs("\n{\"oops\": 1}\n\n", f);
    fclose(f);
    w.n = 0;
    CHECK(gm_dataset_load(tmp, tok, &o, &d) == GM_ERR_FORMAT, "nothing usable");
    CHECK(strstr(gm_last_error(), "no usable example") != NULL && w.n == 1, "%s (%d warnings)", gm_last_error(), w.n);
    remove(tmp);
    o.seq_len = 1;
    CHECK(gm_dataset_load(dpath, tok, &o, &d) == GM_ERR_ARG, "seq_len 1");
    cJSON_Delete(exp);
    gm_tokenizer_free(tok);
    return gm_test_finish();
}
