/*
 * x86_ops_impl.h - row kernels (RMSNorm, softmax, SwiGLU, f32/f16 dot and
 * axpy, f16/bf16 stores) written once over a vector type of KR_X86_WIDTH
 * floats: avx2_kernels.c compiles it with 8 (ymm), avx512_kernels.c with 16
 * (zmm). Tails shorter than a vector use the scalar formulas.
 */
#ifndef KR_X86_OPS_IMPL_H
#define KR_X86_OPS_IMPL_H

#include "kernels_impl.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#if KR_X86_WIDTH == 16
typedef __m512 vf;
typedef __m512i vi;
#define VW 16
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_SET1(f) _mm512_set1_ps(f)
#define V_ZERO() _mm512_setzero_ps()
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_SUB(a, b) _mm512_sub_ps((a), (b))
#define V_MUL(a, b) _mm512_mul_ps((a), (b))
#define V_DIV(a, b) _mm512_div_ps((a), (b))
#define V_MAX(a, b) _mm512_max_ps((a), (b))
#define V_MIN(a, b) _mm512_min_ps((a), (b))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_FNMA(a, b, c) _mm512_fnmadd_ps((a), (b), (c))
#define V_ROUND(v) _mm512_roundscale_ps((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define V_HMAX(v) _mm512_reduce_max_ps(v)
#define V_CVT_I(v) _mm512_cvtps_epi32(v)
#define VI_ADD(a, b) _mm512_add_epi32((a), (b))
#define VI_SLLI(a, n) _mm512_slli_epi32((a), (n))
#define VI_SET1(i) _mm512_set1_epi32(i)
#define VI_AS_F(v) _mm512_castsi512_ps(v)
#define V_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define V_LOAD_I8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define V_STORE_F16(p, v)                                                                                              \
    _mm256_storeu_si256((__m256i *)(p), _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#else
typedef __m256 vf;
typedef __m256i vi;
#define VW 8
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_SET1(f) _mm256_set1_ps(f)
#define V_ZERO() _mm256_setzero_ps()
#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define V_SUB(a, b) _mm256_sub_ps((a), (b))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
#define V_DIV(a, b) _mm256_div_ps((a), (b))
#define V_MAX(a, b) _mm256_max_ps((a), (b))
#define V_MIN(a, b) _mm256_min_ps((a), (b))
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_FNMA(a, b, c) _mm256_fnmadd_ps((a), (b), (c))
#define V_ROUND(v) _mm256_round_ps((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_HSUM(v) hsum256(v)
#define V_HMAX(v) hmax256(v)
#define V_CVT_I(v) _mm256_cvtps_epi32(v)
#define VI_ADD(a, b) _mm256_add_epi32((a), (b))
#define VI_SLLI(a, n) _mm256_slli_epi32((a), (n))
#define VI_SET1(i) _mm256_set1_epi32(i)
#define VI_AS_F(v) _mm256_castsi256_ps(v)
#define V_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define V_LOAD_I8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define V_STORE_F16(p, v) _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))

static inline float hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
#endif

/* e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, a degree-7 series
 * for e^r (Cephes' expf coefficients), 2^n put in the exponent. Inputs are
 * clamped to [-87.3, 88] (n stays within [-126, 127]), so very negative x
 * give ~1e-38 instead of 0 and x > 88 gives e^88. */
static inline vf v_exp(vf x) {
    x = V_MIN(V_MAX(x, V_SET1(-87.33654f)), V_SET1(88.0f));
    const vf n = V_ROUND(V_MUL(x, V_SET1(1.44269504088896341f)));
    vf r = V_FNMA(n, V_SET1(0.693359375f), x);
    r = V_FNMA(n, V_SET1(-2.12194440e-4f), r);
    vf p = V_SET1(1.9875691500e-4f);
    p = V_FMA(p, r, V_SET1(1.3981999507e-3f));
    p = V_FMA(p, r, V_SET1(8.3334519073e-3f));
    p = V_FMA(p, r, V_SET1(4.1665795894e-2f));
    p = V_FMA(p, r, V_SET1(1.6666665459e-1f));
    p = V_FMA(p, r, V_SET1(5.0000001201e-1f));
    p = V_FMA(p, V_MUL(r, r), V_ADD(r, V_SET1(1.0f)));
    const vi pow2n = VI_SLLI(VI_ADD(V_CVT_I(n), VI_SET1(127)), 23);
    return V_MUL(p, VI_AS_F(pow2n));
}

static void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    vf acc0 = V_ZERO(), acc1 = V_ZERO();
    int64_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        const vf a = V_LOAD(x + i), b = V_LOAD(x + i + VW);
        acc0 = V_FMA(a, a, acc0);
        acc1 = V_FMA(b, b, acc1);
    }
    for (; i + VW <= n; i += VW) {
        const vf a = V_LOAD(x + i);
        acc0 = V_FMA(a, a, acc0);
    }
    double ss = V_HSUM(V_ADD(acc0, acc1));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    const float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    const vf vs = V_SET1(scale);
    for (i = 0; i + VW <= n; i += VW) V_STORE(y + i, V_MUL(V_MUL(V_LOAD(x + i), vs), V_LOAD(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void ops_softmax(float *x, int64_t n) {
    if (n <= 0) {
        return;
    }
    int64_t i = 0;
    float max = x[0];
    if (n >= VW) {
        vf vm = V_LOAD(x);
        for (i = VW; i + VW <= n; i += VW) vm = V_MAX(vm, V_LOAD(x + i));
        max = V_HMAX(vm);
    }
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    const vf vmax = V_SET1(max);
    vf vsum = V_ZERO();
    for (i = 0; i + VW <= n; i += VW) {
        const vf e = v_exp(V_SUB(V_LOAD(x + i), vmax));
        V_STORE(x + i, e);
        vsum = V_ADD(vsum, e);
    }
    double sum = V_HSUM(vsum);
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    const vf vinv = V_SET1(inv);
    for (i = 0; i + VW <= n; i += VW) V_STORE(x + i, V_MUL(V_LOAD(x + i), vinv));
    for (; i < n; i++) x[i] *= inv;
}

static void ops_silu_mul(float *out, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    const vf one = V_SET1(1.0f);
    for (; i + VW <= n; i += VW) {
        const vf g = V_LOAD(gate + i);
        const vf s = V_DIV(g, V_ADD(one, v_exp(V_SUB(V_ZERO(), g))));
        V_STORE(out + i, V_MUL(s, V_LOAD(up + i)));
    }
    for (; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static float ops_dot_f32(const float *a, const float *b, int64_t n) {
    vf acc0 = V_ZERO(), acc1 = V_ZERO(), acc2 = V_ZERO(), acc3 = V_ZERO();
    int64_t i = 0;
    for (; i + 4 * VW <= n; i += 4 * VW) {
        acc0 = V_FMA(V_LOAD(a + i), V_LOAD(b + i), acc0);
        acc1 = V_FMA(V_LOAD(a + i + VW), V_LOAD(b + i + VW), acc1);
        acc2 = V_FMA(V_LOAD(a + i + 2 * VW), V_LOAD(b + i + 2 * VW), acc2);
        acc3 = V_FMA(V_LOAD(a + i + 3 * VW), V_LOAD(b + i + 3 * VW), acc3);
    }
    for (; i + VW <= n; i += VW) acc0 = V_FMA(V_LOAD(a + i), V_LOAD(b + i), acc0);
    float s = V_HSUM(V_ADD(V_ADD(acc0, acc1), V_ADD(acc2, acc3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static float ops_dot_f16_f32(const kr_fp16 *a, const float *b, int64_t n) {
    vf acc0 = V_ZERO(), acc1 = V_ZERO();
    int64_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        acc0 = V_FMA(V_LOAD_F16(a + i), V_LOAD(b + i), acc0);
        acc1 = V_FMA(V_LOAD_F16(a + i + VW), V_LOAD(b + i + VW), acc1);
    }
    for (; i + VW <= n; i += VW) acc0 = V_FMA(V_LOAD_F16(a + i), V_LOAD(b + i), acc0);
    float s = V_HSUM(V_ADD(acc0, acc1));
    for (; i < n; i++) s += _cvtsh_ss(a[i]) * b[i];
    return s;
}

static void ops_axpy_f32(float *y, float a, const float *x, int64_t n) {
    const vf va = V_SET1(a);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(y + i, V_FMA(va, V_LOAD(x + i), V_LOAD(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void ops_axpy_f16(float *y, float a, const kr_fp16 *x, int64_t n) {
    const vf va = V_SET1(a);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(y + i, V_FMA(va, V_LOAD_F16(x + i), V_LOAD(y + i)));
    for (; i < n; i++) y[i] += a * _cvtsh_ss(x[i]);
}

/* Hardware conversion rounds to nearest even exactly like the scalar one,
 * subnormals and overflow included. */
static void ops_f32_to_f16(kr_fp16 *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE_F16(y + i, V_LOAD(x + i));
    for (; i < n; i++) y[i] = kr_fp32_to_fp16(x[i]);
}

static void ops_from_float_f16(const float *x, void *y, int64_t n) { ops_f32_to_f16(y, x, n); }

/* Q8_0 / Q4_0 rows to f32 (kr_kernels.dequant_kv): the block's levels
 * widened to int32 and converted exactly, times d in one rounding, as the
 * scalar dequantiser. Q4_0's nibbles become int8 levels (low nibbles are
 * values 0-15, high ones 16-31) in a 32-byte buffer first. */
static void ops_dequant_kv(kr_type t, const void *base, size_t stride, int64_t n_rows, int64_t b0, int64_t nb,
                           float *out) {
    const bool q8 = t == KR_TYPE_Q8_0;
    const size_t bb = q8 ? sizeof(kr_block_q8_0) : sizeof(kr_block_q4_0);
    const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    int8_t lv[32];
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *blk = (const uint8_t *)base + (size_t)r * stride + (size_t)b0 * bb;
        for (int64_t b = 0; b < nb; b++, blk += bb, out += 32) {
            kr_fp16 dh;
            memcpy(&dh, blk, sizeof dh);
            const vf vd = V_SET1(_cvtsh_ss(dh));
            const int8_t *q = (const int8_t *)(blk + sizeof dh);
            if (!q8) {
                const __m128i x = _mm_loadu_si128((const __m128i *)q);
                _mm_storeu_si128((__m128i *)lv, _mm_sub_epi8(_mm_and_si128(x, m4), eight));
                _mm_storeu_si128((__m128i *)(lv + 16), _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), m4), eight));
                q = lv;
            }
            for (int j = 0; j < 32; j += VW) V_STORE(out + j, V_MUL(V_LOAD_I8(q + j), vd));
        }
    }
}

/* ---- small dense product C = A B^T (the KV scorer's q.k logits) ---- */

/* The four lane sums of v0..v3 as one 128-bit vector: pairs are summed
 * within each 128-bit lane by unpack/shuffle, then the lanes are added, so
 * four dot products cost about one horizontal sum. */
static inline __m128 v_sum4(vf v0, vf v1, vf v2, vf v3) {
#if KR_X86_WIDTH == 16
    const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(v0, v1), _mm512_unpackhi_ps(v0, v1));
    const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(v2, v3), _mm512_unpackhi_ps(v2, v3));
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
#else
    const __m256 s01 = _mm256_add_ps(_mm256_unpacklo_ps(v0, v1), _mm256_unpackhi_ps(v0, v1));
    const __m256 s23 = _mm256_add_ps(_mm256_unpacklo_ps(v2, v3), _mm256_unpackhi_ps(v2, v3));
    const __m256 h = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
#endif
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Rows of A per block: MR x 4 accumulators plus MR + 4 loads must fit the
 * register file (32 zmm, 16 ymm). */
#if KR_X86_WIDTH == 16
#define GEMM_MR 4
#else
#define GEMM_MR 2
#endif

/* C[0..mr)[0..4) for mr <= GEMM_MR rows of A against 4 rows of B (f16 rows
 * converted as they are loaded): lane-wise accumulation over k, the sums by
 * v_sum4, a k tail added in scalar. Always inlined so that mr and b_f16 are
 * constants in each copy. */
static inline __attribute__((always_inline)) void gemm_block(float *c, int64_t ldc, const float *a, int64_t lda,
                                                             const char *b, size_t ldb, const bool b_f16, int64_t k,
                                                             const int mr) {
#define GEMM_LOAD_B(row, t)                                                                                            \
    (b_f16 ? V_LOAD_F16((const kr_fp16 *)(b + (row)*ldb) + (t)) : V_LOAD((const float *)(b + (row)*ldb) + (t)))
    vf acc[GEMM_MR][4];
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < 4; j++) acc[i][j] = V_ZERO();
    }
    int64_t t = 0;
    for (; t + VW <= k; t += VW) {
        const vf b0 = GEMM_LOAD_B(0, t), b1 = GEMM_LOAD_B(1, t), b2 = GEMM_LOAD_B(2, t), b3 = GEMM_LOAD_B(3, t);
        for (int i = 0; i < mr; i++) {
            const vf av = V_LOAD(a + i * lda + t);
            acc[i][0] = V_FMA(av, b0, acc[i][0]);
            acc[i][1] = V_FMA(av, b1, acc[i][1]);
            acc[i][2] = V_FMA(av, b2, acc[i][2]);
            acc[i][3] = V_FMA(av, b3, acc[i][3]);
        }
    }
#undef GEMM_LOAD_B
    for (int i = 0; i < mr; i++) {
        __m128 r = v_sum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        if (t < k) {
            float tail[4];
            for (int j = 0; j < 4; j++) {
                const char *bj = b + (size_t)j * ldb;
                float s = 0.0f;
                for (int64_t u = t; u < k; u++) {
                    const float bv = b_f16 ? _cvtsh_ss(((const kr_fp16 *)bj)[u]) : ((const float *)bj)[u];
                    s += a[i * lda + u] * bv;
                }
                tail[j] = s;
            }
            r = _mm_add_ps(r, _mm_loadu_ps(tail));
        }
        _mm_storeu_ps(c + i * ldc, r);
    }
}

#if KR_X86_WIDTH == 16
/* The first two stages of a transpose of N rows of floats in vectors of
 * type VT, any width: unpack pairs, then shuffle pairs of those. After
 * them, out[4p + w]'s 128-bit lane L holds column 4L + w of rows
 * 4p..4p+3; the caller moves the 128-bit lanes into place. */
#define TRANSPOSE_LANES_4X4(VT, N, r, out, UNPACKLO, UNPACKHI, SHUFFLE)                                                \
    do {                                                                                                               \
        VT t_[16];                                                                                                     \
        for (int p = 0; p < (N) / 2; p++) {                                                                            \
            t_[2 * p] = UNPACKLO(r[2 * p], r[2 * p + 1]);                                                              \
            t_[2 * p + 1] = UNPACKHI(r[2 * p], r[2 * p + 1]);                                                          \
        }                                                                                                              \
        for (int p = 0; p < (N) / 4; p++) {                                                                            \
            out[4 * p + 0] = SHUFFLE(t_[4 * p], t_[4 * p + 2], _MM_SHUFFLE(1, 0, 1, 0));                               \
            out[4 * p + 1] = SHUFFLE(t_[4 * p], t_[4 * p + 2], _MM_SHUFFLE(3, 2, 3, 2));                               \
            out[4 * p + 2] = SHUFFLE(t_[4 * p + 1], t_[4 * p + 3], _MM_SHUFFLE(1, 0, 1, 0));                           \
            out[4 * p + 3] = SHUFFLE(t_[4 * p + 1], t_[4 * p + 3], _MM_SHUFFLE(3, 2, 3, 2));                           \
        }                                                                                                              \
    } while (0)

/* Transposes the 8 x 8 floats of r[0..8) in place: r[u][q] becomes the old
 * r[q][u] (4 x 4 blocks in each 128-bit lane, then a swap of halves). */
static inline __attribute__((always_inline)) void transpose8x8(__m256 r[8]) {
    __m256 s[8];
    TRANSPOSE_LANES_4X4(__m256, 8, r, s, _mm256_unpacklo_ps, _mm256_unpackhi_ps, _mm256_shuffle_ps);
    for (int u = 0; u < 4; u++) {
        r[u] = _mm256_permute2f128_ps(s[u], s[u + 4], 0x20);
        r[u + 4] = _mm256_permute2f128_ps(s[u], s[u + 4], 0x31);
    }
}

/* k = 8 (heads of 8 dimensions, as stories260K's) in the 16-wide table,
 * where the lane loop of gemm_block never runs and every product used to
 * be its scalar tail: 8 B rows are converted and transposed once, so that
 * each A row gets the scores of 8 keys from 8 multiply-adds across keys.
 * Each score is the tail's sum, term by term in order of t with a separate
 * multiply and add (the library is built without contraction), so the
 * bits are those of the scalar loop. Returns the columns done. */
static inline __attribute__((always_inline)) int64_t gemm_nt_k8(float *c, int64_t ldc, const float *a, int64_t lda,
                                                                const char *b, size_t ldb, const bool b_f16, int64_t m,
                                                                int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 kt[8];
        for (int q = 0; q < 8; q++) {
            const char *bq = b + (size_t)(j + q) * ldb;
            kt[q] = b_f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)bq)) : _mm256_loadu_ps((const float *)bq);
        }
        transpose8x8(kt);
        for (int64_t i = 0; i < m; i++) {
            const float *ai = a + i * lda;
            __m256 acc = _mm256_setzero_ps();
            for (int u = 0; u < 8; u++) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(ai[u]), kt[u]));
            _mm256_storeu_ps(c + i * ldc + j, acc);
        }
    }
    return j;
}

/* Transposes the 16 x 16 floats of r[0..16) in place: r[t][q] becomes the
 * old r[q][t] (4 x 4 blocks in each 128-bit lane, then two rounds of
 * 128-bit lane shuffles put the blocks in place). */
static inline __attribute__((always_inline)) void transpose16x16(__m512 r[16]) {
    __m512 u[16];
    TRANSPOSE_LANES_4X4(__m512, 16, r, u, _mm512_unpacklo_ps, _mm512_unpackhi_ps, _mm512_shuffle_ps);
    /* u[4p + w], 128-bit lane L: column 4L + w of rows 4p..4p+3 */
    for (int w = 0; w < 4; w++) {
        const __m512 v1 = _mm512_shuffle_f32x4(u[w], u[4 + w], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 v2 = _mm512_shuffle_f32x4(u[w], u[4 + w], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512 v3 = _mm512_shuffle_f32x4(u[8 + w], u[12 + w], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 v4 = _mm512_shuffle_f32x4(u[8 + w], u[12 + w], _MM_SHUFFLE(3, 2, 3, 2));
        r[w] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + w] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + w] = _mm512_shuffle_f32x4(v2, v4, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + w] = _mm512_shuffle_f32x4(v2, v4, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Rows of A from which gemm_nt_lanes pays for its transposes: on one KV
 * block of a head of 32 (16 f16 keys, AMD EPYC, AVX-512) it takes 50-64 ns
 * for 3 rows against gemm_block's 66-88, 57-71 against 92-126 for 4, and
 * 43-56 against 49 for 2 (docs/history/PERFORMANCE-2026-12.md, "Verify steps: the
 * transposed keys from 3 query rows"). */
#define GEMM_LANES_MIN_ROWS 3

/* k = 16 or 32 (heads of 16 or 32 dimensions, as the shipped model's) with
 * many A rows (a verify step or a prompt chunk: 2 query heads per KV head
 * times the entries): gemm_block spends about as many operations summing
 * its lanes as multiplying. Here 16 B rows are converted and transposed
 * once, and each A row then builds gemm_block's 16 lane sums for 16 keys
 * at once, one vector per lane, and adds them in v_sum4's order
 * ((l0 + l2) + (l1 + l3) within each group of 4 lanes, then (g0 + g2) +
 * (g1 + g3)): the same operations on the same values, so the bits are
 * gemm_block's and a row's scores do not depend on the path its call
 * took. Returns the columns done. */
static inline __attribute__((always_inline)) int64_t gemm_nt_lanes(float *c, int64_t ldc, const float *a, int64_t lda,
                                                                   const char *b, size_t ldb, const bool b_f16,
                                                                   int64_t m, int64_t n, const int U) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 kt[32]; /* kt[t]: dimension t of the 16 keys */
        for (int uu = 0; uu < U; uu++) {
            for (int q = 0; q < 16; q++) {
                const char *bq = b + (size_t)(j + q) * ldb;
                kt[16 * uu + q] =
                    b_f16 ? V_LOAD_F16((const kr_fp16 *)bq + 16 * uu) : V_LOAD((const float *)bq + 16 * uu);
            }
            transpose16x16(kt + 16 * uu);
        }
        for (int64_t i = 0; i < m; i++) {
            const float *ai = a + i * lda;
            __m512 half[2];
            for (int g = 0; g < 4; g++) {
                __m512 l4[4];
                for (int q = 0; q < 4; q++) {
                    const int l = 4 * g + q;
                    l4[q] = _mm512_fmadd_ps(_mm512_set1_ps(ai[l]), kt[l], _mm512_setzero_ps());
                    for (int uu = 1; uu < U; uu++)
                        l4[q] = _mm512_fmadd_ps(_mm512_set1_ps(ai[l + 16 * uu]), kt[l + 16 * uu], l4[q]);
                }
                const __m512 sum = _mm512_add_ps(_mm512_add_ps(l4[0], l4[2]), _mm512_add_ps(l4[1], l4[3]));
                half[g & 1] = g < 2 ? sum : _mm512_add_ps(half[g & 1], sum);
            }
            _mm512_storeu_ps(c + i * ldc + j, _mm512_add_ps(half[0], half[1]));
        }
    }
    return j;
}
#endif

/* Blocks of 4 B rows (kept in L1) against all A rows, GEMM_MR at a time;
 * the last n % 4 columns as single dot products. */
static inline __attribute__((always_inline)) void gemm_nt_body(float *c, int64_t ldc, const float *a, int64_t lda,
                                                               const char *b, size_t ldb, const bool b_f16, int64_t m,
                                                               int64_t n, int64_t k) {
    int64_t j = 0;
#if KR_X86_WIDTH == 16
    if (k == 8) j = gemm_nt_k8(c, ldc, a, lda, b, ldb, b_f16, m, n);
    if (k == 16 && m >= GEMM_LANES_MIN_ROWS) j = gemm_nt_lanes(c, ldc, a, lda, b, ldb, b_f16, m, n, 1);
    if (k == 32 && m >= GEMM_LANES_MIN_ROWS) j = gemm_nt_lanes(c, ldc, a, lda, b, ldb, b_f16, m, n, 2);
#endif
    for (; j + 4 <= n; j += 4) {
        int64_t i = 0;
        for (; i + GEMM_MR <= m; i += GEMM_MR) {
            gemm_block(c + i * ldc + j, ldc, a + i * lda, lda, b + (size_t)j * ldb, ldb, b_f16, k, GEMM_MR);
        }
        /* the last m % GEMM_MR rows in one block, not row by row: a decode
         * step's two query rows of a KV head (GQA) share each B load */
        switch (m - i) {
#if GEMM_MR == 4
        case 3: gemm_block(c + i * ldc + j, ldc, a + i * lda, lda, b + (size_t)j * ldb, ldb, b_f16, k, 3); break;
        case 2: gemm_block(c + i * ldc + j, ldc, a + i * lda, lda, b + (size_t)j * ldb, ldb, b_f16, k, 2); break;
#endif
        case 1: gemm_block(c + i * ldc + j, ldc, a + i * lda, lda, b + (size_t)j * ldb, ldb, b_f16, k, 1); break;
        default: break;
        }
    }
    for (; j < n; j++) {
        const char *bj = b + (size_t)j * ldb;
        for (int64_t i = 0; i < m; i++) {
            c[i * ldc + j] = b_f16 ? ops_dot_f16_f32((const kr_fp16 *)bj, a + i * lda, k)
                                   : ops_dot_f32(a + i * lda, (const float *)bj, k);
        }
    }
}

static void ops_gemm_nt(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                        int64_t m, int64_t n, int64_t k) {
    if (b_f16) {
        gemm_nt_body(c, ldc, a, lda, b, ldb, true, m, n, k);
    } else {
        gemm_nt_body(c, ldc, a, lda, b, ldb, false, m, n, k);
    }
}

#endif /* KR_X86_OPS_IMPL_H */
