/* libFuzzer harness: any bytes as a Hugging Face config.json. A config that is accepted must be
 * consistent (gm_config_validate holds). Build with -DGM_FUZZ=ON (clang). */
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gm_config cfg;
    gm_hf_info info;
    if (gm_config_from_hf_json((const char *)data, size, "fuzz", &cfg, &info) == GM_OK &&
        gm_config_validate(&cfg, "fuzz") != GM_OK)
        __builtin_trap();
    return 0;
}
