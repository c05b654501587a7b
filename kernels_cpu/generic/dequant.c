/*
 * dequant.c - block formats back to f32 (kr_dequantize_row). Used by tests,
 * by `kara quantize` for re-encoding, and for embedding-row lookups.
 */
#include "kernels_impl.h"

/* Q4_0 and Q8_0 (also the KV cache's row types, runtime/kv/kv_quant.c) go
 * through a local copy of a block's levels: without it the compiler must
 * assume the int8 source may alias the float output and does not vectorise
 * the products. */
static void dequant_q4_0(const kr_block_q4_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK4_0) {
        const float d = kr_half_to_float(x[i].d);
        int8_t q[KR_QK4_0];
        for (int j = 0; j < KR_QK4_0 / 2; j++) {
            q[j] = (int8_t)((x[i].qs[j] & 0xF) - 8);
            q[j + KR_QK4_0 / 2] = (int8_t)((x[i].qs[j] >> 4) - 8);
        }
        for (int j = 0; j < KR_QK4_0; j++) y[j] = q[j] * d;
    }
}

static void dequant_q4_1(const kr_block_q4_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK4_1) {
        const float d = kr_half_to_float(x[i].d);
        const float m = kr_half_to_float(x[i].m);
        for (int j = 0; j < KR_QK4_1 / 2; j++) {
            y[j] = (x[i].qs[j] & 0xF) * d + m;
            y[j + KR_QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

static void dequant_q5_0(const kr_block_q5_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK5_0) {
        const float d = kr_half_to_float(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof(qh));
        for (int j = 0; j < KR_QK5_0 / 2; j++) {
            const int h0 = ((qh >> j) & 1) << 4;
            const int h1 = ((qh >> (j + 16)) & 1) << 4;
            y[j] = (((x[i].qs[j] & 0xF) | h0) - 16) * d;
            y[j + KR_QK5_0 / 2] = (((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

static void dequant_q5_1(const kr_block_q5_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK5_1) {
        const float d = kr_half_to_float(x[i].d);
        const float m = kr_half_to_float(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof(qh));
        for (int j = 0; j < KR_QK5_1 / 2; j++) {
            const int h0 = ((qh >> j) & 1) << 4;
            const int h1 = ((qh >> (j + 16)) & 1) << 4;
            y[j] = ((x[i].qs[j] & 0xF) | h0) * d + m;
            y[j + KR_QK5_1 / 2] = ((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

static void dequant_q8_0(const kr_block_q8_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK8_0) {
        const float d = kr_half_to_float(x[i].d);
        int8_t q[KR_QK8_0];
        memcpy(q, x[i].qs, sizeof q);
        for (int j = 0; j < KR_QK8_0; j++) y[j] = q[j] * d;
    }
}

static void dequant_q8_1(const kr_block_q8_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK8_1) {
        const float d = kr_half_to_float(x[i].d);
        for (int j = 0; j < KR_QK8_1; j++) {
            y[j] = x[i].qs[j] * d;
        }
    }
}

static void dequant_q8_K(const kr_block_q8_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += KR_QK_K) {
        for (int j = 0; j < KR_QK_K; j++) {
            y[j] = x[i].qs[j] * x[i].d;
        }
    }
}

static void dequant_q4_K(const kr_block_q4_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = kr_half_to_float(x[i].d);
        const float dmin = kr_half_to_float(x[i].dmin);
        const uint8_t *q = x[i].qs;
        uint8_t sc[8], mn[8];
        kr_unpack_scales_k4(x[i].scales, sc, mn);
        for (int j = 0; j < 8; j += 2) {
            const float d1 = d * sc[j], m1 = dmin * mn[j];
            const float d2 = d * sc[j + 1], m2 = dmin * mn[j + 1];
            for (int l = 0; l < 32; l++) {
                y[l] = d1 * (q[l] & 0xF) - m1;
                y[l + 32] = d2 * (q[l] >> 4) - m2;
            }
            q += 32;
            y += 64;
        }
    }
}

static void dequant_q5_K(const kr_block_q5_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = kr_half_to_float(x[i].d);
        const float dmin = kr_half_to_float(x[i].dmin);
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        uint8_t sc[8], mn[8];
        kr_unpack_scales_k4(x[i].scales, sc, mn);
        for (int j = 0; j < 8; j += 2) {
            const float d1 = d * sc[j], m1 = dmin * mn[j];
            const float d2 = d * sc[j + 1], m2 = dmin * mn[j + 1];
            for (int l = 0; l < 32; l++) {
                const int h1 = ((qh[l] >> j) & 1) << 4;
                const int h2 = ((qh[l] >> (j + 1)) & 1) << 4;
                y[l] = d1 * ((ql[l] & 0xF) | h1) - m1;
                y[l + 32] = d2 * ((ql[l] >> 4) | h2) - m2;
            }
            ql += 32;
            y += 64;
        }
    }
}

static void dequant_q6_K(const kr_block_q6_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const float d = kr_half_to_float(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < KR_QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void kr_dequantize_row(kr_type type, const void *x, float *y, int64_t n) {
    const kr_type_info *info = kr_type_get((uint32_t)type);
    if (info == NULL || n <= 0) {
        return;
    }
    const int64_t nb = n / info->block_size;
    switch (type) {
    case KR_TYPE_F32: memcpy(y, x, (size_t)n * sizeof(float)); break;
    case KR_TYPE_F16:
        for (int64_t i = 0; i < n; i++) y[i] = kr_half_to_float(((const kr_fp16 *)x)[i]);
        break;
    case KR_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) y[i] = kr_bf16_bits_to_float(((const kr_bf16 *)x)[i]);
        break;
    case KR_TYPE_Q4_0: dequant_q4_0(x, y, nb); break;
    case KR_TYPE_Q4_1: dequant_q4_1(x, y, nb); break;
    case KR_TYPE_Q5_0: dequant_q5_0(x, y, nb); break;
    case KR_TYPE_Q5_1: dequant_q5_1(x, y, nb); break;
    case KR_TYPE_Q8_0: dequant_q8_0(x, y, nb); break;
    case KR_TYPE_Q8_1: dequant_q8_1(x, y, nb); break;
    case KR_TYPE_Q4_K: dequant_q4_K(x, y, nb); break;
    case KR_TYPE_Q5_K: dequant_q5_K(x, y, nb); break;
    case KR_TYPE_Q6_K: dequant_q6_K(x, y, nb); break;
    case KR_TYPE_Q8_K: dequant_q8_K(x, y, nb); break;
    default: break;
    }
}
