/*
 * avx512_gemv_multi.c - matrix products with a few activation rows (batched
 * decode of several sequences under continuous batching: from 2 rows up to
 * the panel GEMM's batch) for Q8_0, Q4_0, Q4_K and Q6_K weights, with
 * 512-bit VNNI.
 *
 * Why: between the one-row kernels (avx512_gemv.c, avx512_gemv_k.c) and the
 * panel GEMM (avx512_gemm.c) the block kernels of x86_dot_impl.h took over;
 * they unpack every weight block again for each group of four activation
 * rows, in 256-bit steps, so a decode step of 4 sequences cost about three
 * of one, and their rows did not get the one-row kernels' bits. Here each
 * weight block is loaded and unpacked once (nibble split, scale spreading)
 * and then dotted with a chunk of 4 (Q8_0, Q4_0) or 8 (Q4_K, Q6_K)
 * activation rows kept in registers.
 *
 * Every row gets exactly the arithmetic of the one-row kernel: the same
 * int32 lane sums (integer sums are exact, so only which products land in
 * which lane matters, not their order), the same float products, the same
 * accumulator per block and the same final reductions. So the output for a
 * sequence does not depend on how many others share its decode step:
 *   Q8_0, Q4_0, Q4_K: bit-identical to kr_avx512_gemv;
 *   Q6_K: bit-identical to the 256-bit block kernel (body_q6_K with one
 *         row), whose eight int32 lanes are the two 256-bit halves of the
 *         512-bit sums here, added.
 * The activation rows are rearranged once per call into the order the
 * weight bytes are loaded in (as the one-row kernels do), as many rows at a
 * time as a stack buffer of XBUF bytes holds.
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_impl.h"
#include "kernels_impl.h"

#define XBUF (80 * 1024) /* stack buffer for the rearranged activation rows */
#define NR 4             /* Q8_0, Q4_0: activation rows per register chunk */
#define NRK 8            /* Q4_K, Q6_K: the same */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Q8_0/Q4_0: the rows of one register chunk, each in its own layout. */
typedef struct xrows {
    const int8_t *q[NR];
    const float *d[NR], *corr[NR];
} xrows;

/* ================= Q8_0 ================= */

/* One Q8_0 weight row against NRV activation rows; y[j * ldy] for row j. */
ALWAYS_INLINE void rows_q8_0(const uint8_t *row, int64_t nb, const xrows *x, float *y, int64_t ldy, const int NRV) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    const __m512i pair_idx[4] = {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
        _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7),
    };
    __m512 acc0[NR], acc1[NR];
    __m256 corr[NR];
    for (int j = 0; j < NRV; j++) {
        acc0[j] = acc1[j] = _mm512_setzero_ps();
        corr[j] = _mm256_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *blk = row + 34 * b;
        const __m256 dw = gather_scales(blk, 34);
        __m512i w[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const uint8_t *q0 = blk + 68 * p + 2;
            w[p] = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q0));
            w[p] = _mm512_xor_si512(_mm512_inserti64x4(w[p], _mm256_loadu_si256((const __m256i *)(q0 + 34)), 1), bias);
        }
        for (int j = 0; j < NRV; j++) {
            const __m512 s = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_loadu_ps(x->d[j] + b)));
            corr[j] = _mm256_fmadd_ps(dw, _mm256_loadu_ps(x->corr[j] + b), corr[j]);
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const __m512i xv = _mm512_load_si512((const void *)(x->q[j] + 32 * (b + 2 * p)));
                const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[p], xv);
                const __m512 sv = _mm512_permutexvar_ps(pair_idx[p], s);
                if (p & 1)
                    acc1[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc1[j]);
                else
                    acc0[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc0[j]);
            }
        }
    }
    float sum[NR];
    for (int j = 0; j < NRV; j++) sum[j] = row_total(acc0[j], acc1[j], corr[j]);
    for (; b < nb; b++) { /* tail blocks, one at a time, as the one-row kernel */
        const kr_block_q8_0 *blk = (const kr_block_q8_0 *)(row + 34 * b);
        const __m256i wv = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk->qs), _mm256_set1_epi8((char)0x80));
        const float dw = kr_half_to_float(blk->d);
        for (int j = 0; j < NRV; j++) {
            const __m256i xv = _mm256_load_si256((const __m256i *)(x->q[j] + 32 * b));
            const int s = hsum_epi32_256(_mm256_dpbusd_epi32(_mm256_setzero_si256(), wv, xv));
            sum[j] += dw * x->d[j][b] * (float)s - dw * x->corr[j][b];
        }
    }
    for (int j = 0; j < NRV; j++) y[j * ldy] = sum[j];
}

/* ================= Q4_0 ================= */

ALWAYS_INLINE void rows_q4_0(const uint8_t *row, int64_t nb, const xrows *x, float *y, int64_t ldy, const int NRV) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i quad_idx[2] = {
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
    };
    __m512 acc0[NR], acc1[NR];
    __m256 corr[NR];
    for (int j = 0; j < NRV; j++) {
        acc0[j] = acc1[j] = _mm512_setzero_ps();
        corr[j] = _mm256_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *blk = row + 18 * b;
        const __m256 dw = gather_scales(blk, 18);
        __m512i lo[2], hi[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i w = load_q4_0_x4(blk + 72 * h);
            lo[h] = _mm512_and_si512(w, m4);
            hi[h] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
        }
        for (int j = 0; j < NRV; j++) {
            const __m512 s = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_loadu_ps(x->d[j] + b)));
            corr[j] = _mm256_fmadd_ps(dw, _mm256_loadu_ps(x->corr[j] + b), corr[j]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const int8_t *xq = x->q[j] + 32 * (b + 4 * h);
                __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[h], _mm512_load_si512((const void *)xq));
                dot = _mm512_dpbusd_epi32(dot, hi[h], _mm512_load_si512((const void *)(xq + 64)));
                const __m512 sv = _mm512_permutexvar_ps(quad_idx[h], s);
                if (h)
                    acc1[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc1[j]);
                else
                    acc0[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc0[j]);
            }
        }
    }
    float sum[NR];
    for (int j = 0; j < NRV; j++) sum[j] = row_total(acc0[j], acc1[j], corr[j]);
    for (; b < nb; b++) { /* tail blocks: the layout of a partial group */
        const kr_block_q4_0 *blk = (const kr_block_q4_0 *)(row + 18 * b);
        const __m128i w = _mm_loadu_si128((const __m128i *)blk->qs);
        const __m128i lo = _mm_and_si128(w, _mm_set1_epi8(0x0F));
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(w, 4), _mm_set1_epi8(0x0F));
        const float dw = kr_half_to_float(blk->d);
        for (int j = 0; j < NRV; j++) {
            const int8_t *xq = x->q[j] + 128 * (b / 4) + 16 * (b % 4);
            __m128i dot = _mm_dpbusd_epi32(_mm_setzero_si128(), lo, _mm_loadu_si128((const __m128i *)xq));
            dot = _mm_dpbusd_epi32(dot, hi, _mm_loadu_si128((const __m128i *)(xq + 64)));
            dot = _mm_add_epi32(dot, _mm_shuffle_epi32(dot, 0x4E));
            dot = _mm_add_epi32(dot, _mm_shuffle_epi32(dot, 0xB1));
            const int s = _mm_cvtsi128_si32(dot);
            sum[j] += dw * x->d[j][b] * (float)s - dw * x->corr[j][b];
        }
    }
    for (int j = 0; j < NRV; j++) y[j * ldy] = sum[j];
}

/* ================= K-quant chunk records ================= */

/* Q4_K and Q6_K activations are rearranged per chunk of NRV <= NRK rows,
 * one record per 256-element block, so that a block's activation data for
 * all rows of the chunk is contiguous, values in the order the weight bytes
 * are loaded. The record layouts depend on NRV only, so the kernels see
 * them as constants. */
#define QUADS(n) (((n) + 3) / 4)
#define PAIRS(n) (((n) + 1) / 2)
/* Q4_K: q[NRV][256] | sum32, 4 rows per 64 bytes | dx x4, 4 rows per 64
 * bytes | dx[8] (64 bytes) */
#define K4_REC(n) (256 * (n) + 128 * QUADS(n) + 64)
#define K4_SUM(n, q) (256 * (n) + 64 * (q))
#define K4_DX4(n, q) (256 * (n) + 64 * QUADS(n) + 64 * (q))
#define K4_DX(n) (256 * (n) + 128 * QUADS(n))
/* Q6_K: q[NRV][256] | bsums, 2 rows per 64 bytes | dx x8, 2 rows per 64 */
#define K6_REC(n) (256 * (n) + 128 * PAIRS(n))
#define K6_BS(n, p) (256 * (n) + 64 * (p))
#define K6_DX8(n, p) (256 * (n) + 64 * PAIRS(n) + 64 * (p))

/* Q4_K order per block: elements 0-31, 64-95 | 32-63, 96-127 | 128-159,
 * 192-223 | 160-191, 224-255, the lanes of the low/high nibbles of each
 * 64-byte load (as avx512_gemv_k.c); the min terms use sums of 32. */
static void prep_q4_K(const uint8_t *x, size_t x_row_bytes, int nrv, int64_t nb, uint8_t *rec) {
    static const int src[8] = {0, 64, 32, 96, 128, 192, 160, 224};
    const size_t rs = K4_REC(nrv);
    memset(rec, 0, rs * (size_t)nb);
    for (int j = 0; j < nrv; j++) {
        const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o = rec + rs * (size_t)b;
            for (int c = 0; c < 8; c++) memcpy(o + 256 * j + 32 * c, xb[b].qs + src[c], 32);
            int16_t *s32 = (int16_t *)(o + K4_SUM(nrv, j / 4)) + 8 * (j % 4);
            for (int s = 0; s < 8; s++) s32[s] = (int16_t)(xb[b].bsums[2 * s] + xb[b].bsums[2 * s + 1]);
            float *dx4 = (float *)(o + K4_DX4(nrv, j / 4)) + 4 * (j % 4);
            for (int t = 0; t < 4; t++) dx4[t] = xb[b].d;
            ((float *)(o + K4_DX(nrv)))[j] = xb[b].d;
        }
    }
}

/* Q6_K: values in their natural order. */
static void prep_q6_K(const uint8_t *x, size_t x_row_bytes, int nrv, int64_t nb, uint8_t *rec) {
    const size_t rs = K6_REC(nrv);
    memset(rec, 0, rs * (size_t)nb);
    for (int j = 0; j < nrv; j++) {
        const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o = rec + rs * (size_t)b;
            memcpy(o + 256 * j, xb[b].qs, 256);
            memcpy(o + K6_BS(nrv, j / 2) + 32 * (j % 2), xb[b].bsums, 32);
            float *dx8 = (float *)(o + K6_DX8(nrv, j / 2)) + 8 * (j % 2);
            for (int t = 0; t < 8; t++) dx8[t] = xb[b].d;
        }
    }
}

/* ================= Q4_K ================= */

/* One 144-byte block against NRV rows: its sums scaled by d dx added to
 * acc[j] (without the min terms).
 *
 * The one-row kernel's int32 lane l is sum_k sc(k, l) * D(k, l), D being
 * the dot of the 4 nibbles of lane l in 64-byte nibble vector k with their
 * activations (VPMADDUBSW, then VPDPWSSD by the scales). Here each D is one
 * VPDPBUSD (|D| <= 4 * 15 * 128, an int16); the D of vectors 0 and 1 (2
 * and 3) are merged into the two int16 halves of each lane (a shift and a
 * bit select, off the multiply ports) and one VPMADDWD/VPDPWSSD multiplies
 * both by their scales: the same integers with 6 instead of 8 multiply
 * instructions per block and row, which is what bounds this loop. */
ALWAYS_INLINE void block_q4_K(const uint8_t *blk, const uint8_t *rec, __m512 *acc, const int NRV) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i z = _mm512_setzero_si512();
    uint64_t sc8, mn8;
    kr_unpack_k4_scales_packed(blk + 4, &sc8, &mn8);
    /* int16 scales; dword p holds scales 2p, 2p+1: lanes 0-7 of vectors 0
     * and 1 take sub-blocks 0 and 1, lanes 8-15 sub-blocks 2 and 3 */
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8)));
    const __m512i scA =
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), sc16);
    const __m512i scB =
        _mm512_permutexvar_epi32(_mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), sc16);
    const __m512i w0 = _mm512_loadu_si512((const void *)(blk + 16));
    const __m512i w1 = _mm512_loadu_si512((const void *)(blk + 80));
    const __m512i n0 = _mm512_and_si512(w0, m4), n1 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
    const __m512i n2 = _mm512_and_si512(w1, m4), n3 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    const __m512 dd = _mm512_castps256_ps512(
        _mm256_mul_ps(_mm256_set1_ps(f16_at(blk)), _mm256_load_ps((const float *)(rec + K4_DX(NRV)))));
    for (int j = 0; j < NRV; j++) {
        const uint8_t *xq = rec + 256 * j;
        const __m512i a0 = _mm512_dpbusd_epi32(z, n0, _mm512_load_si512((const void *)xq));
        const __m512i a1 = _mm512_dpbusd_epi32(z, n1, _mm512_load_si512((const void *)(xq + 64)));
        const __m512i a2 = _mm512_dpbusd_epi32(z, n2, _mm512_load_si512((const void *)(xq + 128)));
        const __m512i a3 = _mm512_dpbusd_epi32(z, n3, _mm512_load_si512((const void *)(xq + 192)));
        const __m512i t01 = _mm512_ternarylogic_epi32(a0, _mm512_slli_epi32(a1, 16), lo16, 0xE4);
        const __m512i t23 = _mm512_ternarylogic_epi32(a2, _mm512_slli_epi32(a3, 16), lo16, 0xE4);
        const __m512i v = _mm512_dpwssd_epi32(_mm512_madd_epi16(t01, scA), t23, scB);
        const __m512 dj = _mm512_permutexvar_ps(_mm512_set1_epi32(j), dd);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), dj, acc[j]);
    }
}

/* One Q4_K weight row against NRV rows. The one-row kernel adds even blocks
 * into acc0, odd ones into acc1 and all min terms, in block order, into
 * accm; these three chains are independent, so they run one after another
 * here (fewer live registers): the min terms of 4 rows at a time (128-bit
 * lane j of accm[q] is row 4q + j), then the even blocks, then the odd. */
ALWAYS_INLINE void rows_q4_K(const uint8_t *row, int64_t nb, const uint8_t *x, float *y, int64_t ldy, const int NRV) {
    const size_t bsz = sizeof(kr_block_q4_K), rs = K4_REC(NRV);
    __m512 accm[QUADS(NRK)];
    for (int q = 0; q < QUADS(NRV); q++) accm[q] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = row + bsz * i, *rec = x + rs * i;
        uint64_t sc8, mn8;
        kr_unpack_k4_scales_packed(blk + 4, &sc8, &mn8);
        const __m512i mn = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn8)));
        const __m512 dmin = _mm512_set1_ps(f16_at(blk + 2));
        for (int q = 0; q < QUADS(NRV); q++) {
            const __m512i md = _mm512_madd_epi16(mn, _mm512_load_si512((const void *)(rec + K4_SUM(NRV, q))));
            const __m512 dm = _mm512_mul_ps(dmin, _mm512_load_ps((const float *)(rec + K4_DX4(NRV, q))));
            accm[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(md), dm, accm[q]);
        }
    }
    _Alignas(64) float m[4 * QUADS(NRK)][4];
    for (int q = 0; q < QUADS(NRV); q++) _mm512_store_ps(m[4 * q], accm[q]);
    __m512 acc0[NRK], acc1[NRK];
    for (int j = 0; j < NRV; j++) acc0[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) block_q4_K(row + bsz * i, x + rs * i, acc0, NRV);
    for (int j = 0; j < NRV; j++) acc1[j] = _mm512_setzero_ps();
    for (int64_t i = 1; i < nb; i += 2) block_q4_K(row + bsz * i, x + rs * i, acc1, NRV);
    for (int j = 0; j < NRV; j++) {
        y[j * ldy] = hsum512(_mm512_add_ps(acc0[j], acc1[j])) - hsum128(_mm_load_ps(m[j]));
    }
}

/* ================= Q6_K ================= */

/* int16 scale indices of the four 64-element weight vectors of a Q6_K
 * block: vector k = 2h + (g >= 2) holds groups g, g + 1 of half h in its
 * two 256-bit halves, so 128-bit lane L of vector k uses scale 4k + L. */
static const uint16_t q6_scale_idx[4][32] = {
#define Q6I(k)                                                                                                         \
    {                                                                                                                  \
        4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k) + 1, 4 * (k) + 1, 4 * (k) + 1, \
            4 * (k) + 1, 4 * (k) + 1, 4 * (k) + 1, 4 * (k) + 1, 4 * (k) + 1, 4 * (k) + 2, 4 * (k) + 2, 4 * (k) + 2,    \
            4 * (k) + 2, 4 * (k) + 2, 4 * (k) + 2, 4 * (k) + 2, 4 * (k) + 2, 4 * (k) + 3, 4 * (k) + 3, 4 * (k) + 3,    \
            4 * (k) + 3, 4 * (k) + 3, 4 * (k) + 3, 4 * (k) + 3, 4 * (k) + 3                                            \
    }
    Q6I(0),
    Q6I(1),
    Q6I(2),
    Q6I(3),
#undef Q6I
};

/* One Q6_K weight row against NRV rows: the int32 lanes of the 256-bit block
 * kernel with one row, two rows per 512-bit float accumulator. The 256-bit
 * kernel's lane n sums bytes 4n..4n+3 of its 32-byte vectors (h, g) over
 * all h and g; here the 64-byte vectors hold groups (g, g + 1) of a half
 * side by side, which is the activations' natural order, and lane n plus
 * lane 8 + n of the 512-bit sums is that same set of products; the bsums
 * term is the same. (The VPDPBUSD merging of block_q4_K does not pay here:
 * 6-bit sums of 4 need the activations biased to fit an int16, and so a
 * per-block correction.) */
ALWAYS_INLINE void rows_q6_K(const uint8_t *row, int64_t nb, const uint8_t *x, float *y, int64_t ldy, const int NRV) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    /* the high 2 bits of group g are bits 2g, 2g+1 of qh: to bits 4-5 */
    const __m512i up = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);   /* g = 0 | 1 */
    const __m512i down = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1); /* g = 2 | 3 */
    __m512i sidx[4];
    for (int k = 0; k < 4; k++) sidx[k] = _mm512_loadu_si512((const void *)q6_scale_idx[k]);
    const size_t rs = K6_REC(NRV);
    __m512 acc[PAIRS(NRK)];
    for (int p = 0; p < PAIRS(NRV); p++) acc[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const kr_block_q6_K *blk = (const kr_block_q6_K *)row + i;
        const uint8_t *rec = x + rs * (size_t)i;
        const __m512i sc16 =
            _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)blk->scales)));
        const __m512i sc_all = _mm512_shuffle_i64x2(sc16, sc16, 0x44); /* all 16 scales in each half */
        __m512i q[4], s[4];
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(blk->ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h)));
            /* low | (high & 0x30) as one ternary-logic op: imm 0xF8 = A | (B & C) */
            q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_sllv_epi16(qh, up), m30, 0xF8);
            q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                     _mm512_srlv_epi16(qh, down), m30, 0xF8);
        }
        for (int k = 0; k < 4; k++) s[k] = _mm512_permutexvar_epi16(sidx[k], sc16);
        const __m512 d = _mm512_set1_ps(kr_half_to_float(blk->d));
        for (int p = 0; p < PAIRS(NRV); p++) {
            __m512i v[2];
            for (int t = 0; t < 2; t++) {
                const int j = 2 * p + t;
                if (j >= NRV) {
                    v[t] = _mm512_setzero_si512();
                    continue;
                }
                const uint8_t *xq = rec + 256 * j;
                __m512i z0 = _mm512_madd_epi16(_mm512_maddubs_epi16(q[0], _mm512_load_si512((const void *)xq)), s[0]);
                __m512i z1 =
                    _mm512_madd_epi16(_mm512_maddubs_epi16(q[1], _mm512_load_si512((const void *)(xq + 64))), s[1]);
                z0 = _mm512_dpwssd_epi32(z0, _mm512_maddubs_epi16(q[2], _mm512_load_si512((const void *)(xq + 128))),
                                         s[2]);
                z1 = _mm512_dpwssd_epi32(z1, _mm512_maddubs_epi16(q[3], _mm512_load_si512((const void *)(xq + 192))),
                                         s[3]);
                v[t] = _mm512_add_epi32(z0, z1);
            }
            /* rows 2p, 2p+1 in the two halves: lane n plus lane 8 + n */
            __m512i si =
                _mm512_add_epi32(_mm512_shuffle_i64x2(v[0], v[1], 0x44), _mm512_shuffle_i64x2(v[0], v[1], 0xEE));
            const __m512i corr = _mm512_madd_epi16(sc_all, _mm512_load_si512((const void *)(rec + K6_BS(NRV, p))));
            si = _mm512_sub_epi32(si, _mm512_slli_epi32(corr, 5));
            const __m512 dx = _mm512_mul_ps(d, _mm512_load_ps((const float *)(rec + K6_DX8(NRV, p))));
            acc[p] = _mm512_fmadd_ps(dx, _mm512_cvtepi32_ps(si), acc[p]);
        }
    }
    for (int j = 0; j < NRV; j++) {
        const __m512 a = acc[j / 2];
        y[j * ldy] = hsum256(j % 2 ? _mm512_extractf32x8_ps(a, 1) : _mm512_castps512_ps256(a));
    }
}

/* ================= driver ================= */

#define PF_ROWS 4
static inline void prefetch_row(const uint8_t *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* Loop order: weight rows in tiles of about TILE_BYTES; per tile, chunk
 * after chunk of activation rows, each chunk's activations staying in L1
 * while the tile's rows pass, the tile itself staying in L2. So the weights
 * come from memory once per call, whatever the number of chunks; the first
 * pass over a tile prefetches rows PF_ROWS ahead. */
#define TILE_BYTES (192 * 1024)
static int64_t tile_rows(size_t w_row_bytes) {
    const int64_t t = (int64_t)(TILE_BYTES / w_row_bytes);
    return t > 0 ? t : 1;
}

#define ROWS_SWITCH(T, X, ...)                                                                                         \
    static void rows_##T##_n(const uint8_t *row, int64_t nb, const X *x, float *y, int64_t ldy, int nrv) {             \
        switch (nrv) { __VA_ARGS__ }                                                                                   \
    }
#define CASE(T, n)                                                                                                     \
    case n: rows_##T(row, nb, x, y, ldy, n); break;
ROWS_SWITCH(q8_0, xrows, CASE(q8_0, 1) CASE(q8_0, 2) CASE(q8_0, 3) default : rows_q8_0(row, nb, x, y, ldy, 4);)
ROWS_SWITCH(q4_0, xrows, CASE(q4_0, 1) CASE(q4_0, 2) CASE(q4_0, 3) default : rows_q4_0(row, nb, x, y, ldy, 4);)
ROWS_SWITCH(q4_K, uint8_t,
            CASE(q4_K, 1) CASE(q4_K, 2) CASE(q4_K, 3) CASE(q4_K, 4) CASE(q4_K, 5) CASE(q4_K, 6) CASE(q4_K, 7) default
            : rows_q4_K(row, nb, x, y, ldy, 8);)
ROWS_SWITCH(q6_K, uint8_t,
            CASE(q6_K, 1) CASE(q6_K, 2) CASE(q6_K, 3) CASE(q6_K, 4) CASE(q6_K, 5) CASE(q6_K, 6) CASE(q6_K, 7) default
            : rows_q6_K(row, nb, x, y, ldy, 8);)
#undef CASE

static size_t kq_rec(kr_type t, int nrv) { return t == KR_TYPE_Q4_K ? K4_REC(nrv) : K6_REC(nrv); }

/* Q4_K, Q6_K: groups of chunks of up to NRK rows, as many as the buffer
 * holds (smaller chunks for very wide rows; a chunk may spill from L1 to
 * L2: that is still faster than smaller chunks). False when one row does
 * not fit. */
static bool gemv_multi_kq(kr_type t, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t nb,
                          const uint8_t *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy, uint8_t *buf) {
    int kc = n_batch < NRK ? (int)n_batch : NRK;
    while (kc > 1 && kq_rec(t, kc) * (size_t)nb > XBUF) kc--;
    const size_t chunk_bytes = kq_rec(t, kc) * (size_t)nb;
    if (chunk_bytes > XBUF) return false;
    const int64_t group = (int64_t)(XBUF / chunk_bytes) * kc;
    const int64_t tile = tile_rows(w_row_bytes);
    for (int64_t g0 = 0; g0 < n_batch; g0 += group) {
        const int64_t ng = n_batch - g0 < group ? n_batch - g0 : group;
        for (int64_t c0 = 0; c0 < ng; c0 += kc) {
            const int nrv = (int)(ng - c0 < kc ? ng - c0 : kc);
            uint8_t *rec = buf + chunk_bytes * (size_t)(c0 / kc);
            if (t == KR_TYPE_Q4_K)
                prep_q4_K(x + (size_t)(g0 + c0) * x_row_bytes, x_row_bytes, nrv, nb, rec);
            else
                prep_q6_K(x + (size_t)(g0 + c0) * x_row_bytes, x_row_bytes, nrv, nb, rec);
        }
        for (int64_t t0 = r0; t0 < r1; t0 += tile) {
            const int64_t t1 = t0 + tile < r1 ? t0 + tile : r1;
            for (int64_t c0 = 0; c0 < ng; c0 += kc) {
                const int nrv = (int)(ng - c0 < kc ? ng - c0 : kc);
                const uint8_t *rec = buf + chunk_bytes * (size_t)(c0 / kc);
                for (int64_t r = t0; r < t1; r++) {
                    const uint8_t *row = w + (size_t)r * w_row_bytes;
                    float *yc = y + (g0 + c0) * ldy + r;
                    if (c0 == 0 && r + PF_ROWS < t1) prefetch_row(row + PF_ROWS * w_row_bytes, w_row_bytes);
                    if (t == KR_TYPE_Q4_K)
                        rows_q4_K_n(row, nb, rec, yc, ldy, nrv);
                    else
                        rows_q6_K_n(row, nb, rec, yc, ldy, nrv);
                }
            }
        }
    }
    return true;
}

/* Q8_0, Q4_0: each row in its own layout, as many rows as the buffer holds
 * (values at a stride of whole 64- or 128-byte groups, then the block
 * scales and corrections). */
static bool gemv_multi_q0(kr_type t, const uint8_t *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t nb,
                          const uint8_t *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy, uint8_t *buf) {
    const int64_t stride = t == KR_TYPE_Q4_0 ? (32 * nb + 127) & ~(int64_t)127 : (32 * nb + 63) & ~(int64_t)63;
    const int64_t nbp = (nb + 15) & ~(int64_t)15; /* block terms per row, whole cache lines */
    const int64_t row_bytes = stride + 8 * nbp;
    if (row_bytes > XBUF) return false;
    const int64_t group = XBUF / row_bytes;
    const int64_t tile = tile_rows(w_row_bytes);
    for (int64_t g0 = 0; g0 < n_batch; g0 += group) {
        const int64_t ng = n_batch - g0 < group ? n_batch - g0 : group;
        int8_t *q = (int8_t *)buf;
        float *d = (float *)(buf + stride * ng), *corr = d + nbp * ng;
        for (int64_t j = 0; j < ng; j++) {
            const void *xr = x + (size_t)(g0 + j) * x_row_bytes;
            if (t == KR_TYPE_Q8_0)
                prep_x_q8_0(xr, nb, q + j * stride, d + j * nbp, corr + j * nbp);
            else
                prep_x_q4_0(xr, nb, q + j * stride, d + j * nbp, corr + j * nbp);
        }
        for (int64_t t0 = r0; t0 < r1; t0 += tile) { /* as gemv_multi_kq */
            const int64_t t1 = t0 + tile < r1 ? t0 + tile : r1;
            for (int64_t c0 = 0; c0 < ng; c0 += NR) {
                const int nrv = (int)(ng - c0 < NR ? ng - c0 : NR);
                xrows xr;
                for (int j = 0; j < nrv; j++) {
                    xr.q[j] = q + (c0 + j) * stride;
                    xr.d[j] = d + (c0 + j) * nbp;
                    xr.corr[j] = corr + (c0 + j) * nbp;
                }
                for (int64_t r = t0; r < t1; r++) {
                    const uint8_t *row = w + (size_t)r * w_row_bytes;
                    float *yc = y + (g0 + c0) * ldy + r;
                    if (c0 == 0 && r + PF_ROWS < t1) prefetch_row(row + PF_ROWS * w_row_bytes, w_row_bytes);
                    if (t == KR_TYPE_Q8_0)
                        rows_q8_0_n(row, nb, &xr, yc, ldy, nrv);
                    else
                        rows_q4_0_n(row, nb, &xr, yc, ldy, nrv);
                }
            }
        }
    }
    return true;
}

int64_t kr_avx512_gemv_multi_min_batch(kr_type wtype) { return wtype == KR_TYPE_Q6_K ? 4 : 2; }

bool kr_avx512_gemv_multi(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                          const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    _Alignas(64) uint8_t buf[XBUF];
    /* wider rows go to the block kernels, as the one-row gemv does */
    if (n_batch < 1 || n_cols > KR_GEMV_MAX_COLS) return false;
    switch (wtype) {
    case KR_TYPE_Q8_0:
    case KR_TYPE_Q4_0:
        if (n_cols % 32 != 0) return false;
        return gemv_multi_q0(wtype, w, w_row_bytes, r0, r1, n_cols / 32, x, x_row_bytes, n_batch, y, ldy, buf);
    case KR_TYPE_Q4_K:
    case KR_TYPE_Q6_K:
        if (n_cols % KR_QK_K != 0) return false;
        return gemv_multi_kq(wtype, w, w_row_bytes, r0, r1, n_cols / KR_QK_K, x, x_row_bytes, n_batch, y, ldy, buf);
    default: return false;
    }
}
