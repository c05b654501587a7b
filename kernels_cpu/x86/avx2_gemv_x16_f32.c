/*
 * avx2_gemv_x16_f32.c - matrix products for F32 weights interleaved 16
 * rows at a time at load (KR_TYPE_F32_X16, kernels.h) with AVX2, any number
 * of activation rows: the shipped model's matrices on machines without
 * AVX-512.
 *
 * Per column, two 32-byte loads hold the 16 rows' weights, and two FMAs
 * against the broadcast activation value add the column to 16 outputs at
 * once: no horizontal sums, which in a row-major dot product of 128-384
 * columns cost about as much as the multiplies. Up to two activation rows
 * share each weight load (their 8 accumulators, 4 weight registers and the
 * broadcasts fill the 16 ymm). Every output adds its even and its odd
 * columns in two chains and then the two sums: the same operations in the
 * same order whatever the batch or the thread split, so a row's products
 * have the same bits at every batch size.
 */
#include "avx2_gemv.h"

#include <immintrin.h>

#include "kernels_impl.h"

#define NRV_MAX 2

/* One group of 16 weight rows (g: its first value) against NRV activation
 * rows xs floats apart. */
static inline __attribute__((always_inline)) void group_f32(const float *g, int64_t n_cols, const float *x, size_t xs,
                                                            float *y, int64_t ldy, const int NRV) {
    __m256 acc[NRV_MAX][2][2]; /* [activation row][even/odd column][rows 0-7/8-15] */
    for (int j = 0; j < NRV; j++)
        for (int e = 0; e < 2; e++) acc[j][e][0] = acc[j][e][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < n_cols; c += 2) {
        const float *wc = g + (size_t)KR_X16_ROWS * (size_t)c;
        const __m256 w00 = _mm256_loadu_ps(wc), w01 = _mm256_loadu_ps(wc + 8);
        const __m256 w10 = _mm256_loadu_ps(wc + 16), w11 = _mm256_loadu_ps(wc + 24);
        for (int j = 0; j < NRV; j++) {
            const __m256 x0 = _mm256_set1_ps(x[(size_t)j * xs + (size_t)c]);
            const __m256 x1 = _mm256_set1_ps(x[(size_t)j * xs + (size_t)c + 1]);
            acc[j][0][0] = _mm256_fmadd_ps(w00, x0, acc[j][0][0]);
            acc[j][0][1] = _mm256_fmadd_ps(w01, x0, acc[j][0][1]);
            acc[j][1][0] = _mm256_fmadd_ps(w10, x1, acc[j][1][0]);
            acc[j][1][1] = _mm256_fmadd_ps(w11, x1, acc[j][1][1]);
        }
    }
    for (int j = 0; j < NRV; j++) {
        _mm256_storeu_ps(y + j * ldy, _mm256_add_ps(acc[j][0][0], acc[j][1][0]));
        _mm256_storeu_ps(y + j * ldy + 8, _mm256_add_ps(acc[j][0][1], acc[j][1][1]));
    }
}

bool kr_avx2_gemv_x16_f32(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                          size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % 2 != 0 || x_row_bytes % sizeof(float) != 0 || n_batch < 1) return false;
    const size_t gf = w_row_bytes / sizeof(float) * KR_X16_ROWS, xs = x_row_bytes / sizeof(float);
    for (int64_t gi = g0; gi < g1; gi++) {
        const float *g = (const float *)w + gf * (size_t)gi;
        for (int64_t j0 = 0; j0 < n_batch; j0 += NRV_MAX) {
            const float *xj = (const float *)x + xs * (size_t)j0;
            float *yj = y + j0 * ldy + KR_X16_ROWS * gi;
            if (n_batch - j0 >= 2)
                group_f32(g, n_cols, xj, xs, yj, ldy, 2);
            else
                group_f32(g, n_cols, xj, xs, yj, ldy, 1);
        }
    }
    return true;
}
