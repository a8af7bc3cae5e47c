/* libFuzzer harness: any bytes as a training JSONL file (gm_dataset_load), tokenized with
 * tests/fixtures/tokenizer_tiny. Byte 0 picks the options: sequence length 2 + (bits 0-5), strict mode
 * (bit 6); the rest is the file. Properties: every example has 2..seq_len tokens, ids in the vocabulary, at
 * least one counted position among its n - 1; the summary adds up (lines = examples + blank + malformed +
 * no_loss, unless strict mode stopped early; tokens and loss tokens are the examples' sums); every warning is
 * "PATH:LINE: ...". Seeds: tests/fuzz/corpus/fuzz_train_jsonl. */
#include "fuzz/fuzz_util.h"

#include "gemma.h"

static gm_tokenizer *tok;
static char warn_prefix[600];
static int64_t warnings;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char p[1024];
    if (gm_tokenizer_load(fz_fixture("tokenizer_tiny/tokenizer.json", p, sizeof p), &tok) != GM_OK) {
        fprintf(stderr, "fuzz_train_jsonl: %s\n", gm_last_error());
        abort();
    }
    return 0;
}

static void on_warn(void *user, const char *msg) {
    (void)user;
    warnings++;
    FZ_ASSERT(strncmp(msg, warn_prefix, strlen(warn_prefix)) == 0, "warning without PATH:LINE: %s", msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char path[512];
    fz_write("train.jsonl", data + 1, size - 1, path, sizeof path);
    snprintf(warn_prefix, sizeof warn_prefix, "%s:", path);
    warnings = 0;
    gm_dataset_options o = {.seq_len = 2 + (data[0] & 63), .strict = (data[0] & 64) != 0, .warn = on_warn};
    gm_dataset *d = NULL;
    gm_status st = gm_dataset_load(path, tok, &o, &d);
    if (st != GM_OK) {
        FZ_ASSERT(d == NULL, "dataset on failure");
        FZ_ASSERT(st == GM_ERR_FORMAT, "status %s: %s", gm_status_name(st), gm_last_error());
        return 0;
    }
    gm_dataset_summary s = gm_dataset_summary_of(d);
    int V = gm_tokenizer_vocab_size(tok);
    int64_t tokens = 0, loss = 0;
    FZ_ASSERT(gm_dataset_size(d) == (size_t)s.examples && s.examples > 0, "%zu examples, summary %lld", gm_dataset_size(d),
              (long long)s.examples);
    for (size_t i = 0; i < gm_dataset_size(d); i++) {
        const gm_train_example *e = gm_dataset_get(d, i);
        FZ_ASSERT(e->n >= 2 && e->n <= o.seq_len, "example %zu has %d tokens (seq_len %d)", i, e->n, o.seq_len);
        int64_t lt = 0;
        for (int k = 0; k < e->n; k++) FZ_ASSERT(e->tokens[k] >= 0 && e->tokens[k] < V, "id %d", e->tokens[k]);
        for (int k = 0; k < e->n - 1; k++) lt += !e->loss_mask || e->loss_mask[k];
        FZ_ASSERT(lt >= 1, "example %zu counts no position", i);
        tokens += e->n - 1;
        loss += lt;
    }
    FZ_ASSERT(gm_dataset_get(d, gm_dataset_size(d)) == NULL, "get past the end");
    FZ_ASSERT(s.tokens == tokens && s.loss_tokens == loss, "summary tokens %lld/%lld, examples %lld/%lld",
              (long long)s.tokens, (long long)s.loss_tokens, (long long)tokens, (long long)loss);
    FZ_ASSERT(s.lines == s.examples + s.blank + s.malformed + s.no_loss, "lines %lld != %lld + %lld + %lld + %lld",
              (long long)s.lines, (long long)s.examples, (long long)s.blank, (long long)s.malformed, (long long)s.no_loss);
    FZ_ASSERT(warnings == s.malformed + s.no_loss, "%lld warnings for %lld malformed + %lld no-loss lines",
              (long long)warnings, (long long)s.malformed, (long long)s.no_loss);
    FZ_ASSERT(!o.strict || s.malformed == 0, "strict mode accepted %lld malformed lines", (long long)s.malformed);
    gm_dataset_free(d);
    return 0;
}
