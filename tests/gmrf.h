/* Reader for the GMRF arrays the fixture scripts write (tests/reference/gmref.py: write_gmrf):
 * 48-byte header "GMRF", u32 version 1, u32 dtype (0 f32, 1 f16, 2 i32), u32 ndim, u64 dims[4];
 * then the data, little-endian, row-major. Values come back as float (f16 widened) or int32. */
#ifndef GM_TESTS_GMRF_H
#define GM_TESTS_GMRF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

typedef struct gmrf {
    uint32_t dtype;
    uint64_t dims[4];
    uint64_t count;
    float *f;     /* dtype 0 or 1 */
    int32_t *i;   /* dtype 2 */
} gmrf;

static inline float gmrf_half(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        float v = (float)m / 16777216.0f; /* m * 2^-24 */
        return s ? -v : v;
    }
    bits = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112) << 23) | (m << 13));
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Loads fixture `name` (relative to GM_FIXTURES); exits the test with a message if unreadable. */
static inline gmrf gmrf_load(const char *name) {
    char path[1024];
    gm_test_fixture(name, path, sizeof path);
    gmrf a;
    memset(&a, 0, sizeof a);
    FILE *fp = fopen(path, "rb");
    unsigned char hdr[48];
    uint32_t ver, ndim;
    if (!fp || fread(hdr, 1, 48, fp) != 48 || memcmp(hdr, "GMRF", 4) != 0) {
        fprintf(stderr, "fixture %s: missing or not GMRF\n", path);
        exit(1);
    }
    memcpy(&ver, hdr + 4, 4);
    memcpy(&a.dtype, hdr + 8, 4);
    memcpy(&ndim, hdr + 12, 4);
    memcpy(a.dims, hdr + 16, 32);
    a.count = a.dims[0] * a.dims[1] * a.dims[2] * a.dims[3];
    size_t es = a.dtype == 1 ? 2 : 4;
    void *raw = malloc(a.count * es);
    if (ver != 1 || a.dtype > 2 || !raw || fread(raw, es, a.count, fp) != a.count) {
        fprintf(stderr, "fixture %s: bad header or short data\n", path);
        exit(1);
    }
    fclose(fp);
    if (a.dtype == 2) a.i = raw;
    else if (a.dtype == 0) a.f = raw;
    else {
        a.f = malloc(a.count * sizeof(float));
        for (uint64_t k = 0; k < a.count; k++) a.f[k] = gmrf_half(((uint16_t *)raw)[k]);
        free(raw);
    }
    return a;
}

static inline void gmrf_free(gmrf *a) {
    free(a->f);
    free(a->i);
    memset(a, 0, sizeof *a);
}

#endif
