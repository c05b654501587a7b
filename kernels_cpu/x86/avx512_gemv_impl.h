/*
 * avx512_gemv_impl.h - helpers shared by the AVX-512 matrix-vector kernels
 * (avx512_gemv.c, avx512_gemv_k.c) and the few-row kernels
 * (avx512_gemv_multi.c).
 *
 * Why one copy: the few-row kernels promise every row exactly the bits of
 * its one-row product, so both must reduce accumulators, read scales and
 * sum activation blocks with the very same instruction sequences.
 */
#ifndef KR_AVX512_GEMV_IMPL_H
#define KR_AVX512_GEMV_IMPL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels_impl.h"
#include "x86_hsum.h"

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

static inline int hsum_epi32_256(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* A 512-bit accumulator folded to 256 bits as _mm512_reduce_add_ps starts
 * (lanes i + i+8), so that hsum256 of the result is its reduction. */
static inline __m256 fold512(__m512 a) {
    return _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
}

/* The sum of a 512-bit accumulator in a fixed order (the compiler's
 * _mm512_reduce_add_ps may pick another), the one every gemv path uses. */
static inline float hsum512(__m512 a) { return hsum256(fold512(a)); }

/* Sum of the 32 int8 values of one block (runs once per call per block). */
static inline int block_sum_i8(const int8_t *q) {
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)q));
    return hsum_epi32_256(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

/* One Q8_0 activation row rearranged for the Q8_0 kernels: values in block
 * order, block scales as f32, and corr = d * 128 * sum(q) (the weights are
 * stored + 128). */
static inline void prep_x_q8_0(const kr_block_q8_0 *x, int64_t nb, int8_t *q, float *d, float *corr) {
    for (int64_t b = 0; b < nb; b++) {
        memcpy(q + 32 * b, x[b].qs, 32);
        d[b] = kr_half_to_float(x[b].d);
        corr[b] = d[b] * 128.0f * (float)block_sum_i8(x[b].qs);
    }
}

/* The same for the Q4_0 kernels: per group of 4 blocks the low halves
 * (elements 0-15, which meet the low nibbles) of the 4 blocks, then the high
 * halves; corr with 8 (nibbles are stored as value + 8). */
static inline void prep_x_q4_0(const kr_block_q8_0 *x, int64_t nb, int8_t *q, float *d, float *corr) {
    for (int64_t b = 0; b < nb; b++) {
        int8_t *dst = q + 128 * (b / 4);
        memcpy(dst + 16 * (b % 4), x[b].qs, 16);
        memcpy(dst + 64 + 16 * (b % 4), x[b].qs + 16, 16);
        d[b] = kr_half_to_float(x[b].d);
        corr[b] = d[b] * 8.0f * (float)block_sum_i8(x[b].qs);
    }
}

/* A row's dot product from its two accumulators, less the offset
 * correction accumulated per block (Q8_0, Q4_0). */
static inline float row_total(__m512 acc0, __m512 acc1, __m256 corr) {
    return hsum512(_mm512_add_ps(acc0, acc1)) - hsum256(corr);
}

/* Eight f16 scales at a byte stride (the block size), as f32. Plain 16-bit
 * loads: on Zen 4 they are cheaper than VPGATHERDD. */
static inline __m256 gather_scales(const uint8_t *row, const int stride) {
    uint16_t h[8];
    for (int i = 0; i < 8; i++) memcpy(&h[i], row + stride * i, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* Four Q4_0 blocks' 16 nibble bytes, one per 128-bit lane. */
static inline __m512i load_q4_0_x4(const uint8_t *blk) {
    __m512i w = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk + 2)));
    w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(blk + 18 + 2)), 1);
    w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(blk + 36 + 2)), 2);
    return _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)(blk + 54 + 2)), 3);
}

#endif /* KR_AVX512_GEMV_IMPL_H */
