/*
 * avx2_gemv_x16_q40.c - matrix products for Q4_0 weights interleaved 16
 * rows at a time at load (KR_TYPE_Q4_0_X16, kernels.h) with AVX2 alone (no
 * VNNI): any number of activation rows (decode, batched decode, prefill).
 *
 * A 64-byte chunk holds 4 bytes of each of the 16 rows; a 32-byte half
 * holds those of 8 rows, so per half a load gives, after the nibble split,
 * two operands of VPMADDUBSW against 4 activation bytes broadcast to every
 * lane. The nibbles go in unsigned (0..15); their int16 pairs are summed in
 * int16 over the block's 4 chunks (at most 4 * 2 * 2 * 15 * 128 = 30720,
 * no overflow) and widened once per block by VPMADDWD, and the offset of 8
 * comes off once per block from the activation block's sum (computed once
 * per sweep of activation rows). Where the
 * file-layout kernel sums and scales each row's block on its own, this
 * does it for 8 rows in one register.
 *
 * Each activation row goes through the same integer sums and float steps
 * whether it is alone or one of two per pass, so a row's products have the
 * same bits at every batch size.
 */
#include "avx2_gemv.h"

#include <immintrin.h>

#include "kernels_impl.h"
#include "x86_x16_impl.h"

/* One group of 16 weight rows against NRV <= 2 activation rows (their
 * int16 sums, nibble operands and broadcasts fill the 16 ymm); xs[j][b] is
 * the sum of activation row j0 + j's block b. */
static inline __attribute__((always_inline)) void pass_q40(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                           size_t x_row_bytes, const int16_t (*xs)[X16_Q40_MAX_NB],
                                                           int64_t j0, float *y, int64_t ldy, x16_pf pf,
                                                           const int NRV) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
    __m256 acc[2][2]; /* [8-row half][activation row] */
    for (int j = 0; j < NRV; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q40_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q40_BLOCK);
        const kr_block_q8_0 *xb[2];
        __m256i a[2][2];
        for (int j = 0; j < NRV; j++) {
            xb[j] = (const kr_block_q8_0 *)(x + (size_t)(j0 + j) * x_row_bytes) + b;
            a[0][j] = a[1][j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(o + KR_X16_Q40_QS + 64 * c));
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)(o + KR_X16_Q40_QS + 64 * c + 32));
            const __m256i lo0 = _mm256_and_si256(w0, m4), lo1 = _mm256_and_si256(w1, m4);
            const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(w0, 4), m4);
            const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(w1, 4), m4);
            for (int j = 0; j < NRV; j++) {
                const __m256i xl = x16_bcast4_ymm(xb[j]->qs + 4 * c), xh = x16_bcast4_ymm(xb[j]->qs + 16 + 4 * c);
                a[0][j] = _mm256_add_epi16(a[0][j], _mm256_maddubs_epi16(lo0, xl));
                a[1][j] = _mm256_add_epi16(a[1][j], _mm256_maddubs_epi16(lo1, xl));
                a[0][j] = _mm256_add_epi16(a[0][j], _mm256_maddubs_epi16(hi0, xh));
                a[1][j] = _mm256_add_epi16(a[1][j], _mm256_maddubs_epi16(hi1, xh));
                X16_KEEP(a[0][j]);
                X16_KEEP(a[1][j]);
            }
        }
        for (int j = 0; j < NRV; j++) {
            /* the -8 of every weight: 8 * the block's activation sum, off each row */
            const __m256i off = _mm256_set1_epi32(8 * xs[j0 + j][b]);
            const __m256 dx = _mm256_set1_ps(kr_half_to_float(xb[j]->d));
            for (int h = 0; h < 2; h++) {
                const __m256i tot = _mm256_sub_epi32(_mm256_madd_epi16(a[h][j], ones16), off);
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q40_D + 16 * h)));
                acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, dx), acc[h][j]);
            }
        }
    }
    for (int j = 0; j < NRV; j++) {
        _mm256_storeu_ps(y + (j0 + j) * ldy, acc[0][j]);
        _mm256_storeu_ps(y + (j0 + j) * ldy + 8, acc[1][j]);
    }
}

/* A pass of the group loop (up to X16_NRX activation rows) as passes of
 * two; the second finds the group in L1/L2 and prefetches nothing. */
static inline __attribute__((always_inline)) void group_q40(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, const int16_t (*xs)[X16_Q40_MAX_NB],
                                                            int64_t j0, float *y, int64_t ldy, x16_pf pf,
                                                            const int NRV) {
    if (NRV == 1) {
        pass_q40(g, nb, x, x_row_bytes, xs, j0, y, ldy, pf, 1);
        return;
    }
    pass_q40(g, nb, x, x_row_bytes, xs, j0, y, ldy, pf, 2);
    if (NRV == 3) pass_q40(g, nb, x, x_row_bytes, xs, j0 + 2, y, ldy, X16_PF_NONE, 1);
    if (NRV == 4) pass_q40(g, nb, x, x_row_bytes, xs, j0 + 2, y, ldy, X16_PF_NONE, 2);
}

bool kr_avx2_gemv_x16_q4_0(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                           size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % KR_QK4_0 != 0 || n_cols > X16_MAX_COLS || n_batch < 1) return false;
    const int64_t nb = n_cols / KR_QK4_0;
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
#define CALL(n) group_q40(g, nb, xc, x_row_bytes, xs, j0, yg, ldy, pf, n)
    X16_Q40_SWEEPS(w, gbytes, g0, g1, nb, x, x_row_bytes, n_batch, y, ldy, CALL);
#undef CALL
    return true;
}
