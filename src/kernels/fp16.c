/* IEEE binary16 and bfloat16 <-> binary32, in portable integer code (the SIMD kernels use F16C /
 * AVX-512 conversions, which give the same results: f16 -> f32 is exact either way). */
#include <string.h>

#include "kernels/matvec.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float gm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN (payload kept) */
    if (exp != 0) return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return bits_f32(sign);
    /* subnormal: value = man * 2^-24, normal in f32 */
    int e = -1;
    do {
        man <<= 1;
        e++;
    } while (!(man & 0x400u));
    return bits_f32(sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13));
}

uint16_t gm_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) /* inf, or NaN forced quiet so a payload in the dropped bits cannot become inf */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (e <= 0) {
        if (e < -10) return sign; /* below half the smallest subnormal: rounds to zero */
        man |= 0x800000u;         /* implicit bit; shift into subnormal position */
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q); /* q may carry into the exponent field: that is correct */
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++; /* a carry may reach inf: correct */
    return (uint16_t)(sign | q);
}

float gm_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t gm_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* NaN: force quiet */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);              /* round to nearest even */
}
