#include "text/utf8.h"

#include <stdint.h>

size_t gm_utf8_incomplete_tail(const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    /* walk back over at most 3 continuation bytes to the lead byte */
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        uint8_t c = p[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation */
        size_t need = (c & 0x80) == 0 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? back : 0;
    }
    return 0;
}
