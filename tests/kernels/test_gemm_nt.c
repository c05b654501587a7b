/*
 * test_gemm_nt.c - the small dense product C = A B^T of every ISA table
 * this machine runs (the KV scorer's q.k logits), B in f32 and in f16 rows
 * at a byte stride, against a double-precision reference:
 *   - |C - ref| <= 1e-5 * sum_t |a_t b_t| + 1e-30 for shapes with and
 *     without row, column and k tails;
 *   - C entries outside [0, m) x [0, n) (the ldc padding) are not written;
 *   - the same call twice gives the same bits, and a row's results do not
 *     depend on which other rows share its call (m = 1 vs the whole block),
 *     which the scorer's thread-count invariance relies on.
 */
#include "kernels.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float rng_float(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 4.0f - 2.0f;
}

typedef struct shape {
    int m, n, k;
} shape;

/* k = 8, 16 and 32 with up to 18 rows: heads of 8 (stories260K) and 32 (the
 * shipped model), 2 query heads per KV head times a 9-entry verify step */
static const shape shapes[] = {{1, 1, 1},   {3, 5, 7},    {4, 4, 16},   {32, 16, 128}, {33, 18, 130}, {5, 64, 64},
                               {2, 3, 200}, {7, 9, 31},   {32, 64, 64}, {2, 16, 8},    {18, 32, 8},   {9, 13, 8},
                               {1, 8, 8},   {18, 32, 32}, {3, 21, 8},   {7, 16, 16},   {18, 20, 16}};

/* One shape for one table, B as f16 or f32. */
static void check_shape(const kr_kernels *k, shape s, bool f16) {
    const int lda = s.k + 3, ldc = s.n + 5;
    const size_t ldb = (size_t)(s.k + 2) * (f16 ? 2 : 4); /* padded rows, in bytes */
    float *a = malloc(sizeof(float) * (size_t)s.m * lda);
    uint8_t *b = malloc(ldb * (size_t)s.n);
    float *bf = malloc(sizeof(float) * (size_t)s.n * s.k); /* B's values as read */
    float *c = malloc(sizeof(float) * (size_t)s.m * ldc);
    float *c2 = malloc(sizeof(float) * (size_t)s.m * ldc);
    for (int i = 0; i < s.m * lda; i++) a[i] = rng_float();
    for (int j = 0; j < s.n; j++) {
        for (int t = 0; t < s.k; t++) {
            float v = rng_float();
            if (f16) {
                kr_fp16 h = kr_fp32_to_fp16(v);
                memcpy(b + (size_t)j * ldb + (size_t)t * 2, &h, 2);
                v = kr_fp16_to_fp32(h);
            } else {
                memcpy(b + (size_t)j * ldb + (size_t)t * 4, &v, 4);
            }
            bf[(size_t)j * s.k + t] = v;
        }
    }
    for (int i = 0; i < s.m * ldc; i++) c[i] = c2[i] = -1234.5f;
    k->gemm_nt(c, ldc, a, lda, b, ldb, f16, s.m, s.n, s.k);
    double worst = 0;
    bool pad_ok = true;
    for (int i = 0; i < s.m; i++) {
        for (int j = 0; j < ldc; j++) {
            if (j >= s.n) {
                pad_ok &= c[i * ldc + j] == -1234.5f;
                continue;
            }
            double ref = 0, mag = 0;
            for (int t = 0; t < s.k; t++) {
                double p = (double)a[i * lda + t] * bf[(size_t)j * s.k + t];
                ref += p;
                mag += fabs(p);
            }
            double err = fabs(c[i * ldc + j] - ref) / (mag + 1e-30);
            worst = err > worst ? err : worst;
        }
    }
    CHECK_MSG(worst <= 1e-5, "%s gemm_nt %s m %d n %d k %d: relative error %g", k->name, f16 ? "f16" : "f32", s.m, s.n,
              s.k, worst);
    CHECK_MSG(pad_ok, "%s gemm_nt %s m %d n %d k %d wrote past column n", k->name, f16 ? "f16" : "f32", s.m, s.n, s.k);
    /* same call, same bits; each row alone, same bits */
    k->gemm_nt(c2, ldc, a, lda, b, ldb, f16, s.m, s.n, s.k);
    CHECK_MSG(!memcmp(c, c2, sizeof(float) * (size_t)s.m * ldc), "%s gemm_nt: repeated call differs", k->name);
    bool rows_ok = true;
    for (int i = 0; i < s.m; i++) {
        k->gemm_nt(c2 + i * ldc, ldc, a + i * lda, lda, b, ldb, f16, 1, s.n, s.k);
        rows_ok &= !memcmp(c + i * ldc, c2 + i * ldc, sizeof(float) * (size_t)s.n);
    }
    CHECK_MSG(rows_ok, "%s gemm_nt %s m %d n %d k %d: a row alone differs from the block", k->name, f16 ? "f16" : "f32",
              s.m, s.n, s.k);
    free(a);
    free(b);
    free(bf);
    free(c);
    free(c2);
}

int main(void) {
    int tables = 0;
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        const kr_kernels *k = kr_kernels_for_isa((kr_isa)i);
        if (!k) continue;
        tables++;
        if (!CHECK_MSG(k->gemm_nt != NULL, "%s: no gemm_nt", k->name)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            check_shape(k, shapes[s], false);
            check_shape(k, shapes[s], true);
        }
    }
    CHECK(tables >= 1);
    return kr_test_finish();
}
