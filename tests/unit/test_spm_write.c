/* A tokenizer.model written from the real model's GGUF tokenizer (what a checkpoint saved from a GGUF
 * carries) must tokenize like Google's tokenizer.json does under HF `tokenizers`: every case of
 * tests/fixtures/tokenizer_parity.jsonl the GGUF vocabulary covers, ids equal. Also: every piece, score and type survives, and a
 * tokenizer.json tokenizer (explicit merges) is refused. Skipped without the real model. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemma.h"
#include "json_fixture.h"
#include "text/spm_write.h"
#include "text/tokenizer_internal.h"
#include "test_util.h"

int main(void) {
    const char *model = gm_test_model_path();
    if (!model) {
        printf("no GM_TEST_MODEL: skipped\n");
        return 77;
    }
    gm_tokenizer *a, *b;
    CHECK(gm_tokenizer_load(model, &a) == GM_OK, "%s", gm_last_error());
    char path[] = "/tmp/gm_spm_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char model_path[64];
    snprintf(model_path, sizeof model_path, "%s.model", path);
    CHECK(gm_tokenizer_write_spm(a, model_path) == GM_OK, "%s", gm_last_error());
    CHECK(gm_tokenizer_load(model_path, &b) == GM_OK, "%s", gm_last_error());
    CHECK(a->n == b->n, "%d vs %d pieces", a->n, b->n);
    int diff = 0;
    for (int32_t i = 0; i < a->n && i < b->n; i++)
        diff += a->len[i] != b->len[i] || memcmp(gm_tok_text(a, i), gm_tok_text(b, i), a->len[i]) ||
                a->type[i] != b->type[i] || a->score[i] != b->score[i];
    CHECK(diff == 0, "%d pieces differ", diff);
    CHECK(gm_tokenizer_bos_id(b) == gm_tokenizer_bos_id(a) && gm_tokenizer_eos_id(b) == gm_tokenizer_eos_id(a), "bos/eos");

    char fix[1024];
    gm_test_fixture("tokenizer_parity.jsonl", fix, sizeof fix);
    FILE *f = fopen(fix, "r");
    CHECK(f != NULL, "fixture");
    char *line = NULL;
    size_t cap = 0;
    int cases = 0, bad = 0;
    while (f && getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *text = cJSON_GetObjectItem(j, "text"), *ids = cJSON_GetObjectItem(j, "ids");
        /* no_gguf: ids the GGUF's vocabulary does not have (<image_soft_token> = 262144) */
        if (cJSON_IsString(text) && cJSON_IsArray(ids) && !cJSON_IsTrue(cJSON_GetObjectItem(j, "no_gguf"))) {
            int32_t *got;
            size_t n;
            if (gm_tokenizer_encode(b, text->valuestring, strlen(text->valuestring), false, &got, &n) != GM_OK) bad++;
            else {
                bool same = (int)n == cJSON_GetArraySize(ids);
                for (size_t k = 0; same && k < n; k++) same = got[k] == cJSON_GetArrayItem(ids, (int)k)->valueint;
                bad += !same;
                if (!same) fprintf(stderr, "differs: %s", line);
                gm_free(got);
            }
            cases++;
        }
        cJSON_Delete(j);
    }
    free(line);
    if (f) fclose(f);
    CHECK(cases > 450 && bad == 0, "%d of %d cases tokenize differently from HF tokenizers", bad, cases);
    printf("%d parity cases through the written tokenizer.model\n", cases);

    gm_tokenizer *hf;
    gm_test_fixture("tokenizer_tiny/tokenizer.json", fix, sizeof fix);
    CHECK(gm_tokenizer_load(fix, &hf) == GM_OK, "%s", gm_last_error());
    CHECK(gm_tokenizer_write_spm(hf, model_path) == GM_ERR_UNSUPPORTED, "tokenizer.json tokenizers are refused");
    gm_tokenizer_free(hf);
    gm_tokenizer_free(a);
    gm_tokenizer_free(b);
    remove(model_path);
    remove(path);
    return gm_test_finish();
}
