/*
 * cuda_kvquant.h - the KV cache's q8_0 and q4_0 blocks (runtime/kv/
 * kv_quant.h: GGML's layouts, 32 values per block), quantised and
 * dequantised by functions callable from the host and the device
 * (KR_CU_HD).
 *
 * The quantisers are the CPU reference quantizers (kernels_cpu/generic/
 * quant_ref.c: kr_scalar_from_float_q8_0 and kr_quantize_row_q4_0_ref,
 * which kr_kv_row_store uses) step for step: the same signed absmax scan,
 * scale, reciprocal, rounding and saturating truncation, each product and
 * sum rounded on its own (KR_CU_MUL/ADD: no fused multiply-add on the
 * device), so a row stored on the GPU has the CPU's bytes.
 *
 * Layouts (little-endian, byte addressed so any alignment works):
 *   q8_0: f16 scale d (2 bytes), 32 int8 levels q; value q * d; 34 bytes.
 *   q4_0: f16 scale d, 16 bytes of nibbles; element j < 16 is the low
 *         nibble of byte j, element j + 16 its high nibble; value
 *         (nibble - 8) * d; 18 bytes.
 */
#ifndef KR_CUDA_KVQUANT_H
#define KR_CUDA_KVQUANT_H

#include <math.h>
#include <stdint.h>

#include "cuda_common.h"

#define KR_CU_QK 32
#define KR_CU_Q8_0_BYTES 34
#define KR_CU_Q4_0_BYTES 18

/* quant_ref.c's sat_trunc: (int)v in [lo, hi], saturated outside, 0 for NaN
 * (the plain cast would be undefined there). */
KR_CU_HD int kr_cu_sat_trunc(float v, int lo, int hi) {
    if (!(v == v)) return 0;
    if (v >= (float)hi) return hi;
    if (v <= (float)lo) return lo;
    return (int)v;
}

/* quant_ref.c's signed_absmax over one block: the first value of largest
 * magnitude, with its sign, and that magnitude in *amax. */
KR_CU_HD float kr_cu_signed_absmax(const float *x, float *amax) {
    float a = 0.0f, max = 0.0f;
    for (int j = 0; j < KR_CU_QK; j++) {
        if (a < fabsf(x[j])) {
            a = fabsf(x[j]);
            max = x[j];
        }
    }
    *amax = a;
    return max;
}

KR_CU_HD void kr_cu_put_f16(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)(h & 0xffu);
    p[1] = (uint8_t)(h >> 8);
}

KR_CU_HD float kr_cu_get_f16(const uint8_t *p) { return kr_cu_f16_f32((uint16_t)(p[0] | (p[1] << 8))); }

/* 32 floats to one q8_0 block (34 bytes), as kr_scalar_from_float_q8_0. */
KR_CU_HD void kr_cu_quantize_q8_0(const float *x, uint8_t *blk) {
    float amax;
    (void)kr_cu_signed_absmax(x, &amax);
    const float d = KR_CU_DIV(amax, 127.0f);
    const float id = d != 0.0f ? KR_CU_DIV(1.0f, d) : 0.0f;
    kr_cu_put_f16(blk, kr_cu_f32_f16(d));
    for (int j = 0; j < KR_CU_QK; j++)
        blk[2 + j] = (uint8_t)(int8_t)kr_cu_sat_trunc(roundf(KR_CU_MUL(x[j], id)), -128, 127);
}

/* 32 floats to one q4_0 block (18 bytes), as kr_quantize_row_q4_0_ref: the
 * signed largest value maps to level -8. */
KR_CU_HD void kr_cu_quantize_q4_0(const float *x, uint8_t *blk) {
    float amax;
    const float max = kr_cu_signed_absmax(x, &amax);
    const float d = KR_CU_DIV(max, -8.0f);
    const float id = d != 0.0f ? KR_CU_DIV(1.0f, d) : 0.0f;
    kr_cu_put_f16(blk, kr_cu_f32_f16(d));
    for (int j = 0; j < KR_CU_QK / 2; j++) {
        int q0 = kr_cu_sat_trunc(KR_CU_ADD(KR_CU_MUL(x[j], id), 8.5f), -128, 127);
        int q1 = kr_cu_sat_trunc(KR_CU_ADD(KR_CU_MUL(x[j + KR_CU_QK / 2], id), 8.5f), -128, 127);
        q0 = q0 > 15 ? 15 : q0;
        q1 = q1 > 15 ? 15 : q1;
        blk[2 + j] = (uint8_t)((unsigned)q0 | ((unsigned)q1 << 4));
    }
}

/* The level of element j (0..31) of a block: q8_0's int8, q4_0's nibble - 8. */
KR_CU_HD int kr_cu_q8_0_level(const uint8_t *blk, int j) { return (int)(int8_t)blk[2 + j]; }

KR_CU_HD int kr_cu_q4_0_level(const uint8_t *blk, int j) {
    const uint8_t b = blk[2 + (j & 15)];
    return (int)(j < 16 ? (b & 0xF) : (b >> 4)) - 8;
}

/* Element j of a block as f32: level * d, the CPU's dequantisation (one
 * product of two exact floats, so the same bits everywhere). */
KR_CU_HD float kr_cu_dequant_q8_0(const uint8_t *blk, int j) {
    return KR_CU_MUL((float)kr_cu_q8_0_level(blk, j), kr_cu_get_f16(blk));
}

KR_CU_HD float kr_cu_dequant_q4_0(const uint8_t *blk, int j) {
    return KR_CU_MUL((float)kr_cu_q4_0_level(blk, j), kr_cu_get_f16(blk));
}

/* A whole block into out[32]. */
KR_CU_HD void kr_cu_dequant_q8_0_block(const uint8_t *blk, float *out) {
    const float d = kr_cu_get_f16(blk);
    for (int j = 0; j < KR_CU_QK; j++) out[j] = KR_CU_MUL((float)kr_cu_q8_0_level(blk, j), d);
}

KR_CU_HD void kr_cu_dequant_q4_0_block(const uint8_t *blk, float *out) {
    const float d = kr_cu_get_f16(blk);
    for (int j = 0; j < KR_CU_QK; j++) out[j] = KR_CU_MUL((float)kr_cu_q4_0_level(blk, j), d);
}

#endif /* KR_CUDA_KVQUANT_H */
