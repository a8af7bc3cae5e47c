/* The layout shared by the GGUF and Hugging Face source readers. */
#ifndef GM_IO_SOURCE_INTERNAL_H
#define GM_IO_SOURCE_INTERNAL_H

#include "io/source.h"

#define GM_SOURCE_MAX_FILES 64

struct gm_source {
    char path[1024];
    const char *format;
    gm_config config;
    gm_gguf gguf;                    /* GGUF sources */
    bool is_gguf;
    gm_file files[GM_SOURCE_MAX_FILES]; /* safetensors shards */
    int n_files;
    gm_tensor_info *tensors;         /* HF sources: canonical names; offsets absolute in files[file_of[i]] */
    int *file_of;
    size_t n_tensors;
    void *hf_extra;                  /* reader-private (tokenizer path etc.) */
};

#endif
