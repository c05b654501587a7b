/*
 * avx512_gemv_x16_q6k.c - matrix products for Q6_K weights interleaved 16
 * rows at a time at load (KR_TYPE_Q6_K_X16, kernels.h), any number of
 * activation rows: the output matrix of Q4_K_M and Q4_0 mixes and half of
 * their ffn_down and attn_v matrices.
 *
 * Per group of 16 weight rows and 256-column block, each step loads 4
 * bytes of every row from ql (twice: bytes l and l + 32) and from qh, and
 * rebuilds four 6-bit values per byte lane, 0..63, for four VPDPBUSD
 * against broadcast activation bytes; the sums of a 16-column sub-block are
 * multiplied by the 16 rows' int8 scales (VPMULLD). The -32 offset of Q6_K
 * values is taken off once per block: 32 * sum_s sc_s * bsum_s, from the
 * activation block sums with VPDPWSSD on (sc[2t], sc[2t+1]) pairs.
 *
 * As for Q4_K_X16, every activation row goes through the same integer
 * sums and the same float steps whatever the batch, so a row's products
 * have the same bits at every batch size. With the sub-block passes below
 * it keeps its accumulators in registers and needs no panel unpacked, so
 * it beats the panel GEMM at every batch size and the panel GEMM never
 * takes this layout (docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels'
 * design choices").
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_x16_impl.h"
#include "kernels_impl.h"

/* One group of 16 weight rows against NRV activation rows. */
static inline __attribute__((always_inline)) void group_q6(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                           size_t x_row_bytes, int64_t j0, float *y, int64_t ldy,
                                                           x16_pf pf, const int NRV) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const kr_block_q8_K *xr[X16_NRX];
    __m512 acc[X16_NRX];
    for (int j = 0; j < NRV; j++) {
        xr[j] = (const kr_block_q8_K *)(x + (size_t)(j0 + j) * x_row_bytes);
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q6K_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q6K_BLOCK);
        __m512i isum[X16_NRX], off[X16_NRX];
        for (int j = 0; j < NRV; j++) isum[j] = off[j] = _mm512_setzero_si512();
        /* KS sub-blocks (16 columns each: 4 steps of 4 bytes per row) at a
         * time: one for several activation rows, so that one accumulator
         * per row is live (with four side by side, accumulators, scales and
         * sums need 44 zmm, more than the 32 there are, and spill to the
         * stack); all four for one row, whose few accumulators leave room
         * for them, so that each step's unpacking serves four sub-blocks.
         * Each step's chunks are read again per pass, from L1. */
        const int KS = NRV == 1 ? 4 : 1;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
#pragma GCC unroll 4
                for (int k0 = 0; k0 < 4; k0 += KS) { /* sub-blocks 8h + half + 2k, k0 <= k < k0 + KS */
                    __m512i a[X16_NRX][4];
                    for (int j = 0; j < NRV; j++) {
                        for (int kk = 0; kk < KS; kk++) a[j][kk] = _mm512_setzero_si512();
                    }
#pragma GCC unroll 4
                    for (int cc = 0; cc < 4; cc++) {
                        const int c = 4 * half + cc;
                        const uint8_t *tr = o + KR_X16_Q6K_Q + 192 * (8 * h + c); /* the step's three chunks */
                        const __m512i qh = _mm512_loadu_si512((const void *)(tr + 128));
                        for (int kk = 0; kk < KS; kk++) {
                            const int k = k0 + kk;
                            const __m512i ql = _mm512_loadu_si512((const void *)(tr + (k & 1 ? 64 : 0)));
                            const __m512i lo =
                                k < 2 ? _mm512_and_si512(ql, m4) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
                            const __m512i hi = k == 0 ? _mm512_slli_epi16(qh, 4)
                                : k == 1              ? _mm512_slli_epi16(qh, 2)
                                : k == 2              ? qh
                                                      : _mm512_srli_epi16(qh, 2);
                            const __m512i v = _mm512_or_si512(lo, _mm512_and_si512(hi, m30));
                            for (int j = 0; j < NRV; j++)
                                a[j][kk] = _mm512_dpbusd_epi32(a[j][kk], v,
                                                               x16_bcast4(xr[j][b].qs + 128 * h + 4 * c + 32 * k));
                        }
                    }
                    for (int kk = 0; kk < KS; kk++) {  /* times the 16 rows' scales of the sub-block, int32 */
                        const int t = 4 * h + k0 + kk; /* the scale pair (sc[2t], sc[2t+1]) */
                        const __m512i pr =
                            _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(o + KR_X16_Q6K_SC + 32 * t)));
                        const __m512i sc =
                            half ? _mm512_srai_epi32(pr, 16) : _mm512_srai_epi32(_mm512_slli_epi32(pr, 16), 16);
                        for (int j = 0; j < NRV; j++)
                            isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(a[j][kk], sc));
                        if (half == 0) /* the pair's offset term, once */
                            for (int j = 0; j < NRV; j++)
                                off[j] = _mm512_dpwssd_epi32(off[j], pr, x16_bcast4(xr[j][b].bsums + 2 * t));
                    }
                }
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + KR_X16_Q6K_D)));
        for (int j = 0; j < NRV; j++) {
            const __m512i tot = _mm512_sub_epi32(isum[j], _mm512_slli_epi32(off[j], 5));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_mul_ps(d, _mm512_set1_ps(xr[j][b].d)), acc[j]);
        }
    }
    for (int j = 0; j < NRV; j++) _mm512_storeu_ps(y + (j0 + j) * ldy, acc[j]);
}

bool kr_avx512_gemv_x16_q6_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                             size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % KR_QK_K != 0 || n_cols > KR_GEMV_MAX_COLS || n_batch < 1) {
        return false;
    }
    const int64_t nb = n_cols / KR_QK_K;
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
    for (int64_t c0 = 0; c0 < n_batch; c0 += X16_SWEEP) {
        const int64_t nc = n_batch - c0 < X16_SWEEP ? n_batch - c0 : X16_SWEEP;
        const uint8_t *xc = (const uint8_t *)x + (size_t)c0 * x_row_bytes;
#define CALL(n) group_q6(g, nb, xc, x_row_bytes, j0, yg, ldy, pf, n)
        X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)
#undef CALL
    }
    return true;
}
