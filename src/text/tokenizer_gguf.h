/* The tokenizer of a GGUF file that is open already (the model loader's), so the file's metadata is
 * not parsed a second time. It reads the vocabulary arrays from the file itself (gm_gguf_read_array),
 * so it may run beside threads that read the weights; the GGUF must stay open until it returns. */
#ifndef GM_TEXT_TOKENIZER_GGUF_H
#define GM_TEXT_TOKENIZER_GGUF_H

#include "io/gguf.h"

gm_status gm_tokenizer_from_gguf(const gm_gguf *g, gm_tokenizer **out);

#endif
