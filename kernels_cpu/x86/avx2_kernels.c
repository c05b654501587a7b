/*
 * avx2_kernels.c - the AVX2+FMA+F16C kernel table: the scalar table with
 * the hot kernels replaced (quantized and float dot products with their
 * multi-row matmul, activation quantizers, row ops). Compiled with
 * -mavx2 -mfma -mf16c; dispatch.c only calls it on CPUs that have them.
 */
#define KR_X86_VNNI 0
#define KR_X86_WIDTH 8
#include "x86_dot_impl.h"
#include "x86_ops_impl.h"
#include "x86_attn_impl.h"
#include "x86_attn_q8_impl.h"

#include "avx2_gemv.h"

static kr_x86_dotn_fn avx2_dotn[KR_TYPE_COUNT];

/* The kernel of an interleaved layout (kernels.h), or false: no kernel
 * for this layout or width. */
static bool gemv_x16(kr_type wtype, const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols,
                     const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    switch (wtype) {
    case KR_TYPE_Q4_K_X16:
        return kr_avx2_gemv_x16_q4_K(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    case KR_TYPE_Q6_K_X16:
        return kr_avx2_gemv_x16_q6_K(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    case KR_TYPE_Q4_0_X16:
        return kr_avx2_gemv_x16_q4_0(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    case KR_TYPE_F32_X16: return kr_avx2_gemv_x16_f32(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    default: return false;
    }
}

/* Interleaved layouts: threads take whole 16-row groups and the layout's
 * kernel serves every batch size (scalar for a width it refuses); file
 * layouts: the block kernels, up to MAXNX activation rows per weight row. */
static void avx2_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                        int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                        int ith, int nth) {
    if (kr_layout_source(wtype) != wtype) {
        n_rows =
            kr_matmul_layout_tail(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        int64_t g0, g1;
        kr_split_rows(n_rows / KR_X16_ROWS, ith, nth, &g0, &g1);
        if (gemv_x16(wtype, w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy)) return;
    }
    x86_matmul(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth, avx2_dotn);
}

/* bf16 stores: round to nearest even on the bit pattern, NaN kept quiet. */
static void avx2_from_float_bf16(const float *x, void *vy, int64_t n) {
    kr_bf16 *y = vy;
    int64_t i = 0;
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    for (; i + 16 <= n; i += 16) {
        __m256i h[2];
        for (int j = 0; j < 2; j++) {
            const __m256 v = _mm256_loadu_ps(x + i + 8 * j);
            const __m256i u = _mm256_castps_si256(v);
            const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
            const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
            const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
            const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            h[j] = _mm256_blendv_epi8(r, q, nan);
        }
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h[0], h[1]), 0xD8);
        _mm256_storeu_si256((__m256i *)(y + i), packed);
    }
    for (; i < n; i++) y[i] = kr_fp32_to_bf16(x[i]);
}

void kr_kernels_init_avx2(kr_kernels *k) {
    kr_kernels_init_scalar(k);
    k->isa = KR_ISA_AVX2;
    k->name = "avx2";

    k->vec_dot[KR_TYPE_F32] = vec_dot_f32;
    k->vec_dot[KR_TYPE_F16] = vec_dot_f16;
    k->vec_dot[KR_TYPE_BF16] = vec_dot_bf16;
    k->vec_dot[KR_TYPE_Q4_0] = vec_dot_q4_0;
    k->vec_dot[KR_TYPE_Q8_0] = vec_dot_q8_0;
    k->vec_dot[KR_TYPE_Q4_K] = vec_dot_q4_K;
    k->vec_dot[KR_TYPE_Q5_K] = vec_dot_q5_K;
    k->vec_dot[KR_TYPE_Q6_K] = vec_dot_q6_K;

    avx2_dotn[KR_TYPE_F32] = dotn_f32;
    avx2_dotn[KR_TYPE_F16] = dotn_f16;
    avx2_dotn[KR_TYPE_BF16] = dotn_bf16;
    avx2_dotn[KR_TYPE_Q4_0] = dotn_q4_0;
    avx2_dotn[KR_TYPE_Q8_0] = dotn_q8_0;
    avx2_dotn[KR_TYPE_Q4_K] = dotn_q4_K;
    avx2_dotn[KR_TYPE_Q5_K] = dotn_q5_K;
    avx2_dotn[KR_TYPE_Q6_K] = dotn_q6_K;

    k->from_float[KR_TYPE_F16] = ops_from_float_f16;
    k->from_float[KR_TYPE_BF16] = avx2_from_float_bf16;
    k->from_float[KR_TYPE_Q8_0] = from_float_q8_0;
    k->from_float[KR_TYPE_Q8_K] = from_float_q8_K;

    k->matmul = avx2_matmul;
    k->repack[KR_TYPE_Q4_K] = KR_TYPE_Q4_K_X16; /* avx2_gemv_x16_q4k.c */
    k->repack[KR_TYPE_F32] = KR_TYPE_F32_X16;   /* avx2_gemv_x16_f32.c */
    k->repack[KR_TYPE_Q4_0] = KR_TYPE_Q4_0_X16; /* avx2_gemv_x16_q40.c */
    /* Not Q6_K: its AVX2 kernel (avx2_gemv_x16_q6k.c) is about 1.25x the
     * block kernel at 64 activation rows but slower for one row on a matrix
     * from L3 or memory (the 151936-row output matrix of Q4_K_M files, read
     * at every decode step): docs/history/PERFORMANCE-2026-12.md, "AVX2 prefill (issue 20)". */
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
