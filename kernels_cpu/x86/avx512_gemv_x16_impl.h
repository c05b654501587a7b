/*
 * avx512_gemv_x16_impl.h - what the kernels of the interleaved layouts
 * (avx512_gemv_x16_{q4k,q6k,q40}.c) share: the broadcast of 4 activation
 * bytes, the prefetch of the next group, and the loop over a thread's
 * 16-row groups with its passes of up to 4 activation rows (the pass and
 * sweep sizes also serve avx512_gemv_x16_f32.c, which pairs groups).
 */
#ifndef KR_AVX512_GEMV_X16_IMPL_H
#define KR_AVX512_GEMV_X16_IMPL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define X16_NRX 4    /* activation rows per pass over a weight group */
#define X16_SWEEP 32 /* activation rows per sweep over a thread's groups */

static inline __m512i x16_bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* Block b of the next group (pf, or nothing if NULL) into L2. Why: when
 * several passes of 4 activation rows go over a group, going back to the
 * group's start breaks the hardware prefetcher's stream, so without this
 * the next group would come from DRAM only when the kernel reached it and
 * 5-8 rows would run slower than 4 (docs/PERFORMANCE.md, "Figures behind
 * the kernels' design choices").
 * always_inline: as a plain inline function GCC 12 dropped the prefetches
 * from the kernels altogether. */
static inline __attribute__((always_inline)) void x16_prefetch(const uint8_t *pf, int64_t b, int block_bytes) {
    if (pf == NULL) return;
    for (int l = 0; l < block_bytes; l += 64)
        _mm_prefetch((const char *)(pf + (size_t)block_bytes * b + l), _MM_HINT_T1);
}

/* For each group gi in [g0, g1) of a matrix with gbytes per group, and each
 * pass of up to X16_NRX of the sweep's nc activation rows (from row j0),
 * runs CALL(NRV) with g (the group), yg (its first output, in the sweep
 * starting at output row c0), j0 and pf (the next group on the first of
 * several passes, else NULL) in scope. */
#define X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)                                                        \
    for (int64_t gi = (g0); gi < (g1); gi++) {                                                                         \
        const uint8_t *g = (const uint8_t *)(w) + (size_t)(gbytes) * (size_t)gi;                                       \
        float *yg = (y) + (c0) * (ldy) + KR_X16_ROWS * gi;                                                             \
        const uint8_t *pf = (nc) > X16_NRX && gi + 1 < (g1) ? g + (gbytes) : NULL;                                     \
        for (int64_t j0 = 0; j0 < (nc); j0 += X16_NRX, pf = NULL) {                                                    \
            switch ((nc)-j0 < X16_NRX ? (nc)-j0 : X16_NRX) {                                                           \
            case 1: CALL(1); break;                                                                                    \
            case 2: CALL(2); break;                                                                                    \
            case 3: CALL(3); break;                                                                                    \
            default: CALL(4); break;                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    }

#endif /* KR_AVX512_GEMV_X16_IMPL_H */
