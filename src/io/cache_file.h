/* Files that keep work done on a model for later loads (the weight cache, the tokenizer cache):
 * their names, and writing them so that a reader never sees half a file (a temporary name, flushed,
 * then renamed). */
#ifndef GM_IO_CACHE_FILE_H
#define GM_IO_CACHE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* out = dir/<model file or folder name, reduced to characters safe in a file name>-<key as 16 hex
 * digits><tail>. GM_ERR_ARG when it does not fit in cap. */
gm_status gm_cache_file_path(char *out, size_t cap, const char *dir, const char *model_path, uint64_t key,
                             const char *tail);
/* A temporary file beside path (path's directory created when absent, one level as mkdir does): its
 * descriptor and name in tmp, or -1 with why saying what failed ("<what>: cannot create ..."). */
int gm_cache_file_create(const char *path, char *tmp, size_t tmp_cap, const char *what, char *why, size_t why_len);
/* All n bytes at offset off (retrying short writes). */
bool gm_cache_file_pwrite(int fd, const void *p, size_t n, uint64_t off);
/* Finish a file from gm_cache_file_create: when ok, flush it to disk (then drop its pages from the
 * page cache when drop_pages), close it and rename it onto path. Any failure, or !ok, removes the
 * temporary file and says why. Returns whether path now holds the new file. */
bool gm_cache_file_commit(int fd, const char *tmp, const char *path, bool ok, bool drop_pages, const char *what,
                          char *why, size_t why_len);

#endif
