/* gm_config from a file's metadata (GGUF keys as llama.cpp and Ollama write them, or HF config.json). */
#ifndef GM_MODEL_CONFIG_H
#define GM_MODEL_CONFIG_H

#include "gemma.h"
#include "io/gguf.h"

gm_status gm_config_from_gguf(const gm_gguf *g, gm_config *cfg);

/* What config.json says beyond gm_config (src/model/config_hf.c). */
typedef struct gm_hf_info {
    bool multimodal;           /* model_type "gemma3": the text model's keys sit under "text_config" */
    bool tie_word_embeddings;  /* lm_head shares the embedding (always, for Gemma 3) */
} gm_hf_info;

/* gm_config from the text of a Hugging Face config.json (Gemma3ForCausalLM: model_type "gemma3_text";
 * Gemma3ForConditionalGeneration: model_type "gemma3" with "text_config"). `path` names the file in
 * messages. Keys absent from a nested text_config take Gemma3TextConfig's defaults, as transformers does;
 * vocab_size is the config's (the folder reader checks it against the embedding rows). */
gm_status gm_config_from_hf_json(const char *json, size_t len, const char *path, gm_config *cfg, gm_hf_info *info);

/* Checks a filled config for consistency (heads divide, layer count in range, ...). */
gm_status gm_config_validate(const gm_config *cfg, const char *source);
/* "270M", "1B", ... from the layer count, or "custom". */
const char *gm_config_size_label(const gm_config *cfg);

#endif
