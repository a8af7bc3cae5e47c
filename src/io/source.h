/* A model source: one GGUF file or one Hugging Face folder (config.json + *.safetensors), seen the
 * same way: a config, tensors under GGUF names ("blk.3.attn_q.weight", ggml shape order), and ranged
 * reads so a device can load only its slice. */
#ifndef GM_IO_SOURCE_H
#define GM_IO_SOURCE_H

#include "gemma.h"
#include "io/gguf.h"

typedef struct gm_source gm_source;

gm_status gm_source_open(const char *path, gm_source **out);
void gm_source_close(gm_source *src);

const char *gm_source_path(const gm_source *src);
const char *gm_source_format(const gm_source *src);   /* "gguf" or "safetensors" */
const gm_config *gm_source_config(const gm_source *src);
size_t gm_source_tensor_count(const gm_source *src);
const gm_tensor_info *gm_source_tensor_at(const gm_source *src, size_t i);
const gm_tensor_info *gm_source_find(const gm_source *src, const char *name);
/* Raw rows [row0, row0+nrows) of a tensor as stored (a row is ne[0] elements). */
gm_status gm_source_read_rows(const gm_source *src, const gm_tensor_info *t, uint64_t row0, uint64_t nrows,
                              void *dst);
/* The GGUF behind a GGUF source (tokenizer arrays live there); NULL for other formats. */
const gm_gguf *gm_source_gguf(const gm_source *src);
/* Identity for cross-rank checks: file size(s) plus a hash of the header and sampled data. */
uint64_t gm_source_fingerprint(const gm_source *src);
/* The fingerprint mixed with each file's device, inode, size and modification time: it changes when
 * a file is replaced or rewritten (keys caches derived from the files). */
uint64_t gm_source_stamp(const gm_source *src);
/* Drop metadata arrays no longer needed once the tokenizer is built (saves ~10 MB on Gemma 3). */
void gm_source_release_tokenizer_arrays(gm_source *src);

/* Implemented by the Hugging Face reader (src/io/hf_source.c). */
gm_status gm_hf_source_open(const char *dir, gm_source **out);

#endif
