/*
 * test_attn_q8.c - attention's products over a q8_0 KV cache read in place,
 * on every ISA table this machine runs:
 *   - gemm_nt_q8 (Q8_0 queries against Q8_0 keys) against a double sum of
 *     the exact integer block sums times both scales: within 2e-6 of the
 *     sum of |block terms|, with and without a last odd block, key-row and
 *     query-row tails, padded strides;
 *   - its entries are written only inside [0, m) x [0, n), the same call
 *     gives the same bits, and an entry does not depend on which rows share
 *     its call (one query row alone, one key row alone), which attention's
 *     batch invariance (a prompt at once or token by token) relies on;
 *   - gemm_nn_acc_q8 bit for bit equal to the same table's dequant_kv
 *     followed by its gemm_nn_acc: reading values in place changes nothing.
 * Levels lie in [-127, 127], as every Q8_0 quantizer writes them.
 */
#include "kernels.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x6A09E667F3BCC908ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* n rows of nb random Q8_0 blocks, stride bytes apart (stride even, so
 * blocks stay 2-byte aligned as in a cache): levels in [-127, 127], scales
 * of either sign between 2^-12 and 2^-2, padding bytes random. */
static uint8_t *random_rows(int64_t n, int64_t nb, size_t stride) {
    uint8_t *rows = malloc(stride * (size_t)n);
    for (size_t i = 0; i < stride * (size_t)n; i++) rows[i] = (uint8_t)rng_u32();
    for (int64_t r = 0; r < n; r++) {
        kr_block_q8_0 *blk = (kr_block_q8_0 *)(rows + (size_t)r * stride);
        for (int64_t t = 0; t < nb; t++) {
            const float d = ldexpf(1.0f + (float)(rng_u32() % 1000) / 1000.0f, -2 - (int)(rng_u32() % 11));
            const kr_fp16 h = kr_fp32_to_fp16(rng_u32() & 1 ? -d : d);
            memcpy(&blk[t].d, &h, sizeof h);
            for (int u = 0; u < KR_QK8_0; u++) blk[t].qs[u] = (int8_t)((int)(rng_u32() % 255) - 127);
        }
    }
    return rows;
}

typedef struct shape {
    int m, n, nb;
} shape;

static const shape shapes[] = {{1, 1, 1}, {2, 4, 4},  {2, 32, 4}, {3, 7, 3}, {5, 9, 2},
                               {1, 5, 8}, {4, 16, 5}, {2, 6, 10}, {3, 5, 17}};

static void check_scores(const kr_kernels *k, shape s) {
    const size_t lda = (size_t)s.nb * sizeof(kr_block_q8_0) + 6, ldb = (size_t)s.nb * sizeof(kr_block_q8_0) + 10;
    const int ldc = s.n + 3;
    uint8_t *a = random_rows(s.m, s.nb, lda), *b = random_rows(s.n, s.nb, ldb);
    float *c = malloc(sizeof(float) * (size_t)s.m * ldc), *c2 = malloc(sizeof(float) * (size_t)s.m * ldc);
    for (int i = 0; i < s.m * ldc; i++) c[i] = c2[i] = -1234.5f;
    k->gemm_nt_q8(c, ldc, a, lda, b, ldb, s.m, s.n, s.nb);
    double worst = 0.0;
    bool pad_ok = true;
    for (int i = 0; i < s.m; i++) {
        for (int j = 0; j < ldc; j++) {
            if (j >= s.n) {
                pad_ok &= c[i * ldc + j] == -1234.5f;
                continue;
            }
            const kr_block_q8_0 *x = (const kr_block_q8_0 *)(a + (size_t)i * lda);
            const kr_block_q8_0 *y = (const kr_block_q8_0 *)(b + (size_t)j * ldb);
            double ref = 0.0, mag = 0.0;
            for (int t = 0; t < s.nb; t++) {
                long isum = 0, iabs = 0;
                for (int u = 0; u < KR_QK8_0; u++) {
                    isum += (long)x[t].qs[u] * y[t].qs[u];
                    iabs += labs((long)x[t].qs[u] * y[t].qs[u]);
                }
                const double scale = (double)kr_fp16_to_fp32(x[t].d) * kr_fp16_to_fp32(y[t].d);
                ref += (double)isum * scale;
                mag += (double)iabs * fabs(scale);
            }
            const double err = fabs(c[i * ldc + j] - ref) / (mag + 1e-30);
            worst = err > worst ? err : worst;
        }
    }
    CHECK_MSG(worst <= 2e-6, "%s gemm_nt_q8 m %d n %d nb %d: relative error %g", k->name, s.m, s.n, s.nb, worst);
    CHECK_MSG(pad_ok, "%s gemm_nt_q8 m %d n %d nb %d wrote past column n", k->name, s.m, s.n, s.nb);
    k->gemm_nt_q8(c2, ldc, a, lda, b, ldb, s.m, s.n, s.nb);
    CHECK_MSG(!memcmp(c, c2, sizeof(float) * (size_t)s.m * ldc), "%s gemm_nt_q8: repeated call differs", k->name);
    bool rows_ok = true, cols_ok = true;
    for (int i = 0; i < s.m; i++) {
        k->gemm_nt_q8(c2 + i * ldc, ldc, a + (size_t)i * lda, lda, b, ldb, 1, s.n, s.nb);
        rows_ok &= !memcmp(c + i * ldc, c2 + i * ldc, sizeof(float) * (size_t)s.n);
    }
    for (int j = 0; j < s.n; j++) {
        float one[8];
        k->gemm_nt_q8(one, 1, a, lda, b + (size_t)j * ldb, ldb, s.m < 8 ? s.m : 8, 1, s.nb);
        for (int i = 0; i < s.m && i < 8; i++) cols_ok &= !memcmp(&one[i], &c[i * ldc + j], sizeof(float));
    }
    CHECK_MSG(rows_ok, "%s gemm_nt_q8 m %d n %d nb %d: a query row alone differs", k->name, s.m, s.n, s.nb);
    CHECK_MSG(cols_ok, "%s gemm_nt_q8 m %d n %d nb %d: a key row alone differs", k->name, s.m, s.n, s.nb);
    free(a);
    free(b);
    free(c);
    free(c2);
}

/* gemm_nn_acc_q8 against dequant_kv + gemm_nn_acc of the same table. */
static void check_values(const kr_kernels *k) {
    enum { MAXM = 5, MAXN = 17, MAXK = 160, LD = MAXK + 5 };
    static const int64_t ks[] = {32, 64, 96, 128, 160};
    const size_t stride = (MAXK / 32) * sizeof(kr_block_q8_0) + 8;
    uint8_t *rows = random_rows(MAXN, MAXK / 32, stride);
    float *a = malloc(sizeof(float) * MAXM * MAXN), *deq = malloc(sizeof(float) * MAXN * MAXK);
    float *c0 = malloc(sizeof(float) * MAXM * LD), *want = malloc(sizeof(float) * MAXM * LD),
          *got = malloc(sizeof(float) * MAXM * LD);
    for (int i = 0; i < MAXM * MAXN; i++) a[i] = (float)(rng_u32() % 100000) / 100000.0f;
    for (int i = 0; i < MAXM * LD; i++) c0[i] = (float)((int)(rng_u32() % 2001) - 1000) / 1000.0f;
    int bad = 0, calls = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        k->dequant_kv(KR_TYPE_Q8_0, rows, stride, MAXN, 0, ks[ki] / 32, deq);
        for (int64_t m = 1; m <= MAXM; m++) {
            for (int64_t n = 1; n <= MAXN; n += 3) {
                memcpy(want, c0, sizeof(float) * MAXM * LD);
                memcpy(got, c0, sizeof(float) * MAXM * LD);
                k->gemm_nn_acc(want, LD, a, MAXN, deq, (size_t)ks[ki] * sizeof(float), false, m, n, ks[ki]);
                k->gemm_nn_acc_q8(got, LD, a, MAXN, rows, stride, m, n, ks[ki]);
                bad += memcmp(want, got, sizeof(float) * MAXM * LD) != 0;
                calls++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%s gemm_nn_acc_q8: %d of %d calls differ from dequant_kv + gemm_nn_acc", k->name, bad, calls);
    free(rows);
    free(a);
    free(deq);
    free(c0);
    free(want);
    free(got);
}

int main(void) {
    int tables = 0;
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        const kr_kernels *k = kr_kernels_for_isa((kr_isa)i);
        if (!k) continue;
        tables++;
        if (!CHECK_MSG(k->gemm_nt_q8 && k->gemm_nn_acc_q8, "%s: no q8_0 attention products", k->name)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_scores(k, shapes[s]);
        check_values(k);
        printf("  %s: q8_0 attention products checked\n", k->name);
    }
    CHECK(tables >= 1);
    return kr_test_finish();
}
