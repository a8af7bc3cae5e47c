#include "model/tokenizer_job.h"

#include <string.h>

#include "base/hash.h"
#include "io/cache_file.h"
#include "text/tokenizer_cache.h"
#include "text/tokenizer_gguf.h"

static void *run(void *arg) {
    gm_tok_job *j = arg;
    if (j->cache_path[0]) {
        if (gm_tokcache_load(j->cache_path, j->cache_key, &j->tok) == GM_OK && j->tok) {
            j->cache_state = "mapped";
            return NULL;
        }
    }
    gm_status st = j->gguf ? gm_tokenizer_from_gguf(j->gguf, &j->tok) : gm_tokenizer_load(j->path, &j->tok);
    if (st != GM_OK) j->tok = NULL;
    if (j->tok && j->cache_path[0])
        j->cache_state = gm_tokcache_write(j->cache_path, j->cache_key, j->tok, j->why, sizeof j->why) ? "written"
                                                                                                        : "unwritten";
    return NULL;
}

gm_status gm_tok_job_start(gm_tok_job *j, const char *path, const gm_source *src, const char *cache_dir) {
    memset(j, 0, sizeof *j);
    j->path = path;
    j->gguf = gm_source_gguf(src);
    j->cache_state = "off";
    if (cache_dir && *cache_dir) {
        /* the same model files, on a machine with the same pointer size and byte order */
        uint64_t v[3] = {gm_source_stamp(src), sizeof(size_t), 0x0102030405060708ull};
        j->cache_key = gm_fnv1a(GM_FNV_SEED, v, sizeof v);
        GM_TRY(gm_cache_file_path(j->cache_path, sizeof j->cache_path, cache_dir, gm_source_path(src), j->cache_key,
                                  ".gmtok"));
    }
    j->started = pthread_create(&j->thread, NULL, run, j) == 0;
    if (!j->started) run(j);
    return GM_OK;
}

void gm_tok_job_join(gm_tok_job *j) {
    if (j->started) pthread_join(j->thread, NULL);
    j->started = false;
}
