/*
 * neon_x16_int_impl.h - matrix products for the interleaved layouts
 * Q4_0_X16, Q4_K_X16 and Q6_K_X16 (kernels.h), any number of activation
 * rows, written once: dotprod_x16.c compiles them with SDOT (ARMv8.2
 * dotprod, KR_NEON_DOTPROD 1), neon_x16.c without (0), where each SDOT is
 * two widening multiplies and two pairwise adds giving the same integer
 * sums, so both tables give the same bits.
 *
 * A 64-byte chunk of a layout holds 4 bytes of each of 16 rows: four
 * 16-byte registers of 4 rows each. SDOT by lane (vdotq_laneq_s32) takes
 * the 4 activation bytes those weight bytes meet straight from a register
 * of 16 activation bytes, so one instruction gives 4 rows x 4 products and
 * nothing is broadcast or reduced across lanes: where the file-layout
 * kernel ends every row's block with horizontal adds and scalar scale
 * arithmetic, these end a block of 16 rows with a few vector operations.
 * Nibbles go in unsigned (0..15, no subtraction of 8 per byte); Q4_0's
 * offset is taken back once per block from the activation block's sum.
 *
 * Activation rows go in passes of up to two (their accumulators and the
 * shared nibbles fit the 32 registers); each row's sums and float steps are
 * the same whatever the pass or batch, so a row's products have the same
 * bits at every batch size, which speculative decoding relies on.
 */
#ifndef KR_NEON_X16_INT_IMPL_H
#define KR_NEON_X16_INT_IMPL_H

#ifndef KR_NEON_DOTPROD
#error "define KR_NEON_DOTPROD (0 or 1) before including neon_x16_int_impl.h"
#endif

#include <arm_neon.h>
#include <string.h>

#include "kernels_impl.h"
#include "neon_kernels.h"

#define NRV_MAX 2

#if KR_NEON_DOTPROD
/* acc[r] += row r's 4 bytes of w times the 4 bytes of lane L of a: SDOT
 * by lane, one instruction */
#define LANE_DOT(acc, w, a, L) vdotq_laneq_s32((acc), (w), (a), (L))
/* The same in two steps, so that a lane used for many weight registers is
 * made ready once (SDOT reads it in place: nothing to make ready). */
#define LANE_PREP(a, L) (a)
#define LANE_DOT_PREP(acc, w, ap, L) vdotq_laneq_s32((acc), (w), (ap), (L))
#else
/* The same sums without SDOT: two widening multiplies against lane L's 4
 * bytes copied to every lane, two pairwise adds (products of 0..63 by an
 * int8 and their pairs fit int16). */
static inline int32x4_t dot_4x4(int32x4_t acc, int8x16_t w, int8x16_t a4) {
    const int16x8_t p01 = vmull_s8(vget_low_s8(w), vget_low_s8(a4)), p23 = vmull_high_s8(w, a4);
    return vpadalq_s16(acc, vpaddq_s16(p01, p23));
}
#define LANE_PREP(a, L) vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(a), (L)))
#define LANE_DOT(acc, w, a, L) dot_4x4((acc), (w), LANE_PREP(a, L))
#define LANE_DOT_PREP(acc, w, ap, L) dot_4x4((acc), (w), (ap))
#endif

static inline float32x4_t f16x4(const uint8_t *p) {
    uint16x4_t h;
    memcpy(&h, p, sizeof h);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* ---- Q4_0_X16: d[16] | 4 chunks (chunk c: qs bytes 4c..4c+3 of each row;
 * low nibbles elements 4c.., high nibbles 16 + 4c..) ---- */

static inline __attribute__((always_inline)) void group_q4_0(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                             size_t x_row_bytes, float *y, int64_t ldy, const int NRV) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc[NRV_MAX][4];
    for (int j = 0; j < NRV; j++)
        for (int r = 0; r < 4; r++) acc[j][r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q40_BLOCK * b;
        int8x16_t xl[NRV_MAX], xh[NRV_MAX];
        int32x4_t s[NRV_MAX][4];
        for (int j = 0; j < NRV; j++) {
            const kr_block_q8_0 *xb = (const kr_block_q8_0 *)(x + (size_t)j * x_row_bytes) + b;
            xl[j] = vld1q_s8(xb->qs);
            xh[j] = vld1q_s8(xb->qs + 16);
            /* the -8 of every weight: 8 * the block's activation sum, off each row */
            const int32_t off = 8 * (vaddlvq_s8(xl[j]) + vaddlvq_s8(xh[j]));
            for (int r = 0; r < 4; r++) s[j][r] = vdupq_n_s32(-off);
        }
        /* chunk C: each activation row's lane C made ready once (LANE_PREP),
         * then used by the 4 registers of rows */
#define Q40_CHUNK(C)                                                                                                   \
    do {                                                                                                               \
        int8x16_t xlc[NRV_MAX], xhc[NRV_MAX];                                                                          \
        for (int j = 0; j < NRV; j++) xlc[j] = LANE_PREP(xl[j], C), xhc[j] = LANE_PREP(xh[j], C);                      \
        for (int r = 0; r < 4; r++) {                                                                                  \
            const uint8x16_t w = vld1q_u8(o + KR_X16_Q40_QS + 64 * (C) + 16 * r);                                      \
            const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(w, m4));                                                 \
            const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));                                                \
            for (int j = 0; j < NRV; j++)                                                                              \
                s[j][r] = LANE_DOT_PREP(LANE_DOT_PREP(s[j][r], lo, xlc[j], C), hi, xhc[j], C);                         \
        }                                                                                                              \
    } while (0)
        Q40_CHUNK(0);
        Q40_CHUNK(1);
        Q40_CHUNK(2);
        Q40_CHUNK(3);
#undef Q40_CHUNK
        for (int j = 0; j < NRV; j++) {
            const kr_block_q8_0 *xb = (const kr_block_q8_0 *)(x + (size_t)j * x_row_bytes) + b;
            const float xd = kr_half_to_float(xb->d);
            for (int r = 0; r < 4; r++)
                acc[j][r] =
                    vfmaq_f32(acc[j][r], vcvtq_f32_s32(s[j][r]), vmulq_n_f32(f16x4(o + KR_X16_Q40_D + 8 * r), xd));
        }
    }
    for (int j = 0; j < NRV; j++)
        for (int r = 0; r < 4; r++) vst1q_f32(y + (size_t)j * (size_t)ldy + 4 * r, acc[j][r]);
}

/* ---- Q4_K_X16: d[16], dmin[16] | u0[16] u1[16] u2[16] | 32 chunks (chunk
 * 8p + q: qs bytes 32p + 4q.. of each row; low nibbles sub-block 2p,
 * elements 64p + 4q.., high nibbles sub-block 2p + 1, 64p + 32 + 4q..) ---- */

/* The 6-bit scales and mins of 4 rows from their three scale words, one
 * byte per sub-block: sc[0] sub-blocks 0-3, sc[1] 4-7; likewise mn. */
static inline void scales_q4k(const uint8_t *o, int r, uint32x4_t sc[2], uint32x4_t mn[2]) {
    const uint32x4_t u0 = vld1q_u32((const uint32_t *)(o + KR_X16_Q4K_U0 + 16 * r));
    const uint32x4_t u1 = vld1q_u32((const uint32_t *)(o + KR_X16_Q4K_U0 + 64 + 16 * r));
    const uint32x4_t u2 = vld1q_u32((const uint32_t *)(o + KR_X16_Q4K_U0 + 128 + 16 * r));
    const uint32x4_t m3f = vdupq_n_u32(0x3F3F3F3Fu), m0f = vdupq_n_u32(0x0F0F0F0Fu), m30 = vdupq_n_u32(0x30303030u);
    sc[0] = vandq_u32(u0, m3f);
    mn[0] = vandq_u32(u1, m3f);
    sc[1] = vorrq_u32(vandq_u32(u2, m0f), vandq_u32(vshrq_n_u32(u0, 2), m30));
    mn[1] = vorrq_u32(vandq_u32(vshrq_n_u32(u2, 4), m0f), vandq_u32(vshrq_n_u32(u1, 2), m30));
}

/* Byte k of each lane, as int32. */
static inline int32x4_t byte_of(uint32x4_t v, int k) {
    return vreinterpretq_s32_u32(vandq_u32(vshlq_u32(v, vdupq_n_s32(-8 * k)), vdupq_n_u32(0xFF)));
}

#define DOT_LANE(acc, w, a, lane)                                                                                      \
    switch (lane) {                                                                                                    \
    case 0: acc = LANE_DOT(acc, w, a, 0); break;                                                                       \
    case 1: acc = LANE_DOT(acc, w, a, 1); break;                                                                       \
    case 2: acc = LANE_DOT(acc, w, a, 2); break;                                                                       \
    default: acc = LANE_DOT(acc, w, a, 3); break;                                                                      \
    }

/* Rows 4r..4r+3 of a group against NRV activation rows. */
static inline __attribute__((always_inline)) void quad_q4_K(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, int r, float *y, int64_t ldy,
                                                            const int NRV) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc[NRV_MAX];
    for (int j = 0; j < NRV; j++) acc[j] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q4K_BLOCK * b;
        uint32x4_t sc[2], mn[2];
        scales_q4k(o, r, sc, mn);
        int32x4_t isum[NRV_MAX], imin[NRV_MAX];
        for (int j = 0; j < NRV; j++) isum[j] = imin[j] = vdupq_n_s32(0);
        for (int p = 0; p < 4; p++) {
            int32x4_t lo[NRV_MAX], hi[NRV_MAX];
            int8x16_t xa[NRV_MAX][4];
            for (int j = 0; j < NRV; j++) {
                const int8_t *q8 = ((const kr_block_q8_K *)(x + (size_t)j * x_row_bytes))[b].qs + 64 * p;
                for (int h = 0; h < 4; h++) xa[j][h] = vld1q_s8(q8 + 16 * h);
                lo[j] = hi[j] = vdupq_n_s32(0);
            }
            for (int q = 0; q < 8; q++) {
                const uint8x16_t w = vld1q_u8(o + KR_X16_Q4K_QS + 64 * (8 * p + q) + 16 * r);
                const int8x16_t wl = vreinterpretq_s8_u8(vandq_u8(w, m4));
                const int8x16_t wh = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
                for (int j = 0; j < NRV; j++) {
                    DOT_LANE(lo[j], wl, xa[j][q >> 2], q & 3);
                    DOT_LANE(hi[j], wh, xa[j][2 + (q >> 2)], q & 3);
                }
            }
            const int32x4_t sl = byte_of(sc[p >> 1], 2 * (p & 1)), sh = byte_of(sc[p >> 1], 2 * (p & 1) + 1);
            for (int j = 0; j < NRV; j++) isum[j] = vmlaq_s32(vmlaq_s32(isum[j], lo[j], sl), hi[j], sh);
        }
        for (int j = 0; j < NRV; j++) {
            const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes) + b;
            for (int k = 0; k < 8; k++)
                imin[j] = vmlaq_n_s32(imin[j], byte_of(mn[k >> 2], k & 3), xb->bsums[2 * k] + xb->bsums[2 * k + 1]);
            const float32x4_t d = vmulq_n_f32(f16x4(o + KR_X16_Q4K_D + 8 * r), xb->d);
            const float32x4_t dmin = vmulq_n_f32(f16x4(o + KR_X16_Q4K_DMIN + 8 * r), xb->d);
            acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(isum[j]), d);
            acc[j] = vfmsq_f32(acc[j], vcvtq_f32_s32(imin[j]), dmin);
        }
    }
    for (int j = 0; j < NRV; j++) vst1q_f32(y + (size_t)j * (size_t)ldy + 4 * r, acc[j]);
}

static inline __attribute__((always_inline)) void group_q4_K(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                             size_t x_row_bytes, float *y, int64_t ldy, const int NRV) {
    for (int r = 0; r < 4; r++) quad_q4_K(g, nb, x, x_row_bytes, r, y, ldy, NRV);
}

/* ---- Q6_K_X16: d[16] | scale pairs (sc[2t], sc[2t+1]) of each row, t < 8 |
 * 16 chunk triples (8h + c: ql bytes 64h + 4c, ql bytes 64h + 32 + 4c, qh
 * bytes 32h + 4c); value k of a byte (k < 4) is element 128h + 32k + 4c + i,
 * sub-block 8h + 2k + c / 4 ---- */

/* Rows 4r..4r+3 of a group against NRV activation rows. The values are
 * rebuilt 0..63 (the -32 of Q6_K comes off once per block: 32 times the
 * scales dotted with the activation sub-block sums). */
static inline __attribute__((always_inline)) void quad_q6_K(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                            size_t x_row_bytes, int r, float *y, int64_t ldy,
                                                            const int NRV) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    float32x4_t acc[NRV_MAX];
    for (int j = 0; j < NRV; j++) acc[j] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)KR_X16_Q6K_BLOCK * b;
        int32x4_t isum[NRV_MAX], off[NRV_MAX];
        for (int j = 0; j < NRV; j++) isum[j] = off[j] = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++) {
                /* the pair t = 4h + k of the 4 rows: sub-blocks 8h + 2k and 8h + 2k + 1 */
                const int16x8_t pr = vmovl_s8(vld1_s8((const int8_t *)o + KR_X16_Q6K_SC + 32 * (4 * h + k) + 8 * r));
                const int16x8_t even = vuzp1q_s16(pr, pr), odd = vuzp2q_s16(pr, pr);
                const int32x4_t sc[2] = {vmovl_s16(vget_low_s16(even)), vmovl_s16(vget_low_s16(odd))};
                for (int half = 0; half < 2; half++) {
                    int32x4_t a[NRV_MAX];
                    int8x16_t xq[NRV_MAX];
                    for (int j = 0; j < NRV; j++) {
                        const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes) + b;
                        xq[j] = vld1q_s8(xb->qs + 128 * h + 32 * k + 16 * half);
                        a[j] = vdupq_n_s32(0);
                    }
                    for (int cc = 0; cc < 4; cc++) {
                        const uint8_t *tr = o + KR_X16_Q6K_Q + 192 * (8 * h + 4 * half + cc);
                        const uint8x16_t ql = vld1q_u8(tr + (k & 1 ? 64 : 0) + 16 * r);
                        const uint8x16_t qh = vld1q_u8(tr + 128 + 16 * r);
                        const uint8x16_t lo = k < 2 ? vandq_u8(ql, m4) : vshrq_n_u8(ql, 4);
                        const uint8x16_t hi = k == 0 ? vshlq_n_u8(qh, 4)
                            : k == 1                 ? vshlq_n_u8(qh, 2)
                            : k == 2                 ? qh
                                                     : vshrq_n_u8(qh, 2);
                        const int8x16_t v = vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(hi, m30)));
                        for (int j = 0; j < NRV; j++) DOT_LANE(a[j], v, xq[j], cc);
                    }
                    for (int j = 0; j < NRV; j++) {
                        const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes) + b;
                        isum[j] = vmlaq_s32(isum[j], a[j], sc[half]);
                        off[j] = vmlaq_n_s32(off[j], sc[half], xb->bsums[8 * h + 2 * k + half]);
                    }
                }
            }
        for (int j = 0; j < NRV; j++) {
            const kr_block_q8_K *xb = (const kr_block_q8_K *)(x + (size_t)j * x_row_bytes) + b;
            const int32x4_t tot = vsubq_s32(isum[j], vshlq_n_s32(off[j], 5));
            acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(tot), vmulq_n_f32(f16x4(o + KR_X16_Q6K_D + 8 * r), xb->d));
        }
    }
    for (int j = 0; j < NRV; j++) vst1q_f32(y + (size_t)j * (size_t)ldy + 4 * r, acc[j]);
}

static inline __attribute__((always_inline)) void group_q6_K(const uint8_t *g, int64_t nb, const uint8_t *x,
                                                             size_t x_row_bytes, float *y, int64_t ldy, const int NRV) {
    for (int r = 0; r < 4; r++) quad_q6_K(g, nb, x, x_row_bytes, r, y, ldy, NRV);
}

/* Groups [g0, g1) of a layout against every activation row, in passes of
 * up to NRV_MAX rows. */
#define FOR_GROUPS(GROUP, gbytes)                                                                                      \
    for (int64_t gi = g0; gi < g1; gi++) {                                                                             \
        const uint8_t *g = (const uint8_t *)w + (size_t)(gbytes) * (size_t)gi;                                         \
        for (int64_t j0 = 0; j0 < n_batch; j0 += NRV_MAX) {                                                            \
            const uint8_t *xj = (const uint8_t *)x + (size_t)j0 * x_row_bytes;                                         \
            float *yj = y + j0 * ldy + KR_X16_ROWS * gi;                                                               \
            if (n_batch - j0 >= 2)                                                                                     \
                GROUP(g, nb, xj, x_row_bytes, yj, ldy, 2);                                                             \
            else                                                                                                       \
                GROUP(g, nb, xj, x_row_bytes, yj, ldy, 1);                                                             \
        }                                                                                                              \
    }

static bool gemv_x16(kr_type wtype, const void *w, size_t w_row_bytes, int64_t g0, int64_t g1, int64_t n_cols,
                     const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    const size_t gbytes = w_row_bytes * KR_X16_ROWS;
    if (wtype == KR_TYPE_Q4_0_X16 && n_cols % KR_QK4_0 == 0) {
        const int64_t nb = n_cols / KR_QK4_0;
        FOR_GROUPS(group_q4_0, gbytes)
        return true;
    }
    if (wtype == KR_TYPE_Q4_K_X16 && n_cols % KR_QK_K == 0) {
        const int64_t nb = n_cols / KR_QK_K;
        FOR_GROUPS(group_q4_K, gbytes)
        return true;
    }
    if (wtype == KR_TYPE_Q6_K_X16 && n_cols % KR_QK_K == 0) {
        const int64_t nb = n_cols / KR_QK_K;
        FOR_GROUPS(group_q6_K, gbytes)
        return true;
    }
    if (wtype == KR_TYPE_F32_X16)
        return kr_neon_gemv_x16_f32(w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy);
    return false;
}

/* A NEON table's matmul: threads take whole 16-row groups of the
 * interleaved layouts; everything else (file layouts) goes to the scalar
 * driver over the table's dot products. */
static void x16_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                       int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                       int ith, int nth) {
    if (kr_layout_source(wtype) != wtype) {
        n_rows =
            kr_matmul_layout_tail(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        int64_t g0, g1;
        kr_split_rows(n_rows / KR_X16_ROWS, ith, nth, &g0, &g1);
        if (gemv_x16(wtype, w, w_row_bytes, g0, g1, n_cols, x, x_row_bytes, n_batch, y, ldy)) return;
    }
    kr_scalar_matmul(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
}

#endif /* KR_NEON_X16_INT_IMPL_H */
