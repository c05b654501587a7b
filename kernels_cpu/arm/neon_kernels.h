/*
 * neon_kernels.h - between the NEON table (neon_kernels.c) and its SDOT
 * variants (dotprod_kernels.c, compiled with +dotprod).
 */
#ifndef KR_NEON_KERNELS_H
#define KR_NEON_KERNELS_H

#include "kernels.h"

/* Replace the quantized dot products of a NEON table with SDOT versions;
 * call only on CPUs with ASIMDDP. */
void kr_kernels_neon_dotprod(kr_kernels *k);
/* Install the SDOT matmul for the interleaved layouts and add Q4_K_X16
 * and Q6_K_X16 to the load-time layouts (dotprod_x16.c). */
void kr_kernels_dotprod_x16(kr_kernels *k);
/* Install the plain-NEON matmul for the interleaved layouts and make
 * F32_X16 and Q4_0_X16 the table's load-time layouts for F32 and Q4_0
 * (neon_x16.c). */
void kr_kernels_neon_x16(kr_kernels *k);
/* The F32_X16 product of groups [g0, g1) of 16 rows, every activation row;
 * false (nothing done) for a width it does not take. */
bool kr_neon_gemv_x16_f32(const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols, const void *x,
                          size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy);

#endif
