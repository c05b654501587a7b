/*
 * avx512_gemv.h - the one-activation-row products of the AVX-512 table
 * (avx512_gemv.c for Q8_0/Q4_0, avx512_gemv_k.c for Q4_K), used by its
 * matmul for decode.
 */
#ifndef KARA_AVX512_GEMV_H
#define KARA_AVX512_GEMV_H

#include <stdbool.h>

#include "kernels.h"

/* Widest activation row the gemv path rearranges on the stack (40 KiB). */
#define KARA_GEMV_MAX_COLS 32768

/* y[r] = dot(W row r, x) for r in [r0, r1); x is one activation row in the
 * weight type's vec_dot_type. Returns false (writing nothing) for a type or
 * width this path does not handle; the caller then uses the block kernels. */
bool kara_avx512_gemv(kara_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                      const void *x, float *y);

/* The same for Q4_K weights (avx512_gemv_k.c); x is one Q8_K row. */
bool kara_avx512_gemv_k(kara_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                        const void *x, float *y);

#endif
