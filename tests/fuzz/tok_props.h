/* Checks every tokenizer harness runs on a tokenizer it managed to load: encode and decode a few fixed
 * texts (added tokens, spaces, invalid UTF-8, byte pieces), every id in range, every piece reachable. */
#ifndef GM_FUZZ_TOK_PROPS_H
#define GM_FUZZ_TOK_PROPS_H

#include "fuzz/fuzz_util.h"
#include "gemma.h"

static inline void fz_check_tokenizer(const gm_tokenizer *tok, const uint8_t *extra, size_t extra_len) {
    static const char *const texts[] = {"", "Hello world", "  two  spaces \n\n<h1>", "<start_of_turn>user\nhi<end_of_turn>",
                                        "\xff\xfe\xc3\x28 bad utf8 \xe2\x82", "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80"};
    int V = gm_tokenizer_vocab_size(tok);
    FZ_ASSERT(V > 0, "empty vocabulary accepted");
    for (size_t k = 0; k < sizeof texts / sizeof texts[0] + 1; k++) {
        const char *text = k < sizeof texts / sizeof texts[0] ? texts[k] : (const char *)extra;
        size_t len = k < sizeof texts / sizeof texts[0] ? strlen(text) : extra_len;
        if (!text) continue;
        int32_t *ids = NULL;
        size_t n = 0;
        gm_status st = gm_tokenizer_encode(tok, text, len, false, &ids, &n);
        if (st == GM_OK) {
            for (size_t i = 0; i < n; i++) FZ_ASSERT(ids[i] >= 0 && ids[i] < V, "encode gave id %d of %d", ids[i], V);
            char *back = NULL;
            size_t blen = 0;
            FZ_ASSERT(gm_tokenizer_decode_len(tok, ids, n, &back, &blen) == GM_OK, "decode of encode: %s", gm_last_error());
            gm_free(back);
        }
        gm_free(ids);
    }
    for (int32_t id = 0; id < V && id < 4096; id++) {
        size_t len = 0;
        FZ_ASSERT(gm_tokenizer_piece(tok, id) != NULL, "piece %d missing", id);
        FZ_ASSERT(gm_tokenizer_token_bytes(tok, id, &len) != NULL, "bytes of %d missing", id);
    }
    FZ_ASSERT(gm_tokenizer_piece(tok, V) == NULL && gm_tokenizer_piece(tok, -1) == NULL, "out-of-range piece");
    int32_t bad = V;
    char *t = NULL;
    FZ_ASSERT(gm_tokenizer_decode(tok, &bad, 1, &t) == GM_ERR_RANGE && t == NULL, "decode of id V accepted");
}

#endif
