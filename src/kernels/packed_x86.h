/* AVX-512 pieces shared by packed_avx512.c and packed_amx.c (static inline: each file compiles them
 * with its own flags). */
#ifndef GM_KERNELS_PACKED_X86_H
#define GM_KERNELS_PACKED_X86_H

#include <immintrin.h>

#include "kernels/packed.h"

#define GM_PI static inline __attribute__((always_inline))

/* Step g's codes of an N6 tile (packed.h, row form): byte 4r + s = row r's slot s (columns 2g, 2g + 1,
 * 2g + 16, 2g + 17), as vpmaddubsw takes them. Two loads, a shift or two, an AND and a vpternlogd. */
GM_PI __m512i n6_step_u8(const uint8_t *t, int g) {
    __m512i n = _mm512_loadu_si512((const void *)(t + 64 * (g >> 1)));
    __m512i c = _mm512_loadu_si512((const void *)(t + 256 + 64 * (g >> 2)));
    if (g & 1) n = _mm512_srli_epi16(n, 4); /* the high nibbles; what spills in from the next byte is masked */
    /* bits 2 (g % 4), + 1 to bits 4-5: a 16-bit shift spills only into bits the AND clears */
    switch (g & 3) {
    case 0: c = _mm512_slli_epi16(c, 4); break;
    case 1: c = _mm512_slli_epi16(c, 2); break;
    case 2: break;
    default: c = _mm512_srli_epi16(c, 2); break;
    }
    /* (n & 0x0f) | (c & 0x30) */
    return _mm512_ternarylogic_epi32(n, _mm512_and_si512(c, _mm512_set1_epi8(0x30)), _mm512_set1_epi8(0x0f), 0xec);
}

/* Step g's codes of an N4R tile (packed.h), as n6_step_u8: one load, a shift for odd steps and an AND. */
GM_PI __m512i n4r_step_u8(const uint8_t *t, int g) {
    __m512i n = _mm512_loadu_si512((const void *)(t + 64 * (g >> 1)));
    if (g & 1) n = _mm512_srli_epi16(n, 4); /* the high nibbles; what spills in from the next byte is masked */
    return _mm512_and_si512(n, _mm512_set1_epi8(0x0f));
}

/* Step g's codes of an N5R tile (packed.h), as n6_step_u8: N4R's nibbles, then 16 added where the step's
 * plane bit is set (a masked add). */
GM_PI __m512i n5r_step_u8(const uint8_t *t, int g) {
    __m512i n = n4r_step_u8(t, g);
    /* kmovq from memory: a load, not a shuffle-port move */
    return _mm512_mask_add_epi8(n, _load_mask64((__mmask64 *)(t + 256 + 8 * g)), n, _mm512_set1_epi8(16));
}

/* The int16 codes of pairs g and g + 8 (g < 8) of tile t: 16 rows x 2 columns each (N6H: pairs 2g, 2g + 1). */
GM_PI void tile_weights(gm_pack_kind K, const uint8_t *t, int g, __m512i *wa, __m512i *wb) {
    if (K == GM_PK_N6 || K == GM_PK_N6H || K == GM_PK_N5R || K == GM_PK_N4R) {
        /* slots 0, 1 and 2, 3 of each row, zero-extended (N6H: columns 4g, 4g + 1 and 4g + 2, 4g + 3) */
        __m512i w = gm_pack_kind_q6(K) ? n6_step_u8(t, g) : K == GM_PK_N5R ? n5r_step_u8(t, g) : n4r_step_u8(t, g);
        /* -128 zeroes a byte, and stays negative plus 2 */
        const __m128i a = _mm_setr_epi8(0, -128, 1, -128, 4, -128, 5, -128, 8, -128, 9, -128, 12, -128, 13, -128);
        *wa = _mm512_shuffle_epi8(w, _mm512_broadcast_i32x4(a));
        *wb = _mm512_shuffle_epi8(w, _mm512_broadcast_i32x4(_mm_add_epi8(a, _mm_set1_epi8(2))));
        return;
    }
    if (K == GM_PK_D16 || K == GM_PK_SM32) {
        *wa = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(t + 32 * g)));
        *wb = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(t + 32 * g + 256)));
        return;
    }
    /* one widening of the 32 bytes, then each 16-bit lane's low nibble and its byte's high nibble */
    __m512i v = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(t + 32 * g)));
    __m512i a = _mm512_and_si512(v, _mm512_set1_epi16(15));
    __m512i b = _mm512_srli_epi16(v, 4);
    if (K == GM_PK_N5D) { /* bit 4 of each lane from the plane: +16 */
        /* kmovd from memory: a load, not a shuffle-port move */
        __mmask32 *pl = (__mmask32 *)(t + 256);
        a = _mm512_mask_add_epi16(a, _load_mask32(pl + g), a, _mm512_set1_epi16(16));
        b = _mm512_mask_add_epi16(b, _load_mask32(pl + g + 8), b, _mm512_set1_epi16(16));
    }
    *wa = a;
    *wb = b;
}

/* The f32 scales of the 16 rows of a compact K-quant tile (packed.h), from its scale codes sc and its
 * block's f16 row scales d (k_block: d[0] = d, d[1] = -dmin): GM_PK_N4K / N4R s = d sc and m = -dmin mn;
 * GM_PK_N6 / N6H the scales of columns 0-15 in *s and of 16-31 in *m. The products gm_packed_k_scales forms,
 * bit for bit. A block's d serves its 8 tiles: decode converts it once per 8. */
GM_PI void k_block(gm_pack_kind K, const uint8_t *sb, __m512 d[2]) {
    d[0] = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)sb));
    d[1] = gm_pack_kind_q4k(K) ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 32))) : d[0];
}

GM_PI void k_tile(gm_pack_kind K, const uint8_t *sc, const __m512 d[2], __m512 *s, __m512 *m) {
    __m128i c0 = _mm_load_si128((const __m128i *)sc), c1 = _mm_load_si128((const __m128i *)(sc + 16));
    if (gm_pack_kind_q4k(K)) {
        *s = _mm512_mul_ps(d[0], _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c0)));
        *m = _mm512_mul_ps(d[1], _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c1)));
    } else {
        *s = _mm512_mul_ps(d[0], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c0)));
        *m = _mm512_mul_ps(d[0], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c1)));
    }
}

GM_PI void k_scales(gm_pack_kind K, const uint8_t *sc, const uint8_t *sb, __m512 *s, __m512 *m) {
    __m512 d[2];
    k_block(K, sb, d);
    k_tile(K, sc, d, s, m);
}

#endif
