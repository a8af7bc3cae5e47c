/* AVX-512 pieces shared by packed_avx512.c and packed_amx.c (static inline: each file compiles them
 * with its own flags). */
#ifndef GM_KERNELS_PACKED_X86_H
#define GM_KERNELS_PACKED_X86_H

#include <immintrin.h>

#include "kernels/packed.h"

#define GM_PI static inline __attribute__((always_inline))

/* The int16 codes of pairs g and g + 8 (g < 8) of tile t: 16 rows x 2 columns each. */
GM_PI void tile_weights(gm_pack_kind K, const uint8_t *t, int g, __m512i *wa, __m512i *wb) {
    if (K == GM_PK_D16 || K == GM_PK_SM32) {
        *wa = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(t + 32 * g)));
        *wb = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(t + 32 * g + 256)));
        return;
    }
    /* one widening of the 32 bytes, then each 16-bit lane's low nibble and its byte's high nibble */
    __m512i v = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(t + 32 * g)));
    __m512i a = _mm512_and_si512(v, _mm512_set1_epi16(15));
    __m512i b = _mm512_srli_epi16(v, 4);
    if (K == GM_PK_N5D || K == GM_PK_N6) { /* bit 4 of each lane from the plane: +16 */
        /* kmovd from memory: a load, not a shuffle-port move */
        __mmask32 *pl = (__mmask32 *)(t + 256);
        a = _mm512_mask_add_epi16(a, _load_mask32(pl + g), a, _mm512_set1_epi16(16));
        b = _mm512_mask_add_epi16(b, _load_mask32(pl + g + 8), b, _mm512_set1_epi16(16));
    }
    if (K == GM_PK_N6) { /* bit 5: +32 */
        __mmask32 *pl = (__mmask32 *)(t + 320);
        a = _mm512_mask_add_epi16(a, _load_mask32(pl + g), a, _mm512_set1_epi16(32));
        b = _mm512_mask_add_epi16(b, _load_mask32(pl + g + 8), b, _mm512_set1_epi16(32));
    }
    *wa = a;
    *wb = b;
}

/* The f32 scales of the 16 rows of a compact K-quant tile (packed.h), from its scale codes sc and its
 * block's f16 row scales d (k_block: d[0] = d, d[1] = -dmin): GM_PK_N4K s = d sc and m = -dmin mn;
 * GM_PK_N6 the scales of columns 0-15 in *s and of 16-31 in *m. The products gm_packed_k_scales forms,
 * bit for bit. A block's d serves its 8 tiles: decode converts it once per 8. */
GM_PI void k_block(gm_pack_kind K, const uint8_t *sb, __m512 d[2]) {
    d[0] = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)sb));
    d[1] = K == GM_PK_N4K ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 32))) : d[0];
}

GM_PI void k_tile(gm_pack_kind K, const uint8_t *sc, const __m512 d[2], __m512 *s, __m512 *m) {
    __m128i c0 = _mm_load_si128((const __m128i *)sc), c1 = _mm_load_si128((const __m128i *)(sc + 16));
    if (K == GM_PK_N4K) {
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
