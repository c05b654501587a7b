/*
 * dotprod_x16.c - the matmul of the NEON table on CPUs with SDOT (ARMv8.2
 * dotprod): the interleaved layouts' kernels of neon_x16_int_impl.h built
 * with SDOT, and F32_X16 (neon_x16.c).
 */
#define KR_NEON_DOTPROD 1
#include "neon_x16_int_impl.h"

/* The dotprod table's matmul: threads take whole 16-row groups of the
 * layouts above; everything else goes to the scalar driver over the
 * table's dot products. */
static void dotprod_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                           int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                           int ith, int nth) {
    if (kr_layout_source(wtype) != wtype && n_rows % KR_X16_ROWS == 0) {
        int64_t g0, g1;
        kr_split_rows(n_rows / KR_X16_ROWS, ith, nth, &g0, &g1);
        if (gemv_x16(wtype, w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy)) return;
    }
    kr_scalar_matmul(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
}

/* F32 and Q4_0 layouts are the base table's (kr_kernels_neon_x16); with
 * SDOT, Q4_K and Q6_K are worth interleaving too. */
void kr_kernels_dotprod_x16(kr_kernels *k) {
    k->matmul = dotprod_matmul;
    k->repack[KR_TYPE_Q4_K] = KR_TYPE_Q4_K_X16;
    k->repack[KR_TYPE_Q6_K] = KR_TYPE_Q6_K_X16;
}
