/* The forward pass on Hugging Face folders against transformers' own float32 logits (eager attention)
 * at every position: tests/fixtures/hf_tiny_logits.bin (hf_tiny) and hf_tiny_mm_logits.bin (the
 * multimodal model's text path, read from the sharded f32 folder and from the bf16 4.x-layout copy).
 * Layout of the .bin files: tests/fixtures/README.md. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"
#include "test_util.h"

#define TOL 1e-4 /* observed ~5e-6: both sides compute in float32 from the same bf16-exact weights */

static bool rd(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static void check(const char *folder, const char *bin, int devices) {
    char dir[1024], path[1024];
    gm_test_fixture(folder, dir, sizeof dir);
    gm_test_fixture(bin, path, sizeof path);
    gm_load_options opt;
    gm_load_options_default(&opt);
    opt.devices = devices;
    opt.cache_length = 32;
    gm_model *m = NULL;
    gm_status st = gm_model_load(dir, &opt, &m);
    CHECK(st == GM_OK, "%s: %s", folder, gm_last_error());
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (st != GM_OK || !f) {
        if (f) fclose(f);
        gm_model_free(m);
        return;
    }
    char magic[8];
    uint32_t n_seqs = 0, vocab = 0;
    bool ok = rd(f, magic, 8) && memcmp(magic, "GMLOGIT1", 8) == 0 && rd(f, &n_seqs, 4) && rd(f, &vocab, 4);
    CHECK(ok && n_seqs == 3, "%s: bad header", path);
    CHECK(ok && (int)vocab == gm_model_config(m)->vocab_size, "%s: vocab %u vs model %d", path, vocab,
          gm_model_config(m)->vocab_size);
    for (uint32_t s = 0; ok && s < n_seqs && (int)vocab == gm_model_config(m)->vocab_size; s++) {
        uint32_t n = 0;
        ok = rd(f, &n, 4) && n > 0 && n <= 32;
        CHECK(ok, "%s: sequence %u length", path, s);
        if (!ok) break;
        int32_t *ids = malloc(n * sizeof *ids);
        float *ref = malloc((size_t)n * vocab * sizeof *ref), *got = malloc((size_t)n * vocab * sizeof *got);
        float *last = malloc(vocab * sizeof *last);
        ok = rd(f, ids, n * sizeof *ids) && rd(f, ref, (size_t)n * vocab * sizeof *ref);
        CHECK(ok, "%s: truncated", path);
        gm_session *se = NULL;
        if (ok && gm_session_new(m, &se) == GM_OK) {
            st = gm_session_forward(se, ids, n, last, got);
            CHECK(st == GM_OK, "%s: forward: %s", folder, gm_last_error());
            double worst = 0;
            size_t at = 0;
            for (size_t i = 0; st == GM_OK && i < (size_t)n * vocab; i++) {
                double d = fabs((double)got[i] - ref[i]);
                if (!(d <= worst)) worst = d, at = i; /* NaN counts as worst */
            }
            CHECK(st == GM_OK && worst <= TOL, "%s (%d devices) sequence of %u: max |logit diff| %.3g at position %zu, id %zu",
                  folder, devices, n, worst, at / vocab, at % vocab);
            CHECK(st == GM_OK && memcmp(last, got + (size_t)(n - 1) * vocab, vocab * sizeof *last) == 0,
                  "%s: logits_last differs from the last row of logits_all", folder);
        }
        gm_session_free(se);
        free(ids);
        free(ref);
        free(got);
        free(last);
    }
    fclose(f);
    gm_model_free(m);
}

int main(void) {
    for (int devices = 1; devices <= 2; devices++) {
        check("hf_tiny", "hf_tiny_logits.bin", devices);
        check("hf_tiny_mm_sharded", "hf_tiny_mm_logits.bin", devices);
        check("hf_tiny_mm_v4", "hf_tiny_mm_logits.bin", devices);
    }
    return gm_test_finish();
}
