/* Writing a tokenizer as a SentencePiece tokenizer.model, so that a checkpoint saved from a GGUF model
 * (whose tokenizer lives inside the GGUF) is a self-contained Hugging Face folder. */
#ifndef GM_TEXT_SPM_WRITE_H
#define GM_TEXT_SPM_WRITE_H

#include "gemma.h"

/* ModelProto with every piece (text, score, type), trainer_spec {model_type BPE, byte_fallback, unk/bos/eos
 * ids} and Gemma's normalizer_spec {identity, no dummy prefix, whitespace kept}. Only tokenizers whose merge
 * order comes from the scores (GGUF, tokenizer.model) can be written: GM_ERR_UNSUPPORTED for tokenizer.json
 * ones (copy that file instead). */
gm_status gm_tokenizer_write_spm(const gm_tokenizer *tok, const char *path);

#endif
