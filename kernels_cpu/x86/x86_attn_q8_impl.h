/*
 * x86_attn_q8_impl.h - gemm_nt_q8 for the AVX2 and AVX-512 tables: Q8_0
 * queries against the Q8_0 keys of a q8_0 cache in place, with integer
 * products. Why: dequantising the keys to f32 first cost more than the
 * products (decode at depth spent 13% of its time in dequant_kv), and the
 * int8 rows are half the bytes of f16 ones only if nothing widens them.
 *
 * Four key rows at a time against one or two query rows; each entry keeps
 * a float accumulator of its block sums times their two scales, reduced by
 * v_sum4 at the end, so an entry's bits depend only on its two rows (the
 * last key rows of a call repeat the final one instead of taking a
 * different path). Included by avx2_kernels.c and avx512_kernels.c after
 * x86_ops_impl.h (v_sum4) and x86_attn_impl.h (attn_q8_scale).
 */
#ifndef KR_X86_ATTN_Q8_IMPL_H
#define KR_X86_ATTN_Q8_IMPL_H

#include <immintrin.h>

#include "kernels_impl.h"

/* Block t of a row of Q8_0 blocks: its scale (x86_attn_impl.h's reader)
 * and its 32 levels. */
static inline __attribute__((always_inline)) float q8s_scale(const char *row, int64_t t) {
    return attn_q8_scale((const kr_block_q8_0 *)row + t);
}

static inline __attribute__((always_inline)) __m256i q8s_levels(const char *row, int64_t t) {
    return _mm256_loadu_si256((const __m256i *)(row + (size_t)t * sizeof(kr_block_q8_0) + sizeof(kr_fp16)));
}

#if KR_X86_WIDTH == 16
/* Blocks t and t + 1 (only t when !two: the upper half zero) in one zmm,
 * and their scales in lanes 0-7 and 8-15 (VPDPBUSD's lane i holds the sum
 * of bytes 4i..4i+3, so lanes 0-7 are block t's). */
static inline __attribute__((always_inline)) __m512i q8s_pair(const char *row, int64_t t, const bool two) {
    const __m512i lo = _mm512_zextsi256_si512(q8s_levels(row, t));
    return two ? _mm512_inserti64x4(lo, q8s_levels(row, t + 1), 1) : lo;
}

/* The two f16 scales broadcast into the halves of one ymm and widened
 * together (the same values as converting each alone). */
static inline __attribute__((always_inline)) __m512 q8s_pair_scale(const char *row, int64_t t, const bool two) {
    const kr_block_q8_0 *blk = (const kr_block_q8_0 *)row + t;
    kr_fp16 h0, h1 = 0;
    memcpy(&h0, &blk[0].d, sizeof h0);
    if (two) memcpy(&h1, &blk[1].d, sizeof h1);
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)h1), _mm_set1_epi16((short)h0)));
}

/* A query row's pairs of blocks, biased by 128 (a XOR of the sign bit),
 * and their scales: loaded once per row, not once per four keys. */
#define Q8S_MAX_PAIRS 8 /* rows of up to 16 blocks (heads of 512) */
typedef struct q8s_query {
    __m512i q[Q8S_MAX_PAIRS];
    __m512 d[Q8S_MAX_PAIRS];
} q8s_query;

static inline __attribute__((always_inline)) void q8s_query_load(q8s_query *qa, const char *row, int64_t nb) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t t = 0; t < nb; t += 2) {
        qa->q[t / 2] = _mm512_xor_si512(q8s_pair(row, t, t + 1 < nb), bias);
        qa->d[t / 2] = q8s_pair_scale(row, t, t + 1 < nb);
    }
}

/* Query rows i < NR (1 or 2) against key rows bj[0..4). VPDPBUSD
 * multiplies unsigned by signed bytes: the query levels carry the bias,
 * and 128 times the key bytes' sum, one VPDPBUSD per key pair shared by
 * the rows, is taken back off, exactly. */
static inline __attribute__((always_inline)) void q8s_tile(float *c, int64_t ldc, const q8s_query *qa,
                                                           const char *const bj[4], int64_t nb, int nj, const int NR) {
    const __m512i bias = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    __m512 acc[2][4];
    for (int i = 0; i < NR; i++) {
        for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
    }
    for (int64_t t = 0; t < nb; t += 2) {
        const bool two = t + 1 < nb;
        __m512i kq[4], corr[4];
        __m512 kd[4];
        for (int j = 0; j < 4; j++) {
            kq[j] = q8s_pair(bj[j], t, two);
            corr[j] = _mm512_dpbusd_epi32(zero, bias, kq[j]);
            kd[j] = q8s_pair_scale(bj[j], t, two);
        }
        for (int i = 0; i < NR; i++) {
            const __m512i aq = qa[i].q[t / 2];
            const __m512 ad = qa[i].d[t / 2];
            for (int j = 0; j < 4; j++) {
                const __m512i dot = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, aq, kq[j]), corr[j]);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ad, kd[j]), acc[i][j]);
            }
        }
    }
    for (int i = 0; i < NR; i++) {
        float r[4];
        _mm_storeu_ps(r, v_sum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        for (int j = 0; j < nj; j++) c[i * ldc + j] = r[j];
    }
}
#define Q8S_MR 2
#else
/* AVX2 has no VPDPBUSD: |a| times b with a's sign (VPSIGNB), VPMADDUBSW
 * into 16-bit pairs and VPMADDWD into 32-bit lanes, one block per ymm.
 * Exact while levels lie in [-127, 127], as every Q8_0 quantizer writes
 * them (2 * 127 * 127 fits a 16-bit pair). One query row per tile. */
static inline __attribute__((always_inline)) void q8s_tile(float *c, int64_t ldc, const char *a, size_t lda,
                                                           const char *const bj[4], int64_t nb, int nj, const int NR) {
    (void)lda;
    (void)NR;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t t = 0; t < nb; t++) {
        const __m256i aq = q8s_levels(a, t), ax = _mm256_sign_epi8(aq, aq);
        const float da = q8s_scale(a, t);
        for (int j = 0; j < 4; j++) {
            const __m256i p16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(q8s_levels(bj[j], t), aq));
            const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
            acc[j] = _mm256_fmadd_ps(dot, _mm256_set1_ps(da * q8s_scale(bj[j], t)), acc[j]);
        }
    }
    float r[4];
    _mm_storeu_ps(r, v_sum4(acc[0], acc[1], acc[2], acc[3]));
    for (int j = 0; j < nj; j++) c[j] = r[j];
    (void)ldc;
}
#define Q8S_MR 1
#endif

/* The four key rows from j (the last repeated past n). */
static inline __attribute__((always_inline)) int q8s_keys(const char *bj[4], const char *b, size_t ldb, int64_t n,
                                                          int64_t j) {
    const int nj = n - j < 4 ? (int)(n - j) : 4;
    for (int u = 0; u < 4; u++) bj[u] = b + (size_t)(j + (u < nj ? u : nj - 1)) * ldb;
    return nj;
}

#if KR_X86_WIDTH == 16
/* Rows of up to 16 blocks: each pair of query rows loaded once, then every
 * key tile against it (a call's keys are one KV block's, a few KiB, so
 * going over them again for the next pair finds them in L1). */
static void x86_gemm_nt_q8(float *c, int64_t ldc, const void *a, size_t lda, const void *b, size_t ldb, int64_t m,
                           int64_t n, int64_t nb) {
    const char *ac = a, *bc = b;
    if (nb > 2 * Q8S_MAX_PAIRS) { /* wider heads than any model's: the scalar reference */
        kr_scalar_gemm_nt_q8(c, ldc, a, lda, b, ldb, m, n, nb);
        return;
    }
    for (int64_t i = 0; i < m; i += Q8S_MR) {
        const int nr = m - i < Q8S_MR ? 1 : Q8S_MR;
        q8s_query qa[Q8S_MR];
        for (int r = 0; r < nr; r++) q8s_query_load(&qa[r], ac + (size_t)(i + r) * lda, nb);
        for (int64_t j = 0; j < n; j += 4) {
            const char *bj[4];
            const int nj = q8s_keys(bj, bc, ldb, n, j);
            if (nr == Q8S_MR)
                q8s_tile(c + i * ldc + j, ldc, qa, bj, nb, nj, Q8S_MR);
            else
                q8s_tile(c + i * ldc + j, ldc, qa, bj, nb, nj, 1);
        }
    }
}
#else
static void x86_gemm_nt_q8(float *c, int64_t ldc, const void *a, size_t lda, const void *b, size_t ldb, int64_t m,
                           int64_t n, int64_t nb) {
    const char *ac = a, *bc = b;
    for (int64_t j = 0; j < n; j += 4) {
        const char *bj[4];
        const int nj = q8s_keys(bj, bc, ldb, n, j);
        for (int64_t i = 0; i < m; i++) q8s_tile(c + i * ldc + j, ldc, ac + (size_t)i * lda, lda, bj, nb, nj, 1);
    }
}
#endif

#endif /* KR_X86_ATTN_Q8_IMPL_H */
