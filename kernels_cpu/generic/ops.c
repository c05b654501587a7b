/*
 * ops.c - scalar reference for the row-level kernels: matmul built on
 * vec_dot, RMSNorm, softmax, SwiGLU, f32/f16 dot and axpy, f16 stores.
 * Accumulations use double so this stays a trustworthy reference.
 */
#include "kernels_impl.h"

#include <math.h>

/* A load-time layout (kernels.h): each row is copied back to file blocks, a
 * chunk at a time, and dotted with the table's kernel for the source type.
 * Tables whose matmul has no faster way (scalar, AVX2, NEON) run repacked
 * weights so. */
static void matmul_repacked(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                            int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                            int ith, int nth) {
    enum { CHUNK_BYTES = 8192 };
    _Alignas(64) uint8_t row[CHUNK_BYTES];
    const kr_type st = kr_layout_source(wtype);
    const kr_type_info *ti = kr_type_get(st), *xi = kr_type_get(ti->vec_dot_type);
    const kr_vec_dot_fn dot = k->vec_dot[st];
    if (dot == NULL) {
        return;
    }
    const int64_t nb = n_cols / ti->block_size, chunk = CHUNK_BYTES / ti->type_size;
    const size_t x_block = (size_t)xi->type_size * (size_t)(ti->block_size / xi->block_size);
    int64_t r0, r1;
    kr_split_rows(n_rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t b = 0; b < n_batch; b++) y[b * ldy + r] = 0.0f;
        for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
            const int64_t n = nb - b0 < chunk ? nb - b0 : chunk;
            kr_repacked_blocks(wtype, w, w_row_bytes, r, b0, n, row);
            for (int64_t b = 0; b < n_batch; b++) {
                float part;
                dot(n * ti->block_size, &part, row, (const uint8_t *)x + (size_t)b * x_row_bytes + x_block * b0);
                y[b * ldy + r] += part;
            }
        }
    }
}

/* Each weight row is read once and dotted with every batch row while it is
 * still in cache. */
void kr_scalar_matmul(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                      int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                      int ith, int nth) {
    if (kr_layout_source(wtype) != wtype) {
        n_rows =
            kr_matmul_layout_tail(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        matmul_repacked(k, wtype, w, w_row_bytes, n_rows, n_cols, x, x_row_bytes, n_batch, y, ldy, ith, nth);
        return;
    }
    if ((uint32_t)wtype >= KR_TYPE_COUNT || k->vec_dot[wtype] == NULL) {
        return;
    }
    const kr_vec_dot_fn dot = k->vec_dot[wtype];
    int64_t r0, r1;
    kr_split_rows(n_rows, ith, nth, &r0, &r1);
    const char *wb = w;
    const char *xb = x;
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t b = 0; b < n_batch; b++) {
            dot(n_cols, &y[b * ldy + r], wb + (size_t)r * w_row_bytes, xb + (size_t)b * x_row_bytes);
        }
    }
}

void kr_scalar_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) {
        ss += (double)x[i] * x[i];
    }
    const float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] * scale * w[i];
    }
}

void kr_scalar_softmax(float *x, int64_t n) {
    if (n <= 0) {
        return;
    }
    float max = x[0];
    for (int64_t i = 1; i < n; i++) {
        if (x[i] > max) max = x[i];
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) {
        x[i] *= inv;
    }
}

void kr_scalar_silu_mul(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

float kr_scalar_dot_f32(const float *a, const float *b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)a[i] * b[i];
    }
    return (float)sum;
}

float kr_scalar_dot_f16_f32(const kr_fp16 *a, const float *b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)kr_half_to_float(a[i]) * b[i];
    }
    return (float)sum;
}

void kr_scalar_axpy_f32(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        y[i] += a * x[i];
    }
}

void kr_scalar_axpy_f16(float *y, float a, const kr_fp16 *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        y[i] += a * kr_half_to_float(x[i]);
    }
}

void kr_scalar_f32_to_f16(kr_fp16 *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        y[i] = kr_fp32_to_fp16(x[i]);
    }
}

void kr_scalar_gemm_nt(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                       int64_t m, int64_t n, int64_t k) {
    for (int64_t j = 0; j < n; j++) {
        const char *bj = (const char *)b + (size_t)j * ldb;
        for (int64_t i = 0; i < m; i++) {
            c[i * ldc + j] = b_f16 ? kr_scalar_dot_f16_f32((const kr_fp16 *)bj, a + i * lda, k)
                                   : kr_scalar_dot_f32(a + i * lda, (const float *)bj, k);
        }
    }
}

void kr_scalar_dequant_kv(kr_type t, const void *base, size_t stride, int64_t n_rows, int64_t b0, int64_t nb,
                          float *out) {
    const size_t bb = t == KR_TYPE_Q8_0 ? sizeof(kr_block_q8_0) : sizeof(kr_block_q4_0);
    for (int64_t r = 0; r < n_rows; r++, out += nb * 32)
        kr_dequantize_row(t, (const uint8_t *)base + (size_t)r * stride + (size_t)b0 * bb, out, nb * 32);
}

void kr_kernels_init_scalar(kr_kernels *k) {
    memset(k, 0, sizeof(*k));
    k->isa = KR_ISA_SCALAR;
    k->name = "scalar";

    k->vec_dot[KR_TYPE_F32] = kr_scalar_vec_dot_f32;
    k->vec_dot[KR_TYPE_F16] = kr_scalar_vec_dot_f16;
    k->vec_dot[KR_TYPE_BF16] = kr_scalar_vec_dot_bf16;
    k->vec_dot[KR_TYPE_Q4_0] = kr_scalar_vec_dot_q4_0;
    k->vec_dot[KR_TYPE_Q4_1] = kr_scalar_vec_dot_q4_1;
    k->vec_dot[KR_TYPE_Q5_0] = kr_scalar_vec_dot_q5_0;
    k->vec_dot[KR_TYPE_Q5_1] = kr_scalar_vec_dot_q5_1;
    k->vec_dot[KR_TYPE_Q8_0] = kr_scalar_vec_dot_q8_0;
    k->vec_dot[KR_TYPE_Q4_K] = kr_scalar_vec_dot_q4_K;
    k->vec_dot[KR_TYPE_Q5_K] = kr_scalar_vec_dot_q5_K;
    k->vec_dot[KR_TYPE_Q6_K] = kr_scalar_vec_dot_q6_K;

    k->from_float[KR_TYPE_F32] = kr_scalar_from_float_f32;
    k->from_float[KR_TYPE_F16] = kr_scalar_from_float_f16;
    k->from_float[KR_TYPE_BF16] = kr_scalar_from_float_bf16;
    k->from_float[KR_TYPE_Q8_0] = kr_scalar_from_float_q8_0;
    k->from_float[KR_TYPE_Q8_1] = kr_scalar_from_float_q8_1;
    k->from_float[KR_TYPE_Q8_K] = kr_scalar_from_float_q8_K;

    k->matmul = kr_scalar_matmul;
    k->rmsnorm = kr_scalar_rmsnorm;
    k->softmax = kr_scalar_softmax;
    k->silu_mul = kr_scalar_silu_mul;
    k->dot_f32 = kr_scalar_dot_f32;
    k->dot_f16_f32 = kr_scalar_dot_f16_f32;
    k->axpy_f32 = kr_scalar_axpy_f32;
    k->axpy_f16 = kr_scalar_axpy_f16;
    k->f32_to_f16 = kr_scalar_f32_to_f16;
    k->gemm_nt = kr_scalar_gemm_nt;
    k->gemm_nn_acc = kr_scalar_gemm_nn_acc;
    k->dequant_kv = kr_scalar_dequant_kv;
    k->gemm_nt_q8 = kr_scalar_gemm_nt_q8;
    k->gemm_nn_acc_q8 = kr_scalar_gemm_nn_acc_q8;
}
