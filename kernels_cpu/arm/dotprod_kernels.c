/*
 * dotprod_kernels.c - the quantized dot products of neon_dot_impl.h
 * compiled with SDOT (ARMv8.2 dotprod: 16 int8 products summed into four
 * int32 lanes in one instruction). neon_kernels.c installs them when
 * getauxval reports ASIMDDP.
 */
#define KR_NEON_DOTPROD 1
#define NEON_FN(name) dotprod_##name
#include "neon_dot_impl.h"

#include "neon_kernels.h"

void kr_kernels_neon_dotprod(kr_kernels *k) {
    k->vec_dot[KR_TYPE_Q8_0] = dotprod_vec_dot_q8_0;
    k->vec_dot[KR_TYPE_Q4_0] = dotprod_vec_dot_q4_0;
    k->vec_dot[KR_TYPE_Q4_K] = dotprod_vec_dot_q4_K;
    k->vec_dot[KR_TYPE_Q6_K] = dotprod_vec_dot_q6_K;
    kr_kernels_dotprod_x16(k);
}
