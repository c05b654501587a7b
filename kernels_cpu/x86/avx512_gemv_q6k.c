/*
 * avx512_gemv_q6k.c - matrix-vector product (decode: one activation row)
 * for Q6_K weights, the type of the output matrix in Q4_K_M and Q4_0 mixes
 * (a third of a Qwen3-0.6B model's bytes).
 *
 * The arithmetic is the 256-bit block kernel's (acc_q6_K of x86_dot_impl.h,
 * with VNNI); a 512-bit version was slower from memory on Zen 4. What this
 * adds is the row loop: called directly rather than through the per-row
 * kernel pointer, and eight rows' accumulators reduced together
 * (hsum256_x8, same bits as one at a time), which on 1024-column rows of 4
 * blocks cost about as much as a block. Measured on the 151936 x 1024 output
 * shape with the rows in cache: 28 -> 33 GB/s.
 */
#define KARA_X86_VNNI 1
#include "x86_dot_impl.h"

#include "avx512_gemv.h"

bool kara_avx512_gemv_q6_K(const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void *x,
                           float *y)
{
    if (n_cols % KARA_QK_K != 0) {
        return false;
    }
    const char *wb = w;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        __m256 acc[8];
        for (int k = 0; k < 8; k++) acc_q6_K(n_cols, wb + (size_t)(r + k) * w_row_bytes, x, 0, &acc[k], 1);
        _mm256_storeu_ps(y + r, hsum256_x8(acc));
    }
    for (; r < r1; r++) {
        __m256 acc;
        acc_q6_K(n_cols, wb + (size_t)r * w_row_bytes, x, 0, &acc, 1);
        y[r] = hsum256(acc);
    }
    return true;
}
