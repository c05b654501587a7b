/*
 * avx512_gemv_x16_f32.c - matrix products for F32 weights interleaved 16
 * rows at a time at load (KR_TYPE_F32_X16, kernels.h), any number of
 * activation rows (decode, batched decode, prefill).
 *
 * Per column, one 64-byte load holds the 16 rows' weights, and one FMA
 * against the broadcast activation value adds the column to 16 outputs at
 * once: no horizontal sums, which in a row-major dot product of 128-384
 * columns cost about as much as the multiplies. Two groups go side by side
 * so that each broadcast serves 32 rows, and up to 4 activation rows share
 * each weight load. Every output adds its even and its odd columns in two
 * chains and then the two sums: the same operations in the same order
 * whatever the batch, the pairing of groups or the thread split, so a row's
 * products have the same bits at every batch size.
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_x16_impl.h"
#include "kernels_impl.h"

/* G (1 or 2) groups of 16 weight rows, gf floats apart, against NRV
 * activation rows xs floats apart; y[j * ldy + 16 * h + lane]. */
static inline __attribute__((always_inline)) void groups_f32(const float *g, size_t gf, int64_t n_cols, const float *x,
                                                             size_t xs, float *y, int64_t ldy, const int G,
                                                             const int NRV) {
    __m512 acc[2][X16_NRX][2];
    for (int h = 0; h < G; h++) {
        for (int j = 0; j < NRV; j++) acc[h][j][0] = acc[h][j][1] = _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (int64_t c = 0; c < n_cols; c += 2) {
        __m512 x0[X16_NRX], x1[X16_NRX];
        for (int j = 0; j < NRV; j++) {
            x0[j] = _mm512_set1_ps(x[(size_t)j * xs + (size_t)c]);
            x1[j] = _mm512_set1_ps(x[(size_t)j * xs + (size_t)c + 1]);
        }
        for (int h = 0; h < G; h++) {
            const float *wc = g + (size_t)h * gf + (size_t)KR_X16_ROWS * (size_t)c;
            const __m512 w0 = _mm512_loadu_ps(wc), w1 = _mm512_loadu_ps(wc + KR_X16_ROWS);
            for (int j = 0; j < NRV; j++) {
                acc[h][j][0] = _mm512_fmadd_ps(w0, x0[j], acc[h][j][0]);
                acc[h][j][1] = _mm512_fmadd_ps(w1, x1[j], acc[h][j][1]);
            }
        }
    }
    for (int h = 0; h < G; h++) {
        for (int j = 0; j < NRV; j++) {
            _mm512_storeu_ps(y + j * ldy + KR_X16_ROWS * h, _mm512_add_ps(acc[h][j][0], acc[h][j][1]));
        }
    }
}

bool kr_avx512_gemv_x16_f32(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                            size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % 2 != 0 || x_row_bytes % sizeof(float) != 0 || n_batch < 1) {
        return false;
    }
    const size_t gf = w_row_bytes / sizeof(float) * KR_X16_ROWS, xs = x_row_bytes / sizeof(float);
    for (int64_t c0 = 0; c0 < n_batch; c0 += X16_SWEEP) {
        const int64_t nc = n_batch - c0 < X16_SWEEP ? n_batch - c0 : X16_SWEEP;
        for (int64_t gi = g0; gi < g1; gi += 2) {
            const float *g = (const float *)w + gf * (size_t)gi;
            const bool pair = g1 - gi >= 2;
            for (int64_t j0 = 0; j0 < nc; j0 += X16_NRX) {
                const float *xj = (const float *)x + xs * (size_t)(c0 + j0);
                float *yj = y + (c0 + j0) * ldy + KR_X16_ROWS * gi;
                const int64_t nrv = nc - j0 < X16_NRX ? nc - j0 : X16_NRX;
#define CASE(n)                                                                                                        \
    case n:                                                                                                            \
        if (pair)                                                                                                      \
            groups_f32(g, gf, n_cols, xj, xs, yj, ldy, 2, n);                                                          \
        else                                                                                                           \
            groups_f32(g, gf, n_cols, xj, xs, yj, ldy, 1, n);                                                          \
        break;
                switch (nrv) {
                    CASE(1)
                    CASE(2)
                    CASE(3)
                default: CASE(4)
                }
#undef CASE
            }
        }
    }
    return true;
}
