/*
 * x86_x16_impl.h - what the x86 kernels of the interleaved layouts (AVX-512:
 * avx512_gemv_x16_*.c, AVX2: avx2_gemv_x16_*.c) share whatever their vector
 * width: the prefetch of the next group, the loop over a thread's 16-row
 * groups with its passes of up to 4 activation rows, and the Q4_K
 * activation sub-block sums as int16 pairs. Plain C and SSE prefetches
 * only, so that it compiles under either ISA's flags.
 */
#ifndef KR_X86_X16_IMPL_H
#define KR_X86_X16_IMPL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define X16_NRX 4          /* activation rows per pass over a weight group */
#define X16_SWEEP 32       /* activation rows per sweep over a thread's groups */
#define X16_MAX_COLS 32768 /* widest row the Q4_K and Q4_0 kernels take (their pair and block-sum tables) */

/* What a pass prefetches: lines part, part + parts, ... of each block of
 * group g (NULL: nothing). Why: when several passes of 4 activation rows go
 * over a group, going back to the group's start breaks the hardware
 * prefetcher's stream, so the next group must be fetched by hand; and
 * fetched over all the passes, not the first alone, or the memory idles
 * while the later passes compute (docs/history/PERFORMANCE-2026-12.md, "Figures behind the
 * kernels' design choices"). */
typedef struct x16_pf {
    const uint8_t *g;
    int part, parts;
} x16_pf;

#define X16_PF_NONE ((x16_pf){NULL, 0, 1})

/* 4 bytes at p in every 32-bit lane: the activation bytes one VPMADDUBSW
 * of the AVX2 kernels meets. */
static inline __m256i x16_bcast4_ymm(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* An empty asm that claims to change v: keeps an accumulator in its
 * register from one step to the next. Why: GCC 12 otherwise reassociates
 * the int16 sums of the AVX2 kernels into a tree, computes all 32-64
 * products first and parks them on the stack, which made the Q4_K kernel
 * no faster than the block kernel. */
#define X16_KEEP(v) __asm__("" : "+x"(v))

/* Block b's share of pf into L2.
 * always_inline: as a plain inline function GCC 12 dropped the prefetches
 * from the kernels altogether. */
static inline __attribute__((always_inline)) void x16_prefetch(x16_pf pf, int64_t b, int block_bytes) {
    if (pf.g == NULL) return;
    const char *p = (const char *)pf.g + (size_t)block_bytes * b;
    for (int l = 64 * pf.part; l < block_bytes; l += 64 * pf.parts) _mm_prefetch(p + l, _MM_HINT_T1);
}

/* For each group gi in [g0, g1) of a matrix with gbytes per group, and each
 * pass of up to X16_NRX of the sweep's nc activation rows (from row j0),
 * runs CALL(NRV) with g (the group), yg (its first output, in the sweep
 * starting at output row c0), j0 and pf (its share of the next group) in
 * scope. The next group is fetched on a sweep's only pass too (decode, and
 * verify steps of up to 4 entries): without it one activation row streamed
 * a 75 MB Q4_K matrix at 0.65x the block kernel on AVX2, and on AVX-512 one
 * pass of 4 rows cost more than two passes of 5 (docs/history/PERFORMANCE-2026-12.md,
 * "Decode: the next weight group fetched on a single pass too"). Two groups
 * ahead measured no better. */
#define X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)                                                        \
    for (int64_t gi = (g0); gi < (g1); gi++) {                                                                         \
        const uint8_t *g = (const uint8_t *)(w) + (size_t)(gbytes) * (size_t)gi;                                       \
        float *yg = (y) + (c0) * (ldy) + KR_X16_ROWS * gi;                                                             \
        const int npass_ = (int)(((nc) + X16_NRX - 1) / X16_NRX);                                                      \
        const uint8_t *pfg_ = gi + 1 < (g1) ? g + (gbytes) : NULL;                                                     \
        for (int64_t j0 = 0; j0 < (nc); j0 += X16_NRX) {                                                               \
            const x16_pf pf = {pfg_, (int)(j0 / X16_NRX), npass_};                                                     \
            switch ((nc)-j0 < X16_NRX ? (nc)-j0 : X16_NRX) {                                                           \
            case 1: CALL(1); break;                                                                                    \
            case 2: CALL(2); break;                                                                                    \
            case 3: CALL(3); break;                                                                                    \
            default: CALL(4); break;                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    }

/* Per activation row and Q4_K block, the sums of its eight 32-element
 * sub-blocks as int16 pairs (s0|s2, s1|s3, s4|s6, s5|s7): the operands of
 * the min terms' multiply-adds (VPDPWSSD, VPMADDWD) against the rows'
 * (m0, m2), (m1, m3), ... pairs. */
typedef struct x16_pairs {
    int32_t p[X16_SWEEP][X16_MAX_COLS / KR_QK_K][4];
} x16_pairs;

static inline void x16_prepare_pairs(const uint8_t *x, size_t x_row_bytes, int64_t n_batch, int64_t nb, x16_pairs *xp) {
    for (int64_t j = 0; j < n_batch; j++) {
        const kr_block_q8_K *xr = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes);
        for (int64_t b = 0; b < nb; b++) {
            int32_t s[8];
            for (int k = 0; k < 8; k++) s[k] = xr[b].bsums[2 * k] + xr[b].bsums[2 * k + 1];
            for (int q = 0; q < 4; q++) {
                const int lo = (q & 1) + 4 * (q >> 1); /* 0, 1, 4, 5 */
                xp->p[j][b][q] = (int32_t)((uint32_t)(uint16_t)s[lo] | ((uint32_t)(uint16_t)s[lo + 2] << 16));
            }
        }
    }
}

/* Most 32-value blocks in a row of the Q4_0 kernels (their block-sum table). */
#define X16_Q40_MAX_NB (X16_MAX_COLS / KR_QK4_0)

/* The sum of every Q8_0 activation block of a sweep's nc rows: the Q4_0
 * kernels store weights as unsigned nibbles (value + 8) and take 8 * this
 * off each block's integer sum. Computed once per sweep rather than once
 * per 16-row group; the same integers, so the same bits. */
static inline void x16_q40_block_sums(const uint8_t *x, size_t x_row_bytes, int64_t nc, int64_t nb,
                                      int16_t xs[X16_SWEEP][X16_Q40_MAX_NB]) {
    for (int64_t j = 0; j < nc; j++) {
        const kr_block_q8_0 *xr = (const kr_block_q8_0 *)(x + (size_t)j * x_row_bytes);
        for (int64_t b = 0; b < nb; b++) {
            int s = 0;
            for (int l = 0; l < 32; l++) s += xr[b].qs[l];
            xs[j][b] = (int16_t)s;
        }
    }
}

/* The Q4_0 kernels' sweeps over n_batch Q8_0 activation rows of nb blocks:
 * each sweep's block sums, then X16_FOR_GROUPS with CALL(NRV), which finds
 * xc (the sweep's first activation row) and xs (its block sums, for rows
 * of xc) in scope besides X16_FOR_GROUPS' own. */
#define X16_Q40_SWEEPS(w, gbytes, g0, g1, nb, x, x_row_bytes, n_batch, y, ldy, CALL)                                   \
    do {                                                                                                               \
        int16_t xs_[X16_SWEEP][X16_Q40_MAX_NB]; /* 64 KiB */                                                           \
        for (int64_t c0 = 0; c0 < (n_batch); c0 += X16_SWEEP) {                                                        \
            const int64_t nc = (n_batch)-c0 < X16_SWEEP ? (n_batch)-c0 : X16_SWEEP;                                    \
            const uint8_t *xc = (const uint8_t *)(x) + (size_t)c0 * (x_row_bytes);                                     \
            x16_q40_block_sums(xc, (x_row_bytes), nc, (nb), xs_);                                                      \
            const int16_t(*xs)[X16_Q40_MAX_NB] = (const int16_t(*)[X16_Q40_MAX_NB])xs_;                                \
            X16_FOR_GROUPS(w, gbytes, g0, g1, y, ldy, c0, nc, CALL)                                                    \
        }                                                                                                              \
    } while (0)

#endif /* KR_X86_X16_IMPL_H */
