/*
 * avx2_gemv_x16_q6k.c - matrix products for Q6_K weights interleaved 16
 * rows at a time at load (KR_TYPE_Q6_K_X16, kernels.h) with AVX2 alone (no
 * VNNI): any number of activation rows. Q6_K is the other type of Q4_K_M
 * files (their output matrix and half of ffn_down and attn_v).
 *
 * Per group of 16 weight rows and 256-column block, each step loads 4
 * bytes of every row from ql and qh and rebuilds, per 8-row half, one
 * operand of 6-bit values 0..63 for VPMADDUBSW against 4 broadcast
 * activation bytes. Two steps' int16 pairs are summed in int16 (at most
 * 2 * 2 * 63 * 128 = 32256, no overflow; a third could overflow) and
 * widened by one VPMADDWD against the rows' int8 scale of the 16-column
 * sub-block, replicated into both int16 of each row's lane. The -32
 * offset of Q6_K values is taken off once per block, 32 * sum_s sc_s *
 * bsum_s, with VPMADDWD on (sc[2t], sc[2t+1]) pairs against the activation
 * block sums, as in avx512_gemv_x16_q6k.c.
 *
 * Each activation row goes through the same integer sums and float steps
 * whether it is alone or one of up to four per pass, so a row's products
 * have the same bits at every batch size.
 */
#include "avx2_gemv.h"

#include <immintrin.h>

#include "kernels_impl.h"
#include "x86_x16_impl.h"

/* Rows 8r .. 8r + 7 of one group of 16 weight rows against NRV
 * activation rows: y[j * ldy + 8r + l] for l < 8. One 8-row half at a
 * time, so that four activation rows' accumulators fit the 16 ymm
 * registers and each step's unpacking of the 6-bit values serves four
 * rows (both halves of a step at once fit only two, and then the
 * unpacking costs as much as the multiply-adds). */
static inline __attribute__((always_inline)) void half_q6k(const uint8_t *g, int r, int64_t nb, const uint8_t *x,
                                                           size_t x_row_bytes, int64_t j0, float *y, int64_t ldy,
                                                           x16_pf pf, const int NRV) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    /* VPSHUFB controls (indices within a 128-bit lane): the even / odd
     * int16 of each 32-bit lane into both of its int16 */
    const __m256i lane =
        _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
    const __m256i even = _mm256_add_epi8(lane, _mm256_set1_epi32(0x01000100));
    const __m256i odd = _mm256_add_epi8(lane, _mm256_set1_epi32(0x03020302));
    const kr_block_q8_K *xr[X16_NRX];
    __m256 acc[X16_NRX];
    for (int j = 0; j < NRV; j++) {
        xr[j] = (const kr_block_q8_K *)(x + (size_t)(j0 + j) * x_row_bytes);
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q6K_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q6K_BLOCK);
        __m256i isum[X16_NRX];
        for (int j = 0; j < NRV; j++) isum[j] = _mm256_setzero_si256();
            /* sub-blocks 8h + 2k + half, one at a time and not unrolled (the
         * shifts that pick a sub-block's bits take their count from a
         * register): unrolled, GCC 12 shares each step's loads among the
         * four k and parks them on the stack */
#pragma GCC unroll 1
        for (int sb = 0; sb < 16; sb++) {
            const int h = sb >> 3, k = (sb >> 1) & 3, half = sb & 1, t = 4 * h + k; /* scale sc[2t + half] */
            const __m128i nlo = _mm_cvtsi32_si128(4 * (k >> 1)), nhi = _mm_cvtsi32_si128(2 * k);
            const __m256i pr =
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q6K_SC + 32 * t + 16 * r)));
            const __m256i sc = _mm256_shuffle_epi8(pr, half ? odd : even);
            const uint8_t *tq = o + KR_X16_Q6K_Q + 192 * (8 * h + 4 * half) + 32 * r;
            const int8_t *xq[X16_NRX];
            for (int j = 0; j < NRV; j++) xq[j] = xr[j][b].qs + 128 * h + 16 * half + 32 * k;
            __m256i a[X16_NRX];
#pragma GCC unroll 4
            for (int cc = 0; cc < 4; cc++) {
                const uint8_t *tr = tq + 192 * cc; /* the step's three chunks */
                const __m256i ql = _mm256_loadu_si256((const __m256i *)(tr + 64 * (k & 1)));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(tr + 128));
                const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(ql, nlo), m4);
                const __m256i hi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(qh, nhi), 4), m30);
                const __m256i v = _mm256_or_si256(lo, hi);
                for (int j = 0; j < NRV; j++) {
                    const __m256i p = _mm256_maddubs_epi16(v, x16_bcast4_ymm(xq[j] + 4 * cc));
                    if (cc % 2 == 0) {
                        a[j] = p;
                    } else {
                        a[j] = _mm256_add_epi16(a[j], p);
                        isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(a[j], sc));
                        X16_KEEP(isum[j]);
                    }
                    X16_KEEP(a[j]);
                }
            }
        }
        /* the offset terms and the block's scale */
        __m256i off[X16_NRX];
        for (int j = 0; j < NRV; j++) off[j] = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            const __m256i pr =
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q6K_SC + 32 * t + 16 * r)));
            for (int j = 0; j < NRV; j++)
                off[j] = _mm256_add_epi32(off[j], _mm256_madd_epi16(pr, x16_bcast4_ymm(xr[j][b].bsums + 2 * t)));
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q6K_D + 16 * r)));
        for (int j = 0; j < NRV; j++) {
            const __m256i tot = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(off[j], 5));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, _mm256_set1_ps(xr[j][b].d)), acc[j]);
        }
    }
    for (int j = 0; j < NRV; j++) _mm256_storeu_ps(y + (j0 + j) * ldy + 8 * r, acc[j]);
}

/* One group of 16 weight rows against one activation row (decode): both
 * 8-row halves of each step together, so that the group is read once, in
 * order (by halves, one row ran at 40% of the block kernel's speed on
 * large matrices streamed from memory). The same integer sums and float
 * steps as half_q6k, so the same bits. */
static inline __attribute__((always_inline)) void one_q6k(const uint8_t *g, int64_t nb, const uint8_t *x, float *y,
                                                          x16_pf pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i lane =
        _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
    const __m256i even = _mm256_add_epi8(lane, _mm256_set1_epi32(0x01000100));
    const __m256i odd = _mm256_add_epi8(lane, _mm256_set1_epi32(0x03020302));
    const kr_block_q8_K *xr = (const kr_block_q8_K *)x;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q6K_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q6K_BLOCK);
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 1
        for (int sb = 0; sb < 16; sb++) {
            const int h = sb >> 3, k = (sb >> 1) & 3, half = sb & 1, t = 4 * h + k;
            const __m128i nlo = _mm_cvtsi32_si128(4 * (k >> 1)), nhi = _mm_cvtsi32_si128(2 * k);
            __m256i sc[2];
            for (int r = 0; r < 2; r++) {
                const __m256i pr =
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q6K_SC + 32 * t + 16 * r)));
                sc[r] = _mm256_shuffle_epi8(pr, half ? odd : even);
            }
            const uint8_t *tq = o + KR_X16_Q6K_Q + 192 * (8 * h + 4 * half);
            const int8_t *xq = xr[b].qs + 128 * h + 16 * half + 32 * k;
            __m256i a[2];
#pragma GCC unroll 4
            for (int cc = 0; cc < 4; cc++) {
                const uint8_t *tr = tq + 192 * cc;
                const __m256i xb = x16_bcast4_ymm(xq + 4 * cc);
                for (int r = 0; r < 2; r++) {
                    const __m256i ql = _mm256_loadu_si256((const __m256i *)(tr + 64 * (k & 1) + 32 * r));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(tr + 128 + 32 * r));
                    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(ql, nlo), m4);
                    const __m256i hi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(qh, nhi), 4), m30);
                    const __m256i p = _mm256_maddubs_epi16(_mm256_or_si256(lo, hi), xb);
                    if (cc % 2 == 0) {
                        a[r] = p;
                    } else {
                        a[r] = _mm256_add_epi16(a[r], p);
                        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(a[r], sc[r]));
                        X16_KEEP(isum[r]);
                    }
                    X16_KEEP(a[r]);
                }
            }
        }
        for (int r = 0; r < 2; r++) {
            __m256i off = _mm256_setzero_si256();
            for (int t = 0; t < 8; t++) {
                const __m256i pr =
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q6K_SC + 32 * t + 16 * r)));
                off = _mm256_add_epi32(off, _mm256_madd_epi16(pr, x16_bcast4_ymm(xr[b].bsums + 2 * t)));
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q6K_D + 16 * r)));
            const __m256i tot = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(off, 5));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, _mm256_set1_ps(xr[b].d)), acc[r]);
        }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
}

/* A pass of the group loop: one activation row in one sweep, more by
 * 8-row halves, the second finding the group in L1/L2 and prefetching
 * nothing. */
static inline __attribute__((always_inline)) void group_q6k(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, int64_t j0, float *y, int64_t ldy,
                                                            x16_pf pf, const int NRV) {
    if (NRV == 1) {
        one_q6k(g, nb, x + (size_t)j0 * x_row_bytes, y + j0 * ldy, pf);
        return;
    }
    half_q6k(g, 0, nb, x, x_row_bytes, j0, y, ldy, pf, NRV);
    half_q6k(g, 1, nb, x, x_row_bytes, j0, y, ldy, X16_PF_NONE, NRV);
}

bool kr_avx2_gemv_x16_q6_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                           size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % KR_QK_K != 0 || n_batch < 1) {
        return false;
    }
    const int64_t nb = n_cols / KR_QK_K;
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
    for (int64_t c0 = 0; c0 < n_batch; c0 += X16_SWEEP) {
        const int64_t nc = n_batch - c0 < X16_SWEEP ? n_batch - c0 : X16_SWEEP;
        const uint8_t *xc = (const uint8_t *)x + (size_t)c0 * x_row_bytes;
#define CALL(n) group_q6k(g, nb, xc, x_row_bytes, j0, yg, ldy, pf, n)
        X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)
#undef CALL
    }
    return true;
}
