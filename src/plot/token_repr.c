#include "plot/token_repr.h"

#include <stdio.h>
#include <string.h>

/* Decode one UTF-8 sequence at s (NUL-terminated); returns its length, or 0 when invalid (overlong,
 * surrogate, > U+10FFFF or truncated), in which case the caller escapes the single byte. */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0) {
        n = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

/* Appends `len` bytes when they fit in full (plus the NUL); returns 0 when they did not. */
static int put(char *buf, size_t cap, size_t *at, const char *s, size_t len) {
    if (*at + len + 1 > cap) return 0;
    memcpy(buf + *at, s, len);
    *at += len;
    return 1;
}

size_t gm_token_repr(const char *piece, char *buf, size_t cap) {
    if (!buf || cap == 0) return 0;
    buf[0] = 0;
    if (!piece) piece = "";
    /* Python picks double quotes only when the text has a ' and no ". U+2581 counts as a space. */
    bool has_single = strchr(piece, '\'') != NULL, has_double = strchr(piece, '"') != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    size_t at = 0;
    if (!put(buf, cap, &at, &quote, 1)) return 0;
    const unsigned char *s = (const unsigned char *)piece;
    while (*s) {
        uint32_t cp = 0;
        size_t n = utf8_decode(s, &cp);
        char esc[16];
        size_t len;
        const char *out = esc;
        if (n == 0) { /* invalid UTF-8 (Python strings cannot hold it): escape the byte */
            len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *s);
            n = 1;
        } else if (cp == 0x2581) {
            out = " ", len = 1;
        } else if (cp == '\\' || cp == (uint32_t)quote) {
            esc[0] = '\\', esc[1] = (char)cp, len = 2;
        } else if (cp == '\t') {
            out = "\\t", len = 2;
        } else if (cp == '\n') {
            out = "\\n", len = 2;
        } else if (cp == '\r') {
            out = "\\r", len = 2;
        } else if (cp < 0x20 || cp == 0x7F) {
            len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
        } else if (cp < 0x7F || gm_unicode_printable(cp)) {
            out = (const char *)s, len = n;
        } else if (cp < 0x100) {
            len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
        } else if (cp < 0x10000) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
        } else {
            len = (size_t)snprintf(esc, sizeof esc, "\\U%08x", (unsigned)cp);
        }
        /* Keep room for the closing quote; on overflow stop on a character boundary. */
        if (at + len + 2 > cap) break;
        put(buf, cap, &at, out, len);
        s += n;
    }
    if (at + 2 <= cap) buf[at++] = quote;
    buf[at] = 0;
    return at;
}
