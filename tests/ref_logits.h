/* Logits recomputed by the tests exactly as the fixture generators made them
 * (big_logit() in tests/reference/gen_prng_fixtures.py). */
#ifndef GM_TESTS_REF_LOGITS_H
#define GM_TESTS_REF_LOGITS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GM_REF_BIG_V 262144

/* A smooth background in [-3, 3] and a spike of 10..16 every 9973 tokens, in double with the C
 * library's sin (as Python's math.sin), rounded to float32. */
static inline float gm_ref_big_logit(int i) {
    double v = 2.0 * sin(i * 0.0123) + sin(i * 0.7071);
    if (i % 9973 == 17) v += 10.0 + (i % 7);
    return (float)v;
}

/* FNV-1a over the float32 bit patterns (pins the formula's values against the generator's). */
static inline uint32_t gm_ref_fnv1a32(const float *v, size_t n) {
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, &v[i], sizeof w);
        for (int s = 0; s < 32; s += 8) {
            h ^= (w >> s) & 0xFFu;
            h *= 0x01000193u;
        }
    }
    return h;
}

#endif
