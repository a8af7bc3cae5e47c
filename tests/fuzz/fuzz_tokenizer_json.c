/* libFuzzer harness: any bytes as tokenizer.json in a model folder, loaded with gm_tokenizer_load
 * (the folder path, as a model load does). A tokenizer that loads must encode and decode (tok_props.h).
 * Seeds: tests/fuzz/corpus/fuzz_tokenizer_json (tests/fixtures/tokenizer_tiny/tokenizer.json and
 * crafted variants; never Google's 33 MB file). */
#include "fuzz/fuzz_util.h"
#include "fuzz/tok_props.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fz_write("tokenizer.json", data, size, path, sizeof path);
    gm_tokenizer *tok = NULL;
    if (gm_tokenizer_load(fz_dir(), &tok) == GM_OK) {
        fz_check_tokenizer(tok, data, size < 256 ? size : 256);
        gm_tokenizer_free(tok);
    }
    return 0;
}
