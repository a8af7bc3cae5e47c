/* The weight cache: a device's packed matrices kept in a file, so that the next load maps them from
 * the page cache instead of copying, first-touching and packing them again (--weight-cache DIR).
 *
 * One file per (model files' stamp, packing layout and Q5_0 kind, sharding rule, device count, device):
 * DIR/<model name>-<key>-d<dev>of<n>.gmpack. It holds a header, a table of the matrices in load order
 * (name hash, type, local rows and cols, offset, bytes) and their packed bytes, 4 KiB aligned. A file
 * whose header, table or size does not check out is ignored and rewritten; a matrix whose table entry
 * does not match what the loader expects is packed from the model file. Files are written under a
 * temporary name and renamed, so a reader never sees half a file. */
#ifndef GM_MODEL_WEIGHT_CACHE_H
#define GM_MODEL_WEIGHT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "io/source.h"

typedef struct gm_weight_cache gm_weight_cache;

/* Look for this device's cache file in dir and map it when it is valid (*out is never NULL on
 * GM_OK). Fails only on a bad argument or out of memory; an absent, stale or damaged file is a miss. */
gm_status gm_wcache_open(const char *dir, const gm_source *src, gm_sharding rule, int n_dev, int dev,
                         gm_weight_cache **out);
/* The next matrix the loader wants: its packed bytes in the mapping when the file's next entry is
 * this matrix (same name, type, local shape and size), else NULL (the caller packs it and calls
 * gm_wcache_add). Either way the matrix is recorded for writing. */
const void *gm_wcache_take(gm_weight_cache *c, const char *name, gm_dtype type, uint64_t rows, uint64_t cols,
                           size_t bytes);
/* Record a matrix the caller packed itself (after a NULL from gm_wcache_take). */
gm_status gm_wcache_add(gm_weight_cache *c, const void *data);
/* After the last matrix: write the file when anything was packed anew (into a temporary name, then
 * rename). A failure to write leaves the load intact: why says what failed ("" when nothing did). */
void gm_wcache_finish(gm_weight_cache *c, char *why, size_t why_len);
/* Matrices mapped from the file / packed anew, so far. */
int gm_wcache_hits(const gm_weight_cache *c);
int gm_wcache_misses(const gm_weight_cache *c);
/* Hand the mapping to the caller (the matrices point into it); unmap it with gm_wcache_unmap. */
void gm_wcache_release_map(gm_weight_cache *c, void **map, size_t *bytes);
void gm_wcache_unmap(void *map, size_t bytes);
void gm_wcache_free(gm_weight_cache *c);

#endif
