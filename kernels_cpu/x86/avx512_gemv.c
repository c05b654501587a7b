/*
 * avx512_gemv.c - matrix-vector products (decode: one activation row) for
 * Q8_0 and Q4_0 weights in their GGUF layout, with 512-bit VNNI.
 *
 * Why a separate path for one row: the block kernels of x86_dot_impl.h spend
 * about a dozen instructions per 32-element block on its two f16 scales
 * (scalar conversions, a multiply, a broadcast), so Q8_0 and Q4_0 decode
 * through them is compute-bound, well below the memory bandwidth
 * (docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels' design choices").
 * Here the activation row is first rearranged once per call (per thread)
 * into:
 *   - its int8 values, contiguous, in the order the weight bytes are loaded;
 *   - its block scales as f32, and a per-block offset correction term.
 * The weight rows are then streamed with 512-bit loads; each VPDPBUSD takes
 * the weights as unsigned bytes (Q8_0 + 128, or the raw Q4_0 nibbles 0..15)
 * and the activations as signed bytes. The offset this adds is removed once
 * per row: sum_b dw_b * corr_b, with corr_b = dx_b * OFS * sum(x in block b).
 * The eight weight scales of eight blocks are loaded together, are
 * converted to f32 and multiplied by the activation scales in one step, then
 * spread over the int32 lanes of their blocks with a permute.
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_impl.h"
#include "kernels_impl.h"

/* Rearranged activation row: at most KR_GEMV_MAX_COLS columns. */
typedef struct gemv_x {
    _Alignas(64) int8_t q[KR_GEMV_MAX_COLS];
    _Alignas(64) float d[KR_GEMV_MAX_COLS / 32];    /* block scale */
    _Alignas(64) float corr[KR_GEMV_MAX_COLS / 32]; /* dx * OFS * sum(q) */
} gemv_x;

/* The 8-block steps of one Q8_0 weight row (nb8 blocks, a multiple of 8)
 * against the prepared activations, unreduced: the scaled sums folded to
 * 256 bits (*acc) and the offset correction (*corr_out). */
static inline __attribute__((always_inline)) void acc_q8_0(const uint8_t *row, int64_t nb8, const gemv_x *px,
                                                           __m256 *acc, __m256 *corr_out) {
    enum { STRIDE = 34 };
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    /* lane -> scale index within a pair of blocks: blocks 2p, 2p+1 */
    const __m512i pair_idx[4] = {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
        _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7),
    };
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m256 corr = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb8; b += 8) {
        const uint8_t *blk = row + 34 * b;
        const __m256 dw = gather_scales(blk, STRIDE);
        const __m512 s = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_load_ps(px->d + b)));
        corr = _mm256_fmadd_ps(dw, _mm256_load_ps(px->corr + b), corr);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const uint8_t *q0 = blk + 68 * p + 2;
            __m512i w = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q0));
            w = _mm512_inserti64x4(w, _mm256_loadu_si256((const __m256i *)(q0 + 34)), 1);
            w = _mm512_xor_si512(w, bias);
            const __m512i xv = _mm512_load_si512((const void *)(px->q + 32 * (b + 2 * p)));
            const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv);
            const __m512 sv = _mm512_permutexvar_ps(pair_idx[p], s);
            if (p & 1)
                acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc1);
            else
                acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc0);
        }
    }
    *acc = fold512(_mm512_add_ps(acc0, acc1));
    *corr_out = corr;
}

/* One Q8_0 weight row against the prepared activations. */
static float row_q8_0(const uint8_t *row, int64_t nb, const gemv_x *px) {
    const int64_t nb8 = nb & ~(int64_t)7;
    __m256 acc, corr;
    acc_q8_0(row, nb8, px, &acc, &corr);
    float sum = hsum256(acc) - hsum256(corr);
    for (int64_t b = nb8; b < nb; b++) { /* tail blocks, one 256-bit step each */
        const kr_block_q8_0 *blk = (const kr_block_q8_0 *)(row + 34 * b);
        const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk->qs), _mm256_set1_epi8((char)0x80));
        const __m256i xv = _mm256_load_si256((const __m256i *)(px->q + 32 * b));
        const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, xv);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(dot), _mm256_extracti128_si256(dot, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
        const float dw = kr_half_to_float(blk->d);
        sum += dw * px->d[b] * (float)_mm_cvtsi128_si32(s) - dw * px->corr[b];
    }
    return sum;
}

/* The 8-block steps of one Q4_0 weight row, unreduced (as acc_q8_0). */
static inline __attribute__((always_inline)) void acc_q4_0(const uint8_t *row, int64_t nb8, const gemv_x *px,
                                                           __m256 *acc, __m256 *corr_out) {
    enum { STRIDE = 18 };
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* lane -> scale index: four lanes per block, blocks 4h..4h+3 */
    const __m512i quad_idx[2] = {
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
    };
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m256 corr = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb8; b += 8) {
        const uint8_t *blk = row + 18 * b;
        const __m256 dw = gather_scales(blk, STRIDE);
        const __m512 s = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_load_ps(px->d + b)));
        corr = _mm256_fmadd_ps(dw, _mm256_load_ps(px->corr + b), corr);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i w = load_q4_0_x4(blk + 72 * h);
            const int8_t *xq = px->q + 32 * (b + 4 * h);
            const __m512i lo = _mm512_and_si512(w, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512((const void *)xq));
            dot = _mm512_dpbusd_epi32(dot, hi, _mm512_load_si512((const void *)(xq + 64)));
            const __m512 sv = _mm512_permutexvar_ps(quad_idx[h], s);
            if (h)
                acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc1);
            else
                acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc0);
        }
    }
    *acc = fold512(_mm512_add_ps(acc0, acc1));
    *corr_out = corr;
}

/* One Q4_0 weight row against the prepared activations. */
static float row_q4_0(const uint8_t *row, int64_t nb, const gemv_x *px) {
    const int64_t nb8 = nb & ~(int64_t)7;
    __m256 acc, corr;
    acc_q4_0(row, nb8, px, &acc, &corr);
    float sum = hsum256(acc) - hsum256(corr);
    for (int64_t b = nb8; b < nb; b++) { /* tail blocks: the prepared layout of a partial group */
        const kr_block_q4_0 *blk = (const kr_block_q4_0 *)(row + 18 * b);
        const int8_t *xq = px->q + 128 * (b / 4) + 16 * (b % 4);
        int s = 0;
        for (int l = 0; l < 16; l++) s += (blk->qs[l] & 0x0F) * xq[l] + (blk->qs[l] >> 4) * xq[64 + l];
        const float dw = kr_half_to_float(blk->d);
        sum += dw * px->d[b] * (float)s - dw * px->corr[b];
    }
    return sum;
}

/* Rows [r0, r1) of Q8_0 (q8) or Q4_0 weights; q8 is a constant at each call,
 * so each type gets its own loop. Eight rows at a time are reduced together
 * where rows have no tail blocks (same bits as one at a time). */
static inline __attribute__((always_inline)) void gemv_rows(const bool q8, const uint8_t *wb, size_t w_row_bytes,
                                                            int64_t r0, int64_t r1, int64_t nb, const gemv_x *px,
                                                            float *y) {
    int64_t r = r0;
    for (; nb % 8 == 0 && r + 8 <= r1; r += 8) {
        __m256 acc[8], corr[8];
        for (int k = 0; k < 8; k++) {
            const uint8_t *row = wb + (size_t)(r + k) * w_row_bytes;
            if (q8) {
                acc_q8_0(row, nb, px, &acc[k], &corr[k]);
            } else {
                acc_q4_0(row, nb, px, &acc[k], &corr[k]);
            }
        }
        _mm256_storeu_ps(y + r, _mm256_sub_ps(hsum256_x8(acc), hsum256_x8(corr)));
    }
    for (; r < r1; r++) {
        const uint8_t *row = wb + (size_t)r * w_row_bytes;
        y[r] = q8 ? row_q8_0(row, nb, px) : row_q4_0(row, nb, px);
    }
}

bool kr_avx512_gemv(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                    const void *x, float *y) {
    if (wtype == KR_TYPE_Q4_K) {
        return kr_avx512_gemv_k(wtype, w, w_row_bytes, r0, r1, n_cols, x, y);
    }
    if ((wtype != KR_TYPE_Q8_0 && wtype != KR_TYPE_Q4_0) || n_cols > KR_GEMV_MAX_COLS || n_cols % 32 != 0) {
        return false;
    }
    gemv_x px;
    const int64_t nb = n_cols / 32;
    const uint8_t *wb = w;
    if (wtype == KR_TYPE_Q8_0) {
        prep_x_q8_0(x, nb, px.q, px.d, px.corr);
        gemv_rows(true, wb, w_row_bytes, r0, r1, nb, &px, y);
    } else {
        prep_x_q4_0(x, nb, px.q, px.d, px.corr);
        gemv_rows(false, wb, w_row_bytes, r0, r1, nb, &px, y);
    }
    return true;
}
