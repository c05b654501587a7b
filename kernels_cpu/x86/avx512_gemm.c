/*
 * avx512_gemm.c - matrix-matrix products (prefill: many activation rows)
 * for Q8_0, Q4_0, Q4_K and Q6_K weights with 512-bit VNNI (VPDPBUSD).
 *
 * Why: the block kernels dot one weight row with at most four activation
 * rows and pay the unpacking of every weight block again for each group of
 * four, so with many activation rows the unpacking, not the multiply-adds,
 * bounds prefill. Here a panel of weight rows is unpacked once into plain
 * bytes and reused for every activation row.
 *
 * Layout of a panel (PR = 16 lanes): 15 weight rows and one row of ones, for
 * KC columns, stored k-interleaved by 4: the 64 bytes at panel[k/4] hold 4
 * consecutive columns of each of the 16 lanes, which is exactly the operand
 * of one VPDPBUSD against 4 activation bytes broadcast to all lanes. Every
 * weight type is written as w = a * u + c per group of G columns (u the
 * unsigned byte, a and c per row and group: Q8_0 u = q + 128, c = -128 d;
 * Q4_0 u = nibble, c = -8 d; Q4_K a = d sc, c = -dmin m; Q6_K u = 6-bit value,
 * c = -32 d sc), so that
 *     dot(w_r, x) over a group = dx * (a_r * S_r + c_r * S_ones)
 * where S_r is the integer sum of u * x and S_ones (lane 15, the ones row)
 * the integer sum of the activation bytes of the group.
 *
 * Per group and activation row: G/4 VPDPBUSD, then one convert, one
 * permute (S_ones to every lane), two FMAs and a multiply by dx.
 */
#include "avx512_gemm.h"

#include <immintrin.h>

#include "kernels_impl.h"

#define PR 16       /* lanes of a panel: 15 weight rows and the ones row */
#define PW (PR - 1) /* weight rows per panel */
#define KC 1024     /* columns unpacked at a time (a multiple of 256): the panel stays in L1 */
#define NB 8        /* activation rows per step of the micro-kernel */

typedef struct panel {
    _Alignas(64) uint8_t u[KC * PR];   /* k-interleaved by 4 */
    _Alignas(64) float a[KC / 16][PR]; /* per group (at most KC/16 groups) */
    _Alignas(64) float c[KC / 16][PR];
} panel;

/* Activation geometry: Q8_0 (blocks of 32, f16 scale) or Q8_K (blocks of
 * 256, f32 scale). */
typedef struct xgeom {
    size_t block_bytes;
    int block_shift; /* log2 of the elements per block (32 or 256) */
    int qs_off;
    bool f16_scale;
} xgeom;

/* ---- unpacking one row segment [k0, k0 + kc) to bytes and group terms ---- */

/* tmp receives kc bytes; a and c one value per group of G. */
static int unpack_row(kr_type t, const uint8_t *row, int64_t k0, int kc, uint8_t *tmp, float *a, float *c) {
    switch (t) {
    case KR_TYPE_Q8_0: {
        const kr_block_q8_0 *b = (const kr_block_q8_0 *)row + k0 / 32;
        for (int i = 0; i < kc / 32; i++) {
            const float d = kr_half_to_float(b[i].d);
            for (int l = 0; l < 32; l++) tmp[32 * i + l] = (uint8_t)(b[i].qs[l] + 128);
            a[i] = d;
            c[i] = -128.0f * d;
        }
        return 32;
    }
    case KR_TYPE_Q4_0: {
        const kr_block_q4_0 *b = (const kr_block_q4_0 *)row + k0 / 32;
        for (int i = 0; i < kc / 32; i++) {
            const float d = kr_half_to_float(b[i].d);
            for (int l = 0; l < 16; l++) {
                tmp[32 * i + l] = b[i].qs[l] & 0x0F;
                tmp[32 * i + 16 + l] = b[i].qs[l] >> 4;
            }
            a[i] = d;
            c[i] = -8.0f * d;
        }
        return 32;
    }
    case KR_TYPE_Q4_K: {
        const kr_block_q4_K *b = (const kr_block_q4_K *)row + k0 / KR_QK_K;
        for (int i = 0; i < kc / KR_QK_K; i++) {
            const float d = kr_half_to_float(b[i].d), dmin = kr_half_to_float(b[i].dmin);
            uint8_t sc[8], mn[8];
            kr_unpack_scales_k4(b[i].scales, sc, mn);
            uint8_t *o = tmp + KR_QK_K * i;
            for (int j = 0; j < 4; j++) {
                for (int l = 0; l < 32; l++) {
                    o[64 * j + l] = b[i].qs[32 * j + l] & 0x0F;
                    o[64 * j + 32 + l] = b[i].qs[32 * j + l] >> 4;
                }
            }
            for (int s = 0; s < 8; s++) {
                a[8 * i + s] = d * (float)sc[s];
                c[8 * i + s] = -dmin * (float)mn[s];
            }
        }
        return 32;
    }
    case KR_TYPE_Q6_K: {
        const kr_block_q6_K *b = (const kr_block_q6_K *)row + k0 / KR_QK_K;
        for (int i = 0; i < kc / KR_QK_K; i++) {
            const float d = kr_half_to_float(b[i].d);
            uint8_t *o = tmp + KR_QK_K * i;
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
                for (int l = 0; l < 32; l++) {
                    o[128 * h + l] = (uint8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
                    o[128 * h + l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                    o[128 * h + l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                    o[128 * h + l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                }
            }
            for (int g = 0; g < 16; g++) {
                a[16 * i + g] = d * (float)b[i].scales[g];
                c[16 * i + g] = -32.0f * a[16 * i + g];
            }
        }
        return 16;
    }
    default: return 0;
    }
}

/* Unpack rows [r0, r0 + nr) (nr <= PW) of columns [k0, k0 + kc) into a
 * panel; missing rows are zero, lane 15 is the ones row. Returns G. */
static int pack_panel(kr_type t, const uint8_t *w, size_t w_row_bytes, int64_t r0, int nr, int64_t k0, int kc,
                      panel *p) {
    _Alignas(64) uint8_t tmp[KC];
    float a[KC / 16], c[KC / 16];
    uint32_t *dst = (uint32_t *)p->u;
    int g = 32;
    for (int r = 0; r < PR; r++) {
        int ng;
        if (r < nr && kr_layout_source(t) != t) {
            /* a load-time layout: this row's blocks back to file blocks first */
            _Alignas(64) uint8_t blk[KC / KR_QK_K * sizeof(kr_block_q6_K)]; /* the largest: Q6_K */
            const kr_type st = kr_layout_source(t);
            const int64_t bsz = kr_type_get(st)->block_size;
            kr_repacked_blocks(t, w, w_row_bytes, r0 + r, k0 / bsz, kc / bsz, blk);
            g = unpack_row(st, blk, 0, kc, tmp, a, c);
            ng = kc / g;
        } else if (r < nr) {
            g = unpack_row(t, w + (size_t)(r0 + r) * w_row_bytes, k0, kc, tmp, a, c);
            ng = kc / g;
        } else {
            memset(tmp, r == PW ? 1 : 0, (size_t)kc);
            ng = kc / 16;
            for (int i = 0; i < ng; i++) a[i] = c[i] = 0.0f;
        }
        for (int i = 0; i < ng; i++) {
            p->a[i][r] = a[i];
            p->c[i][r] = c[i];
        }
        const uint32_t *src = (const uint32_t *)tmp;
        for (int k4 = 0; k4 < kc / 4; k4++) dst[k4 * PR + r] = src[k4];
    }
    return g;
}

/* ---- the micro-kernel: one panel x NBV activation rows over kc columns ---- */

static inline float x_scale(const uint8_t *blk, bool f16) {
    if (f16) {
        uint16_t h;
        memcpy(&h, blk, 2);
        return _cvtsh_ss(h);
    }
    float d;
    memcpy(&d, blk, 4);
    return d;
}

static inline __attribute__((always_inline)) void micro(const panel *p, int G, int kc, int64_t k0,
                                                        const uint8_t *const *xrow, const xgeom *xg, __m512 *acc,
                                                        const int NBV) {
    const __m512i lane15 = _mm512_set1_epi32(15);
    const int ng = kc / G;
    for (int gi = 0; gi < ng; gi++) {
        const int64_t k = k0 + (int64_t)gi * G;
        const int64_t blk = k >> xg->block_shift;
        const int inblk = (int)(k & ((1 << xg->block_shift) - 1));
        __m512i s[NB];
        const uint8_t *xq[NB];
        for (int b = 0; b < NBV; b++) {
            s[b] = _mm512_setzero_si512();
            xq[b] = xrow[b] + (size_t)blk * xg->block_bytes + xg->qs_off + inblk;
        }
        const __m512i *wu = (const __m512i *)(p->u + (size_t)gi * G * PR);
        for (int q = 0; q < G / 4; q++) {
            const __m512i wv = _mm512_load_si512((const void *)(wu + q));
            for (int b = 0; b < NBV; b++) {
                int32_t x4;
                memcpy(&x4, xq[b] + 4 * q, 4);
                s[b] = _mm512_dpbusd_epi32(s[b], wv, _mm512_set1_epi32(x4));
            }
        }
        const __m512 av = _mm512_load_ps(p->a[gi]), cv = _mm512_load_ps(p->c[gi]);
        for (int b = 0; b < NBV; b++) {
            const __m512 sf = _mm512_cvtepi32_ps(s[b]);
            const __m512 ones = _mm512_permutexvar_ps(lane15, sf);
            const __m512 t = _mm512_fmadd_ps(av, sf, _mm512_mul_ps(cv, ones));
            const float dx = x_scale(xrow[b] + (size_t)blk * xg->block_bytes, xg->f16_scale);
            acc[b] = _mm512_fmadd_ps(t, _mm512_set1_ps(dx), acc[b]);
        }
    }
}

static void micro_dispatch(const panel *p, int G, int kc, int64_t k0, const uint8_t *const *xrow, const xgeom *xg,
                           __m512 *acc, int nbv) {
    switch (nbv) {
    case 1: micro(p, G, kc, k0, xrow, xg, acc, 1); break;
    case 2: micro(p, G, kc, k0, xrow, xg, acc, 2); break;
    case 3: micro(p, G, kc, k0, xrow, xg, acc, 3); break;
    case 4: micro(p, G, kc, k0, xrow, xg, acc, 4); break;
    case 5: micro(p, G, kc, k0, xrow, xg, acc, 5); break;
    case 6: micro(p, G, kc, k0, xrow, xg, acc, 6); break;
    case 7: micro(p, G, kc, k0, xrow, xg, acc, 7); break;
    default: micro(p, G, kc, k0, xrow, xg, acc, 8); break;
    }
}

int64_t kr_avx512_gemm_min_batch(kr_type wtype) {
    switch (wtype) {
    case KR_TYPE_Q8_0: return 16;
    case KR_TYPE_Q4_0: return 40;
    case KR_TYPE_Q4_K: return 32;
    case KR_TYPE_Q6_K: return 56;
    default: return INT64_MAX;
    }
}

bool kr_avx512_gemm(kr_type wtype, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                    const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy) {
    xgeom xg;
    switch (wtype) {
    case KR_TYPE_Q8_0:
    case KR_TYPE_Q4_0:
    case KR_TYPE_Q4_0_X16: xg = (xgeom){sizeof(kr_block_q8_0), 5, 2, true}; break;
    case KR_TYPE_Q4_K:
    case KR_TYPE_Q4_K_X16:
    case KR_TYPE_Q6_K:
    case KR_TYPE_Q6_K_X16: xg = (xgeom){sizeof(kr_block_q8_K), 8, 4, false}; break;
    default: return false;
    }
    if (n_cols % KR_QK_K != 0 && kr_type_get(wtype)->block_size == KR_QK_K) return false;
    if (n_cols % 32 != 0) return false;
    /* column chunks start on a multiple of KC (itself a multiple of 256), so
     * no weight or activation block is ever split; the panel (24 KiB) lives
     * on this thread's stack */
    panel pbuf;
    panel *p = &pbuf;
    const uint8_t *xb = x;
    for (int64_t pr0 = r0; pr0 < r1; pr0 += PW) {
        const int nr = (int)(r1 - pr0 < PW ? r1 - pr0 : PW);
        const __mmask16 store = (__mmask16)((1u << nr) - 1);
        for (int64_t k0 = 0; k0 < n_cols; k0 += KC) {
            const int kc = (int)(n_cols - k0 < KC ? n_cols - k0 : KC);
            const int G = pack_panel(wtype, w, w_row_bytes, pr0, nr, k0, kc, p);
            for (int64_t b0 = 0; b0 < n_batch; b0 += NB) {
                const int nbv = (int)(n_batch - b0 < NB ? n_batch - b0 : NB);
                const uint8_t *xrow[NB];
                __m512 acc[NB];
                for (int b = 0; b < nbv; b++) {
                    xrow[b] = xb + (size_t)(b0 + b) * x_row_bytes;
                    acc[b] = k0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(store, y + (b0 + b) * ldy + pr0);
                }
                micro_dispatch(p, G, kc, k0, xrow, &xg, acc, nbv);
                for (int b = 0; b < nbv; b++) _mm512_mask_storeu_ps(y + (b0 + b) * ldy + pr0, store, acc[b]);
            }
        }
    }
    return true;
}
