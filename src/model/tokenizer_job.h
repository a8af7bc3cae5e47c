/* The model's tokenizer, built on its own thread while the weights load (it reads the model file on
 * its own), or mapped from the tokenizer cache beside the weight cache (text/tokenizer_cache.h). */
#ifndef GM_MODEL_TOKENIZER_JOB_H
#define GM_MODEL_TOKENIZER_JOB_H

#include <pthread.h>
#include <stdbool.h>

#include "io/source.h"

typedef struct gm_tok_job {
    const char *path;     /* the model's file or folder */
    const gm_gguf *gguf;  /* the source's, when it is a GGUF file */
    char cache_path[1280]; /* "" without a cache directory */
    uint64_t cache_key;
    gm_tokenizer *tok;    /* NULL when the model has none, or on failure */
    const char *cache_state; /* "off", "mapped", "written" or "unwritten" */
    char why[1400];       /* why the cache file could not be written, or "" */
    pthread_t thread;
    bool started;
} gm_tok_job;

/* Start the job (on the caller's thread when no thread can be made). cache_dir may be NULL. Fails only
 * on a cache directory path too long to use. */
gm_status gm_tok_job_start(gm_tok_job *j, const char *path, const gm_source *src, const char *cache_dir);
/* Wait for the job to end (a no-op when it ran on the caller's thread); j->tok, cache_state and why
 * hold its results. */
void gm_tok_job_join(gm_tok_job *j);

#endif
