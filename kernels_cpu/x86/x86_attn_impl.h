/*
 * x86_attn_impl.h - gemm_nn_acc for the AVX2 and AVX-512 tables (256-bit
 * code: each value row is converted from f16 once per pair of output rows
 * and held while two rows of probabilities are applied; 32 output columns
 * per pass stay in 8 accumulators). Included by avx2_kernels.c and
 * avx512_kernels.c after x86_dot_impl.h.
 */
#ifndef KARA_X86_ATTN_IMPL_H
#define KARA_X86_ATTN_IMPL_H

#include <immintrin.h>

#include "kernels_impl.h"

static inline __attribute__((always_inline)) __m256 attn_load8(const char *row, int64_t d, const bool f16)
{
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const kara_fp16 *)row + d)));
    return _mm256_loadu_ps((const float *)row + d);
}

/* Rows i and i+1 (NR = 2) or row i alone (NR = 1), columns [d0, d0 + 32). */
static inline __attribute__((always_inline)) void attn_pv_tile(float *c, int64_t ldc, const float *a, int64_t lda,
                                                               const char *b, size_t ldb, const bool f16, int64_t n,
                                                               int64_t d0, const int NR)
{
    __m256 acc[2][4];
    for (int r = 0; r < NR; r++) {
        for (int q = 0; q < 4; q++) acc[r][q] = _mm256_loadu_ps(c + r * ldc + d0 + 8 * q);
    }
    for (int64_t j = 0; j < n; j++) {
        const char *bj = b + (size_t)j * ldb;
        __m256 v[4];
        for (int q = 0; q < 4; q++) v[q] = attn_load8(bj, d0 + 8 * q, f16);
        for (int r = 0; r < NR; r++) {
            const __m256 p = _mm256_broadcast_ss(a + r * lda + j);
            for (int q = 0; q < 4; q++) acc[r][q] = _mm256_fmadd_ps(p, v[q], acc[r][q]);
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int q = 0; q < 4; q++) _mm256_storeu_ps(c + r * ldc + d0 + 8 * q, acc[r][q]);
    }
}

static inline __attribute__((always_inline)) void attn_pv_body(float *c, int64_t ldc, const float *a, int64_t lda,
                                                               const char *b, size_t ldb, const bool f16, int64_t m,
                                                               int64_t n, int64_t k)
{
    const int64_t k32 = k / 32 * 32;
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) {
        for (int64_t d0 = 0; d0 < k32; d0 += 32) attn_pv_tile(c + i * ldc, ldc, a + i * lda, lda, b, ldb, f16, n, d0, 2);
    }
    for (; i < m; i++) {
        for (int64_t d0 = 0; d0 < k32; d0 += 32) attn_pv_tile(c + i * ldc, ldc, a + i * lda, lda, b, ldb, f16, n, d0, 1);
    }
    if (k32 < k) { /* columns beyond the last multiple of 32: the reference loop */
        for (i = 0; i < m; i++) {
            for (int64_t d = k32; d < k; d++) {
                float s = c[i * ldc + d];
                for (int64_t j = 0; j < n; j++) {
                    const char *bj = b + (size_t)j * ldb;
                    s += a[i * lda + j] * (f16 ? _cvtsh_ss(((const kara_fp16 *)bj)[d]) : ((const float *)bj)[d]);
                }
                c[i * ldc + d] = s;
            }
        }
    }
}

static void x86_gemm_nn_acc(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                            int64_t m, int64_t n, int64_t k)
{
    if (b_f16)
        attn_pv_body(c, ldc, a, lda, b, ldb, true, m, n, k);
    else
        attn_pv_body(c, ldc, a, lda, b, ldb, false, m, n, k);
}

#endif /* KARA_X86_ATTN_IMPL_H */
