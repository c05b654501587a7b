/*
 * avx2_gemv_x16_q4k.c - matrix products for Q4_K weights interleaved 16
 * rows at a time at load (KR_TYPE_Q4_K_X16, kernels.h) with AVX2 alone (no
 * VNNI): any number of activation rows (decode, batched decode, prefill).
 *
 * Each 64-byte chunk of the layout holds 4 bytes of each of the 16 rows; a
 * 32-byte half holds those of 8 rows, so per 8-row half a load gives, after
 * the nibble split, two operands of VPMADDUBSW against 4 activation bytes
 * broadcast to every lane. Its int16 pairs are summed in int16 over a
 * sub-block's 8 chunks (at most 8 * 2 * 15 * 128 = 30720, no overflow) and
 * only then widened by one VPMADDWD against the rows' 6-bit scale,
 * replicated into both int16 of the row's lane by one VPSHUFB: where the
 * GGUF-layout block kernel pays a scale multiply and a widening per 32
 * values of each row, this pays them once per 8 rows. The min terms come
 * from VPMADDWD on (m0, m2)-style int16 pairs against the activation
 * sub-block sums, as in the AVX-512 kernel (avx512_gemv_x16_q4k.c).
 *
 * Each activation row goes through the same integer sums and float steps
 * whether it is alone or one of up to four per pass, so a row's products
 * have the same bits at every batch size.
 */
#include "avx2_gemv.h"

#include <immintrin.h>

#include "kernels_impl.h"
#include "x86_x16_impl.h"

/* VPSHUFB control taking byte k of each 32-bit lane into both of its int16
 * halves, zero-extended: the scale of sub-block k of each of 8 rows. */
static inline __m256i scale_ctl(int k) {
    const __m256i base =
        _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
    return _mm256_add_epi8(base, _mm256_set1_epi32((int32_t)(0x80008000u | (uint32_t)k | ((uint32_t)k << 16))));
}

/* One group of 16 weight rows against NRV <= 2 activation rows: y[j * ldy
 * + l] for the group's rows l < 16; pf: this pass's share of a later group
 * to prefetch. Both 8-row halves of each chunk are done together, so that the
 * activation bytes broadcast for one serve the other; two activation rows
 * at most, so that the eight int16 accumulators, the four nibble operands
 * and the broadcasts fit the 16 ymm registers (with more, GCC 12 kept the
 * accumulators and broadcasts on the stack and the kernel ran at the
 * block kernel's speed). */
static inline __attribute__((always_inline)) void pass_q4k(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                           size_t x_row_bytes, const x16_pairs *xp, int64_t j0,
                                                           float *y, int64_t ldy, x16_pf pf, const int NRV) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3f = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
    const __m256i m00ff = _mm256_set1_epi32(0x00FF00FF);
    const kr_block_q8_K *xr[2];
    __m256 acc[2][2];
    for (int j = 0; j < NRV; j++) {
        xr[j] = (const kr_block_q8_K *)(x + (size_t)(j0 + j) * x_row_bytes);
        acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q4K_BLOCK * b;
        x16_prefetch(pf, b, KR_X16_Q4K_BLOCK);
        __m256i isum[2][2];
        for (int j = 0; j < NRV; j++) isum[0][j] = isum[1][j] = _mm256_setzero_si256();
#pragma GCC unroll 1
        for (int p = 0; p < 4; p++) {
            __m256i alo[2][2], ahi[2][2]; /* [half][activation row] */
            for (int j = 0; j < NRV; j++) alo[0][j] = alo[1][j] = ahi[0][j] = ahi[1][j] = _mm256_setzero_si256();
            const uint8_t *qs = o + KR_X16_Q4K_QS + 512 * p;
#pragma GCC unroll 8
            for (int q = 0; q < 8; q++) {
                const __m256i w0 = _mm256_loadu_si256((const __m256i *)(qs + 64 * q));
                const __m256i w1 = _mm256_loadu_si256((const __m256i *)(qs + 64 * q + 32));
                const __m256i lo0 = _mm256_and_si256(w0, m4), lo1 = _mm256_and_si256(w1, m4);
                const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(w0, 4), m4);
                const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(w1, 4), m4);
                for (int j = 0; j < NRV; j++) {
                    const int8_t *xq = xr[j][b].qs + 64 * p + 4 * q;
                    const __m256i xl = x16_bcast4_ymm(xq), xh = x16_bcast4_ymm(xq + 32);
                    alo[0][j] = _mm256_add_epi16(alo[0][j], _mm256_maddubs_epi16(lo0, xl));
                    alo[1][j] = _mm256_add_epi16(alo[1][j], _mm256_maddubs_epi16(lo1, xl));
                    ahi[0][j] = _mm256_add_epi16(ahi[0][j], _mm256_maddubs_epi16(hi0, xh));
                    ahi[1][j] = _mm256_add_epi16(ahi[1][j], _mm256_maddubs_epi16(hi1, xh));
                    X16_KEEP(alo[0][j]);
                    X16_KEEP(alo[1][j]);
                    X16_KEEP(ahi[0][j]);
                    X16_KEEP(ahi[1][j]);
                }
            }
            /* sub-blocks 2p and 2p + 1: scale bytes 2p, 2p + 1 of the rows'
             * scale words (sclo holds scales 0..3, schi 4..7) */
            const __m256i c0 = scale_ctl(2 * (p & 1)), c1 = scale_ctl(2 * (p & 1) + 1);
            for (int h = 0; h < 2; h++) {
                const __m256i u0 = _mm256_loadu_si256((const __m256i *)(o + KR_X16_Q4K_U0 + 32 * h));
                __m256i sv;
                if (p < 2) {
                    sv = _mm256_and_si256(u0, m3f);
                } else {
                    const __m256i u2 = _mm256_loadu_si256((const __m256i *)(o + KR_X16_Q4K_U0 + 128 + 32 * h));
                    sv = _mm256_or_si256(_mm256_and_si256(u2, m4), _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30));
                }
                const __m256i s0 = _mm256_shuffle_epi8(sv, c0), s1 = _mm256_shuffle_epi8(sv, c1);
                for (int j = 0; j < NRV; j++) {
                    isum[h][j] = _mm256_add_epi32(isum[h][j], _mm256_madd_epi16(alo[h][j], s0));
                    isum[h][j] = _mm256_add_epi32(isum[h][j], _mm256_madd_epi16(ahi[h][j], s1));
                }
            }
        }
        for (int h = 0; h < 2; h++) { /* rows 8h .. 8h + 7: the min terms and the block's scales */
            const __m256i u1 = _mm256_loadu_si256((const __m256i *)(o + KR_X16_Q4K_U0 + 64 + 32 * h));
            const __m256i u2 = _mm256_loadu_si256((const __m256i *)(o + KR_X16_Q4K_U0 + 128 + 32 * h));
            const __m256i mnlo = _mm256_and_si256(u1, m3f);
            const __m256i mnhi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4),
                                                 _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30));
            const __m256i m02 = _mm256_and_si256(mnlo, m00ff);
            const __m256i m13 = _mm256_and_si256(_mm256_srli_epi32(mnlo, 8), m00ff);
            const __m256i m46 = _mm256_and_si256(mnhi, m00ff);
            const __m256i m57 = _mm256_and_si256(_mm256_srli_epi32(mnhi, 8), m00ff);
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q4K_D + 16 * h)));
            const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + KR_X16_Q4K_DMIN + 16 * h)));
            for (int j = 0; j < NRV; j++) {
                const int32_t *pp = xp->p[j0 + j][b];
                __m256i ms = _mm256_madd_epi16(m02, _mm256_set1_epi32(pp[0]));
                ms = _mm256_add_epi32(ms, _mm256_madd_epi16(m13, _mm256_set1_epi32(pp[1])));
                ms = _mm256_add_epi32(ms, _mm256_madd_epi16(m46, _mm256_set1_epi32(pp[2])));
                ms = _mm256_add_epi32(ms, _mm256_madd_epi16(m57, _mm256_set1_epi32(pp[3])));
                const __m256 dx = _mm256_set1_ps(xr[j][b].d);
                acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][j]), _mm256_mul_ps(d, dx), acc[h][j]);
                acc[h][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dm, dx), acc[h][j]);
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
static inline __attribute__((always_inline)) void group_q4k(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, const x16_pairs *xp, int64_t j0,
                                                            float *y, int64_t ldy, x16_pf pf, const int NRV) {
    if (NRV == 1) {
        pass_q4k(g, nb, x, x_row_bytes, xp, j0, y, ldy, pf, 1);
        return;
    }
    pass_q4k(g, nb, x, x_row_bytes, xp, j0, y, ldy, pf, 2);
    if (NRV == 3) pass_q4k(g, nb, x, x_row_bytes, xp, j0 + 2, y, ldy, X16_PF_NONE, 1);
    if (NRV == 4) pass_q4k(g, nb, x, x_row_bytes, xp, j0 + 2, y, ldy, X16_PF_NONE, 2);
}

bool kr_avx2_gemv_x16_q4_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                           size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % KR_QK_K != 0 || n_cols > X16_MAX_COLS || n_batch < 1) {
        return false;
    }
    const int64_t nb = n_cols / KR_QK_K;
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
    x16_pairs xp;
    /* sweeps of up to 32 activation rows: their passes over a group find
     * its 2-27 KiB still in L1/L2 */
    for (int64_t c0 = 0; c0 < n_batch; c0 += X16_SWEEP) {
        const int64_t nc = n_batch - c0 < X16_SWEEP ? n_batch - c0 : X16_SWEEP;
        const uint8_t *xc = (const uint8_t *)x + (size_t)c0 * x_row_bytes;
        x16_prepare_pairs(xc, x_row_bytes, nc, nb, &xp);
#define CALL(n) group_q4k(g, nb, xc, x_row_bytes, &xp, j0, yg, ldy, pf, n)
        X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)
#undef CALL
    }
    return true;
}
