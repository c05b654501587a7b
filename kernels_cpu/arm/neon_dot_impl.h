/*
 * neon_dot_impl.h - quantized dot products for AArch64, included by
 * neon_kernels.c (base ARMv8 NEON: widening multiplies VMULL + pairwise
 * adds) and by dotprod_kernels.c (ARMv8.2 SDOT), which compile this same
 * text with their own flags, like x86_dot_impl.h does for AVX2/AVX-512.
 *
 * The building block is an int32x4 accumulator that receives the products
 * of 16 int8 pairs (DOT16); every format reduces to it after unpacking its
 * weights to int8 (Q4_0: nibble - 8; Q4_K: nibble, the min through the
 * activation bsums; Q6_K: 6-bit value - 32).
 */
#ifndef KR_NEON_DOT_IMPL_H
#define KR_NEON_DOT_IMPL_H

#include <arm_neon.h>

#include "kernels_impl.h"

#if KR_NEON_DOTPROD
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
#else
/* |a*b| <= 128*128, so a pair of products fits int16 before the pairwise
 * widening add. */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t p1 = vmull_high_s8(a, b);
    return vpadalq_s16(vpadalq_s16(acc, p0), p1);
}
#endif

static inline float f16_to_f32(kr_fp16 h) { return kr_half_to_float(h); }

/* Q8_0 x Q8_0: two 16-byte halves per block into one int32x4, scaled by the
 * product of the two block scales. */
static void NEON_FN(vec_dot_q8_0)(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q8_0 *w = vw, *x = vx;
    const int64_t nb = n / KR_QK8_0;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        int32x4_t s0 = dot16(vdupq_n_s32(0), vld1q_s8(w[i].qs), vld1q_s8(x[i].qs));
        s0 = dot16(s0, vld1q_s8(w[i].qs + 16), vld1q_s8(x[i].qs + 16));
        int32x4_t s1 = dot16(vdupq_n_s32(0), vld1q_s8(w[i + 1].qs), vld1q_s8(x[i + 1].qs));
        s1 = dot16(s1, vld1q_s8(w[i + 1].qs + 16), vld1q_s8(x[i + 1].qs + 16));
        acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(s0), f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
        acc1 = vmlaq_n_f32(acc1, vcvtq_f32_s32(s1), f16_to_f32(w[i + 1].d) * f16_to_f32(x[i + 1].d));
    }
    for (; i < nb; i++) {
        int32x4_t s0 = dot16(vdupq_n_s32(0), vld1q_s8(w[i].qs), vld1q_s8(x[i].qs));
        s0 = dot16(s0, vld1q_s8(w[i].qs + 16), vld1q_s8(x[i].qs + 16));
        acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(s0), f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
    }
    *out = vaddvq_f32(vaddq_f32(acc0, acc1));
}

/* Q4_0 x Q8_0: low nibbles are elements 0-15, high nibbles 16-31, minus 8. */
static void NEON_FN(vec_dot_q4_0)(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q4_0 *w = vw;
    const kr_block_q8_0 *x = vx;
    const int64_t nb = n / KR_QK4_0;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        int32x4_t s = dot16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
        s = dot16(s, hi, vld1q_s8(x[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(s), f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
    }
    *out = vaddvq_f32(acc);
}

/* Q4_K x Q8_K: per 64 elements, 32 bytes of nibbles (low: sub-block 2j,
 * high: 2j+1), each sub-block's integer sum times its 6-bit scale; the mins
 * come from the activation bsums. */
static void NEON_FN(vec_dot_q4_K)(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q4_K *w = vw;
    const kr_block_q8_K *x = vx;
    const int64_t nb = n / KR_QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        kr_unpack_scales_k4(w[i].scales, sc, mn);
        const int16x8_t bs = vpaddq_s16(vld1q_s16(x[i].bsums), vld1q_s16(x[i].bsums + 8));
        int32x4_t mins = vmull_s16(vget_low_s16(bs), vreinterpret_s16_u16(vget_low_u16(vmovl_u8(vld1_u8(mn)))));
        mins = vmlal_s16(mins, vget_high_s16(bs), vreinterpret_s16_u16(vget_high_u16(vmovl_u8(vld1_u8(mn)))));
        int32_t isum = 0;
        const int8_t *q8 = x[i].qs;
        for (int j = 0; j < 4; j++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * j), q1 = vld1q_u8(w[i].qs + 32 * j + 16);
            int32x4_t lo = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q0, m4)), vld1q_s8(q8 + 64 * j));
            lo = dot16(lo, vreinterpretq_s8_u8(vandq_u8(q1, m4)), vld1q_s8(q8 + 64 * j + 16));
            int32x4_t hi = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(q8 + 64 * j + 32));
            hi = dot16(hi, vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), vld1q_s8(q8 + 64 * j + 48));
            isum += vaddvq_s32(lo) * sc[2 * j] + vaddvq_s32(hi) * sc[2 * j + 1];
        }
        const float d = f16_to_f32(w[i].d) * x[i].d, dmin = f16_to_f32(w[i].dmin) * x[i].d;
        sum += d * (float)isum - dmin * (float)vaddvq_s32(mins);
    }
    *out = sum;
}

/* Q6_K x Q8_K: values 0..63 stored as 4 low bits (ql) and 2 high bits (qh),
 * minus 32; one int8 scale per 16 elements (element e uses scales[e / 16]). */
static void NEON_FN(vec_dot_q6_K)(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q6_K *w = vw;
    const kr_block_q8_K *x = vx;
    const int64_t nb = n / KR_QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
    const int8x16_t m32 = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *sc = w[i].scales;
        const int8_t *q8 = x[i].qs;
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            for (int half = 0; half < 2; half++) { /* l in [16 half, 16 half + 16) */
                const uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
                const uint8x16_t hb = vld1q_u8(qh + 16 * half);
                const uint8x16_t v[4] = {
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                };
                for (int q = 0; q < 4; q++) {
                    const int e = 128 * h + 32 * q + 16 * half; /* first element of these 16 */
                    const int8x16_t s8 = vsubq_s8(vreinterpretq_s8_u8(v[q]), m32);
                    isum += sc[e / 16] * vaddvq_s32(dot16(vdupq_n_s32(0), s8, vld1q_s8(q8 + e)));
                }
            }
        }
        sum += f16_to_f32(w[i].d) * x[i].d * (float)isum;
    }
    *out = sum;
}

#endif /* KR_NEON_DOT_IMPL_H */
