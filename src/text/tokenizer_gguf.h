/* The tokenizer of a GGUF file that is open already (the model loader's), so the file's metadata is
 * not parsed a second time. The GGUF's tokenizer arrays must stay alive until this returns. */
#ifndef GM_TEXT_TOKENIZER_GGUF_H
#define GM_TEXT_TOKENIZER_GGUF_H

#include "io/gguf.h"

gm_status gm_tokenizer_from_gguf(const gm_gguf *g, gm_tokenizer **out);

#endif
