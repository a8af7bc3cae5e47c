/* libFuzzer harness: any bytes as a Hugging Face config.json (gm_config_from_hf_json). An accepted
 * config must be consistent (gm_config_validate holds). Seeds: tests/fuzz/corpus/fuzz_hf_config (the
 * hub configs of every Gemma 3 size, the tiny fixtures' configs, crafted variants). */
#include "fuzz/fuzz_util.h"

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gm_config cfg;
    gm_hf_info info;
    /* a copy without a terminating NUL: the parser must respect the length */
    char *json = malloc(size ? size : 1);
    if (!json) abort();
    if (size) memcpy(json, data, size);
    if (gm_config_from_hf_json(json, size, "fuzz", &cfg, &info) == GM_OK)
        FZ_ASSERT(gm_config_validate(&cfg, "fuzz") == GM_OK, "accepted config fails validation: %s", gm_last_error());
    free(json);
    return 0;
}
