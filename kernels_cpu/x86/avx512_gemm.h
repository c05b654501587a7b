/*
 * avx512_gemm.h - the many-activation-row products of the AVX-512 table
 * (avx512_gemm.c), used by its matmul for prefill.
 */
#ifndef KARA_AVX512_GEMM_H
#define KARA_AVX512_GEMM_H

#include <stdbool.h>

#include "kernels.h"

/* Batches from this size on go through the panel kernel; smaller ones use
 * the block kernels, which need no unpacking. */
#define KARA_GEMM_MIN_BATCH 4

/* Y[b][r] = dot(W row r, X[b]) for r in [r0, r1) and b < n_batch, for Q8_0,
 * Q4_0, Q4_K and Q6_K weights (activations in the vec_dot_type). Returns
 * false (writing nothing) for other types; the caller then uses the block
 * kernels. */
bool kara_avx512_gemm(kara_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                      const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

#endif
