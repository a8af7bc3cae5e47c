#define _GNU_SOURCE
#include "model/weight_cache.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "io/cache_file.h"
#include "kernels/packed.h"

enum { WC_ALIGN = 4096, WC_MAX_ENTRIES = 1 << 16 };
static const char WC_MAGIC[8] = {'G', 'M', 'P', 'A', 'C', 'K', '\n', 0};

typedef struct wc_header {
    char magic[8];
    uint32_t version;     /* GM_PACK_LAYOUT_VERSION */
    uint32_t count;       /* table entries */
    uint64_t key;         /* see cache_key */
    uint64_t file_bytes;  /* the whole file */
    uint64_t table_hash;  /* FNV-1a of the table */
    uint64_t reserved[3];
} wc_header; /* 64 bytes */

typedef struct wc_entry {
    uint64_t name_hash;
    uint32_t type;
    uint32_t reserved;
    uint64_t rows, cols;  /* the device's local slice */
    uint64_t offset, bytes;
} wc_entry; /* 48 bytes */

typedef struct wc_record {
    wc_entry e;           /* offset filled in when writing */
    const void *data;
} wc_record;

struct gm_weight_cache {
    char path[1280];
    uint64_t key;
    uint8_t *map;         /* the valid file, mapped read-only; NULL on a miss */
    size_t map_bytes;
    const wc_entry *table; /* [count] inside map */
    uint32_t count, next;
    wc_record *rec;       /* [n_rec] every matrix of this load, in order */
    size_t n_rec, cap_rec;
    int hits, misses;
    bool unrecorded;      /* out of memory for the record: nothing will be written */
};

static uint64_t cache_key(const gm_source *src, gm_sharding rule, int n_dev, int dev) {
    /* the kinds Q5_0, Q4_K and Q6_K pack as follow the kernels (packed.h): a cache from another machine is not this
     * one's */
    uint64_t v[10] = {gm_source_stamp(src),
                      GM_PACK_LAYOUT_VERSION,
                      (uint64_t)gm_pack_kind_of(GM_Q5_0),
                      (uint64_t)gm_pack_kind_of(GM_Q4_K),
                      (uint64_t)gm_pack_kind_of(GM_Q6_K),
                      (uint64_t)rule,
                      (uint64_t)n_dev,
                      (uint64_t)dev,
                      sizeof(size_t),
                      0x0102030405060708ull /* byte order */};
    return gm_fnv1a(GM_FNV_SEED, v, sizeof v);
}

/* Map the file when every structural field checks out; anything else leaves c->map NULL. */
static void try_map(gm_weight_cache *c) {
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    wc_header h;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof h ||
        pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint64_t table_end = sizeof h + (uint64_t)h.count * sizeof(wc_entry);
    if (memcmp(h.magic, WC_MAGIC, sizeof WC_MAGIC) != 0 || h.version != GM_PACK_LAYOUT_VERSION || h.key != c->key ||
        h.file_bytes != size || h.count > WC_MAX_ENTRIES || table_end > size) {
        close(fd);
        return;
    }
    uint8_t *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return;
    /* page cache the kernel reads in for this mapping comes in 2 MiB folios, which it maps with huge
     * page table entries (kernels whose filesystem has large folios, e.g. ext4 on 6.1x): decode then
     * streams the weights as from anonymous huge pages */
    madvise(map, (size_t)size, MADV_HUGEPAGE);
    const wc_entry *table = (const wc_entry *)(map + sizeof h);
    bool ok = gm_fnv1a(GM_FNV_SEED, table, (size_t)h.count * sizeof *table) == h.table_hash;
    for (uint32_t i = 0; ok && i < h.count; i++) {
        const wc_entry *e = &table[i];
        ok = e->offset % WC_ALIGN == 0 && e->offset >= table_end && e->offset <= size && e->bytes <= size - e->offset;
    }
    if (!ok) {
        munmap(map, (size_t)size);
        return;
    }
    c->map = map;
    c->map_bytes = (size_t)size;
    c->table = table;
    c->count = h.count;
}

gm_status gm_wcache_open(const char *dir, const gm_source *src, gm_sharding rule, int n_dev, int dev,
                         gm_weight_cache **out) {
    *out = NULL;
    if (!dir || !*dir) return gm_fail(GM_ERR_ARG, "--weight-cache: no directory given");
    gm_weight_cache *c = calloc(1, sizeof *c);
    if (!c) return gm_fail(GM_ERR_NOMEM, "out of memory");
    c->key = cache_key(src, rule, n_dev, dev);
    char tail[32];
    snprintf(tail, sizeof tail, "-d%dof%d.gmpack", dev, n_dev);
    gm_status st = gm_cache_file_path(c->path, sizeof c->path, dir, gm_source_path(src), c->key, tail);
    if (st != GM_OK) {
        free(c);
        return st;
    }
    try_map(c);
    *out = c;
    return GM_OK;
}

const void *gm_wcache_take(gm_weight_cache *c, const char *name, gm_dtype type, uint64_t rows, uint64_t cols,
                           size_t bytes) {
    if (c->n_rec == c->cap_rec) {
        size_t cap = c->cap_rec ? c->cap_rec * 2 : 256;
        wc_record *r = realloc(c->rec, cap * sizeof *r);
        if (!r) { /* cannot record: never write this cache, and pack from the model file */
            c->misses++;
            c->next = c->count;
            c->unrecorded = true;
            return NULL;
        }
        c->rec = r;
        c->cap_rec = cap;
    }
    wc_record *r = &c->rec[c->n_rec++];
    memset(r, 0, sizeof *r);
    r->e.name_hash = gm_fnv1a(GM_FNV_SEED, name, strlen(name));
    r->e.type = (uint32_t)type;
    r->e.rows = rows;
    r->e.cols = cols;
    r->e.bytes = bytes;
    if (c->next < c->count) {
        const wc_entry *e = &c->table[c->next];
        if (e->name_hash == r->e.name_hash && e->type == r->e.type && e->rows == rows && e->cols == cols &&
            e->bytes == bytes) {
            c->next++;
            c->hits++;
            r->data = c->map + e->offset;
            return r->data;
        }
        c->next = c->count; /* out of step with the file: pack the rest */
    }
    c->misses++;
    return NULL;
}

gm_status gm_wcache_add(gm_weight_cache *c, const void *data) {
    if (c->unrecorded) return GM_OK;
    if (c->n_rec == 0 || c->rec[c->n_rec - 1].data) return gm_fail(GM_ERR_STATE, "weight cache: add without a missed take");
    c->rec[c->n_rec - 1].data = data;
    return GM_OK;
}

static uint64_t align_up(uint64_t v) { return (v + WC_ALIGN - 1) / WC_ALIGN * WC_ALIGN; }

void gm_wcache_finish(gm_weight_cache *c, char *why, size_t why_len) {
    if (why_len) why[0] = 0;
    if (c->misses == 0 && c->map && c->n_rec == c->count) return; /* the file is this load, as it is */
    if (c->n_rec == 0 || c->unrecorded) return;                  /* nothing packed, or not all recorded */
    for (size_t i = 0; i < c->n_rec; i++)
        if (!c->rec[i].data) return; /* the load failed or could not record: nothing sound to write */
    uint64_t table_end = sizeof(wc_header) + (uint64_t)c->n_rec * sizeof(wc_entry), off = align_up(table_end);
    for (size_t i = 0; i < c->n_rec; i++) {
        c->rec[i].e.offset = off;
        off = align_up(off + c->rec[i].e.bytes);
    }
    wc_entry *table = malloc(c->n_rec * sizeof *table + 1);
    if (!table) {
        snprintf(why, why_len, "weight cache: cannot write %s: out of memory", c->path);
        return;
    }
    char tmp[sizeof c->path + 16];
    int fd = gm_cache_file_create(c->path, tmp, sizeof tmp, "weight cache", why, why_len);
    if (fd < 0) {
        free(table);
        return;
    }
    for (size_t i = 0; i < c->n_rec; i++) table[i] = c->rec[i].e;
    wc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, WC_MAGIC, sizeof WC_MAGIC);
    h.version = GM_PACK_LAYOUT_VERSION;
    h.count = (uint32_t)c->n_rec;
    h.key = c->key;
    h.file_bytes = off;
    h.table_hash = gm_fnv1a(GM_FNV_SEED, table, c->n_rec * sizeof *table);
    bool ok = c->n_rec <= WC_MAX_ENTRIES && gm_cache_file_pwrite(fd, table, c->n_rec * sizeof *table, sizeof h);
    for (size_t i = 0; ok && i < c->n_rec; i++)
        ok = gm_cache_file_pwrite(fd, c->rec[i].data, (size_t)table[i].bytes, table[i].offset);
    /* the header last: a file cut short by a full disk never carries a valid one */
    ok = ok && ftruncate(fd, (off_t)off) == 0 && gm_cache_file_pwrite(fd, &h, sizeof h, 0);
    /* on disk, then out of the page cache: written pages sit in small folios, and the next load's
     * mapping reads the file back in 2 MiB ones (see try_map), once */
    gm_cache_file_commit(fd, tmp, c->path, ok, true, "weight cache", why, why_len);
    free(table);
}

int gm_wcache_hits(const gm_weight_cache *c) { return c->hits; }
int gm_wcache_misses(const gm_weight_cache *c) { return c->misses; }

void gm_wcache_release_map(gm_weight_cache *c, void **map, size_t *bytes) {
    *map = c->map;
    *bytes = c->map_bytes;
    c->map = NULL;
    c->map_bytes = 0;
    c->table = NULL;
}

void gm_wcache_unmap(void *map, size_t bytes) {
    if (map) munmap(map, bytes);
}

void gm_wcache_free(gm_weight_cache *c) {
    if (!c) return;
    gm_wcache_unmap(c->map, c->map_bytes);
    free(c->rec);
    free(c);
}
