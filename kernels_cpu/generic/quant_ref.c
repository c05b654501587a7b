/*
 * quant_ref.c - reference round-to-nearest quantizers for the 32-element
 * block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1) and the 256-element
 * activation format Q8_K, plus kr_quantize_row, which routes every type.
 *
 * The arithmetic follows GGML's *_ref functions step for step (same scale
 * choice, same rounding) so files we write decode as llama.cpp expects and
 * quantize to the same bytes.
 */
#include "kernels_impl.h"

#include <float.h>
#include <math.h>

/* Largest-magnitude element with its sign: the symmetric formats map it to
 * the most negative level, which gives one more level of resolution. */
/* (int)v for v in [lo, hi], saturated outside and 0 for NaN: converting a
 * float outside the target type's range is undefined behaviour in C, and a
 * damaged model's NaN or huge activations reach these quantizers (found by
 * fuzz_gguf under UBSan). In range it is the plain cast, so valid inputs
 * give the same bytes as before. */
static inline int sat_trunc(float v, int lo, int hi) {
    if (!(v == v)) return 0;
    if (v >= (float)hi) return hi;
    if (v <= (float)lo) return lo;
    return (int)v;
}

static float signed_absmax(const float *x, int n, float *amax_out) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax_out) {
        *amax_out = amax;
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

void kr_quantize_row_q4_0_ref(const float *x, kr_block_q4_0 *y, int64_t n) {
    const int64_t nb = n / KR_QK4_0;
    for (int64_t i = 0; i < nb; i++, x += KR_QK4_0) {
        const float max = signed_absmax(x, KR_QK4_0, NULL);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        for (int j = 0; j < KR_QK4_0 / 2; j++) {
            int q0 = sat_trunc(x[j] * id + 8.5f, -128, 127);
            int q1 = sat_trunc(x[j + KR_QK4_0 / 2] * id + 8.5f, -128, 127);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            /* unsigned: a NaN input gives q = -128, whose shift is undefined in int */
            y[i].qs[j] = (uint8_t)((unsigned)q0 | ((unsigned)q1 << 4));
        }
    }
}

void kr_quantize_row_q4_1_ref(const float *x, kr_block_q4_1 *y, int64_t n) {
    const int64_t nb = n / KR_QK4_1;
    for (int64_t i = 0; i < nb; i++, x += KR_QK4_1) {
        float mn, mx;
        min_max(x, KR_QK4_1, &mn, &mx);
        const float d = (mx - mn) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        y[i].m = kr_fp32_to_fp16(mn);
        for (int j = 0; j < KR_QK4_1 / 2; j++) {
            int q0 = sat_trunc((x[j] - mn) * id + 0.5f, -128, 127);
            int q1 = sat_trunc((x[j + KR_QK4_1 / 2] - mn) * id + 0.5f, -128, 127);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[i].qs[j] = (uint8_t)((unsigned)q0 | ((unsigned)q1 << 4));
        }
    }
}

void kr_quantize_row_q5_0_ref(const float *x, kr_block_q5_0 *y, int64_t n) {
    const int64_t nb = n / KR_QK5_0;
    for (int64_t i = 0; i < nb; i++, x += KR_QK5_0) {
        const float max = signed_absmax(x, KR_QK5_0, NULL);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < KR_QK5_0 / 2; j++) {
            int q0 = sat_trunc(x[j] * id + 16.5f, -128, 127);
            int q1 = sat_trunc(x[j + KR_QK5_0 / 2] * id + 16.5f, -128, 127);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + KR_QK5_0 / 2);
        }
        memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

void kr_quantize_row_q5_1_ref(const float *x, kr_block_q5_1 *y, int64_t n) {
    const int64_t nb = n / KR_QK5_1;
    for (int64_t i = 0; i < nb; i++, x += KR_QK5_1) {
        float mn, mx;
        min_max(x, KR_QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        y[i].m = kr_fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < KR_QK5_1 / 2; j++) {
            int q0 = sat_trunc((x[j] - mn) * id + 0.5f, 0, 255);
            int q1 = sat_trunc((x[j + KR_QK5_1 / 2] - mn) * id + 0.5f, 0, 255);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + KR_QK5_1 / 2);
        }
        memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

/* ---- activation formats (also the scalar from_float kernels) ---- */

void kr_scalar_from_float_q8_0(const float *x, void *vy, int64_t n) {
    kr_block_q8_0 *y = vy;
    const int64_t nb = n / KR_QK8_0;
    for (int64_t i = 0; i < nb; i++, x += KR_QK8_0) {
        float amax;
        signed_absmax(x, KR_QK8_0, &amax);
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = kr_fp32_to_fp16(d);
        for (int j = 0; j < KR_QK8_0; j++) {
            y[i].qs[j] = (int8_t)sat_trunc(roundf(x[j] * id), -128, 127);
        }
    }
}

void kr_scalar_from_float_q8_1(const float *x, void *vy, int64_t n) {
    kr_block_q8_1 *y = vy;
    const int64_t nb = n / KR_QK8_1;
    for (int64_t i = 0; i < nb; i++, x += KR_QK8_1) {
        float amax;
        signed_absmax(x, KR_QK8_1, &amax);
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < KR_QK8_1; j++) {
            y[i].qs[j] = (int8_t)sat_trunc(roundf(x[j] * id), -128, 127);
            sum += y[i].qs[j];
        }
        y[i].d = kr_fp32_to_fp16(d);
        y[i].s = kr_fp32_to_fp16((float)sum * d);
    }
}

/* Q8_K keeps an f32 scale and per-16 sums (bsums) so K-quant dot products
 * can apply their sub-block minimums without touching the 8-bit values. The
 * scale maps the largest magnitude to -127 (not -128) so SIMD sign tricks
 * never meet -128. */
void kr_scalar_from_float_q8_K(const float *x, void *vy, int64_t n) {
    kr_block_q8_K *y = vy;
    const int64_t nb = n / KR_QK_K;
    for (int64_t i = 0; i < nb; i++, x += KR_QK_K) {
        float amax;
        const float max = signed_absmax(x, KR_QK_K, &amax);
        if (amax == 0.0f) {
            y[i].d = 0.0f;
            memset(y[i].qs, 0, sizeof(y[i].qs));
            memset(y[i].bsums, 0, sizeof(y[i].bsums));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < KR_QK_K; j++) {
            int v = kr_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < KR_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) {
                sum += y[i].qs[16 * j + l];
            }
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

void kr_scalar_from_float_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void kr_scalar_from_float_f16(const float *x, void *vy, int64_t n) {
    kr_fp16 *y = vy;
    for (int64_t i = 0; i < n; i++) {
        y[i] = kr_fp32_to_fp16(x[i]);
    }
}

void kr_scalar_from_float_bf16(const float *x, void *vy, int64_t n) {
    kr_bf16 *y = vy;
    for (int64_t i = 0; i < n; i++) {
        y[i] = kr_fp32_to_bf16(x[i]);
    }
}

bool kr_quantize_row(kr_type type, const float *x, void *y, int64_t n) {
    const kr_type_info *info = kr_type_get((uint32_t)type);
    if (info == NULL || n < 0 || n % info->block_size != 0) {
        return false;
    }
    switch (type) {
    case KR_TYPE_F32: kr_scalar_from_float_f32(x, y, n); return true;
    case KR_TYPE_F16: kr_scalar_from_float_f16(x, y, n); return true;
    case KR_TYPE_BF16: kr_scalar_from_float_bf16(x, y, n); return true;
    case KR_TYPE_Q4_0: kr_quantize_row_q4_0_ref(x, y, n); return true;
    case KR_TYPE_Q4_1: kr_quantize_row_q4_1_ref(x, y, n); return true;
    case KR_TYPE_Q5_0: kr_quantize_row_q5_0_ref(x, y, n); return true;
    case KR_TYPE_Q5_1: kr_quantize_row_q5_1_ref(x, y, n); return true;
    case KR_TYPE_Q8_0: kr_scalar_from_float_q8_0(x, y, n); return true;
    case KR_TYPE_Q8_1: kr_scalar_from_float_q8_1(x, y, n); return true;
    case KR_TYPE_Q4_K: kr_quantize_row_q4_K_ref(x, y, n); return true;
    case KR_TYPE_Q5_K: kr_quantize_row_q5_K_ref(x, y, n); return true;
    case KR_TYPE_Q6_K: kr_quantize_row_q6_K_ref(x, y, n); return true;
    case KR_TYPE_Q8_K: kr_scalar_from_float_q8_K(x, y, n); return true;
    default: return false;
    }
}
