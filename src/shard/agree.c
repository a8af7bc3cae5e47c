/* Do all ranks run the same thing? Each rank's digest is gathered to every rank, so every rank finds
 * the same first disagreeing rank and can print the same complete message: whichever rank reaches
 * stderr first (the others may be stopped by mpirun a moment later) tells the whole story. */
#include <stdlib.h>
#include <string.h>

#include "shard/comm.h"

/* A uint64 travels as four 16-bit pieces, each exact in a float (MPI moves floats here). */
enum { PIECES = 4 };

gm_status gm_mpi_find_disagreement(const uint64_t *digest, int n, gm_disagreement *out) {
    memset(out, 0, sizeof *out);
    out->first = -1;
    if (n < 1 || n > GM_DIGEST_MAX)
        return gm_fail(GM_ERR_ARG, "rank agreement: digest of %d words (1 to %d)", n, GM_DIGEST_MAX);
    int rank, ranks;
    GM_TRY(gm_mpi_init(GM_WAIT_AUTO, &rank, &ranks)); /* started by the load */
    size_t per = (size_t)n * PIECES;
    float *all = calloc((size_t)ranks * per, sizeof *all);
    size_t *off = malloc(((size_t)ranks + 1) * sizeof *off);
    if (!all || !off) {
        free(all);
        free(off);
        return gm_fail(GM_ERR_NOMEM, "rank agreement: out of memory for %d ranks", ranks);
    }
    for (int r = 0; r <= ranks; r++) off[r] = (size_t)r * per;
    float *mine = all + (size_t)rank * per;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < PIECES; p++) mine[i * PIECES + p] = (float)((digest[i] >> (16 * p)) & 0xffff);
    gm_status st = gm_mpi_all_gather(all, off);
    if (st == GM_OK) {
        uint64_t *words = calloc((size_t)ranks * (size_t)n, sizeof *words);
        if (!words) st = gm_fail(GM_ERR_NOMEM, "rank agreement: out of memory for %d ranks", ranks);
        for (size_t k = 0; words && k < (size_t)ranks * (size_t)n; k++)
            for (int p = 0; p < PIECES; p++) words[k] |= (uint64_t)all[k * PIECES + (size_t)p] << (16 * p);
        for (int r = 1; words && r < ranks; r++) {
            if (memcmp(words + (size_t)r * (size_t)n, words, (size_t)n * sizeof *words) == 0) continue;
            if (out->first < 0) {
                out->first = r;
                memcpy(out->theirs, words + (size_t)r * (size_t)n, (size_t)n * sizeof *words);
                memcpy(out->root, words, (size_t)n * sizeof *words);
            }
            out->count++;
        }
        free(words);
    }
    free(all);
    free(off);
    return st;
}
