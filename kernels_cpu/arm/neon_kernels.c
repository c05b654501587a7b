/*
 * neon_kernels.c - the AArch64 NEON kernel table: float and quantized dot
 * products, activation quantizers (Q8_0, Q8_K) and the row ops. NEON is part
 * of the AArch64 base ISA; where the CPU has SDOT (getauxval's ASIMDDP, seen
 * through kr_cpu_detect), the quantized dot products are replaced by the
 * ones of dotprod_kernels.c. matmul is the scalar driver over this table's
 * vec_dot, which is where the time goes on these cores.
 */
#define KR_NEON_DOTPROD 0
#define NEON_FN(name) neon_##name
#include "neon_dot_impl.h"

#include <math.h>
#include <string.h>

#include "cpu_features.h"
#include "neon_kernels.h"

/* ---- float formats ---- */

static float neon_dot_f32(const float *a, const float *b, int64_t n) {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 4; j++) acc[j] = vfmaq_f32(acc[j], vld1q_f32(a + i + 4 * j), vld1q_f32(b + i + 4 * j));
    }
    for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline float32x4_t load_f16x4(const kr_fp16 *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

static float neon_dot_f16_f32(const kr_fp16 *a, const float *b, int64_t n) {
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        acc0 = vfmaq_f32(acc0, load_f16x4(a + i), vld1q_f32(b + i));
        acc1 = vfmaq_f32(acc1, load_f16x4(a + i + 4), vld1q_f32(b + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(acc0, acc1));
    for (; i < n; i++) s += kr_half_to_float(a[i]) * b[i];
    return s;
}

static void neon_vec_dot_f32(int64_t n, float *out, const void *w, const void *x) { *out = neon_dot_f32(w, x, n); }

static void neon_vec_dot_f16(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_fp16 *w = vw, *x = vx;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        acc0 = vfmaq_f32(acc0, load_f16x4(w + i), load_f16x4(x + i));
        acc1 = vfmaq_f32(acc1, load_f16x4(w + i + 4), load_f16x4(x + i + 4));
    }
    float s = vaddvq_f32(vaddq_f32(acc0, acc1));
    for (; i < n; i++) s += kr_half_to_float(w[i]) * kr_half_to_float(x[i]);
    *out = s;
}

static void neon_axpy_f32(float *y, float a, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] += a * x[i];
}

static void neon_axpy_f16(float *y, float a, const kr_fp16 *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), load_f16x4(x + i), a));
    for (; i < n; i++) y[i] += a * kr_half_to_float(x[i]);
}

/* 16 int8 levels times d into out[0, 16): widened exactly, one rounding
 * each (vmulq_n_f32 does not fuse), as the scalar dequantiser. */
static inline void levels_x16(int8x16_t v, float d, float *out) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
    vst1q_f32(out, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
    vst1q_f32(out + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), d));
    vst1q_f32(out + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
    vst1q_f32(out + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), d));
}

/* Q8_0 / Q4_0 rows to f32 (kr_kernels.dequant_kv); Q4_0's low nibbles are
 * values 0-15 of a block, its high ones 16-31. */
static void neon_dequant_kv(kr_type t, const void *base, size_t stride, int64_t n_rows, int64_t b0, int64_t nb,
                            float *out) {
    const bool q8 = t == KR_TYPE_Q8_0;
    const size_t bb = q8 ? sizeof(kr_block_q8_0) : sizeof(kr_block_q4_0);
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *blk = (const uint8_t *)base + (size_t)r * stride + (size_t)b0 * bb;
        for (int64_t b = 0; b < nb; b++, blk += bb, out += 32) {
            kr_fp16 dh;
            memcpy(&dh, blk, sizeof dh);
            const float d = kr_half_to_float(dh);
            if (q8) {
                levels_x16(vld1q_s8((const int8_t *)(blk + 2)), d, out);
                levels_x16(vld1q_s8((const int8_t *)(blk + 18)), d, out + 16);
            } else {
                const uint8x16_t x = vld1q_u8(blk + 2);
                const int8x16_t eight = vdupq_n_s8(8);
                levels_x16(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0F))), eight), d, out);
                levels_x16(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(x, 4)), eight), d, out + 16);
            }
        }
    }
}

/* f32 -> f16 with the FPCR's default round-to-nearest-even, as the scalar
 * kr_fp32_to_fp16 rounds (subnormal halves are kept: FZ16 is off). */
static void neon_f32_to_f16(kr_fp16 *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = kr_fp32_to_fp16(x[i]);
}

static void neon_from_float_f16(const float *x, void *y, int64_t n) { neon_f32_to_f16(y, x, n); }

/* Value rows as f32, f16 or Q8_0 blocks (a q8_0 cache read in place). */
enum { NN_F32 = 0, NN_F16 = 1, NN_Q8 = 2 };

/* 4 values of row bj from column d (Q8_0: level times the block's scale,
 * one rounding, as neon_dequant_kv), and one value, as the tail reads it. */
static inline float32x4_t nn_load4(const char *bj, int64_t d, int fmt) {
    if (fmt == NN_Q8) {
        const kr_block_q8_0 *blk = (const kr_block_q8_0 *)bj + d / KR_QK8_0;
        int32_t four; /* 4 levels: a wider load could run past the block at its end */
        memcpy(&four, blk->qs + d % KR_QK8_0, sizeof four);
        const int32x4_t l32 = vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(four)))));
        return vmulq_n_f32(vcvtq_f32_s32(l32), kr_half_to_float(blk->d));
    }
    return fmt == NN_F16 ? load_f16x4((const kr_fp16 *)bj + d) : vld1q_f32((const float *)bj + d);
}

static inline float nn_value(const char *bj, int64_t d, int fmt) {
    if (fmt == NN_Q8) {
        const kr_block_q8_0 *blk = (const kr_block_q8_0 *)bj + d / KR_QK8_0;
        return (float)blk->qs[d % KR_QK8_0] * kr_half_to_float(blk->d);
    }
    return fmt == NN_F16 ? kr_half_to_float(((const kr_fp16 *)bj)[d]) : ((const float *)bj)[d];
}

/* C[i] += sum_j A[i][j] * B row j, 16 columns per pass in 4 accumulators,
 * j in order (the scalar reference's order per element). */
static inline void nn_acc_body(float *c, int64_t ldc, const float *a, int64_t lda, const char *b, size_t ldb, int fmt,
                               int64_t m, int64_t n, int64_t k) {
    const int64_t k16 = k / 16 * 16;
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        for (int64_t d0 = 0; d0 < k16; d0 += 16) {
            float32x4_t acc[4];
            for (int q = 0; q < 4; q++) acc[q] = vld1q_f32(ci + d0 + 4 * q);
            for (int64_t j = 0; j < n; j++) {
                const char *bj = b + (size_t)j * ldb;
                const float p = a[i * lda + j];
                for (int q = 0; q < 4; q++) acc[q] = vfmaq_n_f32(acc[q], nn_load4(bj, d0 + 4 * q, fmt), p);
            }
            for (int q = 0; q < 4; q++) vst1q_f32(ci + d0 + 4 * q, acc[q]);
        }
        for (int64_t d = k16; d < k; d++) {
            float s = ci[d];
            for (int64_t j = 0; j < n; j++) s += a[i * lda + j] * nn_value(b + (size_t)j * ldb, d, fmt);
            ci[d] = s;
        }
    }
}

static void neon_gemm_nn_acc(float *c, int64_t ldc, const float *a, int64_t lda, const void *vb, size_t ldb, bool b_f16,
                             int64_t m, int64_t n, int64_t k) {
    nn_acc_body(c, ldc, a, lda, vb, ldb, b_f16 ? NN_F16 : NN_F32, m, n, k);
}

/* Value rows of Q8_0 blocks read in place: neon_dequant_kv's values and
 * neon_gemm_nn_acc's products, so the bits are those of the two calls. */
static void neon_gemm_nn_acc_q8(float *c, int64_t ldc, const float *a, int64_t lda, const void *vb, size_t ldb,
                                int64_t m, int64_t n, int64_t k) {
    nn_acc_body(c, ldc, a, lda, vb, ldb, NN_Q8, m, n, k);
}

/* ---- row ops ---- */

static void neon_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    const float ss = neon_dot_f32(x, x, n);
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

/* The exponentials are libm's expf (as the scalar version) so results match
 * it closely; NEON does the max, the sum and the scaling. */
static void neon_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    float32x4_t vmax = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(x + i));
    float max = vmaxvq_f32(vmax);
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= inv;
}

static void neon_silu_mul(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* ---- activation quantizers ---- */

/* Q8_0: d = amax / 127, values rounded half away from zero (roundf), as the
 * scalar reference. */
static void neon_from_float_q8_0(const float *x, void *vy, int64_t n) {
    kr_block_q8_0 *y = vy;
    const int64_t nb = n / KR_QK8_0;
    for (int64_t i = 0; i < nb; i++, x += KR_QK8_0) {
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < 8; j++) {
            v[j] = vld1q_f32(x + 4 * j);
            m = vmaxq_f32(m, vabsq_f32(v[j]));
        }
        const float amax = vmaxvq_f32(m);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        for (int j = 0; j < 8; j += 2) {
            const int32x4_t a = vcvtaq_s32_f32(vmulq_n_f32(v[j], id));
            const int32x4_t b = vcvtaq_s32_f32(vmulq_n_f32(v[j + 1], id));
            const int16x8_t ab = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
            vst1_s8(y[i].qs + 4 * j, vqmovn_s16(ab));
        }
    }
}

/* Q8_K: the scale maps the signed value of largest magnitude (the first one)
 * to -127; values round to nearest even (kr_nearest_int), capped at 127;
 * bsums are the sums of 16 values. */
static void neon_from_float_q8_K(const float *x, void *vy, int64_t n) {
    kr_block_q8_K *y = vy;
    const int64_t nb = n / KR_QK_K;
    for (int64_t i = 0; i < nb; i++, x += KR_QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < KR_QK_K; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        const float amax = vmaxvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / kr_first_with_magnitude(x, KR_QK_K, amax);
        for (int j = 0; j < KR_QK_K; j += 16) {
            int16x8_t h[2];
            for (int k = 0; k < 2; k++) {
                const int32x4_t a =
                    vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 8 * k), iscale)), vdupq_n_s32(127));
                const int32x4_t b =
                    vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 8 * k + 4), iscale)), vdupq_n_s32(127));
                h[k] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
            }
            const int8x16_t q = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
            vst1q_s8(y[i].qs + j, q);
            y[i].bsums[j / 16] = (int16_t)vaddlvq_s8(q);
        }
        y[i].d = 1.0f / iscale;
    }
}

void kr_kernels_init_neon(kr_kernels *k) {
    kr_kernels_init_scalar(k);
    k->isa = KR_ISA_NEON;
    k->name = "neon";

    k->vec_dot[KR_TYPE_F32] = neon_vec_dot_f32;
    k->vec_dot[KR_TYPE_F16] = neon_vec_dot_f16;
    k->vec_dot[KR_TYPE_Q8_0] = neon_vec_dot_q8_0;
    k->vec_dot[KR_TYPE_Q4_0] = neon_vec_dot_q4_0;
    k->vec_dot[KR_TYPE_Q4_K] = neon_vec_dot_q4_K;
    k->vec_dot[KR_TYPE_Q6_K] = neon_vec_dot_q6_K;

    k->from_float[KR_TYPE_F16] = neon_from_float_f16;
    k->from_float[KR_TYPE_Q8_0] = neon_from_float_q8_0;
    k->from_float[KR_TYPE_Q8_K] = neon_from_float_q8_K;

    k->rmsnorm = neon_rmsnorm;
    k->softmax = neon_softmax;
    k->silu_mul = neon_silu_mul;
    k->dot_f32 = neon_dot_f32;
    k->dot_f16_f32 = neon_dot_f16_f32;
    k->axpy_f32 = neon_axpy_f32;
    k->axpy_f16 = neon_axpy_f16;
    k->dequant_kv = neon_dequant_kv;
    k->f32_to_f16 = neon_f32_to_f16;
    k->gemm_nn_acc = neon_gemm_nn_acc;
    k->gemm_nn_acc_q8 = neon_gemm_nn_acc_q8;
    kr_kernels_neon_x16(k);

    kr_cpu_features f;
    kr_cpu_detect(&f);
    if (f.asimddp) {
        kr_kernels_neon_dotprod(k);
    }
}
