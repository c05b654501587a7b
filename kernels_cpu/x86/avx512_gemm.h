/*
 * avx512_gemm.h - the many-activation-row products of the AVX-512 table
 * (avx512_gemm.c), used by its matmul for prefill.
 */
#ifndef KR_AVX512_GEMM_H
#define KR_AVX512_GEMM_H

#include <stdbool.h>

#include "kernels.h"

/* Smallest batch that goes through the panel kernel for a weight type;
 * smaller ones (2 and up) use the few-row gemv of avx512_gemv_multi.c,
 * which needs no unpacking into a panel. The panel kernel pays its
 * unpacking once per panel, so it only wins from a batch size that depends
 * on how costly the type is to unpack; the thresholds are the measured
 * crossovers on Zen 4 (docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels'
 * design choices"). Returns INT64_MAX for a type
 * without a panel kernel. The interleaved layouts do not ask: their own
 * kernels are faster at every batch. */
int64_t kr_avx512_gemm_min_batch(kr_type wtype);

/* Y[b][r] = dot(W row r, X[b]) for r in [r0, r1) and b < n_batch, for Q8_0,
 * Q4_0, Q4_K and Q6_K weights (activations in the vec_dot_type). Returns
 * false (writing nothing) for other types; the caller then uses the block
 * kernels. */
bool kr_avx512_gemm(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                    const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

#endif
