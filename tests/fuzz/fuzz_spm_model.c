/* libFuzzer harness: any bytes as a SentencePiece tokenizer.model (protobuf) in a model folder, loaded
 * with gm_tokenizer_load. A tokenizer that loads must encode and decode (tok_props.h). Seeds:
 * tests/fuzz/corpus/fuzz_spm_model (small ModelProtos in Gemma's configuration, written by
 * tests/reference/gen_fuzz_seeds.py with the sentencepiece package's own protobuf classes). */
#include "fuzz/fuzz_util.h"
#include "fuzz/tok_props.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fz_write("tokenizer.model", data, size, path, sizeof path);
    gm_tokenizer *tok = NULL;
    if (gm_tokenizer_load(fz_dir(), &tok) == GM_OK) {
        fz_check_tokenizer(tok, data, size < 256 ? size : 256);
        gm_tokenizer_free(tok);
    }
    return 0;
}
