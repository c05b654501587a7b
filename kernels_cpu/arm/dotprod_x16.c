/*
 * dotprod_x16.c - the matmul of the NEON table on CPUs with SDOT (ARMv8.2
 * dotprod): the interleaved layouts' kernels of neon_x16_int_impl.h built
 * with SDOT, and F32_X16 (neon_x16.c).
 */
#define KR_NEON_DOTPROD 1
#include "neon_x16_int_impl.h"

/* F32 and Q4_0 layouts are the base table's (kr_kernels_neon_x16); with
 * SDOT, Q4_K and Q6_K are worth interleaving too. */
void kr_kernels_dotprod_x16(kr_kernels *k) {
    k->matmul = x16_matmul; /* neon_x16_int_impl.h, with SDOT */
    k->repack[KR_TYPE_Q4_K] = KR_TYPE_Q4_K_X16;
    k->repack[KR_TYPE_Q6_K] = KR_TYPE_Q6_K_X16;
}
