/*
 * attn.c - the scalar references of attention's products over cache rows:
 * gemm_nn_acc (rows of probabilities times the value rows of a block of
 * cache slots, added to the output rows), and for a q8_0 cache read in
 * place, gemm_nt_q8 (Q8_0 queries against Q8_0 keys, integer block sums)
 * and gemm_nn_acc_q8.
 */
#include "kernels_impl.h"

void kr_scalar_gemm_nn_acc(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                           int64_t m, int64_t n, int64_t k) {
    const char *bc = b;
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        const float *ai = a + i * lda;
        for (int64_t d = 0; d < k; d++) {
            float s = ci[d];
            for (int64_t j = 0; j < n; j++) {
                const char *bj = bc + (size_t)j * ldb;
                const float v = b_f16 ? kr_half_to_float(((const kr_fp16 *)bj)[d]) : ((const float *)bj)[d];
                s += ai[j] * v;
            }
            ci[d] = s;
        }
    }
}

/* Block t of a row of Q8_0 blocks. */
static const kr_block_q8_0 *q8_block(const void *row, int64_t t) { return (const kr_block_q8_0 *)row + t; }

void kr_scalar_gemm_nt_q8(float *c, int64_t ldc, const void *a, size_t lda, const void *b, size_t ldb, int64_t m,
                          int64_t n, int64_t nb) {
    for (int64_t j = 0; j < n; j++) {
        const char *bj = (const char *)b + (size_t)j * ldb;
        for (int64_t i = 0; i < m; i++) {
            const char *ai = (const char *)a + (size_t)i * lda;
            float s = 0.0f;
            for (int64_t t = 0; t < nb; t++) {
                const kr_block_q8_0 *x = q8_block(ai, t), *y = q8_block(bj, t);
                int32_t isum = 0;
                for (int u = 0; u < KR_QK8_0; u++) isum += (int32_t)x->qs[u] * (int32_t)y->qs[u];
                s += (float)isum * (kr_half_to_float(x->d) * kr_half_to_float(y->d));
            }
            c[i * ldc + j] = s;
        }
    }
}

/* Rows j in order, each block's values level * d (one rounding,
 * kr_dequantize_row's value) added to the output columns: every element
 * still sums j in order, as kr_scalar_gemm_nn_acc over dequantised rows,
 * so the bits are equal, while each scale is read once per block. */
void kr_scalar_gemm_nn_acc_q8(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, int64_t m,
                              int64_t n, int64_t k) {
    const char *bc = b;
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        const float *ai = a + i * lda;
        for (int64_t j = 0; j < n; j++) {
            const char *bj = bc + (size_t)j * ldb;
            for (int64_t t = 0; t < k / KR_QK8_0; t++) {
                const kr_block_q8_0 *blk = q8_block(bj, t);
                const float d = kr_half_to_float(blk->d);
                float *ct = ci + t * KR_QK8_0;
                for (int u = 0; u < KR_QK8_0; u++) {
                    const float v = (float)blk->qs[u] * d;
                    ct[u] += ai[j] * v;
                }
            }
        }
    }
}
