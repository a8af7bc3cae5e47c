#ifndef GM_TEXT_UTF8_H
#define GM_TEXT_UTF8_H

#include <stddef.h>

/* Bytes at the end of s[0..n) that start a UTF-8 sequence not yet complete (0..3). */
size_t gm_utf8_incomplete_tail(const char *s, size_t n);

#endif
