#include "io/source_internal.h"

/* Placeholder until the Hugging Face reader lands: a folder is reported as unsupported. */
gm_status gm_hf_source_open(const char *dir, gm_source **out) {
    *out = NULL;
    return gm_fail(GM_ERR_UNSUPPORTED, "%s: Hugging Face model folders are not supported yet", dir);
}
