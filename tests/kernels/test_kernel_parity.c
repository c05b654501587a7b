/*
 * test_kernel_parity.c - every kernel of every ISA table this machine runs
 * against the scalar reference, and the scalar quantized dot products
 * against a double-precision dot of the dequantized rows.
 *
 * Error bounds (all relative to sum|w_i x_i|, the size of the dot product's
 * terms, unless noted):
 *   - scalar vec_dot vs dequantized double dot: 1e-5 (integer block sums
 *     are exact; only the per-block float scaling rounds), plus, for Q4_1
 *     and Q5_1, the fp16 rounding of the Q8_1 block sums s (|m| |s| 2^-11);
 *   - SIMD vec_dot and matmul vs scalar vec_dot, same activations: 1e-5;
 *   - SIMD from_float: F32/F16/BF16 byte-exact; Q8_* scales within one fp16
 *     ulp, values within one step, < 1% of values off by a step, and the
 *     stored sums (Q8_1 s, Q8_K bsums) consistent with the values;
 *   - rmsnorm, softmax, silu_mul: 1e-5 relative + 1e-6 absolute per element;
 *     dot/axpy: 1e-5 of sum|terms|; f32_to_f16 and dequant_kv bit-exact.
 *   - avx512 matmul of Q8_0, Q4_0, Q4_K and Q6_K with R activation rows,
 *     R below the type's panel-GEMM batch: every row bit-identical to the
 *     product of that activation row alone (batched decode answers do not
 *     depend on how many sequences share a step).
 */
#include "kernels.h"
#include "test_util.h"
#if defined(__x86_64__) || defined(_M_X64)
#include "x86/avx512_gemm.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rng_uniform(void) { return (rng_u32() + 0.5f) / 4294967296.0f; }

static float rng_gauss(void) {
    const float u1 = rng_uniform(), u2 = rng_uniform();
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* Gaussian values with a few outliers, like real weights and activations. */
static void fill_data(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) {
        x[i] = scale * rng_gauss();
        if (rng_u32() % 97 == 0) {
            x[i] *= 8.0f;
        }
    }
}

static const kr_type weight_types[] = {
    KR_TYPE_F32,  KR_TYPE_F16,  KR_TYPE_BF16, KR_TYPE_Q4_0, KR_TYPE_Q4_1, KR_TYPE_Q5_0,
    KR_TYPE_Q5_1, KR_TYPE_Q8_0, KR_TYPE_Q4_K, KR_TYPE_Q5_K, KR_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

static const kr_type act_types[] = {
    KR_TYPE_F32, KR_TYPE_F16, KR_TYPE_BF16, KR_TYPE_Q8_0, KR_TYPE_Q8_1, KR_TYPE_Q8_K,
};
#define N_ACT_TYPES (sizeof(act_types) / sizeof(act_types[0]))

enum { MAX_N = 4096 + 256 };

static const char *tname(kr_type t) { return kr_type_get(t)->name; }

/* Lengths to try for a type: tails for the plain float types, several
 * block counts for the block formats. */
static int lengths_for(kr_type t, int64_t *out) {
    const int bs = kr_type_get(t)->block_size;
    if (bs == 1) {
        static const int64_t ls[] = {1, 7, 16, 33, 100, 255, 1024, 4099};
        memcpy(out, ls, sizeof(ls));
        return 8;
    }
    if (bs == 32) {
        static const int64_t ls[] = {32, 96, 256, 544, 4096 + 32};
        memcpy(out, ls, sizeof(ls));
        return 5;
    }
    static const int64_t ls[] = {256, 512, 768, 4096};
    memcpy(out, ls, sizeof(ls));
    return 4;
}

/* Sum |w_i x_i| over the dequantized rows: the scale of the dot's terms. */
static double abs_dot(const float *w, const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs((double)w[i] * x[i]);
    }
    return s;
}

/* Extra slack for *_1 formats: their dot uses the Q8_1 block sum s rounded
 * to fp16 instead of d * sum(qs). */
static double q8_1_slack(kr_type wt, const void *qw, const void *qx, int64_t n) {
    if (wt != KR_TYPE_Q4_1 && wt != KR_TYPE_Q5_1) {
        return 0.0;
    }
    const kr_block_q8_1 *x = qx;
    double slack = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        const float m = wt == KR_TYPE_Q4_1 ? kr_fp16_to_fp32(((const kr_block_q4_1 *)qw)[i].m)
                                           : kr_fp16_to_fp32(((const kr_block_q5_1 *)qw)[i].m);
        slack += fabs(m) * fabs(kr_fp16_to_fp32(x[i].s)) / 2048.0;
    }
    return slack;
}

static float wf[MAX_N], xf[MAX_N], wd[MAX_N], xd[MAX_N];
static unsigned char qw[MAX_N * 4], qx[MAX_N * 4], qx2[MAX_N * 4];

/* Scalar quantized dot == double dot of the dequantized operands. */
static void test_scalar_vs_dequant(const kr_kernels *ref) {
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        const kr_type wt = weight_types[t];
        const kr_type vt = kr_type_get(wt)->vec_dot_type;
        int64_t lens[8];
        const int nl = lengths_for(wt, lens);
        for (int li = 0; li < nl; li++) {
            const int64_t n = lens[li];
            fill_data(wf, n, 0.05f);
            fill_data(xf, n, 1.0f);
            CHECK(kr_quantize_row(wt, wf, qw, n));
            ref->from_float[vt](xf, qx, n);
            kr_dequantize_row(wt, qw, wd, n);
            kr_dequantize_row(vt, qx, xd, n);
            double exact = 0;
            for (int64_t i = 0; i < n; i++) exact += (double)wd[i] * xd[i];
            const double tol = 1e-5 * abs_dot(wd, xd, n) + q8_1_slack(wt, qw, qx, n) + 1e-30;
            float got = NAN;
            ref->vec_dot[wt](n, &got, qw, qx);
            CHECK_MSG(fabs(got - exact) <= tol, "scalar vec_dot %s n=%lld: %.9g vs dequantized %.9g (tol %.3g)",
                      tname(wt), (long long)n, got, exact, tol);
        }
    }
}

/* SIMD vec_dot == scalar vec_dot on the same (scalar-converted) inputs. */
static void test_vec_dot(const kr_kernels *k, const kr_kernels *ref) {
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        const kr_type wt = weight_types[t];
        const kr_type vt = kr_type_get(wt)->vec_dot_type;
        if (!CHECK_MSG(k->vec_dot[wt] != NULL, "%s: no vec_dot for %s", k->name, tname(wt))) {
            continue;
        }
        int64_t lens[8];
        const int nl = lengths_for(wt, lens);
        for (int li = 0; li < nl; li++) {
            const int64_t n = lens[li];
            fill_data(wf, n, 0.05f);
            fill_data(xf, n, 1.0f);
            kr_quantize_row(wt, wf, qw, n);
            ref->from_float[vt](xf, qx, n);
            kr_dequantize_row(wt, qw, wd, n);
            kr_dequantize_row(vt, qx, xd, n);
            float want = NAN, got = NAN;
            ref->vec_dot[wt](n, &want, qw, qx);
            k->vec_dot[wt](n, &got, qw, qx);
            const double tol = 1e-5 * abs_dot(wd, xd, n) + 1e-30;
            CHECK_MSG(fabs(got - want) <= tol, "%s vec_dot %s n=%lld: %.9g vs scalar %.9g (tol %.3g)", k->name,
                      tname(wt), (long long)n, got, want, tol);
        }
    }
}

/* SIMD activation conversion vs the scalar one. */
static void test_from_float(const kr_kernels *k, const kr_kernels *ref) {
    for (size_t a = 0; a < N_ACT_TYPES; a++) {
        const kr_type at = act_types[a];
        if (!CHECK_MSG(k->from_float[at] != NULL, "%s: no from_float for %s", k->name, tname(at))) {
            continue;
        }
        int64_t lens[8];
        const int nl = lengths_for(at, lens);
        for (int li = 0; li < nl; li++) {
            const int64_t n = lens[li];
            fill_data(xf, n, 1.0f);
            if (li == 0) {
                memset(xf, 0, (size_t)n * sizeof(float)); /* all-zero blocks */
            }
            const size_t bytes = kr_type_row_size(at, n);
            ref->from_float[at](xf, qx, n);
            k->from_float[at](xf, qx2, n);
            if (at == KR_TYPE_F32 || at == KR_TYPE_F16 || at == KR_TYPE_BF16) {
                CHECK_MSG(memcmp(qx, qx2, bytes) == 0, "%s from_float %s n=%lld differs from scalar", k->name,
                          tname(at), (long long)n);
                continue;
            }
            kr_dequantize_row(at, qx, xd, n);
            kr_dequantize_row(at, qx2, wd, n);
            const int bs = kr_type_get(at)->block_size;
            int off_step = 0, off_far = 0, bad_scale = 0, bad_sums = 0;
            for (int64_t b = 0; b < n / bs; b++) {
                float d_ref, d_got;
                if (at == KR_TYPE_Q8_K) {
                    const kr_block_q8_K *blk = (const kr_block_q8_K *)qx2 + b;
                    d_ref = ((const kr_block_q8_K *)qx)[b].d;
                    d_got = blk->d;
                    for (int j = 0; j < 16; j++) {
                        int s = 0;
                        for (int l = 0; l < 16; l++) s += blk->qs[16 * j + l];
                        bad_sums += s != blk->bsums[j];
                    }
                } else if (at == KR_TYPE_Q8_1) {
                    const kr_block_q8_1 *blk = (const kr_block_q8_1 *)qx2 + b;
                    d_ref = kr_fp16_to_fp32(((const kr_block_q8_1 *)qx)[b].d);
                    d_got = kr_fp16_to_fp32(blk->d);
                    int s = 0;
                    for (int l = 0; l < 32; l++) s += blk->qs[l];
                    const float sd = s * d_got, ss = kr_fp16_to_fp32(blk->s);
                    bad_sums += fabsf(ss - sd) > fabsf(sd) / 1024 + 1e-30f;
                } else {
                    d_ref = kr_fp16_to_fp32(((const kr_block_q8_0 *)qx)[b].d);
                    d_got = kr_fp16_to_fp32(((const kr_block_q8_0 *)qx2)[b].d);
                }
                bad_scale += fabsf(d_ref - d_got) > fabsf(d_ref) / 1024;
                for (int j = 0; j < bs; j++) {
                    const float diff = fabsf(xd[b * bs + j] - wd[b * bs + j]);
                    if (diff > 1.01f * fabsf(d_ref) + 1e-30f)
                        off_far++;
                    else if (diff > 0.01f * fabsf(d_ref))
                        off_step++;
                }
            }
            CHECK_MSG(bad_scale == 0, "%s from_float %s n=%lld: %d block scales differ", k->name, tname(at),
                      (long long)n, bad_scale);
            CHECK_MSG(off_far == 0 && off_step * 100 <= n, "%s from_float %s n=%lld: %d values off by >1 step, %d by 1",
                      k->name, tname(at), (long long)n, off_far, off_step);
            CHECK_MSG(bad_sums == 0, "%s from_float %s n=%lld: %d stored sums disagree with the values", k->name,
                      tname(at), (long long)n, bad_sums);
        }
    }
}

/* matmul: every (row, batch) cell equals the scalar vec_dot; each (ith, nth)
 * slice writes only its rows; padding beyond n_rows in each Y row is left
 * alone. */
static void test_matmul(const kr_kernels *k, const kr_kernels *ref) {
    enum { ROWS = 37, MAXB = 64, LDY = ROWS + 3 };
    /* both sides of every ISA's switches: avx512 one-row gemv (1), few-row
     * gemv (2 up to the type's panel batch, added below) and panel kernels;
     * avx2 block kernels in groups of 4 */
    static const int base_batches[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 41};
    static const int nths[] = {1, 2, 3, 5};
    float *w = malloc(sizeof(float) * ROWS * 1024);
    float *x = malloc(sizeof(float) * MAXB * 1024);
    float *wdq = malloc(sizeof(float) * ROWS * 1024);
    float *xdq = malloc(sizeof(float) * MAXB * 1024);
    unsigned char *wq = malloc((size_t)ROWS * 1024 * 4);
    unsigned char *xq = malloc((size_t)MAXB * 1024 * 4);
    float *want = malloc(sizeof(float) * MAXB * LDY);
    float *tol = malloc(sizeof(float) * MAXB * LDY);
    float *got = malloc(sizeof(float) * MAXB * LDY);
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        const kr_type wt = weight_types[t];
        const kr_type vt = kr_type_get(wt)->vec_dot_type;
        /* 608 = 19 blocks of 32: the 8-block steps of the gemv kernels plus a
         * tail of 3 blocks (a partial group of 4 for Q4_0) */
        const int64_t bs = kr_type_get(wt)->block_size;
        const int64_t cols = bs == KR_QK_K ? (wt == KR_TYPE_Q4_K ? 1024 : 512) : 608;
        const size_t wrow = kr_type_row_size(wt, cols), xrow = kr_type_row_size(vt, cols);
        fill_data(w, ROWS * cols, 0.05f);
        fill_data(x, MAXB * cols, 1.0f);
        for (int r = 0; r < ROWS; r++) {
            kr_quantize_row(wt, w + r * cols, wq + r * wrow, cols);
            kr_dequantize_row(wt, wq + r * wrow, wdq + r * cols, cols);
        }
        for (int b = 0; b < MAXB; b++) {
            ref->from_float[vt](x + b * cols, xq + b * xrow, cols);
            kr_dequantize_row(vt, xq + b * xrow, xdq + b * cols, cols);
        }
        for (int b = 0; b < MAXB; b++) {
            for (int r = 0; r < ROWS; r++) {
                ref->vec_dot[wt](cols, &want[b * LDY + r], wq + r * wrow, xq + b * xrow);
                tol[b * LDY + r] = (float)(1e-5 * abs_dot(wdq + r * cols, xdq + b * cols, cols));
            }
        }
        int batches[sizeof(base_batches) / sizeof(base_batches[0]) + 3], n_batches = 0;
        for (size_t bi = 0; bi < sizeof(base_batches) / sizeof(base_batches[0]); bi++) {
            batches[n_batches++] = base_batches[bi];
        }
#if defined(__x86_64__) || defined(_M_X64)
        const int64_t min_gemm = kr_avx512_gemm_min_batch(wt); /* INT64_MAX: no panel GEMM for the type */
        if (min_gemm <= MAXB + 1)
            for (int64_t m = min_gemm - 1; m <= min_gemm + 1 && m <= MAXB; m++) batches[n_batches++] = (int)m;
#endif
        int bad = 0, bad_slice = 0, bad_pad = 0;
        for (int bi = 0; bi < n_batches; bi++) {
            const int nb = batches[bi];
            for (size_t ni = 0; ni < sizeof(nths) / sizeof(nths[0]); ni++) {
                const int nth = nths[ni];
                for (int i = 0; i < MAXB * LDY; i++) got[i] = NAN;
                for (int ith = 0; ith < nth; ith++) {
                    k->matmul(k, wt, wq, wrow, ROWS, cols, xq, xrow, nb, got, LDY, ith, nth);
                    /* rows of later slices are still untouched */
                    const int64_t done = ((ROWS + nth - 1) / nth) * (ith + 1);
                    for (int b = 0; b < nb; b++) {
                        for (int64_t r = done; r < ROWS; r++) bad_slice += !isnan(got[b * LDY + r]);
                    }
                }
                for (int b = 0; b < MAXB; b++) {
                    for (int r = 0; r < LDY; r++) {
                        const float g = got[b * LDY + r];
                        if (b >= nb || r >= ROWS) {
                            bad_pad += !isnan(g);
                        } else if (!(fabsf(g - want[b * LDY + r]) <= tol[b * LDY + r] + 1e-30f)) {
                            if (bad < 3) {
                                fprintf(stderr, "  %s matmul %s b=%d r=%d nb=%d nth=%d: %.9g vs %.9g\n", k->name,
                                        tname(wt), b, r, nb, nth, g, want[b * LDY + r]);
                            }
                            bad++;
                        }
                    }
                }
            }
        }
        CHECK_MSG(bad == 0, "%s matmul %s: %d cells differ from scalar vec_dot", k->name, tname(wt), bad);
        CHECK_MSG(bad_slice == 0, "%s matmul %s: %d cells written outside the thread's slice", k->name, tname(wt),
                  bad_slice);
        CHECK_MSG(bad_pad == 0, "%s matmul %s: %d cells written beyond n_rows or n_batch", k->name, tname(wt), bad_pad);
    }
    free(w);
    free(x);
    free(wdq);
    free(xdq);
    free(wq);
    free(xq);
    free(want);
    free(tol);
    free(got);
}

/* gemm_nn_acc (attention: probabilities times value rows, added to the
 * output): every ISA against the scalar reference, f16 and f32 value rows
 * with padded strides, widths with and without a tail of columns. */
static void test_gemm_nn_acc(const kr_kernels *k, const kr_kernels *ref) {
    /* up to 18 rows (a 9-entry verify step, 2 query heads per KV head);
     * k of 8 (all tail), 32, 40 and 100 (a band of 32 and 8-column tails) */
    enum { MAXM = 18, MAXN = 17, MAXK = 136, LD = MAXK + 5 };
    static const int64_t ks[] = {8, 32, 40, 100, 128, 136};
    float *a = malloc(sizeof(float) * MAXM * MAXN), *bf = malloc(sizeof(float) * MAXN * LD);
    kr_fp16 *bh = malloc(sizeof(kr_fp16) * MAXN * LD);
    float *c0 = malloc(sizeof(float) * MAXM * LD), *want = malloc(sizeof(float) * MAXM * LD),
          *got = malloc(sizeof(float) * MAXM * LD), *alone = malloc(sizeof(float) * MAXM * LD);
    fill_data(a, MAXM * MAXN, 1.0f);
    fill_data(bf, MAXN * LD, 1.0f);
    fill_data(c0, MAXM * LD, 1.0f);
    for (int i = 0; i < MAXN * LD; i++) bh[i] = kr_fp32_to_fp16(bf[i]);
    int bad = 0, bad_alone = 0;
    for (int f16 = 0; f16 < 2; f16++) {
        const void *b = f16 ? (const void *)bh : (const void *)bf;
        const size_t ldb = f16 ? LD * sizeof(kr_fp16) : LD * sizeof(float);
        for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
            for (int64_t m = 1; m <= MAXM; m += m < 9 ? 1 : 3) {
                for (int64_t n = 1; n <= MAXN; n += 4) {
                    memcpy(want, c0, sizeof(float) * MAXM * LD);
                    memcpy(got, c0, sizeof(float) * MAXM * LD);
                    ref->gemm_nn_acc(want, LD, a, MAXN, b, ldb, f16, m, n, ks[ki]);
                    k->gemm_nn_acc(got, LD, a, MAXN, b, ldb, f16, m, n, ks[ki]);
                    /* a row's bits do not depend on the rows beside it (a
                     * verify step's rows equal plain decoding's) */
                    memcpy(alone, c0, sizeof(float) * MAXM * LD);
                    for (int64_t r = 0; r < m; r++)
                        k->gemm_nn_acc(alone + r * LD, LD, a + r * MAXN, MAXN, b, ldb, f16, 1, n, ks[ki]);
                    if (memcmp(alone, got, sizeof(float) * MAXM * LD)) bad_alone++;
                    for (int64_t i = 0; i < MAXM * LD; i++) {
                        /* tolerance: 1e-5 of the sum of |terms| of the cell */
                        const int64_t r = i / LD, d = i % LD;
                        double mag = fabsf(c0[i]);
                        for (int64_t j = 0; r < m && d < ks[ki] && j < n; j++) {
                            mag += fabs(a[r * MAXN + j] * (double)bf[j * LD + d]);
                        }
                        if (!(fabsf(got[i] - want[i]) <= 1e-5 * mag + 1e-30)) bad++;
                    }
                }
            }
        }
    }
    CHECK_MSG(bad == 0, "%s gemm_nn_acc: %d cells differ from scalar (or written outside m x k)", k->name, bad);
    CHECK_MSG(bad_alone == 0, "%s gemm_nn_acc: %d calls give other bits than their rows one at a time", k->name,
              bad_alone);
    free(alone);
    free(a);
    free(bf);
    free(bh);
    free(c0);
    free(want);
    free(got);
}

static int count_far(const float *a, const float *b, int64_t n, float rel, float abs_tol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!(fabsf(a[i] - b[i]) <= rel * fabsf(b[i]) + abs_tol)) bad++;
    }
    return bad;
}

static void test_elementwise(const kr_kernels *k, const kr_kernels *ref) {
    static const int64_t sizes[] = {1, 3, 8, 15, 16, 17, 31, 32, 33, 64, 100, 257, 1000, 4099};
    static float a[MAX_N], b[MAX_N], c[MAX_N], y1[MAX_N], y2[MAX_N];
    static kr_fp16 h[MAX_N], h1[MAX_N], h2[MAX_N];
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        const int64_t n = sizes[si];
        fill_data(a, n, 1.0f);
        fill_data(b, n, 1.0f);
        fill_data(c, n, 3.0f);
        for (int64_t i = 0; i < n; i++) h[i] = kr_fp32_to_fp16(c[i]);

        ref->rmsnorm(y1, a, b, n, 1e-6f);
        k->rmsnorm(y2, a, b, n, 1e-6f);
        CHECK_MSG(count_far(y2, y1, n, 1e-5f, 1e-6f) == 0, "%s rmsnorm n=%lld", k->name, (long long)n);
        memcpy(y2, a, sizeof(float) * n);
        k->rmsnorm(y2, y2, b, n, 1e-6f); /* in place */
        CHECK_MSG(count_far(y2, y1, n, 1e-5f, 1e-6f) == 0, "%s rmsnorm in place n=%lld", k->name, (long long)n);

        for (int64_t i = 0; i < n; i++) y1[i] = y2[i] = c[i] * 4.0f; /* spread of about +-40 */
        ref->softmax(y1, n);
        k->softmax(y2, n);
        CHECK_MSG(count_far(y2, y1, n, 1e-5f, 1e-6f) == 0, "%s softmax n=%lld", k->name, (long long)n);
        double total = 0;
        for (int64_t i = 0; i < n; i++) total += y2[i];
        CHECK_MSG(fabs(total - 1.0) <= 1e-5, "%s softmax n=%lld sums to %.9g", k->name, (long long)n, total);

        ref->silu_mul(y1, c, b, n);
        k->silu_mul(y2, c, b, n);
        CHECK_MSG(count_far(y2, y1, n, 1e-5f, 1e-6f) == 0, "%s silu_mul n=%lld", k->name, (long long)n);
        memcpy(y2, c, sizeof(float) * n);
        k->silu_mul(y2, y2, b, n); /* out aliases gate */
        CHECK_MSG(count_far(y2, y1, n, 1e-5f, 1e-6f) == 0, "%s silu_mul in place n=%lld", k->name, (long long)n);

        double sabs = 0, sabs16 = 0;
        for (int64_t i = 0; i < n; i++) {
            sabs += fabs((double)a[i] * b[i]);
            sabs16 += fabs((double)kr_fp16_to_fp32(h[i]) * b[i]);
        }
        const float d1 = ref->dot_f32(a, b, n), d2 = k->dot_f32(a, b, n);
        CHECK_MSG(fabs(d1 - d2) <= 1e-5 * sabs, "%s dot_f32 n=%lld: %.9g vs %.9g", k->name, (long long)n, d2, d1);
        const float e1 = ref->dot_f16_f32(h, b, n), e2 = k->dot_f16_f32(h, b, n);
        CHECK_MSG(fabs(e1 - e2) <= 1e-5 * sabs16, "%s dot_f16_f32 n=%lld: %.9g vs %.9g", k->name, (long long)n, e2, e1);

        memcpy(y1, a, sizeof(float) * n);
        memcpy(y2, a, sizeof(float) * n);
        ref->axpy_f32(y1, 0.37f, b, n);
        k->axpy_f32(y2, 0.37f, b, n);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += !(fabsf(y1[i] - y2[i]) <= 1e-6f * (fabsf(a[i]) + fabsf(0.37f * b[i])));
        CHECK_MSG(bad == 0, "%s axpy_f32 n=%lld: %d values", k->name, (long long)n, bad);
        memcpy(y1, a, sizeof(float) * n);
        memcpy(y2, a, sizeof(float) * n);
        ref->axpy_f16(y1, -1.25f, h, n);
        k->axpy_f16(y2, -1.25f, h, n);
        bad = 0;
        for (int64_t i = 0; i < n; i++) {
            bad += !(fabsf(y1[i] - y2[i]) <= 1e-6f * (fabsf(a[i]) + fabsf(1.25f * kr_fp16_to_fp32(h[i]))));
        }
        CHECK_MSG(bad == 0, "%s axpy_f16 n=%lld: %d values", k->name, (long long)n, bad);

        /* f16 stores: exact, including overflow, subnormals and ties */
        for (int64_t i = 0; i < n; i++) {
            switch (i % 5) {
            case 0: y1[i] = c[i] * 30000.0f; break;                 /* some overflow to inf */
            case 1: y1[i] = c[i] * 1e-6f; break;                    /* subnormal halves */
            case 2: y1[i] = 1.0f + (float)(i % 7) / 2048.0f; break; /* exact ties */
            default: y1[i] = c[i];
            }
        }
        ref->f32_to_f16(h1, y1, n);
        k->f32_to_f16(h2, y1, n);
        CHECK_MSG(memcmp(h1, h2, sizeof(kr_fp16) * n) == 0, "%s f32_to_f16 n=%lld not bit-exact", k->name,
                  (long long)n);
    }
}

/* The avx512 matmul with R activation rows (R below the panel-GEMM batch of
 * the weight type) against R calls with one row each: the same bits, for
 * several thread splits, at a width where all rows are rearranged together
 * and at one where they are split into groups (the few-row kernel's stack
 * buffer holds 64 KiB of activations), both with tail blocks. */
/* dequant_kv: rows of random Q8_0 / Q4_0 blocks (every byte random, so
 * every level and scale appears, inf and NaN scales included), a sub-range
 * of blocks of rows a stride apart (padded by 8 bytes: blocks stay 2-byte
 * aligned, as a cache's rows are), bit for bit against the scalar table. */
static void test_dequant_kv(const kr_kernels *k, const kr_kernels *ref) {
    enum { ROWS = 5, BLOCKS = 12 };
    const kr_type types[2] = {KR_TYPE_Q8_0, KR_TYPE_Q4_0};
    for (int ti = 0; ti < 2; ti++) {
        const size_t bb = ti == 0 ? sizeof(kr_block_q8_0) : sizeof(kr_block_q4_0), stride = BLOCKS * bb + 8;
        uint8_t *rows = malloc(ROWS * stride);
        float *a = malloc(sizeof(float) * ROWS * BLOCKS * 32), *b = malloc(sizeof(float) * ROWS * BLOCKS * 32);
        for (size_t i = 0; i < ROWS * stride; i++) rows[i] = (uint8_t)rng_u32();
        const int64_t spans[3][2] = {{0, BLOCKS}, {3, 4}, {11, 1}}; /* b0, nb */
        for (int sp = 0; sp < 3; sp++) {
            const int64_t b0 = spans[sp][0], nb = spans[sp][1], n = ROWS * nb * 32;
            ref->dequant_kv(types[ti], rows, stride, ROWS, b0, nb, a);
            k->dequant_kv(types[ti], rows, stride, ROWS, b0, nb, b);
            CHECK_MSG(memcmp(a, b, sizeof(float) * (size_t)n) == 0,
                      "%s dequant_kv %s blocks [%lld, +%lld) not bit-exact", k->name, ti == 0 ? "Q8_0" : "Q4_0",
                      (long long)b0, (long long)nb);
        }
        /* the scalar table is kr_dequantize_row, row by row */
        ref->dequant_kv(types[ti], rows, stride, 1, 2, 3, a);
        kr_dequantize_row(types[ti], rows + 2 * bb, b, 96);
        CHECK(memcmp(a, b, sizeof(float) * 96) == 0);
        free(rows);
        free(a);
        free(b);
    }
}

static void test_batch_invariance(void) {
    const kr_kernels *k = kr_kernels_for_isa(KR_ISA_AVX512);
    if (k == NULL) {
        printf("  batch invariance: SKIPPED, this CPU lacks AVX-512 VNNI/BF16 (no avx512 table)\n");
        return;
    }
#if defined(__x86_64__) || defined(_M_X64)
    enum { ROWS = 29, LDY = ROWS + 2 };
    static const kr_type types[] = {KR_TYPE_Q8_0, KR_TYPE_Q4_0, KR_TYPE_Q4_K, KR_TYPE_Q6_K};
    static const int nths[] = {1, 3};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        const kr_type wt = types[t];
        const kr_type vt = kr_type_get(wt)->vec_dot_type;
        const int64_t min_batch = kr_avx512_gemm_min_batch(wt);
        const int64_t maxr = min_batch - 1 < 64 ? min_batch - 1 : 64;
        const bool kquant = kr_type_get(wt)->block_size == KR_QK_K;
        /* 19 or 259 blocks of 32 (tails of 3 blocks after the 8-block steps),
         * or 5 and 35 blocks of 256; the wide rows hold 7-8 rows per group */
        const int64_t widths[2] = {kquant ? 1280 : 608, kquant ? 8960 : 8288};
        for (int wi = 0; wi < 2; wi++) {
            const int64_t cols = widths[wi];
            const size_t wrow = kr_type_row_size(wt, cols), xrow = kr_type_row_size(vt, cols);
            float *f = malloc(sizeof(float) * (size_t)cols);
            unsigned char *wq = malloc(wrow * ROWS), *xq = malloc(xrow * (size_t)maxr);
            float *one = malloc(sizeof(float) * (size_t)maxr * LDY), *got = malloc(sizeof(float) * (size_t)maxr * LDY);
            for (int r = 0; r < ROWS; r++) {
                fill_data(f, cols, 0.05f);
                kr_quantize_row(wt, f, wq + r * wrow, cols);
            }
            for (int64_t b = 0; b < maxr; b++) {
                fill_data(f, cols, 1.0f);
                k->from_float[vt](f, xq + b * xrow, cols);
            }
            for (int64_t b = 0; b < maxr; b++) {
                k->matmul(k, wt, wq, wrow, ROWS, cols, xq + b * xrow, xrow, 1, one + b * LDY, LDY, 0, 1);
            }
            /* Q6_K: the one-row product is that of the 256-bit block kernel
             * (the table's vec_dot), whatever path computes it */
            int bad_one = 0;
            for (int64_t b = 0; wt == KR_TYPE_Q6_K && b < maxr; b++) {
                for (int r = 0; r < ROWS; r++) {
                    float v = NAN;
                    k->vec_dot[wt](cols, &v, wq + r * wrow, xq + b * xrow);
                    bad_one += memcmp(&v, one + b * LDY + r, sizeof(float)) != 0;
                }
            }
            CHECK_MSG(bad_one == 0, "avx512 matmul Q6_K cols=%lld: %d one-row products differ from vec_dot",
                      (long long)cols, bad_one);
            int bad = 0, first_r = -1;
            for (int64_t nr = 1; nr <= maxr; nr++) {
                for (size_t ni = 0; ni < sizeof(nths) / sizeof(nths[0]); ni++) {
                    for (int ith = 0; ith < nths[ni]; ith++) {
                        k->matmul(k, wt, wq, wrow, ROWS, cols, xq, xrow, nr, got, LDY, ith, nths[ni]);
                    }
                    for (int64_t b = 0; b < nr; b++) {
                        if (memcmp(got + b * LDY, one + b * LDY, sizeof(float) * ROWS) != 0) {
                            if (bad == 0) first_r = (int)nr;
                            bad++;
                        }
                    }
                }
            }
            CHECK_MSG(bad == 0,
                      "avx512 matmul %s cols=%lld: %d batch rows differ from their one-row product (first at "
                      "R=%d)",
                      tname(wt), (long long)cols, bad, first_r);
            CHECK_MSG(maxr >= 1, "avx512 %s: no batch below the panel GEMM (min batch %lld)", tname(wt),
                      (long long)min_batch);
            free(f);
            free(wq);
            free(xq);
            free(one);
            free(got);
        }
    }
#endif
}

static void test_dispatch(void) {
    /* the cap is read once, at the first call */
    setenv("KARA_CPU_ISA", "avx2", 1);
    const kr_kernels *k = kr_kernels_get();
    CHECK(k != NULL);
    const kr_isa expect = kr_kernels_for_isa(KR_ISA_AVX2) ? KR_ISA_AVX2 : KR_ISA_SCALAR;
    CHECK_MSG(k->isa == expect, "KARA_CPU_ISA=avx2 chose %s", k->name);
    CHECK(kr_kernels_get() == k);
    CHECK(kr_kernels_for_isa(KR_ISA_SCALAR) != NULL);
    CHECK(kr_kernels_for_isa(KR_ISA_COUNT) == NULL);
    CHECK(strcmp(kr_isa_name(KR_ISA_AVX512), "avx512") == 0);
    CHECK(strcmp(kr_isa_name(KR_ISA_SCALAR), "scalar") == 0);
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        const kr_kernels *t = kr_kernels_for_isa((kr_isa)i);
        if (t) {
            CHECK_EQ_INT(t->isa, i);
            CHECK(strcmp(t->name, kr_isa_name((kr_isa)i)) == 0);
        }
    }
}

int main(void) {
    test_dispatch();
    const kr_kernels *ref = kr_kernels_for_isa(KR_ISA_SCALAR);
    test_scalar_vs_dequant(ref);
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        const kr_kernels *k = kr_kernels_for_isa((kr_isa)i);
        if (k == NULL) {
            printf("  %s: not available on this machine/build\n", kr_isa_name((kr_isa)i));
            continue;
        }
        printf("  testing %s\n", k->name);
        test_vec_dot(k, ref);
        test_from_float(k, ref);
        test_matmul(k, ref);
        test_gemm_nn_acc(k, ref);
        test_elementwise(k, ref);
        test_dequant_kv(k, ref);
    }
    test_batch_invariance();
    return kr_test_finish();
}
