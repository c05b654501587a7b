/*
 * vec_dot.c - scalar dot products of one weight row with one activation row.
 *
 * Quantized types use integer dot products against 8-bit activations, as
 * GGML does: block sums are exact integers, scaled once per block, so
 * results match llama.cpp's closely and the SIMD versions can be checked to
 * a tight tolerance.
 */
#include "kernels_impl.h"

void kr_scalar_vec_dot_f32(int64_t n, float *out, const void *vw, const void *vx) {
    const float *w = vw, *x = vx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)w[i] * x[i];
    }
    *out = (float)sum;
}

void kr_scalar_vec_dot_f16(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_fp16 *w = vw, *x = vx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)kr_half_to_float(w[i]) * kr_half_to_float(x[i]);
    }
    *out = (float)sum;
}

void kr_scalar_vec_dot_bf16(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_bf16 *w = vw, *x = vx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)kr_bf16_bits_to_float(w[i]) * kr_bf16_bits_to_float(x[i]);
    }
    *out = (float)sum;
}

void kr_scalar_vec_dot_q4_0(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q4_0 *w = vw;
    const kr_block_q8_0 *x = vx;
    const int64_t nb = n / KR_QK8_0;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < KR_QK8_0 / 2; j++) {
            sumi += ((w[i].qs[j] & 0xF) - 8) * x[i].qs[j];
            sumi += ((w[i].qs[j] >> 4) - 8) * x[i].qs[j + KR_QK8_0 / 2];
        }
        sum += sumi * kr_half_to_float(w[i].d) * kr_half_to_float(x[i].d);
    }
    *out = sum;
}

void kr_scalar_vec_dot_q4_1(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q4_1 *w = vw;
    const kr_block_q8_1 *x = vx;
    const int64_t nb = n / KR_QK8_1;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < KR_QK8_1 / 2; j++) {
            sumi += (w[i].qs[j] & 0xF) * x[i].qs[j];
            sumi += (w[i].qs[j] >> 4) * x[i].qs[j + KR_QK8_1 / 2];
        }
        /* sum((q*d + m) * qx*dx) = d*dx*sum(q*qx) + m * (dx*sum(qx)) */
        sum += sumi * kr_half_to_float(w[i].d) * kr_half_to_float(x[i].d) +
            kr_half_to_float(w[i].m) * kr_half_to_float(x[i].s);
    }
    *out = sum;
}

void kr_scalar_vec_dot_q5_0(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q5_0 *w = vw;
    const kr_block_q8_0 *x = vx;
    const int64_t nb = n / KR_QK8_0;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, sizeof(qh));
        int sumi = 0;
        for (int j = 0; j < KR_QK8_0 / 2; j++) {
            const int h0 = ((qh >> j) & 1) << 4;
            const int h1 = ((qh >> (j + 16)) & 1) << 4;
            sumi += (((w[i].qs[j] & 0xF) | h0) - 16) * x[i].qs[j];
            sumi += (((w[i].qs[j] >> 4) | h1) - 16) * x[i].qs[j + KR_QK8_0 / 2];
        }
        sum += sumi * kr_half_to_float(w[i].d) * kr_half_to_float(x[i].d);
    }
    *out = sum;
}

void kr_scalar_vec_dot_q5_1(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q5_1 *w = vw;
    const kr_block_q8_1 *x = vx;
    const int64_t nb = n / KR_QK8_1;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, sizeof(qh));
        int sumi = 0;
        for (int j = 0; j < KR_QK8_1 / 2; j++) {
            const int h0 = ((qh >> j) & 1) << 4;
            const int h1 = ((qh >> (j + 16)) & 1) << 4;
            sumi += ((w[i].qs[j] & 0xF) | h0) * x[i].qs[j];
            sumi += ((w[i].qs[j] >> 4) | h1) * x[i].qs[j + KR_QK8_1 / 2];
        }
        sum += sumi * kr_half_to_float(w[i].d) * kr_half_to_float(x[i].d) +
            kr_half_to_float(w[i].m) * kr_half_to_float(x[i].s);
    }
    *out = sum;
}

void kr_scalar_vec_dot_q8_0(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q8_0 *w = vw;
    const kr_block_q8_0 *x = vx;
    const int64_t nb = n / KR_QK8_0;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < KR_QK8_0; j++) {
            sumi += w[i].qs[j] * x[i].qs[j];
        }
        sum += sumi * kr_half_to_float(w[i].d) * kr_half_to_float(x[i].d);
    }
    *out = sum;
}

/* Q4_K: per super-block, d*dx*sum_j(sc_j * sum(q*qx)) - dmin*dx*sum_j(m_j *
 * sum(qx over sub-block j)); the second sum comes from the Q8_K bsums. */
void kr_scalar_vec_dot_q4_K(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q4_K *w = vw;
    const kr_block_q8_K *x = vx;
    const int64_t nb = n / KR_QK_K;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        kr_unpack_scales_k4(w[i].scales, sc, mn);
        const uint8_t *q = w[i].qs;
        const int8_t *qx = x[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; j += 2) {
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; l++) {
                s1 += (q[l] & 0xF) * qx[l];
                s2 += (q[l] >> 4) * qx[l + 32];
            }
            sumi += sc[j] * s1 + sc[j + 1] * s2;
            q += 32;
            qx += 64;
        }
        for (int j = 0; j < 8; j++) {
            summ += mn[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
        }
        sum += kr_half_to_float(w[i].d) * x[i].d * sumi - kr_half_to_float(w[i].dmin) * x[i].d * summ;
    }
    *out = sum;
}

void kr_scalar_vec_dot_q5_K(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q5_K *w = vw;
    const kr_block_q8_K *x = vx;
    const int64_t nb = n / KR_QK_K;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        kr_unpack_scales_k4(w[i].scales, sc, mn);
        const uint8_t *ql = w[i].qs;
        const uint8_t *qh = w[i].qh;
        const int8_t *qx = x[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; j += 2) {
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; l++) {
                const int v1 = (ql[l] & 0xF) | (((qh[l] >> j) & 1) << 4);
                const int v2 = (ql[l] >> 4) | (((qh[l] >> (j + 1)) & 1) << 4);
                s1 += v1 * qx[l];
                s2 += v2 * qx[l + 32];
            }
            sumi += sc[j] * s1 + sc[j + 1] * s2;
            ql += 32;
            qx += 64;
        }
        for (int j = 0; j < 8; j++) {
            summ += mn[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
        }
        sum += kr_half_to_float(w[i].d) * x[i].d * sumi - kr_half_to_float(w[i].dmin) * x[i].d * summ;
    }
    *out = sum;
}

void kr_scalar_vec_dot_q6_K(int64_t n, float *out, const void *vw, const void *vx) {
    const kr_block_q6_K *w = vw;
    const kr_block_q8_K *x = vx;
    const int64_t nb = n / KR_QK_K;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = w[i].ql;
        const uint8_t *qh = w[i].qh;
        const int8_t *sc = w[i].scales;
        const int8_t *qx = x[i].qs;
        int sumi = 0;
        for (int h = 0; h < KR_QK_K; h += 128) {
            int s[8] = {0};
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                s[is + 0] += q1 * qx[l];
                s[is + 2] += q2 * qx[l + 32];
                s[is + 4] += q3 * qx[l + 64];
                s[is + 6] += q4 * qx[l + 96];
            }
            for (int k = 0; k < 8; k++) {
                sumi += sc[k] * s[k];
            }
            ql += 64;
            qh += 32;
            sc += 8;
            qx += 128;
        }
        sum += kr_half_to_float(w[i].d) * x[i].d * sumi;
    }
    *out = sum;
}
