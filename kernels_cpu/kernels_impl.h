/*
 * kernels_impl.h - internals shared by the kernel sources (not for callers
 * outside kernels_cpu/): inline fp16/bf16 conversions, K-quant scale
 * unpacking, the row split of matmul, and the scalar kernels that SIMD tables
 * start from and fall back to.
 */
#ifndef KR_KERNELS_IMPL_H
#define KR_KERNELS_IMPL_H

#include "kernels.h"

#include <string.h>

/* ---- bit casts and half-precision conversions ---- */
static inline uint32_t kr_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float kr_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals included). */
static inline float kr_half_to_float(kr_fp16 h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) {
        return kr_bits_f32(sign | 0x7f800000 | (mant << 13));
    }
    if (exp != 0) {
        return kr_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
    }
    if (mant == 0) {
        return kr_bits_f32(sign);
    }
    /* subnormal: value = mant * 2^-24, computed exactly in float */
    const float v = (float)mant * (1.0f / 16777216.0f);
    return kr_bits_f32(sign | kr_f32_bits(v));
}

static inline float kr_bf16_bits_to_float(kr_bf16 h) { return kr_bits_f32((uint32_t)h << 16); }

/* GGML's nearest_int: round half to even for |x| < 2^22 (the default FP
 * rounding mode), without a libm call. */
static inline int kr_nearest_int(float fval) {
    float val = fval + 12582912.0f;
    int i;
    memcpy(&i, &val, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

/* ---- K-quant 6-bit scale/min unpacking (Q4_K, Q5_K) ---- */
static inline void kr_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Unpack all 8 scales and 8 mins of a Q4_K/Q5_K block. */
static inline void kr_unpack_scales_k4(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 8; j++) {
        kr_get_scale_min_k4(j, q, &sc[j], &mn[j]);
    }
}

/* The same, packed as 8 bytes each (scale j / min j in byte j), with
 * 32-bit operations: what the SIMD kernels widen into their scale vectors. */
static inline void kr_unpack_k4_scales_packed(const uint8_t *s, uint64_t *sc, uint64_t *mn) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    const uint32_t sc_lo = u0 & 0x3f3f3f3f;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 2) & 0x30303030);
    const uint32_t mn_lo = u1 & 0x3f3f3f3f;
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 2) & 0x30303030);
    *sc = sc_lo | ((uint64_t)sc_hi << 32);
    *mn = mn_lo | ((uint64_t)mn_hi << 32);
}

/* The first of x[0..n) whose magnitude is amax (the block's largest): the
 * SIMD quantizers find amax with vector max and take its sign from here, as
 * the scalar reference picks it. */
static inline float kr_first_with_magnitude(const float *x, int n, float amax) {
    for (int j = 0; j < n; j++) {
        if (x[j] == amax || x[j] == -amax) return x[j];
    }
    return amax;
}

/* ---- interleaved layouts (kernels.h): byte offsets in one group's block,
 * for the packer (generic/repack.c) and the kernels that read them ---- */
enum {
    KR_X16_Q4K_D = 0,
    KR_X16_Q4K_DMIN = 32,
    KR_X16_Q4K_U0 = 64,
    KR_X16_Q4K_QS = 256,
    KR_X16_Q4K_BLOCK = KR_X16_ROWS * 144,
    /* Q6_K: from KR_X16_Q6K_Q, 16 chunk triples of 192 bytes (kernels.h) */
    KR_X16_Q6K_D = 0,
    KR_X16_Q6K_SC = 32,
    KR_X16_Q6K_Q = 288,
    KR_X16_Q6K_BLOCK = KR_X16_ROWS * 210,
    KR_X16_Q40_D = 0,
    KR_X16_Q40_QS = 32,
    KR_X16_Q40_BLOCK = KR_X16_ROWS * 18,
};

/* ---- work split ---- */
/* Rows [*r0, *r1) of thread ith among nth, in even contiguous slices. */
static inline void kr_split_rows(int64_t n_rows, int ith, int nth, int64_t *r0, int64_t *r1) {
    if (nth < 1) {
        nth = 1;
    }
    const int64_t per = (n_rows + nth - 1) / nth;
    int64_t a = per * ith;
    int64_t b = a + per;
    if (a > n_rows) {
        a = n_rows;
    }
    if (b > n_rows) {
        b = n_rows;
    }
    *r0 = a;
    *r1 = b;
}

/* ---- scalar kernels (generic/) ---- */
void kr_scalar_vec_dot_f32(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_f16(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_bf16(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q4_0(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q4_1(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q5_0(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q5_1(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q8_0(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q4_K(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q5_K(int64_t n, float *out, const void *w, const void *x);
void kr_scalar_vec_dot_q6_K(int64_t n, float *out, const void *w, const void *x);

void kr_scalar_from_float_f32(const float *x, void *y, int64_t n);
void kr_scalar_from_float_f16(const float *x, void *y, int64_t n);
void kr_scalar_from_float_bf16(const float *x, void *y, int64_t n);
void kr_scalar_from_float_q8_0(const float *x, void *y, int64_t n);
void kr_scalar_from_float_q8_1(const float *x, void *y, int64_t n);
void kr_scalar_from_float_q8_K(const float *x, void *y, int64_t n);

/* Reference quantizers by block family (generic/quant_*.c). */
void kr_quantize_row_q4_0_ref(const float *x, kr_block_q4_0 *y, int64_t n);
void kr_quantize_row_q4_1_ref(const float *x, kr_block_q4_1 *y, int64_t n);
void kr_quantize_row_q5_0_ref(const float *x, kr_block_q5_0 *y, int64_t n);
void kr_quantize_row_q5_1_ref(const float *x, kr_block_q5_1 *y, int64_t n);
void kr_quantize_row_q4_K_ref(const float *x, kr_block_q4_K *y, int64_t n);
void kr_quantize_row_q5_K_ref(const float *x, kr_block_q5_K *y, int64_t n);
void kr_quantize_row_q6_K_ref(const float *x, kr_block_q6_K *y, int64_t n);

void kr_scalar_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                      int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                      int ith, int nth);
/* A layout's rows past its last whole group (kernels.h) multiplied through
 * the source type's path of table k; returns the rows left in whole groups
 * (n_rows for a file type). Called first by every table's matmul. */
int64_t kr_matmul_layout_tail(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                              int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                              int ith, int nth);
void kr_scalar_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void kr_scalar_softmax(float *x, int64_t n);
void kr_scalar_silu_mul(float *out, const float *gate, const float *up, int64_t n);
float kr_scalar_dot_f32(const float *a, const float *b, int64_t n);
float kr_scalar_dot_f16_f32(const kr_fp16 *a, const float *b, int64_t n);
void kr_scalar_axpy_f32(float *y, float a, const float *x, int64_t n);
void kr_scalar_axpy_f16(float *y, float a, const kr_fp16 *x, int64_t n);
void kr_scalar_dequant_kv(kr_type t, const void *base, size_t stride, int64_t n_rows, int64_t b0, int64_t nb,
                          float *out);
void kr_scalar_f32_to_f16(kr_fp16 *y, const float *x, int64_t n);
void kr_scalar_gemm_nn_acc(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                           int64_t m, int64_t n, int64_t k);
void kr_scalar_gemm_nt(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                       int64_t m, int64_t n, int64_t k);
void kr_scalar_gemm_nt_q8(float *c, int64_t ldc, const void *a, size_t lda, const void *b, size_t ldb, int64_t m,
                          int64_t n, int64_t nb);
void kr_scalar_gemm_nn_acc_q8(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, int64_t m,
                              int64_t n, int64_t k);

#endif /* KR_KERNELS_IMPL_H */
