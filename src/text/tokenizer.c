/* Placeholder until the tokenizer lands. */
#include <stddef.h>

#include "base/status.h"

gm_status gm_tokenizer_load(const char *model_path, gm_tokenizer **out) {
    *out = NULL;
    return gm_fail(GM_ERR_UNSUPPORTED, "%s: tokenizer not implemented yet", model_path);
}
void gm_tokenizer_free(gm_tokenizer *tok) { (void)tok; }
int gm_tokenizer_vocab_size(const gm_tokenizer *tok) { (void)tok; return 0; }
const char *gm_tokenizer_piece(const gm_tokenizer *tok, int32_t id) { (void)tok; (void)id; return NULL; }
int32_t gm_tokenizer_find(const gm_tokenizer *tok, const char *piece) { (void)tok; (void)piece; return -1; }
gm_status gm_tokenizer_encode(const gm_tokenizer *tok, const char *text, size_t len, bool add_bos, int32_t **ids,
                              size_t *n_ids) {
    (void)tok; (void)text; (void)len; (void)add_bos; *ids = NULL; *n_ids = 0;
    return gm_fail(GM_ERR_UNSUPPORTED, "tokenizer not implemented yet");
}
gm_status gm_tokenizer_decode(const gm_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text) {
    (void)tok; (void)ids; (void)n_ids; *text = NULL;
    return gm_fail(GM_ERR_UNSUPPORTED, "tokenizer not implemented yet");
}
