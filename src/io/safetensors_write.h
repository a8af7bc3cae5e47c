/* Streaming safetensors writer: the header (names, dtypes, shapes, offsets) first, then each tensor's
 * bytes in header order. Written to a temporary name and renamed by the caller (see train/checkpoint.c),
 * with every write, flush, fsync and close checked. */
#ifndef GM_IO_SAFETENSORS_WRITE_H
#define GM_IO_SAFETENSORS_WRITE_H

#include <stdio.h>

#include "base/status.h"

typedef struct gm_st_entry {
    const char *name;
    const char *dtype;     /* "F32" */
    int n_dims;            /* 1 or 2 */
    uint64_t shape[2];
} gm_st_entry;

typedef struct gm_st_writer {
    FILE *f;
    char path[1100];
    uint64_t expected, written;
} gm_st_writer;

/* Create path and write the header for entries (data follows with gm_st_write). */
gm_status gm_st_write_begin(gm_st_writer *w, const char *path, const gm_st_entry *e, size_t n);
gm_status gm_st_write(gm_st_writer *w, const void *data, size_t bytes);
/* Check that every byte was written, flush, fsync and close. */
gm_status gm_st_write_end(gm_st_writer *w);
/* Close and delete the file (after an error). */
void gm_st_write_abort(gm_st_writer *w);

#endif
