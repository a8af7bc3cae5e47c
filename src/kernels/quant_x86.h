/* x86 building blocks shared by matvec_avx2.c and matvec_avx512.c (included by both; every function
 * is static inline so each file compiles it with its own ISA flags). Needs AVX2 + F16C.
 *
 * Every quantized type is decoded the same way: a 32-value chunk becomes 32 signed bytes q (all
 * types' integer codes fit in int8 once the type's offset is subtracted), and each 16-value half has
 * a scale s and offset o so that w = q * s + o. q * s is always exact in f32 (an f16 scale times a
 * small integer), so computing w with one FMA gives bit for bit what ggml and the gguf package give. */
#ifndef GM_KERNELS_QUANT_X86_H
#define GM_KERNELS_QUANT_X86_H

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/packed.h"

#define GM_AI static inline __attribute__((always_inline))

/* The f32 kernels on the file's layout (matvec_avx2.c, matvec_avx512.c) prefetch each row stream this
 * far ahead: rows are streamed once, so the hardware prefetcher alone leaves the loop waiting on DRAM
 * (measured: 5.8 -> 9.8 GB/s on Q8_0 262144x640). The packed kernels use gm_packed_prefetch(kind). */
enum { GM_ROW_PREFETCH_BYTES = 4096 };

/* Prefetch the `bytes` at p, one request per cache line, into L1 (T0) or L2 (T1). Prefetches never
 * fault, so running past the end of a matrix or a cache row is harmless. */
GM_AI void prefetch_lines_l1(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}
GM_AI void prefetch_lines_l2(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T1);
}

/* Prefetch `bytes` (a compile-time constant after inlining) starting `ahead` bytes past p into L1,
 * nothing when ahead is 0; consecutive calls on adjacent spans cover every line. */
GM_AI void prefetch_span(const uint8_t *p, size_t ahead, size_t bytes) {
    if (ahead) prefetch_lines_l1(p + ahead, bytes);
}

/* The packed kernels' weight stream: each span to L1 pf.l1 bytes ahead and to L2 pf.l2 bytes ahead
 * (either 0: none). The L2 requests keep more lines in flight than L1's fill buffers allow. */
GM_AI void prefetch_stream(const uint8_t *p, gm_prefetch pf, size_t bytes) {
    prefetch_span(p, pf.l1, bytes);
    if (pf.l2) prefetch_lines_l2(p + pf.l2, bytes);
}

/* Where the decode prefetch of a compact K-quant kind (packed.h) stands in its three streams, in the
 * order decode reads them: its codes pf.l1 and pf.l2 bytes ahead of the kernel's reads, and the scale
 * codes and block records of the tile pf.l2 / tb tiles ahead. Set at each panel's start, then stepped a
 * line or a tile at a time: working each line's place out from its tile's (a loop over the panels the
 * lead runs past) cost 12-18 % of the Q4_K and Q6_K matvecs in cache. */
typedef struct k_leads {
    gm_lead l1, l2, sc;
} k_leads;

GM_AI k_leads panel_leads(gm_pack_kind K, const gm_packed *P, const uint8_t *panel, size_t tb, gm_prefetch pf) {
    k_leads L = {{panel, 0}, {panel, 0}, {panel, 0}};
    if (!gm_pack_kind_compact(K)) return L;
    const size_t tiles = P->cols / 32, codes = tiles * tb;
    L.l1 = gm_lead_start(P, panel, codes, pf.l1);
    L.l2 = gm_lead_start(P, panel, codes, pf.l2);
    L.sc = gm_lead_start(P, panel, tiles, pf.l2 / tb);
    return L;
}

/* The decode prefetch of `bytes` of codes from tile b of a panel on (tb bytes per tile): to L1 pf.l1
 * and to L2 pf.l2 bytes ahead (prefetch_stream). For the compact K-quant kinds, from the lead L (its
 * codes, and for even b the scale codes and block record of its tile, to L2: a line holds two tiles'
 * scale codes, a block record serves 8 tiles), which steps past them; their leads carry on into the
 * next panel: stopping at the panel's end left each panel's first tiles, codes and scales, to demand
 * misses. */
GM_AI void prefetch_panel(gm_pack_kind K, const gm_packed *P, const uint8_t *panel, size_t b, size_t tb,
                          gm_prefetch pf, size_t bytes, k_leads *L) {
    if (!pf.l1 && !pf.l2) return; /* the batched products: no prefetch */
    if (!gm_pack_kind_compact(K)) {
        prefetch_stream(panel + b * tb, pf, bytes); /* panels follow one another: one stream */
        return;
    }
    const size_t tiles = P->cols / 32, codes = tiles * tb;
    for (size_t l = 0; l < bytes; l += 64) {
        if (pf.l1) {
            _mm_prefetch((const char *)(L->l1.panel + L->l1.at), _MM_HINT_T0);
            gm_lead_step(&L->l1, P, codes, 64);
        }
        if (pf.l2) {
            _mm_prefetch((const char *)(L->l2.panel + L->l2.at), _MM_HINT_T1);
            gm_lead_step(&L->l2, P, codes, 64);
        }
    }
    if (!pf.l2) return;
    if (b % 2 == 0) {
        _mm_prefetch((const char *)gm_packed_sc(P, L->sc.panel, L->sc.at), _MM_HINT_T1);
        if (L->sc.at % 8 < 2) _mm_prefetch((const char *)gm_packed_sb(P, L->sc.panel, L->sc.at), _MM_HINT_T1);
    }
    gm_lead_step(&L->sc, P, tiles, bytes / tb);
}

/* Per-block scales. Q4_K / Q5_K: chunk k (32 values) has scale s[k] and offset o[k]; Q6_K: values
 * 16j .. 16j+15 have scale s[j]; 32-value types: s[0] (and o[0] for Q4_1 / Q5_1). */
typedef struct qstate {
    float s[16];
    float o[8];
} qstate;

GM_AI float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

GM_AI int qtype_block(gm_dtype t) { return t == GM_Q4_K || t == GM_Q5_K || t == GM_Q6_K ? 256 : 32; }

GM_AI int qtype_bytes(gm_dtype t) {
    switch (t) {
    case GM_Q4_0: return 18;
    case GM_Q4_1: return 20;
    case GM_Q5_0: return 22;
    case GM_Q5_1: return 24;
    case GM_Q8_0: return 34;
    case GM_Q4_K: return 144;
    case GM_Q5_K: return 176;
    case GM_Q6_K: return 210;
    default: return 0;
    }
}

/* Types whose values carry an additive min (o != 0). */
GM_AI int qtype_has_min(gm_dtype t) { return t == GM_Q4_1 || t == GM_Q5_1 || t == GM_Q4_K || t == GM_Q5_K; }

/* Scales of the low and high 16 values of chunk k. */
GM_AI float qscale_lo(gm_dtype t, const qstate *st, int k) {
    return t == GM_Q6_K ? st->s[2 * k] : t == GM_Q4_K || t == GM_Q5_K ? st->s[k] : st->s[0];
}
GM_AI float qscale_hi(gm_dtype t, const qstate *st, int k) {
    return t == GM_Q6_K ? st->s[2 * k + 1] : t == GM_Q4_K || t == GM_Q5_K ? st->s[k] : st->s[0];
}
GM_AI float qoffset(gm_dtype t, const qstate *st, int k) { return t == GM_Q4_K || t == GM_Q5_K ? st->o[k] : st->o[0]; }

/* Fill the scales of block b. Only the entries the type's decode reads are set. */
GM_AI void qprep(gm_dtype t, const uint8_t *b, qstate *st) {
    switch (t) {
    case GM_Q4_0: case GM_Q5_0: case GM_Q8_0:
        st->s[0] = f16_at(b);
        break;
    case GM_Q4_1: case GM_Q5_1:
        st->s[0] = f16_at(b);
        st->o[0] = f16_at(b + 2);
        break;
    case GM_Q4_K: case GM_Q5_K: {
        /* the 8 6-bit (scale, min) pairs packed in 12 bytes (ggml get_scale_min_k4), unpacked four
         * at a time in 32-bit words: bytes 0-3 hold sc[0..3] and the top bits of sc[4..7], bytes 4-7
         * m[0..3] and the top bits of m[4..7], bytes 8-11 the low nibbles of sc[4..7] and m[4..7] */
        uint32_t u[3];
        memcpy(u, b + 4, 12);
        uint32_t sc_lo = u[0] & 0x3f3f3f3fu, m_lo = u[1] & 0x3f3f3f3fu;
        uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
        uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
        __m128i v = _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo);
        __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
        __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
        /* d * sc and dmin * m are exact (11-bit f16 times 6-bit integer) */
        _mm256_storeu_ps(st->s, _mm256_mul_ps(sc, _mm256_set1_ps(f16_at(b))));
        _mm256_storeu_ps(st->o, _mm256_mul_ps(m, _mm256_set1_ps(-f16_at(b + 2))));
        break;
    }
    case GM_Q6_K: {
        __m128i sc = _mm_loadu_si128((const __m128i *)(b + 192));
        __m256 d = _mm256_set1_ps(f16_at(b + 208));
        _mm256_storeu_ps(st->s, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d));
        _mm256_storeu_ps(st->s + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))), d));
        break;
    }
    default: break;
    }
}

/* Byte i (0..31) is 0xff when bit i of the 32-bit little-endian word at p is set. */
GM_AI __m256i bits_to_bytes(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), spread); /* byte i = byte i/8 of w */
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));     /* all bits but bit i%8 */
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
}

/* 16 packed bytes -> 32 nibbles: low nibbles first (values 0..15), then high nibbles (16..31). */
GM_AI __m256i nibbles_32(const uint8_t *p) {
    __m128i q = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* The 32 signed integer codes of chunk k (0 .. block/32 - 1) of block b. */
GM_AI __m256i qdecode(gm_dtype t, const uint8_t *b, int k) {
    const __m256i m4 = _mm256_set1_epi8(15), b16 = _mm256_set1_epi8(16);
    switch (t) {
    case GM_Q4_0: return _mm256_sub_epi8(nibbles_32(b + 2), _mm256_set1_epi8(8));
    case GM_Q4_1: return nibbles_32(b + 4);
    case GM_Q5_0:
        return _mm256_sub_epi8(_mm256_or_si256(nibbles_32(b + 6), _mm256_and_si256(bits_to_bytes(b + 2), b16)), b16);
    case GM_Q5_1: return _mm256_or_si256(nibbles_32(b + 8), _mm256_and_si256(bits_to_bytes(b + 4), b16));
    case GM_Q8_0: return _mm256_loadu_si256((const __m256i *)(b + 2));
    case GM_Q4_K: case GM_Q5_K: {
        const uint8_t *qs = b + (t == GM_Q4_K ? 16 : 48) + 32 * (k / 2);
        __m256i q = _mm256_loadu_si256((const __m256i *)qs);
        if (k & 1) q = _mm256_srli_epi16(q, 4);
        q = _mm256_and_si256(q, m4);
        if (t == GM_Q5_K) { /* bit k of qh[l] is the 16s bit of value l */
            __m256i bit = _mm256_set1_epi8((char)(1 << k));
            __m256i qh = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(b + 16)), bit);
            q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(qh, bit), b16));
        }
        return q;
    }
    case GM_Q6_K: {
        int h = k / 4, kk = k % 4;
        __m256i lo = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32 * (kk & 1)));
        if (kk >= 2) lo = _mm256_srli_epi16(lo, 4);
        lo = _mm256_and_si256(lo, m4);
        __m256i hi = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
        hi = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * kk), _mm256_set1_epi8(3));
        hi = _mm256_slli_epi16(hi, 4); /* values <= 0x30: no bits cross into the next byte */
        return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
    }
    default: return _mm256_setzero_si256();
    }
}

#endif
