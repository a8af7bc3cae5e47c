/* libFuzzer harness: the tokenizer's encode and decode on arbitrary bytes, with real vocabularies:
 * tests/fixtures/tokenizer_tiny/tokenizer.json (explicit merges) and, when GM_TEST_MODEL names the Gemma 3
 * GGUF, its 262144-piece vocabulary (ranks derived from scores). The first input byte picks the mode:
 *   0: encode the rest (with/without <bos> by bit 7), decode the ids back;
 *      valid UTF-8 text with no added piece and no U+2581 in it must decode to itself;
 *   1: the rest as little-endian int32 ids: decode must succeed iff every id is in range;
 *   2: token_bytes / piece / find for the ids.
 * Seeds: tests/fuzz/corpus/fuzz_tokenizer (multilingual text, code, emoji, invalid UTF-8, added tokens). */
#include "fuzz/fuzz_util.h"

#include "gemma.h"
#include "text/tokenizer_internal.h"

static gm_tokenizer *toks[2];
static int n_toks;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char p[1024];
    if (gm_tokenizer_load(fz_fixture("tokenizer_tiny/tokenizer.json", p, sizeof p), &toks[n_toks]) != GM_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", gm_last_error());
        abort();
    }
    n_toks++;
    const char *model = getenv("GM_TEST_MODEL");
    if (model && access(model, R_OK) == 0) {
        if (gm_tokenizer_load(model, &toks[n_toks]) != GM_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", gm_last_error());
            abort();
        }
        n_toks++;
    }
    return 0;
}

/* The text decodes back to itself when nothing in it is an added piece or a control token. */
static bool plain_text(const gm_tokenizer *t, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t l = gm_utf8_valid_len(s + i, n - i);
        if (!l) return false;
        if (l == 3 && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) return false; /* U+2581 decodes to ' ' */
        i += l;
    }
    for (size_t i = 0; i < n; i++)
        if (t->trie.nodes && t->trie.root[s[i]] >= 0) {
            size_t mlen;
            if (gm_trie_longest(&t->trie, s + i, n - i, &mlen) >= 0) return false;
        }
    return true;
}

static void one(const gm_tokenizer *tok, uint8_t mode, const uint8_t *data, size_t size) {
    int V = gm_tokenizer_vocab_size(tok);
    switch (mode % 3) {
    case 0: {
        int32_t *ids = NULL;
        size_t n = 0;
        bool bos = mode & 0x80;
        FZ_ASSERT(gm_tokenizer_encode(tok, (const char *)data, size, bos, &ids, &n) == GM_OK, "encode: %s", gm_last_error());
        for (size_t i = 0; i < n; i++) FZ_ASSERT(ids[i] >= 0 && ids[i] < V, "id %d", ids[i]);
        FZ_ASSERT(!bos || (n >= 1 && ids[0] == gm_tokenizer_bos_id(tok)), "no <bos> first");
        char *back = NULL;
        size_t blen = 0;
        FZ_ASSERT(gm_tokenizer_decode_len(tok, ids, n, &back, &blen) == GM_OK, "decode: %s", gm_last_error());
        if (plain_text(tok, data, size))
            FZ_ASSERT(blen == size && memcmp(back, data, size) == 0, "round trip changed the text (%zu -> %zu bytes)",
                      size, blen);
        gm_free(back);
        gm_free(ids);
        break;
    }
    case 1: {
        size_t n = size / 4;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        if (!ids) abort();
        bool in_range = true;
        for (size_t i = 0; i < n; i++) {
            memcpy(&ids[i], data + 4 * i, 4);
            in_range &= ids[i] >= 0 && ids[i] < V;
        }
        char *text = NULL;
        size_t len = 0;
        gm_status st = gm_tokenizer_decode_len(tok, ids, n, &text, &len);
        FZ_ASSERT((st == GM_OK) == in_range, "decode returned %d for %s ids", st, in_range ? "valid" : "invalid");
        if (st == GM_OK) FZ_ASSERT(text[len] == 0, "not NUL-terminated");
        gm_free(text);
        free(ids);
        break;
    }
    default:
        for (size_t i = 0; i + 4 <= size; i += 4) {
            int32_t id;
            memcpy(&id, data + i, 4);
            size_t len = 7;
            const char *b = gm_tokenizer_token_bytes(tok, id, &len);
            const char *p = gm_tokenizer_piece(tok, id);
            FZ_ASSERT((b != NULL) == (id >= 0 && id < V) && (p != NULL) == (b != NULL), "id %d", id);
            if (p) FZ_ASSERT(gm_tokenizer_find(tok, p) >= 0, "piece of id %d not found", id);
            (void)gm_tokenizer_is_control(tok, id);
        }
        /* the input as a piece name */
        char *z = malloc(size + 1);
        if (!z) abort();
        memcpy(z, data, size);
        z[size] = 0;
        int32_t id = gm_tokenizer_find(tok, z);
        FZ_ASSERT(id < V, "find gave %d", id);
        free(z);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    for (int i = 0; i < n_toks; i++) one(toks[i], data[0], data + 1, size - 1);
    return 0;
}
