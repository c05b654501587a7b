/*
 * avx512_gemv.h - the one-activation-row products of the AVX-512 table
 * (avx512_gemv.c for Q8_0/Q4_0, avx512_gemv_k.c for Q4_K; Q6_K's is in
 * avx512_kernels.c), used by its matmul for decode, their few-row version
 * (avx512_gemv_multi.c) for batched decode, and the kernels of the
 * interleaved load-time layouts (avx512_gemv_x16_*.c) for every batch.
 */
#ifndef KR_AVX512_GEMV_H
#define KR_AVX512_GEMV_H

#include <stdbool.h>

#include "kernels.h"

/* Widest activation row the gemv path rearranges on the stack (40 KiB). */
#define KR_GEMV_MAX_COLS 32768

/* y[r] = dot(W row r, x) for r in [r0, r1); x is one activation row in the
 * weight type's vec_dot_type. Returns false (writing nothing) for a type or
 * width this path does not handle; the caller then uses the block kernels. */
bool kr_avx512_gemv(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                    const void *x, float *y);

/* The same for Q4_K weights (avx512_gemv_k.c); x is one Q8_K row. */
bool kr_avx512_gemv_k(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                      const void *x, float *y);

/* Y[b][r] for the rows of 16-row groups [g0, g1) of a matrix in an
 * interleaved layout (KARA_TYPE_*_X16, kernels.h) and n_batch activation
 * rows in its vec_dot_type, y[b * ldy + r]: decode, batched decode and
 * prefill (avx512_gemv_x16_{q4k,q6k,q40,f32}.c). A row's products have the same
 * bits whatever n_batch. Use up to 64 KiB of stack. Return false (writing
 * nothing) for a width over KR_GEMV_MAX_COLS. */
bool kr_avx512_gemv_x16_q4_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                             size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);
bool kr_avx512_gemv_x16_q6_K(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                             size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);
bool kr_avx512_gemv_x16_q4_0(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                             size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);
bool kr_avx512_gemv_x16_f32(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                            size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

/* Y[b][r] = dot(W row r, X[b]) for r in [r0, r1) and b < n_batch (y[b * ldy
 * + r]), for Q8_0, Q4_0, Q4_K and Q6_K weights, activations in the
 * vec_dot_type with x_row_bytes between rows. Each weight block is unpacked
 * once for several activation rows. Every output is bit-identical to the
 * one-row product of its activation row alone (kr_avx512_gemv; for Q6_K
 * the block kernel that the AVX-512 matmul uses for one row), whatever
 * n_batch or the thread split. Uses 80 KiB of stack for the rearranged
 * activations. Returns false (writing nothing) for another type or a width
 * the one-row path does not take either (over KR_GEMV_MAX_COLS). */
bool kr_avx512_gemv_multi(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                          const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

/* Smallest batch the AVX-512 matmul gives to kr_avx512_gemv_multi: 2,
 * except Q6_K, whose block kernel (same bits, see above) is as fast up to 3
 * rows: the few-row kernel's shared unpacking pays for itself from 4 rows
 * (measured crossover: docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels'
 * design choices"). */
int64_t kr_avx512_gemv_multi_min_batch(kr_type wtype);

#endif
