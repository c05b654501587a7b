/*
 * test_quant_roundtrip.c - the type table, exact fp16/bf16 rounding, and
 * quantize -> dequantize error bounds for every quantizer.
 *
 * Error bounds are relative RMSE (||x - x'|| / ||x||) on Gaussian data and
 * on GGML's test signal 0.1 + 2 cos(i + offset). Each bound sits about 20%
 * above the error the reference algorithm produces, far below what a broken
 * packing or a lost scale would give (> 0.5), and the K-quants must also
 * beat the plain round-to-nearest formats of similar size, which checks that
 * their scale search works.
 */
#include "kernels.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

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

/* ---- type table ---- */
static void test_type_table(void) {
    CHECK(kr_type_get(KR_TYPE_Q4_K) != NULL);
    CHECK(strcmp(kr_type_get(KR_TYPE_Q4_K)->name, "Q4_K") == 0);
    CHECK(kr_type_get(4) == NULL);  /* removed Q4_2 */
    CHECK(kr_type_get(16) == NULL); /* IQ types are unknown to Kara */
    CHECK(kr_type_get(1000) == NULL);
    CHECK(kr_type_get(KR_TYPE_Q2_K) != NULL && !kr_type_get(KR_TYPE_Q2_K)->supported);
    CHECK(kr_type_get(KR_TYPE_Q3_K) != NULL && !kr_type_get(KR_TYPE_Q3_K)->supported);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_F32, 10), 40);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_F16, 10), 20);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_BF16, 10), 20);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q4_0, 64), 36);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q8_0, 1024), 32 * 34);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q2_K, 256), 84);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q3_K, 256), 110);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q4_K, 512), 288);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q5_K, 256), 176);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q6_K, 256), 210);
    CHECK_EQ_INT(kr_type_row_size(KR_TYPE_Q8_K, 256), 292);
    CHECK_EQ_INT(kr_type_get(KR_TYPE_Q4_K)->vec_dot_type, KR_TYPE_Q8_K);
    CHECK_EQ_INT(kr_type_get(KR_TYPE_Q4_1)->vec_dot_type, KR_TYPE_Q8_1);
    CHECK_EQ_INT(kr_type_get(KR_TYPE_Q5_0)->vec_dot_type, KR_TYPE_Q8_0);
    CHECK_EQ_INT(kr_type_get(KR_TYPE_F16)->vec_dot_type, KR_TYPE_F16);
}

/* ---- fp16 / bf16 ---- */
static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static void test_fp16_known_values(void) {
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.5f, 0x3800},
        {65504.0f, 0x7bff},
        {65519.0f, 0x7bff},
        {65520.0f, 0x7c00},
        {1e9f, 0x7c00},
        {0.1f, 0x2e66},
        {0.333333343f, 0x3555},
        {6.103515625e-05f, 0x0400},         /* 2^-14 */
        {5.9604644775390625e-08f, 0x0001},  /* 2^-24, smallest subnormal */
        {2.98023223876953125e-08f, 0x0000}, /* 2^-25: tie, rounds to even (0) */
        {4.470348358154297e-08f, 0x0001},   /* 1.5 * 2^-25 */
        {8.940696716308594e-08f, 0x0002},   /* 1.5 * 2^-24: tie -> even (2) */
        {1.00048828125f, 0x3c00},           /* 1 + 2^-11: tie -> even */
        {1.00146484375f, 0x3c02},           /* 1 + 3*2^-11: tie -> even */
        {1.0009765625f, 0x3c01},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const uint16_t h = kr_fp32_to_fp16(cases[i].f);
        CHECK_MSG(h == cases[i].h, "fp16(%.9g) = 0x%04x, want 0x%04x", cases[i].f, h, cases[i].h);
    }
    CHECK_EQ_INT(kr_fp32_to_fp16(INFINITY), 0x7c00);
    CHECK_EQ_INT(kr_fp32_to_fp16(-INFINITY), 0xfc00);
    CHECK(isnan(kr_fp16_to_fp32(kr_fp32_to_fp16(NAN))));
    CHECK(kr_fp16_to_fp32(0x7c00) == INFINITY);
    CHECK(kr_fp16_to_fp32(0x0001) == 5.9604644775390625e-08f);
    CHECK(kr_fp16_to_fp32(0x03ff) == 6.097555160522461e-05f);
    CHECK(kr_fp16_to_fp32(0xc000) == -2.0f);
}

/* Every finite half converts to f32 and back to itself, and each midpoint
 * between neighbours rounds to the one with an even mantissa. */
static void test_fp16_exhaustive(void) {
    int bad_roundtrip = 0, bad_tie = 0, bad_inside = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (uint32_t s = 0; s <= 0x8000; s += 0x8000) {
            const uint16_t hs = (uint16_t)(h | s);
            const float f = kr_fp16_to_fp32(hs);
            if (kr_fp32_to_fp16(f) != hs) bad_roundtrip++;
            if (h + 1 < 0x7c00) {
                const float g = kr_fp16_to_fp32((uint16_t)((h + 1) | s));
                const float mid = (f + g) * 0.5f; /* exact: one more bit than half */
                const uint16_t want = (uint16_t)(((h & 1) ? h + 1 : h) | s);
                if (kr_fp32_to_fp16(mid) != want) bad_tie++;
                /* just inside the midpoint rounds to the nearer neighbour */
                uint32_t mb;
                memcpy(&mb, &mid, 4);
                if (kr_fp32_to_fp16(f32_from_bits(mb - 1)) != hs && mid != 0) bad_inside++;
            }
        }
    }
    CHECK_MSG(bad_roundtrip == 0, "%d halves do not survive f16->f32->f16", bad_roundtrip);
    CHECK_MSG(bad_tie == 0, "%d midpoints do not round to even", bad_tie);
    CHECK_MSG(bad_inside == 0, "%d values below a midpoint round up", bad_inside);
}

static void test_bf16(void) {
    CHECK_EQ_INT(kr_fp32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(kr_fp32_to_bf16(-2.0f), 0xc000);
    CHECK_EQ_INT(kr_fp32_to_bf16(1.00390625f), 0x3f80); /* 1 + 2^-8: tie -> even */
    CHECK_EQ_INT(kr_fp32_to_bf16(1.01171875f), 0x3f82); /* 1 + 3*2^-8: tie -> even */
    CHECK_EQ_INT(kr_fp32_to_bf16(1.0078125f), 0x3f81);
    CHECK_EQ_INT(kr_fp32_to_bf16(3.4e38f), 0x7f80); /* rounds up to infinity */
    CHECK(isnan(kr_bf16_to_fp32(kr_fp32_to_bf16(NAN))));
    CHECK(kr_bf16_to_fp32(0x3fc0) == 1.5f);
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) continue; /* NaNs */
        if (kr_fp32_to_bf16(kr_bf16_to_fp32((uint16_t)h)) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d bf16 values do not round-trip", bad);
}

/* ---- quantize -> dequantize ---- */
typedef struct {
    kr_type type;
    double gauss_bound; /* relative RMSE bound on Gaussian data */
    double cos_bound;   /* relative RMSE bound on 0.1 + 2cos(i) */
} quant_case;

static const quant_case quant_cases[] = {
    {KR_TYPE_F16, 0.00026, 0.00025}, {KR_TYPE_BF16, 0.002, 0.002},  {KR_TYPE_Q8_0, 0.0066, 0.004},
    {KR_TYPE_Q8_1, 0.0066, 0.004},   {KR_TYPE_Q8_K, 0.0085, 0.004}, {KR_TYPE_Q6_K, 0.0215, 0.0142},
    {KR_TYPE_Q5_0, 0.052, 0.032},    {KR_TYPE_Q5_1, 0.046, 0.031},  {KR_TYPE_Q5_K, 0.044, 0.029},
    {KR_TYPE_Q4_0, 0.103, 0.061},    {KR_TYPE_Q4_1, 0.095, 0.062},  {KR_TYPE_Q4_K, 0.086, 0.053},
};
#define N_QUANT_CASES (sizeof(quant_cases) / sizeof(quant_cases[0]))

enum { N_ELEMS = 256 * 64 };

static double rel_rmse(const float *x, const float *y, int64_t n) {
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; i++) {
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
    return sqrt(se / sx);
}

static double roundtrip_error(kr_type type, const float *x, float *y, void *buf) {
    if (!kr_quantize_row(type, x, buf, N_ELEMS)) {
        return INFINITY;
    }
    kr_dequantize_row(type, buf, y, N_ELEMS);
    return rel_rmse(x, y, N_ELEMS);
}

static void test_roundtrip_errors(void) {
    float *gauss = malloc(N_ELEMS * sizeof(float));
    float *wave = malloc(N_ELEMS * sizeof(float));
    float *y = malloc(N_ELEMS * sizeof(float));
    void *buf = malloc(N_ELEMS * 4);
    for (int i = 0; i < N_ELEMS; i++) {
        gauss[i] = rng_gauss();
        wave[i] = 0.1f + 2.0f * cosf((float)i + 0.5f);
    }
    double err_g[KR_TYPE_COUNT] = {0};
    for (size_t c = 0; c < N_QUANT_CASES; c++) {
        const quant_case *qc = &quant_cases[c];
        const char *name = kr_type_get(qc->type)->name;
        const double eg = roundtrip_error(qc->type, gauss, y, buf);
        const double ew = roundtrip_error(qc->type, wave, y, buf);
        err_g[qc->type] = eg;
        printf("  %-5s rel rmse gauss %.5f  cos %.5f\n", name, eg, ew);
        CHECK_MSG(eg <= qc->gauss_bound, "%s gaussian rel rmse %.5f > %.5f", name, eg, qc->gauss_bound);
        CHECK_MSG(ew <= qc->cos_bound, "%s cos rel rmse %.5f > %.5f", name, ew, qc->cos_bound);
    }
    /* more bits, less error; the searched K-quant scales beat plain
     * round-to-nearest blocks of about the same size */
    CHECK(err_g[KR_TYPE_Q8_0] < err_g[KR_TYPE_Q6_K]);
    CHECK(err_g[KR_TYPE_Q6_K] < err_g[KR_TYPE_Q5_K]);
    CHECK(err_g[KR_TYPE_Q5_K] < err_g[KR_TYPE_Q4_K]);
    CHECK(err_g[KR_TYPE_Q5_0] < err_g[KR_TYPE_Q4_0]);
    CHECK(err_g[KR_TYPE_Q4_K] < err_g[KR_TYPE_Q4_0]);
    CHECK(err_g[KR_TYPE_Q5_K] < err_g[KR_TYPE_Q5_0]);
    free(gauss);
    free(wave);
    free(y);
    free(buf);
}

/* Per-element bounds for the plain block formats: each value lands within
 * half a step of its original (a full step where the positive side clips),
 * plus the rounding of the block scale to fp16. */
static void test_block_error_bounds(void) {
    enum { N = 32 * 50 };
    float x[N], y[N];
    kr_block_q8_0 q8[N / 32];
    kr_block_q4_0 q4[N / 32];
    kr_block_q5_1 q51[N / 32];
    for (int i = 0; i < N; i++) {
        x[i] = rng_gauss() * (1.0f + (float)(i / 32)); /* blocks of growing scale */
    }
    int bad8 = 0, bad4 = 0, bad51 = 0;
    kr_quantize_row(KR_TYPE_Q8_0, x, q8, N);
    kr_dequantize_row(KR_TYPE_Q8_0, q8, y, N);
    for (int i = 0; i < N; i++) {
        const float d = fabsf(kr_fp16_to_fp32(q8[i / 32].d));
        if (fabsf(x[i] - y[i]) > 0.5f * d + 127 * d / 1024) bad8++;
    }
    kr_quantize_row(KR_TYPE_Q4_0, x, q4, N);
    kr_dequantize_row(KR_TYPE_Q4_0, q4, y, N);
    for (int i = 0; i < N; i++) {
        const float d = fabsf(kr_fp16_to_fp32(q4[i / 32].d));
        if (fabsf(x[i] - y[i]) > d * (1.0f + 8.0f / 1024)) bad4++;
    }
    kr_quantize_row(KR_TYPE_Q5_1, x, q51, N);
    kr_dequantize_row(KR_TYPE_Q5_1, q51, y, N);
    for (int i = 0; i < N; i++) {
        const float d = kr_fp16_to_fp32(q51[i / 32].d);
        const float m = kr_fp16_to_fp32(q51[i / 32].m);
        if (fabsf(x[i] - y[i]) > 0.5f * d + 31 * d / 1024 + fabsf(m) / 1024) bad51++;
    }
    CHECK_MSG(bad8 == 0, "%d Q8_0 values off by more than half a step", bad8);
    CHECK_MSG(bad4 == 0, "%d Q4_0 values off by more than a step", bad4);
    CHECK_MSG(bad51 == 0, "%d Q5_1 values off by more than half a step", bad51);
}

/* All-zero and constant blocks must not produce NaN/inf and must come back
 * exactly (zero) or closely (constant). */
static void test_degenerate_blocks(void) {
    enum { N = 512 };
    float x[N], y[N];
    unsigned char buf[N * 4];
    for (size_t c = 0; c < N_QUANT_CASES; c++) {
        const kr_type t = quant_cases[c].type;
        const char *name = kr_type_get(t)->name;
        memset(x, 0, sizeof(x));
        kr_quantize_row(t, x, buf, N);
        kr_dequantize_row(t, buf, y, N);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += (y[i] != 0.0f);
        CHECK_MSG(bad == 0, "%s: zeros do not come back as zeros (%d)", name, bad);
        for (int i = 0; i < N; i++) x[i] = 0.75f;
        kr_quantize_row(t, x, buf, N);
        kr_dequantize_row(t, buf, y, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += !(fabsf(y[i] - 0.75f) <= 0.75f * 0.02f);
        CHECK_MSG(bad == 0, "%s: constant 0.75 comes back wrong (%d values, e.g. %g)", name, bad, y[0]);
    }
}

static void test_quantize_rejects(void) {
    float x[256] = {0};
    unsigned char buf[1024];
    CHECK(!kr_quantize_row(KR_TYPE_Q2_K, x, buf, 256));
    CHECK(!kr_quantize_row(KR_TYPE_Q3_K, x, buf, 256));
    CHECK(!kr_quantize_row(KR_TYPE_Q4_0, x, buf, 33));
    CHECK(!kr_quantize_row(KR_TYPE_Q4_K, x, buf, 128));
    CHECK(!kr_quantize_row((kr_type)5, x, buf, 32));
}

int main(void) {
    test_type_table();
    test_fp16_known_values();
    test_fp16_exhaustive();
    test_bf16();
    test_roundtrip_errors();
    test_block_error_bounds();
    test_degenerate_blocks();
    test_quantize_rejects();
    return kr_test_finish();
}
