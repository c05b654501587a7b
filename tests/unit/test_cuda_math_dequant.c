/*
 * test_cuda_math_dequant.c - kernels_cuda/cuda_dequant.h on the CPU: for
 * every weight type, kr_cu_dequant32 over each 32-value stretch of a row
 * must give the very bits kr_dequantize_row gives (the CPU's scalar
 * reference), on rows from the reference quantizers and on random bytes
 * (with finite f16 scales) that reach scale and level patterns the
 * quantizers never write. The type ids, block sizes and field offsets the
 * header hard-codes are checked against kernels_cpu/kernels.h, and
 * kr_cu_row_bytes against kr_type_row_size.
 *
 * The CPU has no Q2_K / Q3_K dequantiser (it refuses those weights), so
 * they are checked against a whole-row transcription of GGML's
 * dequantize_row_q2_K / q3_K loops kept here.
 */
#include "cuda_dequant.h"
#include "kernels.h"
#include "test_util.h"

#include <math.h>
#include <stddef.h>
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

/* A finite f16 scale: mostly ordinary magnitudes, sometimes zero, negative,
 * subnormal or large, so the products cover the awkward cases. */
static uint16_t rng_scale_f16(void) {
    switch (rng_u32() % 8) {
    case 0: return 0;
    case 1: return (uint16_t)(rng_u32() & 0x83ffu);             /* subnormal (or zero) */
    case 2: return (uint16_t)(0x7000u | (rng_u32() & 0x83ffu)); /* large, up to 2^13 */
    default: return kr_fp32_to_fp16(rng_gauss() * 0.02f);
    }
}

typedef struct {
    int type;
    const char *name;
    int n_f16;      /* f16 fields per block to make finite */
    int f16_off[2]; /* their offsets */
    bool has_quant; /* kr_quantize_row handles it */
} type_case;

static const type_case k_cases[] = {
    {KR_TYPE_F32, "F32", 0, {0, 0}, true},      {KR_TYPE_F16, "F16", 0, {0, 0}, true},
    {KR_TYPE_BF16, "BF16", 0, {0, 0}, true},    {KR_TYPE_Q4_0, "Q4_0", 1, {0, 0}, true},
    {KR_TYPE_Q4_1, "Q4_1", 2, {0, 2}, true},    {KR_TYPE_Q5_0, "Q5_0", 1, {0, 0}, true},
    {KR_TYPE_Q5_1, "Q5_1", 2, {0, 2}, true},    {KR_TYPE_Q8_0, "Q8_0", 1, {0, 0}, true},
    {KR_TYPE_Q2_K, "Q2_K", 2, {80, 82}, false}, {KR_TYPE_Q3_K, "Q3_K", 1, {108, 0}, false},
    {KR_TYPE_Q4_K, "Q4_K", 2, {0, 2}, true},    {KR_TYPE_Q5_K, "Q5_K", 2, {0, 2}, true},
    {KR_TYPE_Q6_K, "Q6_K", 1, {208, 0}, true},
};
#define N_CASES (int)(sizeof k_cases / sizeof k_cases[0])

/* The header's constants against kernels.h's enum and structs. */
static void test_layout_constants(void) {
    CHECK_EQ_INT(KR_CU_TYPE_F32, KR_TYPE_F32);
    CHECK_EQ_INT(KR_CU_TYPE_F16, KR_TYPE_F16);
    CHECK_EQ_INT(KR_CU_TYPE_BF16, KR_TYPE_BF16);
    CHECK_EQ_INT(KR_CU_TYPE_Q4_0, KR_TYPE_Q4_0);
    CHECK_EQ_INT(KR_CU_TYPE_Q4_1, KR_TYPE_Q4_1);
    CHECK_EQ_INT(KR_CU_TYPE_Q5_0, KR_TYPE_Q5_0);
    CHECK_EQ_INT(KR_CU_TYPE_Q5_1, KR_TYPE_Q5_1);
    CHECK_EQ_INT(KR_CU_TYPE_Q8_0, KR_TYPE_Q8_0);
    CHECK_EQ_INT(KR_CU_TYPE_Q2_K, KR_TYPE_Q2_K);
    CHECK_EQ_INT(KR_CU_TYPE_Q3_K, KR_TYPE_Q3_K);
    CHECK_EQ_INT(KR_CU_TYPE_Q4_K, KR_TYPE_Q4_K);
    CHECK_EQ_INT(KR_CU_TYPE_Q5_K, KR_TYPE_Q5_K);
    CHECK_EQ_INT(KR_CU_TYPE_Q6_K, KR_TYPE_Q6_K);
    CHECK_EQ_INT(KR_CU_Q4_0_BYTES, sizeof(kr_block_q4_0));
    CHECK_EQ_INT(KR_CU_Q4_1_BYTES, sizeof(kr_block_q4_1));
    CHECK_EQ_INT(KR_CU_Q5_0_BYTES, sizeof(kr_block_q5_0));
    CHECK_EQ_INT(KR_CU_Q5_1_BYTES, sizeof(kr_block_q5_1));
    CHECK_EQ_INT(KR_CU_Q8_0_BYTES, sizeof(kr_block_q8_0));
    CHECK_EQ_INT(KR_CU_Q4_K_BYTES, sizeof(kr_block_q4_K));
    CHECK_EQ_INT(KR_CU_Q5_K_BYTES, sizeof(kr_block_q5_K));
    CHECK_EQ_INT(KR_CU_Q6_K_BYTES, sizeof(kr_block_q6_K));
    CHECK_EQ_INT(KR_CU_Q2_K_BYTES, kr_type_get(KR_TYPE_Q2_K)->type_size);
    CHECK_EQ_INT(KR_CU_Q3_K_BYTES, kr_type_get(KR_TYPE_Q3_K)->type_size);
    /* the field offsets cuda_dequant.h reads */
    CHECK_EQ_INT(offsetof(kr_block_q4_1, m), 2);
    CHECK_EQ_INT(offsetof(kr_block_q4_1, qs), 4);
    CHECK_EQ_INT(offsetof(kr_block_q5_0, qh), 2);
    CHECK_EQ_INT(offsetof(kr_block_q5_0, qs), 6);
    CHECK_EQ_INT(offsetof(kr_block_q5_1, qh), 4);
    CHECK_EQ_INT(offsetof(kr_block_q5_1, qs), 8);
    CHECK_EQ_INT(offsetof(kr_block_q8_0, qs), 2);
    CHECK_EQ_INT(offsetof(kr_block_q4_K, dmin), 2);
    CHECK_EQ_INT(offsetof(kr_block_q4_K, scales), 4);
    CHECK_EQ_INT(offsetof(kr_block_q4_K, qs), 16);
    CHECK_EQ_INT(offsetof(kr_block_q5_K, scales), 4);
    CHECK_EQ_INT(offsetof(kr_block_q5_K, qh), 16);
    CHECK_EQ_INT(offsetof(kr_block_q5_K, qs), 48);
    CHECK_EQ_INT(offsetof(kr_block_q6_K, qh), 128);
    CHECK_EQ_INT(offsetof(kr_block_q6_K, scales), 192);
    CHECK_EQ_INT(offsetof(kr_block_q6_K, d), 208);
}

static void test_row_bytes(void) {
    for (int t = 0; t < N_CASES; t++) {
        const int type = k_cases[t].type;
        CHECK_MSG(kr_cu_type_known(type), "%s known", k_cases[t].name);
        const int64_t bv = kr_type_get((uint32_t)type)->block_size;
        CHECK_EQ_INT(kr_cu_block_values(type), bv);
        for (int64_t n = bv; n <= 8192; n += bv * (1 + (int64_t)(rng_u32() % 7))) {
            CHECK_MSG(kr_cu_row_bytes(type, n) == (int64_t)kr_type_row_size((kr_type)type, n),
                      "%s row bytes of %lld: %lld vs %zu", k_cases[t].name, (long long)n,
                      (long long)kr_cu_row_bytes(type, n), kr_type_row_size((kr_type)type, n));
        }
        if (bv > 1) CHECK_EQ_INT(kr_cu_row_bytes(type, bv + 1), -1);
    }
    /* ids the weights never have: Q8_1, Q8_K, removed and IQ ids, Kara's internal layouts */
    static const int unknown[] = {-1, 4, 5, 9, 15, 16, 29, 31, 40, 41, 42, 43, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK_MSG(!kr_cu_type_known(unknown[i]), "type %d unknown", unknown[i]);
        CHECK_EQ_INT(kr_cu_row_bytes(unknown[i], 256), -1);
    }
}

/* GGML's dequantize_row_q2_K for one row (84-byte blocks: scales[16],
 * qs[64], d, dmin). */
static void ref_dequant_q2_k(const uint8_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *b = x + i * 84;
        uint16_t hd, hm;
        memcpy(&hd, b + 80, 2);
        memcpy(&hm, b + 82, 2);
        const float d = kr_fp16_to_fp32(hd), min = kr_fp16_to_fp32(hm);
        const uint8_t *q = b + 16;
        int is = 0;
        for (int nn = 0; nn < 256; nn += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = b[is++];
                float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = b[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

/* GGML's dequantize_row_q3_K for one row (110-byte blocks: hmask[32],
 * qs[64], scales[12], d), with its 32-bit unpacking of the 6-bit scales. */
static void ref_dequant_q3_k(const uint8_t *x, float *y, int64_t n) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *b = x + i * 110;
        uint16_t hd;
        memcpy(&hd, b + 108, 2);
        const float d_all = kr_fp16_to_fp32(hd);
        const uint8_t *q = b + 32, *hm = b;
        uint8_t m = 1;
        uint32_t aux[4];
        memcpy(aux, b + 96, 12);
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t scales[16];
        memcpy(scales, aux, 16);
        int is = 0;
        for (int nn = 0; nn < 256; nn += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                float dl = d_all * (scales[is++] - 32);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                dl = d_all * (scales[is++] - 32);
                for (int l = 0; l < 16; ++l) {
                    *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                }
                shift += 2;
                m <<= 1;
            }
            q += 32;
        }
    }
}

static void reference_row(int type, const uint8_t *row, float *y, int64_t n) {
    if (type == KR_TYPE_Q2_K) {
        ref_dequant_q2_k(row, y, n);
    } else if (type == KR_TYPE_Q3_K) {
        ref_dequant_q3_k(row, y, n);
    } else {
        kr_dequantize_row((kr_type)type, row, y, n);
    }
}

/* Fill a row: quantised Gaussian data (scaled by `amp`) or random bytes
 * with finite f16 scales. */
static void fill_row(const type_case *tc, uint8_t *row, int64_t n, size_t bytes, bool quantized, float amp) {
    if (quantized) {
        float *x = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) x[i] = rng_gauss() * amp;
        CHECK_MSG(kr_quantize_row((kr_type)tc->type, x, row, n), "%s quantize", tc->name);
        free(x);
        return;
    }
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rng_u32();
    if (tc->type == KR_TYPE_F32) { /* random bits are mostly fine, but keep the exponent off all-ones */
        for (int64_t i = 0; i < n; i++) row[4 * i + 3] &= 0xbf;
        return;
    }
    const int bv = kr_type_get((uint32_t)tc->type)->block_size, bb = kr_type_get((uint32_t)tc->type)->type_size;
    for (int64_t b = 0; b < n / bv; b++) {
        for (int f = 0; f < tc->n_f16; f++) {
            const uint16_t h = rng_scale_f16();
            memcpy(row + b * bb + tc->f16_off[f], &h, 2);
        }
    }
}

/* Compare kr_cu_dequant32 block by block with the reference row; prints at
 * most a few differences per type. */
static void check_row(const type_case *tc, const uint8_t *row, int64_t n, const char *what, int r, int *reported) {
    float *ref = malloc((size_t)n * sizeof(float));
    reference_row(tc->type, row, ref, n);
    bool ok = true;
    for (int64_t b = 0; b < n / 32; b++) {
        float got[32];
        kr_cu_dequant32(tc->type, row, b, got);
        for (int i = 0; i < 32; i++) {
            const uint32_t g = kr_cu_f32_bits(got[i]), e = kr_cu_f32_bits(ref[32 * b + i]);
            if (g == e) continue;
            ok = false;
            if ((*reported)++ < 8) {
                CHECK_MSG(false,
                          "%s (%s row %d): block %lld index %d: kr_cu_dequant32 %.9g (0x%08x), CPU %.9g (0x%08x)",
                          tc->name, what, r, (long long)b, i, got[i], g, ref[32 * b + i], e);
            }
        }
    }
    CHECK_MSG(ok, "%s (%s row %d) bit-identical to the CPU", tc->name, what, r);
    free(ref);
}

static void test_dequant_matches_cpu(void) {
    const int64_t n = 2048; /* 8 K-blocks, 64 32-value blocks */
    for (int t = 0; t < N_CASES; t++) {
        const type_case *tc = &k_cases[t];
        const size_t bytes = kr_type_row_size((kr_type)tc->type, n);
        uint8_t *row = malloc(bytes);
        int reported = 0;
        for (int r = 0; r < 12; r++) {
            fill_row(tc, row, n, bytes, false, 0.0f);
            check_row(tc, row, n, "random bytes", r, &reported);
        }
        if (tc->has_quant) {
            static const float amps[] = {1.0f, 0.01f, 1e-5f, 300.0f};
            for (int r = 0; r < 8; r++) {
                fill_row(tc, row, n, bytes, true, amps[r % 4]);
                check_row(tc, row, n, "quantized", r, &reported);
            }
        }
        free(row);
    }
}

/* The GEMV's reduction for one row, on the host as the kernel does it:
 * lane k takes stretch k of each 32-stretch chunk (kr_cu_dequant_part, the
 * activations staged with zeros past n_cols), sums its 32 products in
 * order, and a butterfly of shuffles adds the 32 lane sums. */
static float emulate_gemv_row(int type, const uint8_t *row, const float *x, int64_t n_cols) {
    float acc[32] = {0};
    const int64_t nblk = kr_cu_stretches(n_cols);
    for (int64_t c0 = 0; c0 < nblk; c0 += 32)
        for (int lane = 0; lane < 32 && c0 + lane < nblk; lane++) {
            float v[32], xs[32], sum = 0.0f;
            kr_cu_dequant_part(type, row, c0 + lane, n_cols, v);
            for (int j = 0; j < 32; j++) {
                const int64_t col = (c0 + lane) * 32 + j;
                xs[j] = col < n_cols ? x[col] : 0.0f;
            }
            for (int j = 0; j < 32; j++) sum += v[j] * xs[j];
            acc[lane] += sum;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float next[32];
        for (int l = 0; l < 32; l++) next[l] = acc[l] + acc[l ^ o];
        memcpy(acc, next, sizeof acc);
    }
    return acc[0];
}

/* Rows whose width is not a multiple of 32 (stories260K's ffn_down has 172
 * columns, llama-2-tiny-random's embeddings 8): F32 / F16 / BF16 take them,
 * the last stretch partial. kr_cu_dequant_part must give the CPU's values
 * for the row's columns and 0 past them, reading only the row's own bytes
 * (each row is its own allocation, so a sanitizer build catches a read
 * past it), and the emulated GEMV must give the row's dot product. The
 * quantised types stay whole blocks (kr_cu_cols_ok). */
static void test_partial_stretch(void) {
    static const unsigned widths[] = {1, 8, 31, 33, 95, 172, 1000, 1029};
    static const int types[] = {KR_TYPE_F32, KR_TYPE_F16, KR_TYPE_BF16};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
            const int type = types[t];
            const int64_t n = widths[w];
            const size_t bytes = kr_type_row_size((kr_type)type, n), nz = widths[w];
            CHECK_MSG(kr_cu_cols_ok(type, n), "type %d takes %lld columns", type, (long long)n);
            CHECK_EQ_INT(kr_cu_row_bytes(type, n), (int64_t)bytes);
            uint8_t *row = malloc(bytes);
            float *want = malloc(nz * sizeof(float)), *x = malloc(nz * sizeof(float));
            float *src = malloc(nz * sizeof(float));
            for (int64_t i = 0; i < n; i++) {
                src[i] = rng_gauss();
                x[i] = rng_gauss();
            }
            CHECK(kr_quantize_row((kr_type)type, src, row, n));
            kr_dequantize_row((kr_type)type, row, want, n);
            bool same = true;
            double dot = 0.0, mag = 0.0;
            for (int64_t b = 0; b < kr_cu_stretches(n); b++) {
                float v[32];
                kr_cu_dequant_part(type, row, b, n, v);
                for (int j = 0; j < 32; j++) {
                    const int64_t col = b * 32 + j;
                    const float expect = col < n ? want[col] : 0.0f;
                    same = same && memcmp(&v[j], &expect, sizeof expect) == 0;
                }
            }
            for (int64_t i = 0; i < n; i++) {
                dot += (double)want[i] * x[i];
                mag += fabs((double)want[i] * x[i]);
            }
            CHECK_MSG(same, "type %d, %lld columns: the partial stretch's values and zeros", type, (long long)n);
            const float got = emulate_gemv_row(type, row, x, n);
            CHECK_MSG(fabs(got - dot) <= 1e-5 * (mag + 1e-30), "type %d, %lld columns: GEMV row %.9g vs %.9g", type,
                      (long long)n, got, dot);
            free(row);
            free(want);
            free(x);
            free(src);
        }
    /* quantised rows: whole blocks only */
    CHECK(kr_cu_cols_ok(KR_TYPE_Q8_0, 64) && !kr_cu_cols_ok(KR_TYPE_Q8_0, 172) && !kr_cu_cols_ok(KR_TYPE_Q4_0, 8));
    CHECK(kr_cu_cols_ok(KR_TYPE_Q4_K, 768) && !kr_cu_cols_ok(KR_TYPE_Q4_K, 800) && !kr_cu_cols_ok(KR_TYPE_Q6_K, 32));
    CHECK(!kr_cu_cols_ok(KR_TYPE_F32, 0) && !kr_cu_cols_ok(-1, 64));
}

int main(void) {
    test_layout_constants();
    test_row_bytes();
    test_dequant_matches_cpu();
    test_partial_stretch();
    return kr_test_finish();
}
