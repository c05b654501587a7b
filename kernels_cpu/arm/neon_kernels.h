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
/* Install the SDOT matmul for the Q4_0_X16 and Q4_K_X16 layouts and make
 * them the table's load-time layouts for Q4_0 and Q4_K (dotprod_x16.c). */
void kr_kernels_dotprod_x16(kr_kernels *k);

#endif
