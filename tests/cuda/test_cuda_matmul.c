/*
 * test_cuda_matmul.c - kernels_cuda/cuda_matmul.cu on a GPU: kr_cuda_matmul
 * for every weight type against a double-precision product of the CPU's
 * dequantised rows, on both paths (GEMV for n <= KR_CUDA_GEMV_MAX, f16 tiles
 * and cuBLAS above; a small scratch forces several tiles), and
 * kr_cuda_embed bit for bit against kr_dequantize_row. Exits 77 (skip)
 * without a CUDA device.
 *
 * Tolerances, as |y - ref| / (||W[r]|| * ||x[b]||), the bound on |W[r] . x[b]|:
 *  - GEMV: 1e-4. Weights are dequantised exactly and everything is summed
 *    in fp32; over 1280 terms the rounding stays far below that.
 *  - cuBLAS (n > 8): 2e-3. Weights and activations are rounded to f16
 *    (relative 2^-11 each, so about 1e-3 per product at worst) before an
 *    fp32-accumulated product; by Cauchy-Schwarz the sum's error relative to
 *    ||W[r]|| * ||x[b]|| is at most about that.
 * The CPU has no Q2_K / Q3_K quantiser or dequantiser: those weights are
 * random bytes with finite scales and their reference rows come from
 * kr_cu_dequant32 on the host (tests/unit/test_cuda_math_dequant.c checks it
 * against GGML's loops).
 */
#include "cuda_dequant.h"
#include "cuda_ops.h"
#include "kernels.h"

#include <cuda_runtime_api.h>

#include "cuda_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ROWS 100  /* not a multiple of the GEMV's 32 rows per block */
#define N_COLS 1280 /* 5 super-blocks; 40 32-value blocks: one full and one partial staging chunk */
/* the row width of the case at hand: N_COLS, or for F32 / F16 / BF16 also
 * widths that end in a partial 32-value stretch (stories260K's ffn_down
 * has 172 columns, llama-2-tiny-random's embeddings 8) */
static int n_cols = N_COLS;
#define LDY (N_ROWS + 3)
#define MAX_N 64
#define SENTINEL 12345.0f

static int failures = 0;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rng_gauss(void) {
    const float u1 = (rng_u32() + 0.5f) / 4294967296.0f, u2 = (rng_u32() + 0.5f) / 4294967296.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

typedef struct {
    int type;
    const char *name;
} type_case;

static const type_case k_types[] = {
    {KR_TYPE_F32, "F32"},   {KR_TYPE_F16, "F16"},   {KR_TYPE_BF16, "BF16"}, {KR_TYPE_Q4_0, "Q4_0"},
    {KR_TYPE_Q4_1, "Q4_1"}, {KR_TYPE_Q5_0, "Q5_0"}, {KR_TYPE_Q5_1, "Q5_1"}, {KR_TYPE_Q8_0, "Q8_0"},
    {KR_TYPE_Q2_K, "Q2_K"}, {KR_TYPE_Q3_K, "Q3_K"}, {KR_TYPE_Q4_K, "Q4_K"}, {KR_TYPE_Q5_K, "Q5_K"},
    {KR_TYPE_Q6_K, "Q6_K"},
};

/* Weights of the type: quantised Gaussian rows, or (Q2_K / Q3_K) random
 * bytes with small positive f16 scales at the blocks' d / dmin offsets. */
static void make_weights(int type, uint8_t *w, size_t row_bytes) {
    if (type == KR_TYPE_Q2_K || type == KR_TYPE_Q3_K) {
        for (size_t i = 0; i < row_bytes * N_ROWS; i++) w[i] = (uint8_t)rng_u32();
        const size_t bb = type == KR_TYPE_Q2_K ? KR_CU_Q2_K_BYTES : KR_CU_Q3_K_BYTES;
        for (size_t b = 0; b < row_bytes * N_ROWS / bb; b++) {
            const uint16_t d = kr_fp32_to_fp16(0.002f + 0.01f * (rng_u32() % 1000) / 1000.0f);
            const uint16_t m = kr_fp32_to_fp16(0.001f + 0.01f * (rng_u32() % 1000) / 1000.0f);
            if (type == KR_TYPE_Q2_K) {
                memcpy(w + b * bb + 80, &d, 2);
                memcpy(w + b * bb + 82, &m, 2);
            } else {
                memcpy(w + b * bb + 108, &d, 2);
            }
        }
        return;
    }
    float row[N_COLS];
    for (int r = 0; r < N_ROWS; r++) {
        for (int c = 0; c < n_cols; c++) row[c] = 0.05f * rng_gauss();
        if (!kr_quantize_row((kr_type)type, row, w + (size_t)r * row_bytes, n_cols)) {
            fprintf(stderr, "test_cuda_matmul: no quantiser for type %d\n", type);
            exit(1);
        }
    }
}

/* The f32 values of row r: the CPU's dequantiser where it has one. */
static void ref_row(int type, const uint8_t *w, size_t row_bytes, int r, float *out) {
    const uint8_t *row = w + (size_t)r * row_bytes;
    if (type == KR_TYPE_Q2_K || type == KR_TYPE_Q3_K) {
        for (int b = 0; b < n_cols / 32; b++) kr_cu_dequant32(type, row, b, out + 32 * b);
    } else {
        kr_dequantize_row((kr_type)type, row, out, n_cols);
    }
}

/* Runs kr_cuda_matmul for n entries and compares every output (and that the
 * ldy padding is untouched). */
static void check_matmul(const type_case *tc, void *stream, void *blas, const void *dw, size_t row_bytes,
                         const float *wf, const float *dx, const float *x, int n, void *dscratch, size_t scratch_bytes,
                         float *dy, const char *what) {
    static float y[MAX_N * LDY];
    for (int i = 0; i < MAX_N * LDY; i++) y[i] = SENTINEL;
    CK(cudaMemcpy(dy, y, sizeof y, cudaMemcpyHostToDevice));
    RC_OK(
        kr_cuda_matmul(stream, blas, tc->type, dw, row_bytes, N_ROWS, n_cols, dx, n, dy, LDY, dscratch, scratch_bytes));
    CK(cudaStreamSynchronize((cudaStream_t)stream));
    CK(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost));
    const double tol = n <= KR_CUDA_GEMV_MAX ? 1e-4 : 2e-3;
    double worst = 0.0;
    int bad = 0;
    for (int b = 0; b < n; b++) {
        double xn = 0.0;
        for (int c = 0; c < n_cols; c++) xn += (double)x[b * n_cols + c] * x[b * n_cols + c];
        for (int r = 0; r < N_ROWS; r++) {
            double ref = 0.0, wn = 0.0;
            for (int c = 0; c < n_cols; c++) {
                ref += (double)wf[r * n_cols + c] * x[b * n_cols + c];
                wn += (double)wf[r * n_cols + c] * wf[r * n_cols + c];
            }
            const double scale = sqrt(wn * xn) > 0 ? sqrt(wn * xn) : 1.0;
            const double err = fabs((double)y[b * LDY + r] - ref) / scale;
            if (!(err <= tol)) { /* NaN fails too */
                if (bad++ < 5) {
                    fprintf(stderr, "test_cuda_matmul: %s %s n=%d: y[%d][%d] = %.9g, reference %.9g (rel %.3g > %g)\n",
                            tc->name, what, n, b, r, y[b * LDY + r], ref, err, tol);
                }
            }
            if (err > worst) worst = err;
        }
        for (int r = N_ROWS; r < LDY; r++) {
            if (y[b * LDY + r] != SENTINEL && bad++ < 5) {
                fprintf(stderr, "test_cuda_matmul: %s %s n=%d: wrote y[%d][%d] past n_rows\n", tc->name, what, n, b, r);
            }
        }
    }
    if (bad) {
        failures++;
        fprintf(stderr, "test_cuda_matmul: FAIL %s %s n=%d: %d outputs off (worst rel %.3g)\n", tc->name, what, n, bad,
                worst);
    } else {
        printf("  %-5s %-22s n=%-2d worst rel error %.3g (tol %g)\n", tc->name, what, n, worst, tol);
    }
}

/* kr_cuda_embed of a few tokens, bit for bit against the reference rows. */
static void check_embed(const type_case *tc, void *stream, const void *dw, size_t row_bytes, const float *wf) {
    static const int32_t tokens[] = {5, 0, 99, 42, 5, 63};
    const int n = (int)(sizeof tokens / sizeof tokens[0]);
    int32_t *dtok;
    float *dx;
    static float x[6 * N_COLS];
    CK(cudaMalloc((void **)&dtok, sizeof tokens));
    CK(cudaMalloc((void **)&dx, sizeof x));
    CK(cudaMemcpy(dtok, tokens, sizeof tokens, cudaMemcpyHostToDevice));
    RC_OK(kr_cuda_embed(stream, tc->type, dw, row_bytes, dtok, n, n_cols, dx));
    CK(cudaStreamSynchronize((cudaStream_t)stream));
    CK(cudaMemcpy(x, dx, sizeof x, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < n_cols; c++) {
            const float got = x[i * n_cols + c], ref = wf[tokens[i] * n_cols + c];
            if (memcmp(&got, &ref, sizeof got) != 0 && bad++ < 5) {
                fprintf(stderr, "test_cuda_matmul: %s embed token %d col %d: %.9g, CPU %.9g\n", tc->name, tokens[i], c,
                        got, ref);
            }
        }
    }
    if (bad) {
        failures++;
        fprintf(stderr, "test_cuda_matmul: FAIL %s embed: %d values differ\n", tc->name, bad);
    }
    CK(cudaFree(dtok));
    CK(cudaFree(dx));
}

/* Arguments the kernels refuse, before any launch. */
static void check_bad_args(void *stream, void *blas, float *dy, const float *dx, const void *dw) {
    struct {
        int type;
        int64_t cols;
        size_t row_bytes;
    } bad[] = {
        {KR_TYPE_Q8_K, 256, 292},     /* not a weight type */
        {KR_TYPE_Q4_K_X16, 256, 144}, /* a CPU-only layout */
        {KR_TYPE_Q4_K, 128, 72},      /* half a super-block */
        {KR_TYPE_Q8_0, 48, 51},       /* not whole 32-value blocks */
        {KR_TYPE_Q4_0, 64, 35},       /* rows shorter than the data */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int rc =
            kr_cuda_matmul(stream, blas, bad[i].type, dw, bad[i].row_bytes, 4, bad[i].cols, dx, 1, dy, 4, NULL, 0);
        if (rc != KR_CUDA_ERR_ARG) {
            failures++;
            fprintf(stderr, "test_cuda_matmul: FAIL bad args %zu: rc %d, expected %d\n", i, rc, KR_CUDA_ERR_ARG);
        }
    }
    if (kr_cuda_weight_type_ok(KR_TYPE_Q8_K) || !kr_cuda_weight_type_ok(KR_TYPE_Q6_K)) {
        failures++;
        fprintf(stderr, "test_cuda_matmul: FAIL kr_cuda_weight_type_ok\n");
    }
}

int main(void) {
    skip_without_gpu("test_cuda_matmul");
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    void *blas = NULL;
    RC_OK(kr_cuda_blas_create(&blas, stream));

    static const int ns[] = {1, 3, 8, 9, 64};
    static float x[MAX_N * N_COLS];
    for (int i = 0; i < MAX_N * N_COLS; i++) x[i] = rng_gauss();
    float *dx, *dy;
    CK(cudaMalloc((void **)&dx, sizeof x));
    CK(cudaMalloc((void **)&dy, sizeof(float) * MAX_N * LDY));
    CK(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice));
    const size_t scratch_bytes = kr_cuda_matmul_scratch_bytes(N_COLS, MAX_N);
    void *dscratch;
    CK(cudaMalloc(&dscratch, scratch_bytes));

    float *wf = malloc(sizeof(float) * N_ROWS * N_COLS);
    static const int widths[] = {N_COLS, 172, 8, 1029};
    for (size_t t = 0; t < sizeof k_types / sizeof k_types[0]; t++) {
        const type_case *tc = &k_types[t];
        const bool any_width = tc->type == KR_TYPE_F32 || tc->type == KR_TYPE_F16 || tc->type == KR_TYPE_BF16;
        for (size_t wi = 0; wi < (any_width ? sizeof widths / sizeof widths[0] : 1); wi++) {
            n_cols = widths[wi];
            /* room for the activations and 40 weight rows (of n_cols rounded up
             * to 32 f16): three tiles over 100 rows */
            const size_t small_scratch =
                256 + ((size_t)MAX_N * n_cols * 2 + 255) / 256 * 256 + 40 * (size_t)((n_cols + 31) / 32 * 32) * 2;
            const size_t row_bytes = kr_type_row_size((kr_type)tc->type, n_cols);
            uint8_t *w = malloc(row_bytes * N_ROWS);
            make_weights(tc->type, w, row_bytes);
            for (int r = 0; r < N_ROWS; r++) ref_row(tc->type, w, row_bytes, r, wf + (size_t)r * n_cols);
            void *dw;
            CK(cudaMalloc(&dw, row_bytes * N_ROWS));
            CK(cudaMemcpy(dw, w, row_bytes * N_ROWS, cudaMemcpyHostToDevice));
            char what[48];
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                snprintf(what, sizeof what, "%s %d cols", ns[k] <= KR_CUDA_GEMV_MAX ? "gemv" : "cublas", n_cols);
                check_matmul(tc, stream, blas, dw, row_bytes, wf, dx, x, ns[k], dscratch, scratch_bytes, dy, what);
            }
            snprintf(what, sizeof what, "cublas 3 tiles %d", n_cols);
            check_matmul(tc, stream, blas, dw, row_bytes, wf, dx, x, 64, dscratch, small_scratch, dy, what);
            check_embed(tc, stream, dw, row_bytes, wf);
            CK(cudaFree(dw));
            free(w);
        }
    }
    n_cols = N_COLS;
    check_bad_args(stream, blas, dy, dx, dscratch);

    free(wf);
    CK(cudaFree(dscratch));
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    kr_cuda_blas_destroy(blas);
    CK(cudaStreamDestroy(stream));
    if (failures) {
        fprintf(stderr, "test_cuda_matmul: %d checks failed\n", failures);
        return 1;
    }
    printf("test_cuda_matmul: all passed\n");
    return 0;
}
