/* AVX2 pieces shared by packed_avx2.c (the int16 products) and packed_matmul_avx2.c (the f32 batched
 * products): static inline, each file compiles them with its own flags. */
#ifndef GM_KERNELS_PACKED_AVX2_H
#define GM_KERNELS_PACKED_AVX2_H

#include "kernels/packed.h"
#include "kernels/quant_x86.h"

/* The codes of pairs g and g + 8 (g < 8) of tile t as bytes (32 lanes = 16 rows x 2 columns each). */
GM_AI void tile_bytes(gm_pack_kind K, const uint8_t *t, int g, __m256i *a, __m256i *b, int *is_signed) {
    if (K == GM_PK_D16 || K == GM_PK_SM32) {
        *a = _mm256_load_si256((const __m256i *)(t + 32 * g));
        *b = _mm256_load_si256((const __m256i *)(t + 32 * g + 256));
        *is_signed = 1;
        return;
    }
    *is_signed = 0;
    __m256i v = _mm256_load_si256((const __m256i *)(t + 32 * g)), m4 = _mm256_set1_epi8(15);
    __m256i x = _mm256_and_si256(v, m4), y = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (K == GM_PK_N6C) { /* pairs g, g + 8 at bits 0-1, 4-5 (g < 4) or 2-3, 6-7 of crumb byte section g % 4 */
        __m256i c = _mm256_load_si256((const __m256i *)(t + 256 + 32 * (g & 3))), m = _mm256_set1_epi8(0x30);
        /* 16-bit shifts: what crosses into a byte from its neighbour lands outside bits 4-5 */
        __m256i cx = g < 4 ? _mm256_slli_epi16(c, 4) : _mm256_slli_epi16(c, 2);
        __m256i cy = g < 4 ? c : _mm256_srli_epi16(c, 2);
        *a = _mm256_or_si256(x, _mm256_and_si256(cx, m));
        *b = _mm256_or_si256(y, _mm256_and_si256(cy, m));
        return;
    }
    if (K == GM_PK_N5D) {
        x = _mm256_or_si256(x, _mm256_and_si256(bits_to_bytes(t + 256 + 4 * g), _mm256_set1_epi8(16)));
        y = _mm256_or_si256(y, _mm256_and_si256(bits_to_bytes(t + 256 + 4 * (g + 8)), _mm256_set1_epi8(16)));
    }
    *a = x;
    *b = y;
}

/* Rows {0-3, 8-11} (lo) and {4-7, 12-15} (hi) of 16 values given as rows 0-7 (a) and 8-15 (b): the order
 * the in-lane unpacks (_mm256_unpack{lo,hi}_epi8 / epi16) leave a tile's 16 rows in. Its own inverse. */
GM_AI void rows_mixed(__m256 a, __m256 b, __m256 *lo, __m256 *hi) {
    *lo = _mm256_permute2f128_ps(a, b, 0x20);
    *hi = _mm256_permute2f128_ps(a, b, 0x31);
}

/* The f32 scales of rows 0-7 (h = 0) or 8-15 (h = 1) of a compact K-quant tile (packed.h), from its scale
 * codes sc and its block's f16 row scales (k_block8: d[h] = d, d[2 + h] = -dmin): GM_PK_N4K s = d sc,
 * m = -dmin mn; GM_PK_N6C the scales of columns 0-15 in *s, of 16-31 in *m. The products gm_packed_k_scales
 * forms, bit for bit. A block's d serves its 8 tiles: decode converts it once per 8. */
GM_AI void k_block8(gm_pack_kind K, const uint8_t *sb, __m256 d[4]) {
    d[0] = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)sb));
    d[1] = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 16)));
    d[2] = K == GM_PK_N4K ? _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 32))) : d[0];
    d[3] = K == GM_PK_N4K ? _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 48))) : d[1];
}

GM_AI void k_tile8(gm_pack_kind K, const uint8_t *sc, const __m256 d[4], int h, __m256 *s, __m256 *m) {
    __m128i c0 = _mm_loadl_epi64((const __m128i *)(sc + 8 * h));
    __m128i c1 = _mm_loadl_epi64((const __m128i *)(sc + 16 + 8 * h));
    if (K == GM_PK_N4K) {
        *s = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c0)));
        *m = _mm256_mul_ps(d[2 + h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c1)));
    } else {
        *s = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c0)));
        *m = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c1)));
    }
}

/* All 16 rows of tile b's scales: s[h], m[h] for rows 8h .. 8h + 7 (the block's d converted here) */
GM_AI void k_scales16(gm_pack_kind K, const gm_packed *P, const uint8_t *panel, size_t b, __m256 s[2], __m256 m[2]) {
    __m256 d[4];
    k_block8(K, gm_packed_sb(P, panel, b), d);
    k_tile8(K, gm_packed_sc(P, panel, b), d, 0, &s[0], &m[0]);
    k_tile8(K, gm_packed_sc(P, panel, b), d, 1, &s[1], &m[1]);
}

/* Rows [r0, r1) of panel p's 16 results into y (y[0] = row r0), stored, or with `add` added to what y holds
 * (a constant after inlining) */
GM_AI void put_rows(float *y, __m256 lo, __m256 hi, size_t p, size_t r0, size_t r1, int add) {
    size_t a = p * GM_PANEL_ROWS;
    if (a >= r0 && a + GM_PANEL_ROWS <= r1) {
        float *o = y + (a - r0);
        if (add) lo = _mm256_add_ps(lo, _mm256_loadu_ps(o)), hi = _mm256_add_ps(hi, _mm256_loadu_ps(o + 8));
        _mm256_storeu_ps(o, lo);
        _mm256_storeu_ps(o + 8, hi);
        return;
    }
    float v[16];
    _mm256_storeu_ps(v, lo);
    _mm256_storeu_ps(v + 8, hi);
    for (size_t i = 0; i < GM_PANEL_ROWS; i++)
        if (a + i >= r0 && a + i < r1) y[a + i - r0] = add ? y[a + i - r0] + v[i] : v[i];
}

GM_AI void store_rows(float *y, __m256 lo, __m256 hi, size_t p, size_t r0, size_t r1) {
    put_rows(y, lo, hi, p, r0, r1, 0);
}

#endif
