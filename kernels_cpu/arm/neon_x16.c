/*
 * neon_x16.c - matrix products for the interleaved layouts (kernels.h)
 * with plain NEON, any number of activation rows: F32_X16 for both NEON
 * tables, and the quantized layouts of neon_x16_int_impl.h built without
 * SDOT for the table of CPUs that lack it (the same integer sums, so the
 * same bits as the SDOT table; that table asks the loader only for
 * Q4_0_X16 of them, the one that pays without SDOT).
 *
 * F32: per column, one 4-register load holds the 16 rows' weights, and four
 * multiply-adds by lane (vfmaq_laneq_f32, the activation value taken from
 * a register of 4 columns) add the column to 16 outputs at once: nothing is
 * broadcast and nothing is summed across lanes, where the file-layout dot
 * product ends every row with a horizontal add. Every output adds its even
 * and its odd columns in two chains and then the two sums: the same
 * operations in the same order whatever the batch or the thread split, so
 * a row's products have the same bits at every batch size (speculative
 * decoding relies on it). Activation rows go in passes of up to NRV_MAX:
 * 2 x 2 chains x 4 accumulators, 4 weight registers and the activations
 * fit the 32 registers.
 */
#define KR_NEON_DOTPROD 0
#include "neon_x16_int_impl.h" /* Q4_0_X16, Q4_K_X16, Q6_K_X16: gemv_x16; NRV_MAX */

/* One multiply-add by lane of column c % 4 (the lane must be a constant). */
#define FMA_LANE(acc, w, xv, L) vfmaq_laneq_f32((acc), (w), (xv), (L))

/* 16 rows (g: the group's first value) against NRV activation rows. */
static inline __attribute__((always_inline)) void group_f32(const float *g, int64_t n_cols, const float *x, size_t xs,
                                                            float *y, int64_t ldy, const int NRV) {
    float32x4_t acc[NRV_MAX][2][4];
    for (int j = 0; j < NRV; j++)
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < 4; r++) acc[j][h][r] = vdupq_n_f32(0.0f);
    int64_t c = 0;
    for (; c + 4 <= n_cols; c += 4) {
        float32x4_t xv[NRV_MAX];
        for (int j = 0; j < NRV; j++) xv[j] = vld1q_f32(x + (size_t)j * xs + (size_t)c);
        const float *wc = g + (size_t)KR_X16_ROWS * (size_t)c;
        for (int cc = 0; cc < 4; cc++) {
            const float32x4x4_t wq = vld1q_f32_x4(wc + KR_X16_ROWS * cc); /* one LD1 of 4 registers */
            const float32x4_t w[4] = {wq.val[0], wq.val[1], wq.val[2], wq.val[3]};
            for (int j = 0; j < NRV; j++)
                for (int r = 0; r < 4; r++) {
                    switch (cc) {
                    case 0: acc[j][0][r] = FMA_LANE(acc[j][0][r], w[r], xv[j], 0); break;
                    case 1: acc[j][1][r] = FMA_LANE(acc[j][1][r], w[r], xv[j], 1); break;
                    case 2: acc[j][0][r] = FMA_LANE(acc[j][0][r], w[r], xv[j], 2); break;
                    default: acc[j][1][r] = FMA_LANE(acc[j][1][r], w[r], xv[j], 3); break;
                    }
                }
        }
    }
    if (c < n_cols) { /* a last pair of columns (n_cols is even): the even and odd chains as above */
        const float32x4x4_t w0 = vld1q_f32_x4(g + (size_t)KR_X16_ROWS * (size_t)c);
        const float32x4x4_t w1 = vld1q_f32_x4(g + (size_t)KR_X16_ROWS * (size_t)(c + 1));
        for (int j = 0; j < NRV; j++) {
            const float32x2_t xv = vld1_f32(x + (size_t)j * xs + (size_t)c);
            for (int r = 0; r < 4; r++) {
                acc[j][0][r] = vfmaq_lane_f32(acc[j][0][r], w0.val[r], xv, 0);
                acc[j][1][r] = vfmaq_lane_f32(acc[j][1][r], w1.val[r], xv, 1);
            }
        }
    }
    for (int j = 0; j < NRV; j++)
        for (int r = 0; r < 4; r++) vst1q_f32(y + j * ldy + 4 * r, vaddq_f32(acc[j][0][r], acc[j][1][r]));
}

bool kr_neon_gemv_x16_f32(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                          size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    if (n_cols % 2 != 0 || x_row_bytes % sizeof(float) != 0 || n_batch < 1) return false;
    const size_t gf = w_row_bytes / sizeof(float) * KR_X16_ROWS, xs = x_row_bytes / sizeof(float);
    const float *wf = w, *xf = x;
    for (int64_t gi = g0; gi < g1; gi++) {
        const float *g = wf + gf * (size_t)gi;
        for (int64_t j0 = 0; j0 < n_batch; j0 += NRV_MAX) {
            float *yj = y + j0 * ldy + KR_X16_ROWS * gi;
            if (n_batch - j0 >= 2)
                group_f32(g, n_cols, xf + xs * (size_t)j0, xs, yj, ldy, 2);
            else
                group_f32(g, n_cols, xf + xs * (size_t)j0, xs, yj, ldy, 1);
        }
    }
    return true;
}

void kr_kernels_neon_x16(kr_kernels *k) {
    k->matmul = x16_matmul; /* neon_x16_int_impl.h, without SDOT */
    k->repack[KR_TYPE_F32] = KR_TYPE_F32_X16;
    k->repack[KR_TYPE_Q4_0] = KR_TYPE_Q4_0_X16;
    /* Q4_K and Q6_K keep the file layout here: without SDOT their
     * interleaved kernels take about as many instructions as the file
     * layout's (docs/history/PERFORMANCE-2026-12.md), though they still serve a model
     * loaded in those layouts */
}
