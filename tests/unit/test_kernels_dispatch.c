/* The run-time kernel choice: GM_KERNELS=scalar|avx2|avx512 forces a path (falling back to the best
 * the CPU runs when it cannot), anything else or nothing picks the best. Each setting is checked in
 * a child process (the choice is made once per process). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "test_util.h"

int main(int argc, char **argv) {
    if (getenv("GM_DISPATCH_CHILD")) {
        /* report the choice, and that the dispatched matvec is the chosen path's */
        float x[32], y1[3], y2[3];
        uint8_t w[3 * 34];
        for (int i = 0; i < 32; i++) x[i] = 0.1f * (float)(i - 13);
        for (int i = 0; i < 3 * 34; i++) w[i] = (uint8_t)(i * 37 + 11);
        for (int r = 0; r < 3; r++) w[34 * r] = 0, w[34 * r + 1] = 0x2c; /* d = 0.0625 */
        gm_matvec(GM_Q8_0, w, 34, 3, 32, x, y1);
        gm_kernels_lookup(gm_kernels_isa())->matvec(GM_Q8_0, w, 34, 3, 32, x, y2);
        printf("%s %d\n", gm_kernels_isa(), memcmp(y1, y2, sizeof y1) == 0);
        return 0;
    }
    (void)argc;
    const char *best = gm_kernels_lookup("avx512") ? "avx512" : gm_kernels_lookup("avx2") ? "avx2" : "scalar";
    CHECK(strcmp(gm_kernels_isa(), getenv("GM_KERNELS") ? gm_kernels_isa() : best) == 0, "default choice");
    static const char *settings[] = {"scalar", "avx2", "avx512", "bogus", ""};
    for (int i = 0; i < 5; i++) {
        const char *s = settings[i];
        const char *want = s[0] == 0 || !strcmp(s, "bogus") ? best : gm_kernels_lookup(s) ? s : best;
        char cmd[2048], out[64] = {0};
        snprintf(cmd, sizeof cmd, "GM_DISPATCH_CHILD=1 GM_KERNELS='%s' '%s'", s, argv[0]);
        FILE *p = popen(cmd, "r");
        CHECK(p != NULL, "cannot run %s", cmd);
        if (!p) continue;
        char *got = fgets(out, sizeof out, p);
        int rc = pclose(p);
        char isa[32] = {0};
        int same = 0;
        CHECK(got && rc == 0 && sscanf(out, "%31s %d", isa, &same) == 2, "child for GM_KERNELS='%s' failed", s);
        CHECK(strcmp(isa, want) == 0, "GM_KERNELS='%s': chose %s, want %s", s, isa, want);
        CHECK(same == 1, "GM_KERNELS='%s': gm_matvec is not the chosen path's matvec", s);
    }
    CHECK(gm_kernels_lookup("scalar") == &gm_kernels_scalar, "scalar is always available");
    CHECK(gm_kernels_lookup("sse9") == NULL, "unknown names give NULL");
    return gm_test_finish();
}
