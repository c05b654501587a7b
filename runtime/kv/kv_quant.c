/* kv_quant.c - the element types of the KV cache's rows (kv_quant.h). */
#include "kv_quant.h"

#include <string.h>

#include "kernels.h"

#define QK 32

int32_t kr_kv_dtype_block(kara_kv_dtype t) { return kr_kv_dtype_blocked(t) ? QK : 1; }

bool kr_kv_dtype_blocked(kara_kv_dtype t) { return t == KARA_KV_Q8_0 || t == KARA_KV_Q4_0; }

bool kr_kv_q8_in_place(kara_kv_dtype t, int32_t head_dim) { return t == KARA_KV_Q8_0 && head_dim % QK == 0; }

size_t kr_kv_row_bytes(kara_kv_dtype t, int64_t n) {
    switch (t) {
    case KARA_KV_F16: return (size_t)n * sizeof(kr_fp16);
    case KARA_KV_F32: return (size_t)n * sizeof(float);
    case KARA_KV_Q8_0: return (size_t)(n / QK) * sizeof(kr_block_q8_0);
    case KARA_KV_Q4_0: return (size_t)(n / QK) * sizeof(kr_block_q4_0);
    default: return 0;
    }
}

void kr_kv_row_store(kara_kv_dtype t, const float *x, void *row, int64_t n) {
    switch (t) {
    case KARA_KV_F16: kr_quantize_row(KR_TYPE_F16, x, row, n); break;
    case KARA_KV_F32: memcpy(row, x, (size_t)n * sizeof(float)); break;
    case KARA_KV_Q8_0: kr_quantize_row(KR_TYPE_Q8_0, x, row, n); break;
    case KARA_KV_Q4_0: kr_quantize_row(KR_TYPE_Q4_0, x, row, n); break;
    default: break;
    }
}

/* The 32 levels of block b (q8_0's int8; q4_0's nibble - 8) and its scale. */
static float block_levels(kara_kv_dtype t, const void *row, int64_t b, int8_t *q) {
    if (t == KARA_KV_Q8_0) {
        const kr_block_q8_0 *x = (const kr_block_q8_0 *)row + b;
        memcpy(q, x->qs, QK);
        return kr_fp16_to_fp32(x->d);
    }
    const kr_block_q4_0 *x = (const kr_block_q4_0 *)row + b;
    for (int32_t j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)((x->qs[j] & 0xF) - 8);
        q[j + QK / 2] = (int8_t)((x->qs[j] >> 4) - 8);
    }
    return kr_fp16_to_fp32(x->d);
}

/* Values [j0, j1) of block b of a blocked row into out (j1 - j0 floats). */
static void block_values(kara_kv_dtype t, const void *row, int64_t b, int32_t j0, int32_t j1, float *out) {
    int8_t q[QK];
    const float d = block_levels(t, row, b, q);
    for (int32_t j = j0; j < j1; j++) out[j - j0] = (float)q[j] * d;
}

/* Whole blocks [b0, b0 + nb) into out: the kernels' dequantisation of the
 * same GGML layouts (attention reads every value this way when head_dim is
 * a multiple of 32). */
static void whole_blocks(kara_kv_dtype t, const void *row, int64_t b0, int64_t nb, float *out) {
    const kr_type type = t == KARA_KV_Q8_0 ? KR_TYPE_Q8_0 : KR_TYPE_Q4_0;
    const size_t block_bytes = t == KARA_KV_Q8_0 ? sizeof(kr_block_q8_0) : sizeof(kr_block_q4_0);
    kr_dequantize_row(type, (const uint8_t *)row + (size_t)b0 * block_bytes, out, nb * QK);
}

void kr_kv_row_load(kara_kv_dtype t, const void *row, int64_t v0, int64_t n, float *out) {
    if (t == KARA_KV_F32) {
        memcpy(out, (const float *)row + v0, (size_t)n * sizeof(float));
        return;
    }
    if (t == KARA_KV_F16) {
        for (int64_t i = 0; i < n; i++) out[i] = kr_fp16_to_fp32(((const kr_fp16 *)row)[v0 + i]);
        return;
    }
    if (v0 % QK == 0 && n % QK == 0) {
        whole_blocks(t, row, v0 / QK, n / QK, out);
        return;
    }
    for (int64_t v = v0, end = v0 + n; v < end;) {
        const int64_t b = v / QK;
        const int32_t j0 = (int32_t)(v - b * QK);
        const int32_t j1 = end - b * QK < QK ? (int32_t)(end - b * QK) : QK;
        block_values(t, row, b, j0, j1, out + (v - v0));
        v += j1 - j0;
    }
}

void kr_kv_rows_load(kara_kv_dtype t, const void *base, size_t stride, int32_t n_rows, int64_t v0, int64_t n,
                     float *out) {
    const uint8_t *p = base;
    if (kr_kv_dtype_blocked(t) && v0 % QK == 0 && n % QK == 0) {
        for (int32_t r = 0; r < n_rows; r++, p += stride, out += n) whole_blocks(t, p, v0 / QK, n / QK, out);
        return;
    }
    for (int32_t r = 0; r < n_rows; r++, p += stride, out += n) kr_kv_row_load(t, p, v0, n, out);
}

float kr_kv_row_value(kara_kv_dtype t, const void *row, int64_t i) {
    float y = 0.0f;
    kr_kv_row_load(t, row, i, 1, &y);
    return y;
}

float kr_kv_row_dot(kara_kv_dtype t, const void *row, int64_t v0, int64_t n, const float *x) {
    float sum = 0.0f;
    if (!kr_kv_dtype_blocked(t)) {
        for (int64_t i = 0; i < n; i++) sum += x[i] * kr_kv_row_value(t, row, v0 + i);
        return sum;
    }
    /* per block: the levels times x in 8 partial sums (a fixed order the
     * compiler can vectorise), then once times the scale */
    for (int64_t v = v0, end = v0 + n; v < end;) {
        const int64_t b = v / QK;
        const int32_t j0 = (int32_t)(v - b * QK);
        const int32_t j1 = end - b * QK < QK ? (int32_t)(end - b * QK) : QK;
        const float *xb = x + (v - v0) - j0;
        int8_t q[QK];
        const float d = block_levels(t, row, b, q);
        float acc[8] = {0};
        if (j0 == 0 && j1 == QK)
            for (int32_t j = 0; j < QK; j++) acc[j & 7] += xb[j] * (float)q[j];
        else
            for (int32_t j = j0; j < j1; j++) acc[j & 7] += xb[j] * (float)q[j];
        sum += (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) * d;
        v += j1 - j0;
    }
    return sum;
}
