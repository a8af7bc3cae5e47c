/* A read-only file with bounds-checked positional reads. Every reader in src/io goes through here,
 * so "offset past the end" is caught in one place and the message names the file. */
#ifndef GM_IO_FILE_H
#define GM_IO_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct gm_file {
    int fd;
    uint64_t size;
    char path[1024];
} gm_file;

gm_status gm_file_open(gm_file *f, const char *path);
void gm_file_close(gm_file *f);
/* Read exactly len bytes at offset; GM_ERR_FORMAT (naming file, offset and size) if the range is
 * outside the file, GM_ERR_IO on a read error. */
gm_status gm_file_read(const gm_file *f, uint64_t offset, void *dst, uint64_t len);
/* Whole small file into a NUL-terminated heap buffer (config.json, tokenizer.json). */
gm_status gm_file_slurp(const char *path, uint64_t max_bytes, char **out, uint64_t *out_len);

#endif
