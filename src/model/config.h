/* gm_config from a file's metadata (GGUF keys as llama.cpp and Ollama write them, or HF config.json). */
#ifndef GM_MODEL_CONFIG_H
#define GM_MODEL_CONFIG_H

#include "gemma.h"
#include "io/gguf.h"

gm_status gm_config_from_gguf(const gm_gguf *g, gm_config *cfg);
/* Checks a filled config for consistency (heads divide, layer count in range, ...). */
gm_status gm_config_validate(const gm_config *cfg, const char *source);
/* "270M", "1B", ... from the layer count, or "custom". */
const char *gm_config_size_label(const gm_config *cfg);

#endif
