/*
 * cuda_dequant.h - per-block dequantisation of weight rows in the GGUF file
 * layout, callable from CUDA kernels and from plain C (the host unit test
 * tests/unit/test_cuda_math_dequant.c compares it bit for bit with the CPU's
 * kr_dequantize_row).
 *
 * Everything reads bytes at fixed offsets (no struct layouts, no alignment
 * assumptions), so kernels_cpu/kernels.h need not be visible to nvcc. The
 * type ids and block sizes below are GGML's and equal the kr_type values and
 * kr_type_row_size of kernels_cpu/kernels.h (the unit test checks both).
 *
 * The float operations mirror kernels_cpu/generic/dequant.c one for one. On
 * the device a product followed by a sum is written with __fmul_rn /
 * __fadd_rn, which nvcc never contracts into an FMA: the CPU library is
 * built as ISO C (no contraction) and an FMA would round differently.
 */
#ifndef KR_CUDA_DEQUANT_H
#define KR_CUDA_DEQUANT_H

#include "cuda_common.h"

#include <stdbool.h>
#include <stdint.h>

/* kr_type ids (kernels_cpu/kernels.h; test_cuda_math_dequant.c checks them) */
#define KR_CU_TYPE_F32 0
#define KR_CU_TYPE_F16 1
#define KR_CU_TYPE_Q4_0 2
#define KR_CU_TYPE_Q4_1 3
#define KR_CU_TYPE_Q5_0 6
#define KR_CU_TYPE_Q5_1 7
#define KR_CU_TYPE_Q8_0 8
#define KR_CU_TYPE_Q2_K 10
#define KR_CU_TYPE_Q3_K 11
#define KR_CU_TYPE_Q4_K 12
#define KR_CU_TYPE_Q5_K 13
#define KR_CU_TYPE_Q6_K 14
#define KR_CU_TYPE_BF16 30

/* Bytes per block (sizeof the kr_block_* structs; 256 values for the K
 * types, 32 for the others). */
#define KR_CU_Q4_0_BYTES 18
#define KR_CU_Q4_1_BYTES 20
#define KR_CU_Q5_0_BYTES 22
#define KR_CU_Q5_1_BYTES 24
#define KR_CU_Q8_0_BYTES 34
#define KR_CU_Q2_K_BYTES 84
#define KR_CU_Q3_K_BYTES 110
#define KR_CU_Q4_K_BYTES 144
#define KR_CU_Q5_K_BYTES 176
#define KR_CU_Q6_K_BYTES 210

/* a * b, a + b, a - b rounded one at a time (cuda_common.h's KR_CU_MUL...) */
KR_CU_HD float kr_cu_mul(float a, float b) { return KR_CU_MUL(a, b); }
KR_CU_HD float kr_cu_add(float a, float b) { return KR_CU_ADD(a, b); }
KR_CU_HD float kr_cu_sub(float a, float b) { return KR_CU_SUB(a, b); }

/* little-endian f16 / bf16 / f32 at p */
KR_CU_HD uint16_t kr_cu_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
KR_CU_HD float kr_cu_h(const uint8_t *p) { return kr_cu_f16_f32(kr_cu_u16(p)); }

KR_CU_HD uint32_t kr_cu_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

KR_CU_HD bool kr_cu_type_known(int type) {
    switch (type) {
    case KR_CU_TYPE_F32:
    case KR_CU_TYPE_F16:
    case KR_CU_TYPE_BF16:
    case KR_CU_TYPE_Q4_0:
    case KR_CU_TYPE_Q4_1:
    case KR_CU_TYPE_Q5_0:
    case KR_CU_TYPE_Q5_1:
    case KR_CU_TYPE_Q8_0:
    case KR_CU_TYPE_Q2_K:
    case KR_CU_TYPE_Q3_K:
    case KR_CU_TYPE_Q4_K:
    case KR_CU_TYPE_Q5_K:
    case KR_CU_TYPE_Q6_K: return true;
    default: return false;
    }
}

/* Values per block: a row's n_cols must be a multiple of it. 0 for a type
 * not known here. */
KR_CU_HD int kr_cu_block_values(int type) {
    switch (type) {
    case KR_CU_TYPE_F32:
    case KR_CU_TYPE_F16:
    case KR_CU_TYPE_BF16: return 1;
    case KR_CU_TYPE_Q2_K:
    case KR_CU_TYPE_Q3_K:
    case KR_CU_TYPE_Q4_K:
    case KR_CU_TYPE_Q5_K:
    case KR_CU_TYPE_Q6_K: return 256;
    default: return kr_cu_type_known(type) ? 32 : 0;
    }
}

/* Bytes per block (per value for F32/F16/BF16); 0 for an unknown type. */
KR_CU_HD int kr_cu_block_bytes(int type) {
    switch (type) {
    case KR_CU_TYPE_F32: return 4;
    case KR_CU_TYPE_F16:
    case KR_CU_TYPE_BF16: return 2;
    case KR_CU_TYPE_Q4_0: return KR_CU_Q4_0_BYTES;
    case KR_CU_TYPE_Q4_1: return KR_CU_Q4_1_BYTES;
    case KR_CU_TYPE_Q5_0: return KR_CU_Q5_0_BYTES;
    case KR_CU_TYPE_Q5_1: return KR_CU_Q5_1_BYTES;
    case KR_CU_TYPE_Q8_0: return KR_CU_Q8_0_BYTES;
    case KR_CU_TYPE_Q2_K: return KR_CU_Q2_K_BYTES;
    case KR_CU_TYPE_Q3_K: return KR_CU_Q3_K_BYTES;
    case KR_CU_TYPE_Q4_K: return KR_CU_Q4_K_BYTES;
    case KR_CU_TYPE_Q5_K: return KR_CU_Q5_K_BYTES;
    case KR_CU_TYPE_Q6_K: return KR_CU_Q6_K_BYTES;
    default: return 0;
    }
}

/* Bytes of a row of n_cols values (a multiple of the block's values), or -1
 * for an unknown type or a column count that is not whole blocks. */
KR_CU_HD int64_t kr_cu_row_bytes(int type, int64_t n_cols) {
    const int bv = kr_cu_block_values(type);
    if (bv == 0 || n_cols < 0 || n_cols % bv != 0) return -1;
    return n_cols / bv * kr_cu_block_bytes(type);
}

/* Scale j and min j (6 bits each) of a Q4_K / Q5_K block's 12 scale bytes,
 * as kernels_cpu's kr_get_scale_min_k4. */
KR_CU_HD void kr_cu_scale_min_k4(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Scale k (of 16, 6 bits, stored biased by 32) of a Q3_K block's 12 scale
 * bytes: low 4 bits from bytes 0..7 (low nibble for k < 8, else the high
 * nibble of byte k - 8), high 2 bits from byte 8 + k % 4 at bit 2 * (k / 4). */
KR_CU_HD int kr_cu_scale_q3_k(int k, const uint8_t *s) {
    const int lo = k < 8 ? (s[k] & 0xF) : (s[k - 8] >> 4);
    const int hi = (s[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The 32 values at columns [32 * b32, 32 * b32 + 32) of a row of type
 * `type` starting at `row`. Each case is the matching loop of
 * kernels_cpu/generic/dequant.c (Q2_K / Q3_K: GGML's dequantize_row_q2_K /
 * q3_K, which the CPU lacks) restricted to one 32-value stretch, with the
 * same float operations in the same order. */
KR_CU_HD void kr_cu_dequant32(int type, const uint8_t *row, int64_t b32, float out[32]) {
    switch (type) {
    case KR_CU_TYPE_F32: {
        const uint8_t *p = row + b32 * 128;
        for (int j = 0; j < 32; j++) out[j] = kr_cu_bits_f32(kr_cu_u32(p + 4 * j));
        break;
    }
    case KR_CU_TYPE_F16: {
        const uint8_t *p = row + b32 * 64;
        for (int j = 0; j < 32; j++) out[j] = kr_cu_h(p + 2 * j);
        break;
    }
    case KR_CU_TYPE_BF16: {
        const uint8_t *p = row + b32 * 64;
        for (int j = 0; j < 32; j++) out[j] = kr_cu_bf16_f32(kr_cu_u16(p + 2 * j));
        break;
    }
    case KR_CU_TYPE_Q4_0: { /* d, qs[16] */
        const uint8_t *b = row + b32 * KR_CU_Q4_0_BYTES;
        const float d = kr_cu_h(b);
        for (int j = 0; j < 16; j++) {
            out[j] = (float)((b[2 + j] & 0xF) - 8) * d;
            out[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
        break;
    }
    case KR_CU_TYPE_Q4_1: { /* d, m, qs[16] */
        const uint8_t *b = row + b32 * KR_CU_Q4_1_BYTES;
        const float d = kr_cu_h(b), m = kr_cu_h(b + 2);
        for (int j = 0; j < 16; j++) {
            out[j] = kr_cu_add(kr_cu_mul((float)(b[4 + j] & 0xF), d), m);
            out[j + 16] = kr_cu_add(kr_cu_mul((float)(b[4 + j] >> 4), d), m);
        }
        break;
    }
    case KR_CU_TYPE_Q5_0: { /* d, qh[4], qs[16] */
        const uint8_t *b = row + b32 * KR_CU_Q5_0_BYTES;
        const float d = kr_cu_h(b);
        const uint32_t qh = kr_cu_u32(b + 2);
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = (float)(((b[6 + j] & 0xF) | h0) - 16) * d;
            out[j + 16] = (float)(((b[6 + j] >> 4) | h1) - 16) * d;
        }
        break;
    }
    case KR_CU_TYPE_Q5_1: { /* d, m, qh[4], qs[16] */
        const uint8_t *b = row + b32 * KR_CU_Q5_1_BYTES;
        const float d = kr_cu_h(b), m = kr_cu_h(b + 2);
        const uint32_t qh = kr_cu_u32(b + 4);
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = kr_cu_add(kr_cu_mul((float)((b[8 + j] & 0xF) | h0), d), m);
            out[j + 16] = kr_cu_add(kr_cu_mul((float)((b[8 + j] >> 4) | h1), d), m);
        }
        break;
    }
    case KR_CU_TYPE_Q8_0: { /* d, qs[32] (int8) */
        const uint8_t *b = row + b32 * KR_CU_Q8_0_BYTES;
        const float d = kr_cu_h(b);
        for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)b[2 + j] * d;
        break;
    }
    case KR_CU_TYPE_Q2_K: { /* scales[16], qs[64], d, dmin */
        const uint8_t *b = row + (b32 >> 3) * KR_CU_Q2_K_BYTES;
        const int c = (int)(b32 & 7), shift = 2 * (c & 3);
        const uint8_t *q = b + 16 + 32 * (c >> 2), *sc = b + 2 * c;
        const float d = kr_cu_h(b + 80), dmin = kr_cu_h(b + 82);
        for (int h = 0; h < 2; h++) {
            const float dl = d * (float)(sc[h] & 0xF), ml = dmin * (float)(sc[h] >> 4);
            for (int l = 0; l < 16; l++) {
                out[16 * h + l] = kr_cu_sub(kr_cu_mul(dl, (float)((q[16 * h + l] >> shift) & 3)), ml);
            }
        }
        break;
    }
    case KR_CU_TYPE_Q3_K: { /* hmask[32], qs[64], scales[12], d */
        const uint8_t *b = row + (b32 >> 3) * KR_CU_Q3_K_BYTES;
        const int c = (int)(b32 & 7), shift = 2 * (c & 3);
        const uint8_t *hm = b, *q = b + 32 + 32 * (c >> 2);
        const float d = kr_cu_h(b + 108);
        for (int h = 0; h < 2; h++) {
            const float dl = d * (float)kr_cu_scale_q3_k(2 * c + h, b + 96);
            for (int l = 16 * h; l < 16 * h + 16; l++) {
                const int v = ((q[l] >> shift) & 3) - ((hm[l] >> c) & 1 ? 0 : 4);
                out[l] = dl * (float)v;
            }
        }
        break;
    }
    case KR_CU_TYPE_Q4_K: { /* d, dmin, scales[12], qs[128] */
        const uint8_t *b = row + (b32 >> 3) * KR_CU_Q4_K_BYTES;
        const int c = (int)(b32 & 7);
        const uint8_t *q = b + 16 + 32 * (c >> 1);
        int sc, mn;
        kr_cu_scale_min_k4(c, b + 4, &sc, &mn);
        const float d = kr_cu_h(b), dmin = kr_cu_h(b + 2);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        const int sh = 4 * (c & 1);
        for (int l = 0; l < 32; l++) out[l] = kr_cu_sub(kr_cu_mul(d1, (float)((q[l] >> sh) & 0xF)), m1);
        break;
    }
    case KR_CU_TYPE_Q5_K: { /* d, dmin, scales[12], qh[32], qs[128] */
        const uint8_t *b = row + (b32 >> 3) * KR_CU_Q5_K_BYTES;
        const int c = (int)(b32 & 7);
        const uint8_t *qh = b + 16, *ql = b + 48 + 32 * (c >> 1);
        int sc, mn;
        kr_cu_scale_min_k4(c, b + 4, &sc, &mn);
        const float d = kr_cu_h(b), dmin = kr_cu_h(b + 2);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        const int sh = 4 * (c & 1);
        for (int l = 0; l < 32; l++) {
            const int v = ((ql[l] >> sh) & 0xF) | (((qh[l] >> c) & 1) << 4);
            out[l] = kr_cu_sub(kr_cu_mul(d1, (float)v), m1);
        }
        break;
    }
    case KR_CU_TYPE_Q6_K: { /* ql[128], qh[64], scales[16] (int8), d */
        const uint8_t *b = row + (b32 >> 3) * KR_CU_Q6_K_BYTES;
        const int c = (int)(b32 & 7), half = c >> 2, k = c & 3;
        /* k = 0..3: the y[l], y[l + 32], y[l + 64], y[l + 96] of the CPU loop */
        const uint8_t *ql = b + 64 * half + 32 * (k & 1), *qh = b + 128 + 32 * half;
        const uint8_t *sc = b + 192 + 8 * half + 2 * k;
        const int lsh = 4 * (k >> 1), hsh = 2 * k;
        const float d = kr_cu_h(b + 208);
        for (int l = 0; l < 32; l++) {
            const int v = (((ql[l] >> lsh) & 0xF) | (((qh[l] >> hsh) & 3) << 4)) - 32;
            out[l] = d * (float)(int8_t)sc[l / 16] * (float)v;
        }
        break;
    }
    default:
        for (int j = 0; j < 32; j++) out[j] = 0.0f;
        break;
    }
}

/* Whether the kernels take rows of n_cols values of the type: any width
 * for F32 / F16 / BF16 (the last 32-value stretch may be partial), whole
 * blocks for the quantised types (32 values, 256 for the K types). */
KR_CU_HD bool kr_cu_cols_ok(int type, int64_t n_cols) {
    const int bv = kr_cu_block_values(type);
    return bv > 0 && n_cols > 0 && n_cols % bv == 0;
}

/* 32-value stretches of a row of n_cols values (the last may be partial). */
KR_CU_HD int64_t kr_cu_stretches(int64_t n_cols) { return (n_cols + 31) / 32; }

/* Stretch b32 of a row of n_cols values: kr_cu_dequant32 when it is whole;
 * the last, partial one of an F32 / F16 / BF16 row reads only the row's
 * n_cols % 32 remaining values and gives 0 past them, so a dot product
 * over 32 lanes (with the activations' tail zero as well) adds only the
 * row's values. Quantised rows are whole blocks (kr_cu_cols_ok). */
KR_CU_HD void kr_cu_dequant_part(int type, const uint8_t *row, int64_t b32, int64_t n_cols, float out[32]) {
    const int64_t left = n_cols - b32 * 32;
    if (left >= 32) {
        kr_cu_dequant32(type, row, b32, out);
        return;
    }
    for (int j = 0; j < 32; j++) {
        float v = 0.0f;
        if (j < left) {
            if (type == KR_CU_TYPE_F32)
                v = kr_cu_bits_f32(kr_cu_u32(row + (b32 * 32 + j) * 4));
            else if (type == KR_CU_TYPE_F16)
                v = kr_cu_h(row + (b32 * 32 + j) * 2);
            else if (type == KR_CU_TYPE_BF16)
                v = kr_cu_bf16_f32(kr_cu_u16(row + (b32 * 32 + j) * 2));
        }
        out[j] = v;
    }
}

#endif /* KR_CUDA_DEQUANT_H */
