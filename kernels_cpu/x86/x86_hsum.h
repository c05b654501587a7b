/*
 * x86_hsum.h - horizontal sums of float vectors in one fixed order, for the
 * 256-bit block kernels (x86_dot_impl.h) and the AVX-512 matrix-vector
 * kernels (avx512_gemv_impl.h) alike.
 *
 * Why one header: a row's product must have the same bits whichever path
 * computes it (one row alone, eight rows reduced together, or the few-row
 * kernels of batched decode), so every path reduces with these.
 */
#ifndef KR_X86_HSUM_H
#define KR_X86_HSUM_H

#include <immintrin.h>

/* (v0 + v2) + (v1 + v3) */
static inline float hsum128(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_movehdup_ps(v));
    return _mm_cvtss_f32(v);
}

/* lanes i + i+4, then hsum128 */
static inline float hsum256(__m256 v) {
    return hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

/* hsum256 of eight vectors at once, y[k] = hsum256(a[k]), with hsum256's
 * very additions (lanes i + i+4, then i + i+2, then 0 + 1), so a row's sum
 * has the same bits whether it is reduced alone or in a group of eight.
 * Why: with 1024-column rows (4 K-quant blocks) a row's own reductions cost
 * as much as a block; the shuffles here are shared by eight rows. */
static inline __m256 hsum256_x8(const __m256 a[8]) {
    __m256 e[4];
    for (int k = 0; k < 4; k++) { /* [row 2k | row 2k+1], lanes i + i+4 */
        e[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x31));
    }
    /* lanes 0 + 2 and 1 + 3: [r0 r0 r2 r2 | r1 r1 r3 r3] and [r4 r4 r6 r6 | r5 r5 r7 r7] */
    const __m256 f0 = _mm256_add_ps(_mm256_shuffle_ps(e[0], e[1], 0x44), _mm256_shuffle_ps(e[0], e[1], 0xEE));
    const __m256 f1 = _mm256_add_ps(_mm256_shuffle_ps(e[2], e[3], 0x44), _mm256_shuffle_ps(e[2], e[3], 0xEE));
    /* lanes 0 + 1: [r0 r2 r4 r6 | r1 r3 r5 r7] */
    const __m256 g = _mm256_add_ps(_mm256_shuffle_ps(f0, f1, 0x88), _mm256_shuffle_ps(f0, f1, 0xDD));
    return _mm256_permutevar8x32_ps(g, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* hsum128 of eight vectors at once, in hsum128's order ((0 + 2) + (1 + 3)). */
static inline __m256 hsum128_x8(const __m128 v[8]) {
    __m256 s[4];
    for (int k = 0; k < 4; k++) s[k] = _mm256_set_m128(v[k + 4], v[k]); /* [row k | row k+4] */
    const __m256 s01 = _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], 0x44), _mm256_shuffle_ps(s[0], s[1], 0xEE));
    const __m256 s23 = _mm256_add_ps(_mm256_shuffle_ps(s[2], s[3], 0x44), _mm256_shuffle_ps(s[2], s[3], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(s01, s23, 0x88), _mm256_shuffle_ps(s01, s23, 0xDD));
}

#endif /* KR_X86_HSUM_H */
