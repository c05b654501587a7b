/*
 * avx512_gemv_k.c - matrix-vector products (decode: one activation row) for
 * Q4_K weights in their GGUF layout, with 512-bit VNNI.
 *
 * Why: Q4_K_M decode spends most of its time in Q4_K rows, and the 256-bit
 * block kernel of x86_dot_impl.h needs twice the instructions per weight
 * byte. Here one 256-element block is two 64-byte loads, four VPMADDUBSW
 * (unsigned nibbles x signed activations, int16 pair sums) and four VPDPWSSD
 * that multiply the pair sums by the sub-block scales and accumulate in
 * int32; the block's integer total is converted to f32 once and scaled by
 * d(weights) * d(activations). A 64-byte load of nibbles holds sub-blocks 0
 * and 2 in its low nibbles and 1 and 3 in its high nibbles, so the
 * activation row is rearranged once per call into that order (with its
 * 32-element sums, from the Q8_K bsums, for the min terms).
 * Scales are spread over the lanes with VPSHUFB, an in-lane shuffle, from
 * a per-lane broadcast: the cross-lane VPERMW makes the kernel slower.
 * Q6_K stays on the 256-bit block kernel: a 512-bit version of this
 * design streams more slowly from DRAM. (Figures for both and for this
 * kernel against the block kernel: docs/history/PERFORMANCE-2026-12.md, "Figures behind
 * the kernels' design choices".)
 */
#include "avx512_gemv.h"

#include <immintrin.h>

#include "avx512_gemv_impl.h"
#include "kernels_impl.h"

/* Rearranged Q8_K activation row for Q4_K: at most KR_GEMV_MAX_COLS. */
typedef struct gemv_xk {
    _Alignas(64) int8_t q[KR_GEMV_MAX_COLS];
    _Alignas(64) float d[KR_GEMV_MAX_COLS / KR_QK_K];
    _Alignas(64) int16_t sum32[KR_GEMV_MAX_COLS / 32]; /* per 32-element sub-block */
} gemv_xk;

/* Order per block: elements 0-31, 64-95 | 32-63, 96-127 | 128-159, 192-223 |
 * 160-191, 224-255: the lanes of the low/high nibbles of each 64-byte load. */
static void prepare_x_q4_K(const kr_block_q8_K *x, int64_t nb, gemv_xk *px) {
    static const int src[8] = {0, 64, 32, 96, 128, 192, 160, 224};
    for (int64_t b = 0; b < nb; b++) {
        int8_t *dst = px->q + KR_QK_K * b;
        for (int c = 0; c < 8; c++) memcpy(dst + 32 * c, x[b].qs + src[c], 32);
        px->d[b] = x[b].d;
        for (int s = 0; s < 8; s++) px->sum32[8 * b + s] = (int16_t)(x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
    }
}

/* One Q4_K weight row (144-byte blocks) against the prepared activations,
 * left unreduced: the scaled sums folded to 256 bits (*acc) and the min
 * terms (*accm); the row's product is hsum256(*acc) - hsum128(*accm). */
static inline __attribute__((always_inline)) void acc_q4_K(const uint8_t *row, int64_t nb, const gemv_xk *px,
                                                           __m256 *acc, __m128 *accm_out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* byte shuffles that spread int16 scale j over a 256-bit half: every
     * 128-bit lane holds all eight scales, lanes 0-1 take sub-block a, 2-3 b */
#define SPREAD(a, b) _mm512_set_epi64(S64(b), S64(b), S64(b), S64(b), S64(a), S64(a), S64(a), S64(a))
#define S64(j) (long long)(0x0101010101010101ULL * (uint64_t)(2 * (j)) + 0x0100010001000100ULL)
    const __m512i idx[4] = {SPREAD(0, 2), SPREAD(1, 3), SPREAD(4, 6), SPREAD(5, 7)};
#undef SPREAD
#undef S64
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = row + sizeof(kr_block_q4_K) * i;
        uint64_t sc8, mn8;
        kr_unpack_k4_scales_packed(blk + 4, &sc8, &mn8);
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8)));
        const __m128i mn = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn8));
        const __m512i w0 = _mm512_loadu_si512((const void *)(blk + 16));
        const __m512i w1 = _mm512_loadu_si512((const void *)(blk + 80));
        const int8_t *xq = px->q + KR_QK_K * i;
        const __m512i p0 = _mm512_maddubs_epi16(_mm512_and_si512(w0, m4), _mm512_load_si512((const void *)xq));
        const __m512i p1 = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(w0, 4), m4),
                                                _mm512_load_si512((const void *)(xq + 64)));
        const __m512i p2 = _mm512_maddubs_epi16(_mm512_and_si512(w1, m4), _mm512_load_si512((const void *)(xq + 128)));
        const __m512i p3 = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(w1, 4), m4),
                                                _mm512_load_si512((const void *)(xq + 192)));
        __m512i s01 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p0, _mm512_shuffle_epi8(sc, idx[0]));
        __m512i s23 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p2, _mm512_shuffle_epi8(sc, idx[2]));
        s01 = _mm512_dpwssd_epi32(s01, p1, _mm512_shuffle_epi8(sc, idx[1]));
        s23 = _mm512_dpwssd_epi32(s23, p3, _mm512_shuffle_epi8(sc, idx[3]));
        const float dx = px->d[i];
        const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(s01, s23));
        if (i & 1)
            acc1 = _mm512_fmadd_ps(sum, _mm512_set1_ps(f16_at(blk) * dx), acc1);
        else
            acc0 = _mm512_fmadd_ps(sum, _mm512_set1_ps(f16_at(blk) * dx), acc0);
        const __m128i md = _mm_madd_epi16(mn, _mm_load_si128((const __m128i *)(px->sum32 + 8 * i)));
        accm = _mm_fmadd_ps(_mm_cvtepi32_ps(md), _mm_set1_ps(f16_at(blk + 2) * dx), accm);
    }
    *acc = fold512(_mm512_add_ps(acc0, acc1));
    *accm_out = accm;
}

bool kr_avx512_gemv_k(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                      const void *x, float *y) {
    if (wtype != KR_TYPE_Q4_K || n_cols > KR_GEMV_MAX_COLS || n_cols % KR_QK_K != 0) {
        return false;
    }
    const int64_t nb = n_cols / KR_QK_K;
    const uint8_t *wb = w;
    gemv_xk px;
    prepare_x_q4_K(x, nb, &px);
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) { /* eight rows reduced together */
        __m256 acc[8];
        __m128 accm[8];
        for (int k = 0; k < 8; k++) acc_q4_K(wb + (size_t)(r + k) * w_row_bytes, nb, &px, &acc[k], &accm[k]);
        _mm256_storeu_ps(y + r, _mm256_sub_ps(hsum256_x8(acc), hsum128_x8(accm)));
    }
    for (; r < r1; r++) {
        __m256 acc;
        __m128 accm;
        acc_q4_K(wb + (size_t)r * w_row_bytes, nb, &px, &acc, &accm);
        y[r] = hsum256(acc) - hsum128(accm);
    }
    return true;
}
