/* gm_token_repr against CPython's repr() of Gemma 3 pieces (tests/fixtures/token_repr.json, made by
 * tests/reference/gen_token_repr_fixtures.py), plus truncation and invalid UTF-8. */
#include <string.h>

#include "gemma.h"
#include "json_fixture.h"
#include "plot/token_repr.h"
#include "test_util.h"

int main(void) {
    cJSON *root = gm_test_load_json("token_repr.json");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        const char *piece = cJSON_GetStringValue(cJSON_GetObjectItem(c, "piece"));
        const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(c, "repr"));
        char got[512];
        size_t len = gm_token_repr(piece, got, sizeof got);
        CHECK(strcmp(got, want) == 0 && len == strlen(want), "repr of '%s': got %s, Python %s", piece, got, want);
        n++;
    }
    CHECK(n > 1000, "only %d cases", n);

    char b[16];
    /* Truncation keeps whole characters and escapes, and the NUL. */
    size_t len = gm_token_repr("\xe2\x96\x81Mary had a little lamb", b, sizeof b);
    CHECK(len == strlen(b) && len <= 15 && strncmp(b, "' Mary had a", 12) == 0, "truncated: %s", b);
    len = gm_token_repr("\n\n\n\n\n\n\n\n", b, 8); /* room for 7 bytes: never half an escape */
    CHECK(strcmp(b, "'\\n\\n'") == 0 && len == 6, "truncated escapes: %s", b);
    len = gm_token_repr("\xe4\xb8\xad\xe6\x96\x87", b, 6);
    CHECK(strcmp(b, "'\xe4\xb8\xad'") == 0, "truncated on a UTF-8 boundary: %s", b);
    /* Invalid UTF-8 (not representable in a Python str) is escaped byte by byte. */
    gm_token_repr("a\xff\xc3(", b, sizeof b);
    CHECK(strcmp(b, "'a\\xff\\xc3('") == 0, "invalid UTF-8: %s", b);
    gm_token_repr("\xed\xa0\x80", b, sizeof b); /* an encoded surrogate */
    CHECK(strcmp(b, "'\\xed\\xa0\\x80'") == 0, "surrogate: %s", b);
    CHECK(gm_token_repr(NULL, b, sizeof b) == 2 && strcmp(b, "''") == 0, "NULL piece: %s", b);
    CHECK(gm_token_repr("x", b, 0) == 0, "cap 0 writes nothing");
    CHECK(gm_token_repr("x", b, 1) == 0 && b[0] == 0, "cap 1: empty");
    CHECK(gm_unicode_printable('a') && !gm_unicode_printable(0x200B) && !gm_unicode_printable(0xE000) &&
              gm_unicode_printable(0x4E2D) && !gm_unicode_printable(0x10FFFF),
          "printable table");

    cJSON_Delete(root);
    return gm_test_finish();
}
