/* Token labels as Python's repr() writes them (the seed labels its logits plot with repr(token)). */
#ifndef GM_PLOT_TOKEN_REPR_H
#define GM_PLOT_TOKEN_REPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemma.h"

/* str.isprintable() for one code point (generated table, src/plot/unicode_nonprint.c). */
bool gm_unicode_printable(uint32_t cp);

#endif
