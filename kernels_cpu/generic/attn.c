/*
 * attn.c - the scalar reference of gemm_nn_acc: rows of attention
 * probabilities times the value rows of a block of cache slots, added to
 * the output rows.
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
