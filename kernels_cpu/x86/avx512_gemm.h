/*
 * avx512_gemm.h - the many-activation-row products of the AVX-512 table
 * (avx512_gemm.c), used by its matmul for prefill.
 */
#ifndef KARA_AVX512_GEMM_H
#define KARA_AVX512_GEMM_H

#include <stdbool.h>

#include "kernels.h"

/* Smallest batch that goes through the panel kernel for a weight type;
 * smaller ones use the block kernels, which need no unpacking. The panel
 * kernel pays its unpacking once per panel, so it only wins from a batch
 * size that depends on how costly the type is to unpack (kara bench
 * --kernels -t 1 -p N on Zen 4, GOP/s block vs panel: Q8_0 68 vs 77 at 8;
 * Q4_0 62 vs 80 at 16; Q4_K 122 vs 124 at 16, 121 vs 173 at 32; Q6_K 129 vs
 * 138 at 32). Decode batches of continuous batching stay on the block
 * kernels. Returns INT64_MAX for a type without a panel kernel. */
int64_t kara_avx512_gemm_min_batch(kara_type wtype);

/* Y[b][r] = dot(W row r, X[b]) for r in [r0, r1) and b < n_batch, for Q8_0,
 * Q4_0, Q4_K and Q6_K weights (activations in the vec_dot_type). Returns
 * false (writing nothing) for other types; the caller then uses the block
 * kernels. */
bool kara_avx512_gemm(kara_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                      const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

#endif
