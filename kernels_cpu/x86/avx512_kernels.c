/*
 * avx512_kernels.c - the AVX-512 kernel table (F, BW, VL, DQ, VNNI, BF16).
 *
 * Quantized dot products: the 256-bit kernels of x86_dot_impl.h compiled
 * with VNNI (VPDPWSSD/VPDPBUSD fuse the multiply-add-accumulate steps).
 * Float formats and row ops use 512-bit vectors with masked tails; BF16
 * rows use VDPBF16PS, which multiplies bf16 pairs exactly and accumulates in
 * f32.
 */
#define KR_X86_VNNI 1
#define KR_X86_WIDTH 16
#include "x86_dot_impl.h"
#include "x86_ops_impl.h"
#include "x86_attn_impl.h"
#include "x86_attn_q8_impl.h"

#include "avx512_gemm.h"
#include "avx512_gemv.h"

static kr_x86_dotn_fn avx512_dotn[KR_TYPE_COUNT];

static inline __mmask16 tail_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

static inline __mmask32 tail_mask32(int64_t left) {
    return left >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << left) - 1);
}

static inline __m512 load_f32_masked(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

static inline __m512 load_f16_masked(const kr_fp16 *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* 32 elements per step in two zmm accumulators per activation row; the
 * tail is a masked step, so no scalar loop. */
#define FLOAT_BODY512(NAME, T, LOADM)                                                                                  \
    KR_INLINE void NAME(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {    \
        const T *w = vw;                                                                                               \
        __m512 acc[MAXNX][2];                                                                                          \
        for (int b = 0; b < NX; b++) acc[b][0] = acc[b][1] = _mm512_setzero_ps();                                      \
        int64_t i = 0;                                                                                                 \
        for (; i + 32 <= n; i += 32) {                                                                                 \
            const __m512 w0 = LOADM(w + i, 0xFFFF), w1 = LOADM(w + i + 16, 0xFFFF);                                    \
            for (int b = 0; b < NX; b++) {                                                                             \
                const T *xb = (const T *)(x + b * xs);                                                                 \
                acc[b][0] = _mm512_fmadd_ps(w0, LOADM(xb + i, 0xFFFF), acc[b][0]);                                     \
                acc[b][1] = _mm512_fmadd_ps(w1, LOADM(xb + i + 16, 0xFFFF), acc[b][1]);                                \
            }                                                                                                          \
        }                                                                                                              \
        for (; i < n; i += 16) {                                                                                       \
            const __mmask16 m = tail_mask16(n - i);                                                                    \
            const __m512 w0 = LOADM(w + i, m);                                                                         \
            for (int b = 0; b < NX; b++) {                                                                             \
                const T *xb = (const T *)(x + b * xs);                                                                 \
                acc[b][0] = _mm512_fmadd_ps(w0, LOADM(xb + i, m), acc[b][0]);                                          \
            }                                                                                                          \
        }                                                                                                              \
        for (int b = 0; b < NX; b++) y[b * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(acc[b][0], acc[b][1]));           \
    }

FLOAT_BODY512(body512_f32, float, load_f32_masked)
FLOAT_BODY512(body512_f16, kr_fp16, load_f16_masked)

static inline __m512bh load_bf16x32(const kr_bf16 *p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

KR_INLINE void body512_bf16(int64_t n, const void *vw, const char *x, size_t xs, float *y, int64_t ldy, const int NX) {
    const kr_bf16 *w = vw;
    __m512 acc[MAXNX][2];
    for (int b = 0; b < NX; b++) acc[b][0] = acc[b][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512bh w0 = load_bf16x32(w + i, 0xFFFFFFFFu), w1 = load_bf16x32(w + i + 32, 0xFFFFFFFFu);
        for (int b = 0; b < NX; b++) {
            const kr_bf16 *xb = (const kr_bf16 *)(x + b * xs);
            acc[b][0] = _mm512_dpbf16_ps(acc[b][0], w0, load_bf16x32(xb + i, 0xFFFFFFFFu));
            acc[b][1] = _mm512_dpbf16_ps(acc[b][1], w1, load_bf16x32(xb + i + 32, 0xFFFFFFFFu));
        }
    }
    for (; i < n; i += 32) {
        const __mmask32 m = tail_mask32(n - i);
        const __m512bh w0 = load_bf16x32(w + i, m);
        for (int b = 0; b < NX; b++) {
            const kr_bf16 *xb = (const kr_bf16 *)(x + b * xs);
            acc[b][0] = _mm512_dpbf16_ps(acc[b][0], w0, load_bf16x32(xb + i, m));
        }
    }
    for (int b = 0; b < NX; b++) y[b * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(acc[b][0], acc[b][1]));
}

DEFINE_DOT(f32_512, body512_f32)
DEFINE_DOT(f16_512, body512_f16)
DEFINE_DOT(bf16_512, body512_bf16)

/* One activation row of Q6_K weights in the file layout (mapped files,
 * no_repack): the block kernel's arithmetic (acc_q6_K; a 512-bit version
 * streams more slowly from memory on Zen 4), called directly rather than
 * through the per-row kernel pointer, and eight rows' accumulators reduced
 * together (same bits as one at a time): on 1024-column rows of 4 blocks a
 * row's reduction costs about as much as a block, so sharing it among eight
 * rows matters (docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels' design
 * choices"). */
static void gemv_q6_K(const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void *x,
                      float *y) {
    const char *wb = w;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        __m256 acc[8];
        for (int k = 0; k < 8; k++) acc_q6_K(n_cols, wb + (size_t)(r + k) * w_row_bytes, x, 0, &acc[k], 1);
        _mm256_storeu_ps(y + r, hsum256_x8(acc));
    }
    for (; r < r1; r++) {
        __m256 acc;
        acc_q6_K(n_cols, wb + (size_t)r * w_row_bytes, x, 0, &acc, 1);
        y[r] = hsum256(acc);
    }
}

/* The kernel of an interleaved layout (kernels.h). */
static bool gemv_x16(kr_type wtype, const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols,
                     const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    switch (wtype) {
    case KR_TYPE_Q4_K_X16:
        return kr_avx512_gemv_x16_q4_K(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    case KR_TYPE_Q6_K_X16:
        return kr_avx512_gemv_x16_q6_K(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    case KR_TYPE_Q4_0_X16:
        return kr_avx512_gemv_x16_q4_0(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    case KR_TYPE_F32_X16:
        return kr_avx512_gemv_x16_f32(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    default: return false;
    }
}

static void avx512_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                          int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                          int ith, int nth) {
    int64_t r0, r1;
    if (kr_layout_source(wtype) != wtype) {
        /* interleaved layouts (kernels.h): threads take whole 16-row groups;
         * their kernels serve every batch size (they keep their
         * accumulators in registers and unpack nothing into a panel, so
         * they beat the panel GEMM even at hundreds of rows); the panel
         * GEMM, which copies rows back to file blocks as it unpacks them,
         * takes only the widths they refuse; the rows past the last whole
         * group go through the file layout's path below (kernels.h) */
        n_rows =
            kr_matmul_layout_tail(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        int64_t g0, g1;
        kr_split_rows(n_rows / KR_X16_ROWS, ith, nth, &g0, &g1);
        if (gemv_x16(wtype, w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy)) return;
        if (kr_avx512_gemm(wtype, w, w_row_bytes, g0 * KR_X16_ROWS, g1 * KR_X16_ROWS, n_cols, x, x_row_bytes, n_batch,
                           y, ldy))
            return;
        kr_scalar_matmul(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        return;
    }
    kr_split_rows(n_rows, ith, nth, &r0, &r1);
    /* file layouts (kara_model_params.no_repack, mapped files): one
     * activation row: gemv (Q6_K: the block kernel's arithmetic); a few
     * rows: the few-row gemv, which gives each row the bits of the one-row
     * product; many rows: panel GEMM */
    if (n_batch == 1 && wtype == KR_TYPE_Q6_K) {
        gemv_q6_K(w, w_row_bytes, r0, r1, n_cols, x, y);
        return;
    }
    if (n_batch == 1 && kr_avx512_gemv(wtype, w, w_row_bytes, r0, r1, n_cols, x, y)) return;
    const int64_t min_gemm = kr_avx512_gemm_min_batch(wtype);
    if (n_batch >= kr_avx512_gemv_multi_min_batch(wtype) && n_batch < min_gemm &&
        kr_avx512_gemv_multi(wtype, w, w_row_bytes, r0, r1, n_cols, x, x_row_bytes, n_batch, y, ldy))
        return;
    if (n_batch >= min_gemm && kr_avx512_gemm(wtype, w, w_row_bytes, r0, r1, n_cols, x, x_row_bytes, n_batch, y, ldy))
        return;
    x86_matmul(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth, avx512_dotn);
}

/* bf16 stores: round to nearest even on the bit pattern (VCVTNEPS2BF16
 * would flush subnormals, so it is not used), NaN kept quiet. */
static void avx512_from_float_bf16(const float *x, void *vy, int64_t n) {
    kr_bf16 *y = vy;
    const __m512i bias = _mm512_set1_epi32(0x7fff);
    const __m512i one = _mm512_set1_epi32(1);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512i u = _mm512_castps_si512(v);
        const __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(r));
    }
}

void kr_kernels_init_avx512(kr_kernels *k) {
    kr_kernels_init_scalar(k);
    k->isa = KR_ISA_AVX512;
    k->name = "avx512";

    k->vec_dot[KR_TYPE_F32] = vec_dot_f32_512;
    k->vec_dot[KR_TYPE_F16] = vec_dot_f16_512;
    k->vec_dot[KR_TYPE_BF16] = vec_dot_bf16_512;
    k->vec_dot[KR_TYPE_Q4_0] = vec_dot_q4_0;
    k->vec_dot[KR_TYPE_Q8_0] = vec_dot_q8_0;
    k->vec_dot[KR_TYPE_Q4_K] = vec_dot_q4_K;
    k->vec_dot[KR_TYPE_Q5_K] = vec_dot_q5_K;
    k->vec_dot[KR_TYPE_Q6_K] = vec_dot_q6_K;

    avx512_dotn[KR_TYPE_F32] = dotn_f32_512;
    avx512_dotn[KR_TYPE_F16] = dotn_f16_512;
    avx512_dotn[KR_TYPE_BF16] = dotn_bf16_512;
    avx512_dotn[KR_TYPE_Q4_0] = dotn_q4_0;
    avx512_dotn[KR_TYPE_Q8_0] = dotn_q8_0;
    avx512_dotn[KR_TYPE_Q4_K] = dotn_q4_K;
    avx512_dotn[KR_TYPE_Q5_K] = dotn_q5_K;
    avx512_dotn[KR_TYPE_Q6_K] = dotn_q6_K;

    k->from_float[KR_TYPE_F16] = ops_from_float_f16;
    k->from_float[KR_TYPE_BF16] = avx512_from_float_bf16;
    k->from_float[KR_TYPE_Q8_0] = from_float_q8_0;
    k->from_float[KR_TYPE_Q8_K] = from_float_q8_K;

    k->matmul = avx512_matmul;
    k->repack[KR_TYPE_Q4_K] = KR_TYPE_Q4_K_X16; /* avx512_gemv_x16_q4k.c */
    k->repack[KR_TYPE_Q6_K] = KR_TYPE_Q6_K_X16; /* avx512_gemv_x16_q6k.c */
    k->repack[KR_TYPE_Q4_0] = KR_TYPE_Q4_0_X16; /* avx512_gemv_x16_q40.c */
    k->repack[KR_TYPE_F32] = KR_TYPE_F32_X16;   /* avx512_gemv_x16_f32.c */
    k->rmsnorm = ops_rmsnorm;
    k->softmax = ops_softmax;
    k->silu_mul = ops_silu_mul;
    k->dot_f32 = ops_dot_f32;
    k->dot_f16_f32 = ops_dot_f16_f32;
    k->axpy_f32 = ops_axpy_f32;
    k->axpy_f16 = ops_axpy_f16;
    k->dequant_kv = ops_dequant_kv;
    k->f32_to_f16 = ops_f32_to_f16;
    k->gemm_nt = ops_gemm_nt;
    k->gemm_nn_acc = x86_gemm_nn_acc;
    k->gemm_nt_q8 = x86_gemm_nt_q8;
    k->gemm_nn_acc_q8 = x86_gemm_nn_acc_q8;
}
