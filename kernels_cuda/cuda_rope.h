/*
 * cuda_rope.h - RoPE angles and the rotation of one pair, callable from the
 * host and the device (KR_CU_HD), the same arithmetic as the CPU forward
 * pass (runtime/decode/forward.c rope_tables / rope_apply).
 *
 * The angle of pair j at position pos is theta_j = pos * theta_scale^j with
 * theta_scale = powf(freq_base, -2.0f / rope_dim), built the CPU's way:
 * theta starts at (float)pos and is multiplied by theta_scale once per
 * pair, in float (GGML's order), so theta is the same float on both sides.
 * The caller computes theta_scale once on the host with the C library's
 * powf and passes it down, so it too is the CPU's value.
 *
 * cos and sin: on the host these are the C library's cosf / sinf, the very
 * values of forward.c. On the device CUDA's cosf / sinf (without
 * -use_fast_math, which must not be used for these files) are within 2 ulp
 * of the correctly rounded result with full range reduction, so a rotated
 * value of magnitude ~1 differs from the CPU's by up to a few 1e-7; the
 * device test allows 2e-6 absolute. The rotation itself uses round-to-
 * nearest products and sums with no fused multiply-add, so given the same
 * cos / sin it gives the CPU's bits.
 */
#ifndef KR_CUDA_ROPE_H
#define KR_CUDA_ROPE_H

#include <math.h>
#include <stdint.h>

#include "cuda_common.h"

/* theta_scale of rope_tables: freq_base^(-2/rope_dim) (host side only is
 * bit-identical to the CPU, since powf is the C library's there). */
KR_CU_HD float kr_cu_rope_theta_scale(float freq_base, int32_t rope_dim) {
    return powf(freq_base, -2.0f / (float)rope_dim);
}

/* The angle of pair `pair` at position pos: (float)pos times theta_scale,
 * `pair` times, one float rounding per step as rope_tables does (a closed
 * form pos * powf(scale, pair) would round differently). */
KR_CU_HD float kr_cu_rope_theta(int32_t pos, int32_t pair, float theta_scale) {
    float theta = (float)pos;
    for (int32_t j = 0; j < pair; j++) theta = KR_CU_MUL(theta, theta_scale);
    return theta;
}

/* cos and sin of pair `pair`'s angle at pos (rope_dim only documents the
 * caller's range, pair < rope_dim / 2, and is not otherwise needed). */
KR_CU_HD void kr_cu_rope_cs(int32_t pos, int32_t pair, int32_t rope_dim, float theta_scale, float *c, float *s) {
    (void)rope_dim;
    const float theta = kr_cu_rope_theta(pos, pair, theta_scale);
    *c = cosf(theta);
    *s = sinf(theta);
}

/* Rotate the pair (*x0, *x1) by the angle with cosine co and sine si, as
 * rope_apply: x0' = x0 co - x1 si, x1' = x0 si + x1 co. */
KR_CU_HD void kr_cu_rope_rotate(float *x0, float *x1, float co, float si) {
    const float a = *x0, b = *x1;
    *x0 = KR_CU_SUB(KR_CU_MUL(a, co), KR_CU_MUL(b, si));
    *x1 = KR_CU_ADD(KR_CU_MUL(a, si), KR_CU_MUL(b, co));
}

/* The indices of pair j within a head: neox (j, j + rope_dim / 2), else
 * (2j, 2j + 1). */
KR_CU_HD void kr_cu_rope_pair_index(int32_t j, int32_t rope_dim, int neox, int32_t *a, int32_t *b) {
    *a = neox ? j : 2 * j;
    *b = neox ? j + rope_dim / 2 : 2 * j + 1;
}

#endif /* KR_CUDA_ROPE_H */
