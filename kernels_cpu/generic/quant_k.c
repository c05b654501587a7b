/*
 * quant_k.c - reference quantizers for the K-quant super-blocks (Q4_K, Q5_K,
 * Q6_K) of 256 elements.
 *
 * These do a small search per sub-block for the scale (and minimum) that
 * minimises a weighted squared error, then quantize the sub-block scales
 * themselves to 6 or 8 bits. The search grid, weights and rounding follow
 * GGML's reference quantizers (make_qkx2_quants / make_qx_quants) so our
 * files have the quality users expect from llama.cpp's own.
 */
#include "kernels_impl.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/*
 * Asymmetric fit x ~ scale*L + min with L in [0, nmax] and min <= 0, over n
 * values with importance weights w. Starts from the plain min/max mapping,
 * then tries nstep rescaled grids (iscale = (nmax + rmin + rdelta*is) /
 * range) and keeps the least-squares (scale, min) of whichever grid gives the
 * lowest weighted error. Returns the scale; *neg_min gets -min (>= 0).
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *Laux,
                           float rmin, float rdelta, int nstep) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) {
        lo = 0;
    }
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(kr_nearest_int(iscale * (x[i] - lo)), 0, nmax);
        L[i] = (uint8_t)l;
        const float diff = scale * l + lo - x[i];
        best_err += w[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(kr_nearest_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0) {
            float s = (sum_w * sum_xl - sum_x * sum_l) / det;
            float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (m > 0) {
                m = 0;
                s = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                const float diff = s * Laux[i] + m - x[i];
                err += w[i] * diff * diff;
            }
            if (err < best_err) {
                memcpy(L, Laux, (size_t)n);
                best_err = err;
                scale = s;
                lo = m;
            }
        }
    }
    *neg_min = -lo;
    return scale;
}

/*
 * Symmetric fit x ~ scale*(L - nmax) with L in [0, 2*nmax), weights x^2.
 * Tries 18 grids around nmax/max and keeps the one maximising
 * (sum w x l)^2 / (sum w l^2), i.e. the least weighted squared error.
 */
static float fit_scale_symmetric(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sum_lx = 0, sum_l2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(kr_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sum_lx += w * x[i] * l;
        sum_l2 += w * l * l;
    }
    float scale = sum_l2 ? sum_lx / sum_l2 : 0.0f;
    float best = scale * sum_lx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) {
            continue;
        }
        iscale = -(nmax + 0.1f * is) / max;
        sum_lx = sum_l2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(kr_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sum_lx += w * x[i] * l;
            sum_l2 += w * l * l;
        }
        if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
            for (int i = 0; i < n; i++) {
                L[i] = (int8_t)(nmax + clampi(kr_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sum_lx / sum_l2;
            best = scale * sum_lx;
        }
    }
    return scale;
}

/* Fit the 8 sub-blocks of 32 of one Q4_K/Q5_K super-block, quantize their
 * scales and mins to 6 bits (packed into scales[12]) and requantize every
 * element against the final rounded scales. L gets levels 0..nmax. */
static void quantize_k4_superblock(const float *x, int nmax, float rmin, float rdelta, int nstep, uint8_t L[KR_QK_K],
                                   uint8_t packed[KR_K_SCALE_SIZE], kr_fp16 *d_out, kr_fp16 *dmin_out) {
    float scales[8], mins[8], w[32];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) {
            sum_x2 += xs[l] * xs[l];
        }
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) {
            w[l] = av_x + fabsf(xs[l]);
        }
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    memset(packed, 0, KR_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        int ls = kr_nearest_int(inv_scale * scales[j]);
        int lm = kr_nearest_int(inv_min * mins[j]);
        ls = ls > 63 ? 63 : ls;
        lm = lm > 63 ? 63 : lm;
        if (j < 4) {
            packed[j] = (uint8_t)ls;
            packed[j + 4] = (uint8_t)lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = kr_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = kr_fp32_to_fp16(max_min / 63.0f);
    const float d_all = kr_fp16_to_fp32(*d_out);
    const float dmin_all = kr_fp16_to_fp32(*dmin_out);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        kr_get_scale_min_k4(j, packed, &sc, &m);
        const float d = d_all * sc;
        if (!d) {
            continue;
        }
        const float dm = dmin_all * m;
        for (int l = 0; l < 32; l++) {
            L[32 * j + l] = (uint8_t)clampi(kr_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
        }
    }
}

void kr_quantize_row_q4_K_ref(const float *x, kr_block_q4_K *y, int64_t n) {
    const int64_t nb = n / KR_QK_K;
    uint8_t L[KR_QK_K];
    for (int64_t i = 0; i < nb; i++, x += KR_QK_K) {
        quantize_k4_superblock(x, 15, -1.0f, 0.1f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
        /* 64 elements per 32 bytes: the low nibbles hold sub-block 2k, the
         * high nibbles sub-block 2k+1 */
        uint8_t *q = y[i].qs;
        for (int j = 0; j < KR_QK_K; j += 64) {
            for (int l = 0; l < 32; l++) {
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            }
            q += 32;
        }
    }
}

void kr_quantize_row_q5_K_ref(const float *x, kr_block_q5_K *y, int64_t n) {
    const int64_t nb = n / KR_QK_K;
    uint8_t L[KR_QK_K];
    for (int64_t i = 0; i < nb; i++, x += KR_QK_K) {
        quantize_k4_superblock(x, 31, -0.5f, 0.1f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
        /* low 4 bits as in Q4_K; the fifth bit of element j of sub-block
         * 2k (2k+1) is bit 2k (2k+1) of qh[j] */
        uint8_t *ql = y[i].qs;
        uint8_t *qh = y[i].qh;
        memset(qh, 0, KR_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int j = 0; j < KR_QK_K; j += 64) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[j + l];
                int l2 = L[j + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[l] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[l] |= m2;
                }
                ql[l] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
    }
}

void kr_quantize_row_q6_K_ref(const float *x, kr_block_q6_K *y, int64_t n) {
    const int64_t nb = n / KR_QK_K;
    int8_t L[KR_QK_K];
    float scales[KR_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += KR_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < KR_QK_K / 16; ib++) {
            const float scale = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            if (fabsf(scale) > max_abs_scale) {
                max_abs_scale = fabsf(scale);
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(y[i]));
            y[i].d = kr_fp32_to_fp16(0.0f);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[i].d = kr_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < KR_QK_K / 16; ib++) {
            const int s = kr_nearest_int(iscale * scales[ib]);
            y[i].scales[ib] = (int8_t)(s > 127 ? 127 : s);
        }
        const float d_all = kr_fp16_to_fp32(y[i].d);
        for (int j = 0; j < KR_QK_K / 16; j++) {
            const float d = d_all * y[i].scales[j];
            if (!d) {
                continue;
            }
            for (int ii = 0; ii < 16; ii++) {
                const int l = clampi(kr_nearest_int(x[16 * j + ii] / d), -32, 31);
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        /* 128-element halves: ql holds low nibbles (elements l and l+64 in
         * one byte, l+32 and l+96 in another), qh the 2 high bits of four */
        uint8_t *ql = y[i].ql;
        uint8_t *qh = y[i].qh;
        for (int j = 0; j < KR_QK_K; j += 128) {
            for (int l = 0; l < 32; l++) {
                const int q1 = L[j + l] & 0xF;
                const int q2 = L[j + l + 32] & 0xF;
                const int q3 = L[j + l + 64] & 0xF;
                const int q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}
