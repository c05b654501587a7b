/*
 * avx2_gemv.h - the AVX2 table's kernels for the interleaved layouts
 * (kernels.h, KR_TYPE_*_X16), used by its matmul for every batch size:
 * decode, batched decode and prefill.
 */
#ifndef KR_AVX2_GEMV_H
#define KR_AVX2_GEMV_H

#include <stdbool.h>

#include "kernels.h"

/* Y[b][16 g + l] = dot(W row 16 g + l, X[b]) for the 16-row groups g in
 * [g0, g1), l < 16 and b < n_batch; X holds n_batch Q8_K activation rows
 * x_row_bytes apart, Y rows are ldy floats apart. Each activation row's
 * products have the same bits whatever n_batch. Returns false (writing
 * nothing) for a width the kernel does not take (over X16_MAX_COLS of
 * x86_x16_impl.h, or not a multiple of 256). */
bool kr_avx2_gemv_x16_q4_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                           size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);
/* The same for Q6_K_X16 (any width that is a multiple of 256). */
bool kr_avx2_gemv_x16_q6_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                           size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);
/* The same for Q4_0_X16 (Q8_0 activation rows; a width that is a multiple
 * of 32, up to X16_MAX_COLS). */
bool kr_avx2_gemv_x16_q4_0(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                           size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);
/* The same for F32_X16 (f32 activation rows; any width that is a multiple
 * of 16). */
bool kr_avx2_gemv_x16_f32(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                          size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

#endif
