#include <stdlib.h>

#include "gemma.h"

void gm_free(void *p) { free(p); }
