/*
 * x86_dot_impl.h - 256-bit dot-product kernels, included by avx2_kernels.c
 * (AVX2+FMA+F16C) and by avx512_kernels.c (adds AVX-512VL VNNI), which
 * compile this same text with their own flags. With KR_X86_VNNI set, the
 * multiply-accumulate steps use VPDPWSSD/VPDPBUSD instead of the AVX2
 * madd+add pairs.
 *
 * Why 256-bit for the quantized kernels on the AVX-512 table too: Zen 4
 * executes 512-bit integer ops as two 256-bit halves, so ymm code moves as
 * many bytes per cycle, and each K-quant super-block splits naturally into
 * 32-byte pieces.
 *
 * Every kernel is written once as an always-inline body over NX activation
 * rows (1..4): the weight block is loaded and unpacked once and dotted with
 * NX activation rows, which is what matmul uses to read each weight row once
 * per group of batch rows.
 */
#ifndef KR_X86_DOT_IMPL_H
#define KR_X86_DOT_IMPL_H

#include "kernels_impl.h"

#include <immintrin.h>
#include <math.h>

#include "x86_hsum.h"

#define KR_INLINE static inline __attribute__((always_inline))
#define MAXNX 4

#if KR_X86_VNNI
/* acc + madd(a, b) in one instruction */
#define DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
/* acc + sum of four u8*s8 products per int32 lane */
#define DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#else
#define DPWSSD(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define DPBUSD(acc, u, s)                                                                                              \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#endif

#define F16(h) _cvtsh_ss(h)

/* Independent integer accumulators per activation row. VPDPWSSD has a
 * 4-cycle dependency through its accumulator, so the VNNI build spreads the
 * sums over 4 chains; the AVX2 madd+add form only chains through the add. */
#if KR_X86_VNNI
#define KCH 4
#else
#define KCH 1
#endif

typedef void (*kr_x86_dotn_fn)(int64_t n, const void *w, const void *x, size_t xs, int nx, float *y, int64_t ldy);

/* ------------------------------------------------------------------ */
/* Q8_0 x Q8_0: |w| * (x with w's sign) keeps the u8*s8 instructions exact. */
KR_INLINE void body_q8_0(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {
    const kr_block_q8_0 *w = vw;
    const int64_t nb = n / KR_QK8_0;
    __m256 acc[MAXNX][2];
    for (int b = 0; b < NX; b++) acc[b][0] = acc[b][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i qw = _mm256_loadu_si256((const __m256i *)w[i].qs);
        const __m256i aw = _mm256_sign_epi8(qw, qw);
        const float dw = F16(w[i].d);
        for (int b = 0; b < NX; b++) {
            const kr_block_q8_0 *xb = (const kr_block_q8_0 *)(x + b * xs) + i;
            const __m256i sx = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb->qs), qw);
            const __m256i dot = DPBUSD(_mm256_setzero_si256(), aw, sx);
            acc[b][i & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dw * F16(xb->d)), _mm256_cvtepi32_ps(dot), acc[b][i & 1]);
        }
    }
    for (int b = 0; b < NX; b++) y[b * ldy] = hsum256(_mm256_add_ps(acc[b][0], acc[b][1]));
}

/* Q4_0 x Q8_0: nibbles to bytes (low nibbles are elements 0-15, high 16-31),
 * minus 8, then the signed trick as for Q8_0. */
KR_INLINE void body_q4_0(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {
    const kr_block_q4_0 *w = vw;
    const int64_t nb = n / KR_QK4_0;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 acc[MAXNX][2];
    for (int b = 0; b < NX; b++) acc[b][0] = acc[b][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)w[i].qs);
        const __m256i qq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
        const __m256i qw = _mm256_sub_epi8(qq, eight);
        const __m256i aw = _mm256_sign_epi8(qw, qw);
        const float dw = F16(w[i].d);
        for (int b = 0; b < NX; b++) {
            const kr_block_q8_0 *xb = (const kr_block_q8_0 *)(x + b * xs) + i;
            const __m256i sx = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb->qs), qw);
            const __m256i dot = DPBUSD(_mm256_setzero_si256(), aw, sx);
            acc[b][i & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dw * F16(xb->d)), _mm256_cvtepi32_ps(dot), acc[b][i & 1]);
        }
    }
    for (int b = 0; b < NX; b++) y[b * ldy] = hsum256(_mm256_add_ps(acc[b][0], acc[b][1]));
}

/* pshufb controls that broadcast int16 element e of each 128-bit lane */
#define BCAST16(e) _mm256_set1_epi16((short)((2 * (e)) | ((2 * (e) + 1) << 8)))

/* sum_j mins_j * (bsums_{2j} + bsums_{2j+1}) as 4 int32 lanes */
KR_INLINE __m128i k4_min_dot(__m128i mins16, const int16_t *bsums) {
    const __m128i b0 = _mm_loadu_si128((const __m128i *)bsums);
    const __m128i b1 = _mm_loadu_si128((const __m128i *)(bsums + 8));
    return _mm_madd_epi16(mins16, _mm_hadd_epi16(b0, b1));
}

/* Q4_K x Q8_K: per 64 elements, 32 bytes of nibbles: low nibbles are
 * sub-block 2k, high nibbles 2k+1. Scales multiply the int16 pair sums,
 * mins come from the activation bsums. */
KR_INLINE void body_q4_K(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {
    const kr_block_q4_K *w = vw;
    const int64_t nb = n / KR_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[MAXNX];
    __m128 accm[MAXNX];
    for (int b = 0; b < NX; b++) {
        acc[b] = _mm256_setzero_ps();
        accm[b] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        uint64_t sc8, mn8;
        kr_unpack_k4_scales_packed(w[i].scales, &sc8, &mn8);
        const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8));
        const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn8));
        const __m256i scales = _mm256_broadcastsi128_si256(sc16);
        const float d = F16(w[i].d), dmin = F16(w[i].dmin);
        __m256i sumi[MAXNX][KCH];
        for (int b = 0; b < NX; b++) {
            for (int c = 0; c < KCH; c++) sumi[b][c] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * k));
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i s_lo = _mm256_shuffle_epi8(scales, BCAST16(2 * k));
            const __m256i s_hi = _mm256_shuffle_epi8(scales, BCAST16(2 * k + 1));
            for (int b = 0; b < NX; b++) {
                const int8_t *qx = ((const kr_block_q8_K *)(x + b * xs))[i].qs + 64 * k;
                const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)qx));
                const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(qx + 32)));
                sumi[b][(2 * k) % KCH] = DPWSSD(sumi[b][(2 * k) % KCH], p0, s_lo);
                sumi[b][(2 * k + 1) % KCH] = DPWSSD(sumi[b][(2 * k + 1) % KCH], p1, s_hi);
            }
        }
        for (int b = 0; b < NX; b++) {
            const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + b * xs) + i;
            __m256i si = sumi[b][0];
            for (int c = 1; c < KCH; c++) si = _mm256_add_epi32(si, sumi[b][c]);
            acc[b] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(si), acc[b]);
            const __m128i md = k4_min_dot(mn16, xb->bsums);
            accm[b] = _mm_fmadd_ps(_mm_set1_ps(-dmin * xb->d), _mm_cvtepi32_ps(md), accm[b]);
        }
    }
    for (int b = 0; b < NX; b++) y[b * ldy] = hsum256(acc[b]) + hsum128(accm[b]);
}

/* Q5_K x Q8_K: Q4_K plus a fifth bit per element: bit 2k of qh[l] for the
 * low nibble of byte l in pair k, bit 2k+1 for the high nibble. */
KR_INLINE void body_q5_K(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {
    const kr_block_q5_K *w = vw;
    const int64_t nb = n / KR_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i two = _mm256_set1_epi8(2);
    __m256 acc[MAXNX];
    __m128 accm[MAXNX];
    for (int b = 0; b < NX; b++) {
        acc[b] = _mm256_setzero_ps();
        accm[b] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        uint64_t sc8, mn8;
        kr_unpack_k4_scales_packed(w[i].scales, &sc8, &mn8);
        const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8));
        const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn8));
        const __m256i scales = _mm256_broadcastsi128_si256(sc16);
        const float d = F16(w[i].d), dmin = F16(w[i].dmin);
        __m256i hb = _mm256_loadu_si256((const __m256i *)w[i].qh);
        __m256i sumi[MAXNX][KCH];
        for (int b = 0; b < NX; b++) {
            for (int c = 0; c < KCH; c++) sumi[b][c] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * k));
            const __m256i lo =
                _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(hb, two), 3));
            hb = _mm256_srli_epi16(hb, 2);
            const __m256i s_lo = _mm256_shuffle_epi8(scales, BCAST16(2 * k));
            const __m256i s_hi = _mm256_shuffle_epi8(scales, BCAST16(2 * k + 1));
            for (int b = 0; b < NX; b++) {
                const int8_t *qx = ((const kr_block_q8_K *)(x + b * xs))[i].qs + 64 * k;
                const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)qx));
                const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(qx + 32)));
                sumi[b][(2 * k) % KCH] = DPWSSD(sumi[b][(2 * k) % KCH], p0, s_lo);
                sumi[b][(2 * k + 1) % KCH] = DPWSSD(sumi[b][(2 * k + 1) % KCH], p1, s_hi);
            }
        }
        for (int b = 0; b < NX; b++) {
            const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + b * xs) + i;
            __m256i si = sumi[b][0];
            for (int c = 1; c < KCH; c++) si = _mm256_add_epi32(si, sumi[b][c]);
            acc[b] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(si), acc[b]);
            const __m128i md = k4_min_dot(mn16, xb->bsums);
            accm[b] = _mm_fmadd_ps(_mm_set1_ps(-dmin * xb->d), _mm_cvtepi32_ps(md), accm[b]);
        }
    }
    for (int b = 0; b < NX; b++) y[b * ldy] = hsum256(acc[b]) + hsum128(accm[b]);
}

/* Q6_K x Q8_K: 6-bit values 0..63 (stored minus 32) times int8 scales per
 * 16 elements; the -32 offset is applied once per block through the bsums:
 * sum sc*(q-32)*x = sum sc*q*x - 32 * sum_j sc_j * bsum_j. */
KR_INLINE void acc_q6_K(int64_t n, const void *vw, const char *x, size_t xs, __m256 *acc, const int NX) {
    const kr_block_q6_K *w = vw;
    const int64_t nb = n / KR_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    /* per 128-bit lane: broadcast int16 element 2g (low lane) / 2g+1 (high) */
    const __m256i ctrl[4] = {
        _mm256_set_m128i(_mm_set1_epi16(0x0302), _mm_set1_epi16(0x0100)),
        _mm256_set_m128i(_mm_set1_epi16(0x0706), _mm_set1_epi16(0x0504)),
        _mm256_set_m128i(_mm_set1_epi16(0x0b0a), _mm_set1_epi16(0x0908)),
        _mm256_set_m128i(_mm_set1_epi16(0x0f0e), _mm_set1_epi16(0x0d0c)),
    };
    for (int b = 0; b < NX; b++) acc[b] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i sc_all = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const float d = F16(w[i].d);
        __m256i sumi[MAXNX][KCH];
        for (int b = 0; b < NX; b++) {
            const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + b * xs) + i;
            const __m256i corr = _mm256_madd_epi16(sc_all, _mm256_loadu_si256((const __m256i *)xb->bsums));
            sumi[b][0] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
            for (int c = 1; c < KCH; c++) sumi[b][c] = _mm256_setzero_si256();
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
            };
            const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc_all, sc_all, 0x00)
                                        : _mm256_permute2x128_si256(sc_all, sc_all, 0x11);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                const __m256i s = _mm256_shuffle_epi8(sc_h, ctrl[g]);
                for (int b = 0; b < NX; b++) {
                    const int8_t *qx = ((const kr_block_q8_K *)(x + b * xs))[i].qs + 128 * h + 32 * g;
                    const __m256i p = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256((const __m256i *)qx));
                    sumi[b][g % KCH] = DPWSSD(sumi[b][g % KCH], p, s);
                }
            }
        }
        for (int b = 0; b < NX; b++) {
            const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + b * xs) + i;
            __m256i si = sumi[b][0];
            for (int c = 1; c < KCH; c++) si = _mm256_add_epi32(si, sumi[b][c]);
            acc[b] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(si), acc[b]);
        }
    }
}

/* Rows end in hsum256 of acc_q6_K's accumulators (the AVX-512 table's
 * one-row Q6_K loop reduces eight rows' at once, with the same bits). */
KR_INLINE void body_q6_K(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {
    __m256 acc[MAXNX];
    acc_q6_K(n, vw, x, xs, acc, NX);
    for (int b = 0; b < NX; b++) y[b * ldy] = hsum256(acc[b]);
}

/* ---- float formats: weights and activations in the same type ---- */
KR_INLINE __m256 load_f16x8(const kr_fp16 *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

KR_INLINE __m256 load_bf16x8(const kr_bf16 *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

#define FLOAT_BODY(NAME, T, LOAD, SCALAR)                                                                              \
    KR_INLINE void NAME(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {    \
        const T *w = vw;                                                                                               \
        __m256 acc[MAXNX][2];                                                                                          \
        for (int b = 0; b < NX; b++) acc[b][0] = acc[b][1] = _mm256_setzero_ps();                                      \
        int64_t i = 0;                                                                                                 \
        for (; i + 16 <= n; i += 16) {                                                                                 \
            const __m256 w0 = LOAD(w + i), w1 = LOAD(w + i + 8);                                                       \
            for (int b = 0; b < NX; b++) {                                                                             \
                const T *xb = (const T *)(x + b * xs);                                                                 \
                acc[b][0] = _mm256_fmadd_ps(w0, LOAD(xb + i), acc[b][0]);                                              \
                acc[b][1] = _mm256_fmadd_ps(w1, LOAD(xb + i + 8), acc[b][1]);                                          \
            }                                                                                                          \
        }                                                                                                              \
        for (int b = 0; b < NX; b++) {                                                                                 \
            const T *xb = (const T *)(x + b * xs);                                                                     \
            float s = hsum256(_mm256_add_ps(acc[b][0], acc[b][1]));                                                    \
            for (int64_t j = i; j < n; j++) s += SCALAR(w[j]) * SCALAR(xb[j]);                                         \
            y[b * ldy] = s;                                                                                            \
        }                                                                                                              \
    }

#define F32_ID(v) (v)
#define BF16_SCALAR(v) kr_bf16_bits_to_float(v)
FLOAT_BODY(body_f32, float, _mm256_loadu_ps, F32_ID)
FLOAT_BODY(body_f16, kr_fp16, load_f16x8, F16)
FLOAT_BODY(body_bf16, kr_bf16, load_bf16x8, BF16_SCALAR)

/* ---- wrappers: vec_dot (one row) and the NX-row variants ---- */
#define DEFINE_DOT(SUFFIX, BODY)                                                                                       \
    __attribute__((unused)) static void vec_dot_##SUFFIX(int64_t n, float *out, const void *w, const void *x) {        \
        BODY(n, w, (const char *)x, 0, out, 0, 1);                                                                     \
    }                                                                                                                  \
    __attribute__((unused)) static void dotn_##SUFFIX(int64_t n, const void *w, const void *x, size_t xs, int nx,      \
                                                      float *y, int64_t ldy) {                                         \
        const char *xc = x;                                                                                            \
        switch (nx) {                                                                                                  \
        case 1: BODY(n, w, xc, xs, y, ldy, 1); break;                                                                  \
        case 2: BODY(n, w, xc, xs, y, ldy, 2); break;                                                                  \
        case 3: BODY(n, w, xc, xs, y, ldy, 3); break;                                                                  \
        default: BODY(n, w, xc, xs, y, ldy, 4); break;                                                                 \
        }                                                                                                              \
    }

DEFINE_DOT(q8_0, body_q8_0)
DEFINE_DOT(q4_0, body_q4_0)
DEFINE_DOT(q4_K, body_q4_K)
DEFINE_DOT(q5_K, body_q5_K)
DEFINE_DOT(q6_K, body_q6_K)
DEFINE_DOT(f32, body_f32)
DEFINE_DOT(f16, body_f16)
DEFINE_DOT(bf16, body_bf16)

/* ---- activation quantizers ---- */

/* 32 int32 lanes (four vectors) to 32 int8 in element order. */
KR_INLINE __m256i pack_i32x32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b); /* a0-3 b0-3 | a4-7 b4-7 */
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

KR_INLINE __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static void from_float_q8_0(const float *x, void *vy, int64_t n) {
    kr_block_q8_0 *y = vy;
    const int64_t nb = n / KR_QK8_0;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m256 v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])), _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
        _mm256_storeu_si256((__m256i *)y[i].qs, pack_i32x32_to_i8(q[0], q[1], q[2], q[3]));
    }
}

/* Q8_K: the scale maps the largest magnitude to -127 (see the scalar
 * version); values round to nearest even like kr_nearest_int, and bsums
 * are summed from the packed bytes. */
static void from_float_q8_K(const float *x, void *vy, int64_t n) {
    kr_block_q8_K *y = vy;
    const int64_t nb = n / KR_QK_K;
    for (int64_t i = 0; i < nb; i++, x += KR_QK_K) {
        __m256 vmax = _mm256_setzero_ps();
        for (int j = 0; j < KR_QK_K; j += 8) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(x + j)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / kr_first_with_magnitude(x, KR_QK_K, amax);
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i ones = _mm256_set1_epi8(1);
        for (int j = 0; j < KR_QK_K; j += 32) {
            __m256i q[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vs));
            }
            const __m256i q8 = pack_i32x32_to_i8(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), q8);
            const __m256i pairs = _mm256_maddubs_epi16(ones, q8); /* 16 pair sums */
            int16_t p[16];
            _mm256_storeu_si256((__m256i *)p, pairs);
            int s0 = 0, s1 = 0;
            for (int k = 0; k < 8; k++) {
                s0 += p[k];
                s1 += p[8 + k];
            }
            y[i].bsums[j / 16] = (int16_t)s0;
            y[i].bsums[j / 16 + 1] = (int16_t)s1;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- matmul ---- */

/* Rows of this thread's slice in tiles of ROW_TILE: for each group of up to
 * four batch rows, every weight row of the tile is read once and dotted with
 * the whole group; the tile stays in L1/L2 while the groups stream past. */
#define ROW_TILE 16

static void x86_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                       int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                       int ith, int nth, const kr_x86_dotn_fn *dotn) {
    if ((uint32_t)wtype >= KR_TYPE_COUNT) {
        return;
    }
    const kr_x86_dotn_fn f = dotn[wtype];
    if (f == NULL) {
        kr_scalar_matmul(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        return;
    }
    int64_t r0, r1;
    kr_split_rows(n_rows, ith, nth, &r0, &r1);
    const char *wb = w, *xb = x;
    if (n_batch == 1) {
        for (int64_t r = r0; r < r1; r++) {
            f(n_cols, wb + (size_t)r * w_row_bytes, xb, x_row_bytes, 1, y + r, ldy);
        }
        return;
    }
    for (int64_t t0 = r0; t0 < r1; t0 += ROW_TILE) {
        const int64_t t1 = t0 + ROW_TILE < r1 ? t0 + ROW_TILE : r1;
        for (int64_t b0 = 0; b0 < n_batch; b0 += MAXNX) {
            const int nx = n_batch - b0 < MAXNX ? (int)(n_batch - b0) : MAXNX;
            for (int64_t r = t0; r < t1; r++) {
                f(n_cols, wb + (size_t)r * w_row_bytes, xb + (size_t)b0 * x_row_bytes, x_row_bytes, nx,
                  y + b0 * ldy + r, ldy);
            }
        }
    }
}

#endif /* KR_X86_DOT_IMPL_H */
