/*
 * x86_attn_impl.h - gemm_nn_acc and gemm_nn_acc_q8 for the AVX2 and AVX-512
 * tables: each value row is converted (from f16, or from Q8_0 levels times
 * the block's scale) once per group of output rows and held while their
 * probabilities are applied; AVX-512 takes 64 columns of up to 4 rows per
 * pass (16 zmm accumulators) and a last 32 columns of up to 8 rows, AVX2
 * 32 columns of 2 rows (8 ymm); the last k % 32 columns go 8 at a time.
 * Every element sums j in order.
 * Included by avx2_kernels.c and avx512_kernels.c after x86_ops_impl.h.
 */
#ifndef KR_X86_ATTN_IMPL_H
#define KR_X86_ATTN_IMPL_H

#include <immintrin.h>

#include "kernels_impl.h"

/* The formats of value rows: f32, f16, or Q8_0 blocks (a q8_0 cache). */
enum { ATTN_F32 = 0, ATTN_F16 = 1, ATTN_Q8 = 2 };

/* Q8_0 block of row `row` holding column d, and its scale. */
static inline __attribute__((always_inline)) const kr_block_q8_0 *attn_q8_block(const char *row, int64_t d) {
    return (const kr_block_q8_0 *)row + d / KR_QK8_0;
}

static inline __attribute__((always_inline)) float attn_q8_scale(const kr_block_q8_0 *blk) {
    kr_fp16 h;
    memcpy(&h, &blk->d, sizeof h);
    return _cvtsh_ss(h);
}

/* One value of a row in any format, as the vector loaders give it. */
static inline __attribute__((always_inline)) float attn_value(const char *row, int64_t d, const int fmt) {
    if (fmt == ATTN_Q8) {
        const kr_block_q8_0 *blk = attn_q8_block(row, d);
        return (float)blk->qs[d % KR_QK8_0] * attn_q8_scale(blk);
    }
    return fmt == ATTN_F16 ? _cvtsh_ss(((const kr_fp16 *)row)[d]) : ((const float *)row)[d];
}

/* 8 values from column d (Q8_0: d a multiple of 8, and s its block's
 * scale broadcast, attn_q8_scale8), dequant_kv's bits. */
static inline __attribute__((always_inline)) __m256 attn_load8(const char *row, int64_t d, const int fmt, __m256 s) {
    if (fmt == ATTN_Q8) {
        const kr_block_q8_0 *blk = attn_q8_block(row, d);
        const __m128i lv = _mm_loadl_epi64((const __m128i *)(blk->qs + d % KR_QK8_0));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lv)), s);
    }
    if (fmt == ATTN_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const kr_fp16 *)row + d)));
    return _mm256_loadu_ps((const float *)row + d);
}

/* The scale of the Q8_0 block of row holding column d, broadcast. */
static inline __attribute__((always_inline)) __m256 attn_q8_scale8(const char *row, int64_t d) {
    return _mm256_set1_ps(attn_q8_scale(attn_q8_block(row, d)));
}

/* NAME(c, ..., d0, NR, NQ): NR rows from row i, columns [d0, d0 + NQ * W)
 * in NQ vectors of W floats per row: each value row's vectors are
 * converted once and applied to the NR rows (NR * NQ accumulators: at most
 * 8 for ymm, 16 for zmm); a Q8_0 block's scale is widened once for its
 * vectors. Every element gets the same FMAs in the same order at either
 * width and any NR, so all of them give the same bits. */
#define ATTN_PV_TILE(NAME, VT, W, LOADV, SCALE, SET1, FMA, LOADU, STOREU)                                              \
    static inline __attribute__((always_inline)) void NAME(float *c, int64_t ldc, const float *a, int64_t lda,         \
                                                           const char *b, size_t ldb, const int fmt, int64_t n,        \
                                                           int64_t d0, const int NR, const int NQ) {                   \
        VT acc[8][4];                                                                                                  \
        for (int r = 0; r < NR; r++) {                                                                                 \
            for (int q = 0; q < NQ; q++) acc[r][q] = LOADU(c + r * ldc + d0 + W * q);                                  \
        }                                                                                                              \
        for (int64_t j = 0; j < n; j++) {                                                                              \
            const char *bj = b + (size_t)j * ldb;                                                                      \
            VT v[4], s_ = SET1(0.0f);                                                                                  \
            for (int q = 0; q < NQ; q++) {                                                                             \
                if (fmt == ATTN_Q8 && (q == 0 || (d0 + W * q) % KR_QK8_0 == 0)) s_ = SCALE(bj, d0 + W * q);            \
                v[q] = LOADV(bj, d0 + W * q, fmt, s_);                                                                 \
            }                                                                                                          \
            for (int r = 0; r < NR; r++) {                                                                             \
                const VT p = SET1(a[r * lda + j]);                                                                     \
                for (int q = 0; q < NQ; q++) acc[r][q] = FMA(p, v[q], acc[r][q]);                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int r = 0; r < NR; r++) {                                                                                 \
            for (int q = 0; q < NQ; q++) STOREU(c + r * ldc + d0 + W * q, acc[r][q]);                                  \
        }                                                                                                              \
    }

ATTN_PV_TILE(attn_pv_tile, __m256, 8, attn_load8, attn_q8_scale8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_loadu_ps,
             _mm256_storeu_ps)

#if KR_X86_WIDTH == 16
/* 16 values from column d (Q8_0: d a multiple of 16, and s its block's
 * scale broadcast, attn_q8_scale16), dequant_kv's bits. */
static inline __attribute__((always_inline)) __m512 attn_load16(const char *row, int64_t d, const int fmt, __m512 s) {
    if (fmt == ATTN_Q8) {
        const kr_block_q8_0 *blk = attn_q8_block(row, d);
        const __m128i lv = _mm_loadu_si128((const __m128i *)(blk->qs + d % KR_QK8_0));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lv)), s);
    }
    if (fmt == ATTN_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const kr_fp16 *)row + d)));
    return _mm512_loadu_ps((const float *)row + d);
}

static inline __attribute__((always_inline)) __m512 attn_q8_scale16(const char *row, int64_t d) {
    return _mm512_set1_ps(attn_q8_scale(attn_q8_block(row, d)));
}

ATTN_PV_TILE(attn_pv_tile64, __m512, 16, attn_load16, attn_q8_scale16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_loadu_ps,
             _mm512_storeu_ps)
#endif

/* Columns [d0, d0 + 8) of NR <= 8 rows past the last whole tile, where
 * the loop used to be scalar (heads of 8, as stories260K's, are all
 * tail): each term is a multiply and then an add, in order of j, as the
 * scalar loop does them (the library is built without contraction), so
 * the bits are that loop's. */
static inline __attribute__((always_inline)) void attn_pv_tail8(float *c, int64_t ldc, const float *a, int64_t lda,
                                                                const char *b, size_t ldb, const int fmt, int64_t n,
                                                                int64_t d0, const int NR) {
    __m256 acc[8];
    for (int r = 0; r < NR; r++) acc[r] = _mm256_loadu_ps(c + r * ldc + d0);
    for (int64_t j = 0; j < n; j++) {
        const char *bj = b + (size_t)j * ldb;
        const __m256 v = attn_load8(bj, d0, fmt, fmt == ATTN_Q8 ? attn_q8_scale8(bj, d0) : _mm256_setzero_ps());
        for (int r = 0; r < NR; r++) acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_set1_ps(a[r * lda + j]), v));
    }
    for (int r = 0; r < NR; r++) _mm256_storeu_ps(c + r * ldc + d0, acc[r]);
}

/* CALL(i, NR) over rows [0, m) in groups of 8, then one of 4, 2 and 1 each
 * as needed: NR is a constant at every call, so the tiles stay in
 * registers. */
#define ATTN_ROWS_BY8(m, CALL)                                                                                         \
    do {                                                                                                               \
        int64_t i_ = 0;                                                                                                \
        for (; i_ + 8 <= (m); i_ += 8) CALL(i_, 8);                                                                    \
        if ((m)-i_ >= 4) CALL(i_, 4), i_ += 4;                                                                         \
        if ((m)-i_ >= 2) CALL(i_, 2), i_ += 2;                                                                         \
        if ((m)-i_ >= 1) CALL(i_, 1);                                                                                  \
    } while (0)

/* All rows and columns, a band of columns at a time: 64 as 4 zmm of up to
 * 4 rows (AVX-512), then 32 as 2 zmm of up to 8 rows (AVX-512) or 4 ymm of
 * up to 2 rows (AVX2), then 8 at a time (attn_pv_tail8), then the scalar
 * loop for the last k % 8. An element's arithmetic depends only on its
 * band, never on the rows beside it. */
static inline __attribute__((always_inline)) void attn_pv_body(float *c, int64_t ldc, const float *a, int64_t lda,
                                                               const char *b, size_t ldb, const int fmt, int64_t m,
                                                               int64_t n, int64_t k) {
    int64_t d0 = 0;
#if KR_X86_WIDTH == 16
#define PV_T64(i, NR) attn_pv_tile64(c + (i)*ldc, ldc, a + (i)*lda, lda, b, ldb, fmt, n, d0, NR, 4)
    for (; d0 + 64 <= k; d0 += 64) {
        int64_t i = 0;
        for (; i + 4 <= m; i += 4) PV_T64(i, 4);
        if (m - i >= 2) PV_T64(i, 2), i += 2;
        if (m - i >= 1) PV_T64(i, 1);
    }
#undef PV_T64
#define PV_T32(i, NR) attn_pv_tile64(c + (i)*ldc, ldc, a + (i)*lda, lda, b, ldb, fmt, n, d0, NR, 2)
    if (d0 + 32 <= k) {
        ATTN_ROWS_BY8(m, PV_T32);
        d0 += 32;
    }
#undef PV_T32
#else
    for (; d0 + 32 <= k; d0 += 32) {
        int64_t i = 0;
        for (; i + 2 <= m; i += 2) attn_pv_tile(c + i * ldc, ldc, a + i * lda, lda, b, ldb, fmt, n, d0, 2, 4);
        if (i < m) attn_pv_tile(c + i * ldc, ldc, a + i * lda, lda, b, ldb, fmt, n, d0, 1, 4);
    }
#endif
#define PV_T8(i, NR) attn_pv_tail8(c + (i)*ldc, ldc, a + (i)*lda, lda, b, ldb, fmt, n, d0, NR)
    for (; d0 + 8 <= k; d0 += 8) ATTN_ROWS_BY8(m, PV_T8);
#undef PV_T8
    for (int64_t r = 0; r < m; r++) {
        for (int64_t d = d0; d < k; d++) {
            float s = c[r * ldc + d];
            for (int64_t j = 0; j < n; j++) {
                s += a[r * lda + j] * attn_value(b + (size_t)j * ldb, d, fmt);
            }
            c[r * ldc + d] = s;
        }
    }
}

static void x86_gemm_nn_acc(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                            int64_t m, int64_t n, int64_t k) {
    if (b_f16)
        attn_pv_body(c, ldc, a, lda, b, ldb, ATTN_F16, m, n, k);
    else
        attn_pv_body(c, ldc, a, lda, b, ldb, ATTN_F32, m, n, k);
}

/* Value rows of Q8_0 blocks read in place: the loaders dequantise 8 or 16
 * values at a time in registers, with dequant_kv's arithmetic, and the
 * products are gemm_nn_acc's, so the bits are those of the two calls. */
static void x86_gemm_nn_acc_q8(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, int64_t m,
                               int64_t n, int64_t k) {
    attn_pv_body(c, ldc, a, lda, b, ldb, ATTN_Q8, m, n, k);
}

#endif /* KR_X86_ATTN_IMPL_H */
