/*
 * avx512_gemv_x16_q4k.c - matrix products for Q4_K weights interleaved 16
 * rows at a time at load (KR_TYPE_Q4_K_X16, kernels.h), any number of
 * activation rows (decode, batched decode, prefill).
 *
 * Per group of 16 weight rows and 256-column block: the 6-bit scales and
 * mins of all 16 rows are unpacked with a few 512-bit operations on the
 * three scale words; each 64-byte load holds 4 bytes (8 nibbles) of every
 * row, so its low and high nibbles each give one VPDPBUSD against 4
 * activation bytes broadcast from memory, summing for 16 rows at once. A
 * 32-column sub-block's sums are multiplied by the 16 rows' scales
 * (VPMULLD), a block's by d * dx in f32, and the min terms (mins times the
 * activation sums of each sub-block) come from four VPDPWSSD on int16 pairs.
 * The GGUF-layout kernel (avx512_gemv_k.c) spends per row the scale work
 * this does once for 16, and is bound by its instructions even with the
 * weights in cache; this one keeps up with the weight stream from memory.
 *
 * Each activation row goes through the same instructions whether it is
 * alone or one of up to four per pass, so a row's products have the same
 * bits at every batch size (batched decode gives the same answers as
 * decoding alone). The same kernel serves prefill: with four activation
 * rows per pass and no panel to unpack, it is faster than the panel GEMM
 * on the GGUF layout even at 512 rows. (Figures: docs/history/PERFORMANCE-2026-12.md,
 * "Figures behind the kernels' design choices".)
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_x16_impl.h"
#include "kernels_impl.h"

/* One group of 16 weight rows against NRV activation rows: y[j * ldy + l]
 * for the group's rows l < 16; pf: this pass's share of a later group to prefetch. */
static inline __attribute__((always_inline)) void group_x16(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, const x16_pairs *xp, int64_t j0,
                                                            float *y, int64_t ldy, x16_pf pf, const int NRV) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
    const __m512i mff = _mm512_set1_epi32(0xFF), m00ff = _mm512_set1_epi32(0x00FF00FF);
    const kr_block_q8_K *xr[X16_NRX];
    __m512 acc[X16_NRX];
    for (int j = 0; j < NRV; j++) {
        xr[j] = (const kr_block_q8_K *)(x + (size_t)(j0 + j) * x_row_bytes);
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q4K_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q4K_BLOCK);
        const __m512i u0 = _mm512_loadu_si512((const void *)(o + KR_X16_Q4K_U0));
        const __m512i u2 = _mm512_loadu_si512((const void *)(o + KR_X16_Q4K_U0 + 128));
        /* scales j = 0..3 in the bytes of sclo, 4..7 in schi (per row lane) */
        const __m512i sclo = _mm512_and_si512(u0, m3f);
        const __m512i schi = _mm512_or_si512(_mm512_and_si512(u2, m4), _mm512_and_si512(_mm512_srli_epi32(u0, 2), m30));
        __m512i isum[X16_NRX];
        for (int j = 0; j < NRV; j++) isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m512i alo[X16_NRX], ahi[X16_NRX];
            for (int j = 0; j < NRV; j++) alo[j] = ahi[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int q = 0; q < 8; q++) {
                const __m512i w = _mm512_loadu_si512((const void *)(o + KR_X16_Q4K_QS + 64 * (8 * p + q)));
                const __m512i lo = _mm512_and_si512(w, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
                for (int j = 0; j < NRV; j++) {
                    const int8_t *xq = xr[j][b].qs + 64 * p + 4 * q;
                    alo[j] = _mm512_dpbusd_epi32(alo[j], lo, x16_bcast4(xq));
                    ahi[j] = _mm512_dpbusd_epi32(ahi[j], hi, x16_bcast4(xq + 32));
                }
            }
            const __m512i sv = p < 2 ? sclo : schi;
            const __m512i s0 = _mm512_and_si512(_mm512_srli_epi32(sv, 16 * (p & 1)), mff);
            const __m512i s1 = _mm512_and_si512(_mm512_srli_epi32(sv, 16 * (p & 1) + 8), mff);
            for (int j = 0; j < NRV; j++) {
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(alo[j], s0));
                isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(ahi[j], s1));
            }
        }
        const __m512i u1 = _mm512_loadu_si512((const void *)(o + KR_X16_Q4K_U0 + 64));
        const __m512i mnlo = _mm512_and_si512(u1, m3f);
        const __m512i mnhi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4),
                                             _mm512_and_si512(_mm512_srli_epi32(u1, 2), m30));
        const __m512i m02 = _mm512_and_si512(mnlo, m00ff), m13 = _mm512_and_si512(_mm512_srli_epi32(mnlo, 8), m00ff);
        const __m512i m46 = _mm512_and_si512(mnhi, m00ff), m57 = _mm512_and_si512(_mm512_srli_epi32(mnhi, 8), m00ff);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + KR_X16_Q4K_D)));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + KR_X16_Q4K_DMIN)));
        for (int j = 0; j < NRV; j++) {
            const int32_t *pp = xp->p[j0 + j][b];
            __m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m02, _mm512_set1_epi32(pp[0]));
            ms = _mm512_dpwssd_epi32(ms, m13, _mm512_set1_epi32(pp[1]));
            ms = _mm512_dpwssd_epi32(ms, m46, _mm512_set1_epi32(pp[2]));
            ms = _mm512_dpwssd_epi32(ms, m57, _mm512_set1_epi32(pp[3]));
            const __m512 dx = _mm512_set1_ps(xr[j][b].d);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(d, dx), acc[j]);
            acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dm, dx), acc[j]);
        }
    }
    for (int j = 0; j < NRV; j++) _mm512_storeu_ps(y + (j0 + j) * ldy, acc[j]);
}

bool kr_avx512_gemv_x16_q4_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                             size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % KR_QK_K != 0 || n_cols > X16_MAX_COLS || n_batch < 1) {
        return false;
    }
    const int64_t nb = n_cols / KR_QK_K;
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
    x16_pairs xp;
    /* sweeps of up to 32 activation rows: their 16-row passes over a group
     * find its 2-27 KiB still in L1/L2 */
    for (int64_t c0 = 0; c0 < n_batch; c0 += X16_SWEEP) {
        const int64_t nc = n_batch - c0 < X16_SWEEP ? n_batch - c0 : X16_SWEEP;
        const uint8_t *xc = (const uint8_t *)x + (size_t)c0 * x_row_bytes;
        x16_prepare_pairs(xc, x_row_bytes, nc, nb, &xp);
#define CALL(n) group_x16(g, nb, xc, x_row_bytes, &xp, j0, yg, ldy, pf, n)
        X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)
#undef CALL
    }
    return true;
}
