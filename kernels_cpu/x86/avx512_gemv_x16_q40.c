/*
 * avx512_gemv_x16_q40.c - matrix products for Q4_0 weights interleaved 16
 * rows at a time at load (KR_TYPE_Q4_0_X16, kernels.h), any number of
 * activation rows (decode, batched decode, prefill: with no panel to
 * unpack it is faster than the panel GEMM at every batch size; figures in
 * docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels' design choices").
 *
 * Per group of 16 weight rows and 32-column block: four 64-byte loads hold
 * the 16 nibble bytes of every row; their low and high nibbles (stored
 * value + 8) give eight VPDPBUSD against 4 broadcast activation bytes.
 * The +8 is taken off per block with the activation block's sum (computed
 * once per sweep of activation rows), and the block's integer sums are
 * scaled by the 16 rows' d times the activation's d in f32. Every
 * activation row goes through the same instructions whatever the batch, so
 * a row's products have the same bits at every batch size.
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_x16_impl.h"
#include "kernels_impl.h"

/* One group of 16 weight rows against NRV activation rows; xs[j][b] is the
 * sum of activation row j0 + j's block b. */
static inline __attribute__((always_inline)) void group_q40(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, const int16_t (*xs)[X16_Q40_MAX_NB],
                                                            int64_t j0, float *y, int64_t ldy, x16_pf pf,
                                                            const int NRV) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const kr_block_q8_0 *xr[X16_NRX];
    __m512 acc[X16_NRX];
    for (int j = 0; j < NRV; j++) {
        xr[j] = (const kr_block_q8_0 *)(x + (size_t)(j0 + j) * x_row_bytes);
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q40_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q40_BLOCK);
        __m512i s[X16_NRX];
        for (int j = 0; j < NRV; j++) s[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i w = _mm512_loadu_si512((const void *)(o + KR_X16_Q40_QS + 64 * c));
            const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            for (int j = 0; j < NRV; j++) {
                s[j] = _mm512_dpbusd_epi32(s[j], lo, x16_bcast4(xr[j][b].qs + 4 * c));
                s[j] = _mm512_dpbusd_epi32(s[j], hi, x16_bcast4(xr[j][b].qs + 16 + 4 * c));
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + KR_X16_Q40_D)));
        for (int j = 0; j < NRV; j++) {
            const __m512i t = _mm512_sub_epi32(s[j], _mm512_set1_epi32(8 * xs[j0 + j][b]));
            const __m512 dx = _mm512_set1_ps(_cvtsh_ss(xr[j][b].d));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, dx), acc[j]);
        }
    }
    for (int j = 0; j < NRV; j++) _mm512_storeu_ps(y + (j0 + j) * ldy, acc[j]);
}

bool kr_avx512_gemv_x16_q4_0(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                             size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % KR_QK4_0 != 0 || n_cols > X16_MAX_COLS || n_batch < 1) {
        return false;
    }
    const int64_t nb = n_cols / KR_QK4_0;
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
#define CALL(n) group_q40(g, nb, xc, x_row_bytes, xs, j0, yg, ldy, pf, n)
    X16_Q40_SWEEPS(w, gbytes, g0, g1, nb, x, x_row_bytes, n_batch, y, ldy, CALL);
#undef CALL
    return true;
}
