/*
 * neon_kernels.h - between the NEON table (neon_kernels.c) and its SDOT
 * variants (dotprod_kernels.c, compiled with +dotprod).
 */
#ifndef KARA_NEON_KERNELS_H
#define KARA_NEON_KERNELS_H

#include "kernels.h"

/* Replace the quantized dot products of a NEON table with SDOT versions;
 * call only on CPUs with ASIMDDP. */
void kara_kernels_neon_dotprod(kara_kernels *k);

#endif
