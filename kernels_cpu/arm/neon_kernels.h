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

#endif
