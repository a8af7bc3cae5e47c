/* safetensors reader: an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value"}}
 * then the data region; offsets are relative to the data region (byte 8 + N). Every length, offset and
 * size is checked against the file before anything is read. */
#ifndef GM_IO_SAFETENSORS_H
#define GM_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "io/file.h"

#define GM_ST_MAX_DIMS 8
#define GM_ST_MAX_HEADER (100u * 1000u * 1000u) /* the reference implementation's limit */

typedef struct gm_st_tensor {
    char *name;                        /* as stored ("model.layers.0.self_attn.q_proj.weight") */
    char dtype_name[12];               /* as stored ("BF16") */
    int dtype;                         /* gm_dtype (F32, F16, BF16), or -1 for a type we do not compute with */
    uint32_t elem_bytes;
    int n_dims;
    uint64_t shape[GM_ST_MAX_DIMS];    /* as stored: row-major, shape[0] outermost (HF [out, in]) */
    uint64_t offset;                   /* absolute offset in the file */
    uint64_t nbytes;
} gm_st_tensor;

typedef struct gm_safetensors {
    uint64_t file_size;
    uint64_t data_start;               /* 8 + header length */
    size_t n_tensors;
    gm_st_tensor *tensors;             /* in header order */
} gm_safetensors;

/* Parse the header of an open file (the file stays the caller's). */
gm_status gm_safetensors_read(const gm_file *f, gm_safetensors *out);
/* Parse header JSON already in memory: `json` is the `len` bytes after the 8-byte length, `file_size`
 * the size of the whole file; `path` names the file in messages. */
gm_status gm_safetensors_parse(const char *json, size_t len, uint64_t file_size, const char *path,
                               gm_safetensors *out);
void gm_safetensors_free(gm_safetensors *st);
const gm_st_tensor *gm_safetensors_find(const gm_safetensors *st, const char *name);

#endif
