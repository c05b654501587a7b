/*
 * cuda_elementwise.cu - the elementwise launchers of cuda_ops.h: RMSNorm,
 * RoPE, SwiGLU's silu(g) * u, residual adds, bias, row gathers and the KV
 * cache's row stores.
 *
 * Each launcher checks its arguments before launching (KR_CUDA_ERR_ARG),
 * launches nothing for empty work (returns 0), and otherwise returns the
 * launch's cudaGetLastError(). Flat loops are grid-stride loops over
 * int64_t indices, so any n fits in a bounded grid.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_common.h"
#include "cuda_kvquant.h"
#include "cuda_ops.h"
#include "cuda_rope.h"
#include "kara.h"

namespace {

constexpr int kThreads = 256;
/* Enough blocks to fill any current GPU several times over; grid-stride
 * loops cover the rest. */
constexpr int64_t kMaxBlocks = 65536;

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

/* Blocks of kThreads for a flat loop over n items. */
unsigned flat_blocks(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

__device__ int64_t flat_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

__device__ int64_t flat_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

/* Sum of v over the block (all threads get it): a shuffle tree per warp,
 * then the warps' sums through shared memory. blockDim.x a multiple of 32. */
__device__ float block_sum(float v) {
    __shared__ float warp_sums[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = lane < n_warps ? warp_sums[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* warp_sums may be reused by a later call */
    return v;
}

/* One block per row. The sum of squares is accumulated in float (the CPU's
 * scalar kernel uses double; a row of a few thousand values in float per
 * thread and a tree over threads stays within ~1e-6 relative), then
 * y = (x * scale) * w as the CPU orders it. */
__global__ void rmsnorm_kernel(float *y, const float *x, const float *w, int64_t dim, float eps) {
    const float *xr = x + static_cast<int64_t>(blockIdx.x) * dim;
    float *yr = y + static_cast<int64_t>(blockIdx.x) * dim;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}

/* One block per entry: the entry's cos / sin per pair into shared memory
 * (cuda_rope.h, the CPU's angles), then every (head, pair) of the entry
 * rotated. */
__global__ void rope_kernel(float *v, const int32_t *pos, int32_t n_heads, int32_t head_dim, int32_t rope_dim,
                            float theta_scale, bool neox) {
    extern __shared__ float cs[]; /* rope_dim floats: cos, sin per pair */
    const int32_t half = rope_dim / 2, p = pos[blockIdx.x];
    for (int32_t j = threadIdx.x; j < half; j += blockDim.x)
        kr_cu_rope_cs(p, j, rope_dim, theta_scale, &cs[2 * j], &cs[2 * j + 1]);
    __syncthreads();
    float *row = v + static_cast<int64_t>(blockIdx.x) * n_heads * head_dim;
    for (int32_t t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
        const int32_t h = t / half, j = t % half;
        int32_t a, b;
        kr_cu_rope_pair_index(j, rope_dim, neox, &a, &b);
        float *hv = row + static_cast<int64_t>(h) * head_dim;
        kr_cu_rope_rotate(&hv[a], &hv[b], cs[2 * j], cs[2 * j + 1]);
    }
}

/* g = g / (1 + exp(-g)) * u, the CPU's expression. */
__global__ void silu_mul_kernel(float *g, const float *u, int64_t n) {
    for (int64_t i = flat_index(); i < n; i += flat_stride()) {
        const float x = g[i];
        g[i] = x / (1.0f + expf(-x)) * u[i];
    }
}

__global__ void add_kernel(float *x, const float *y, int64_t n) {
    for (int64_t i = flat_index(); i < n; i += flat_stride()) x[i] += y[i];
}

__global__ void add_bias_kernel(float *y, const float *b, int64_t n, int64_t dim) {
    for (int64_t i = flat_index(); i < n; i += flat_stride()) y[i] += b[i % dim];
}

__global__ void gather_rows_kernel(float *dst, const float *src, const int32_t *rows, int64_t n, int64_t dim) {
    for (int64_t i = flat_index(); i < n; i += flat_stride()) {
        const int64_t r = i / dim, d = i % dim;
        dst[i] = src[static_cast<int64_t>(rows[r]) * dim + d];
    }
}

/* f32 and f16 rows: one thread per value (n = rows * row_len values). */
__global__ void kv_store_f32_kernel(uint8_t *pool, const int64_t *offs, const float *src, int64_t n, int64_t row_len) {
    for (int64_t i = flat_index(); i < n; i += flat_stride()) {
        const int64_t r = i / row_len, c = i % row_len;
        if (offs[r] >= 0) reinterpret_cast<float *>(pool + offs[r])[c] = src[i];
    }
}

__global__ void kv_store_f16_kernel(uint8_t *pool, const int64_t *offs, const float *src, int64_t n, int64_t row_len) {
    for (int64_t i = flat_index(); i < n; i += flat_stride()) {
        const int64_t r = i / row_len, c = i % row_len;
        if (offs[r] >= 0) reinterpret_cast<uint16_t *>(pool + offs[r])[c] = kr_cu_f32_f16(src[i]);
    }
}

/* q8_0 / q4_0 rows: one thread per 32-value block, quantised by the CPU's
 * reference arithmetic (cuda_kvquant.h), so the bytes are kr_kv_row_store's.
 * n_blocks = rows * row_len / 32. */
template <bool Q8>
__global__ void kv_store_blocks_kernel(uint8_t *pool, const int64_t *offs, const float *src, int64_t n_blocks,
                                       int64_t row_len) {
    const int64_t per_row = row_len / KR_CU_QK;
    for (int64_t i = flat_index(); i < n_blocks; i += flat_stride()) {
        const int64_t r = i / per_row, b = i % per_row;
        if (offs[r] < 0) continue;
        const float *x = src + r * row_len + b * KR_CU_QK;
        if (Q8)
            kr_cu_quantize_q8_0(x, pool + offs[r] + b * KR_CU_Q8_0_BYTES);
        else
            kr_cu_quantize_q4_0(x, pool + offs[r] + b * KR_CU_Q4_0_BYTES);
    }
}

int launched() { return static_cast<int>(cudaGetLastError()); }

} // namespace

extern "C" int kr_cuda_rmsnorm(void *stream, float *y, const float *x, const float *w, int64_t n_rows, int64_t dim,
                               float eps) {
    if (!y || !x || !w || n_rows < 0 || dim <= 0 || n_rows > INT32_MAX) return KR_CUDA_ERR_ARG;
    if (n_rows == 0) return 0;
    rmsnorm_kernel<<<static_cast<unsigned>(n_rows), kThreads, 0, as_stream(stream)>>>(y, x, w, dim, eps);
    return launched();
}

extern "C" int kr_cuda_rope(void *stream, float *v, const int32_t *pos, int64_t n_entries, int32_t n_heads,
                            int32_t head_dim, int32_t rope_dim, float freq_base, bool neox) {
    if (!v || !pos || n_entries < 0 || n_entries > INT32_MAX || n_heads <= 0 || head_dim <= 0 || rope_dim < 0 ||
        rope_dim % 2 != 0 || rope_dim > head_dim || !(freq_base > 0.0f))
        return KR_CUDA_ERR_ARG;
    if (n_entries == 0 || rope_dim == 0) return 0;
    /* the host's powf: the CPU's theta_scale bit for bit */
    const float theta_scale = kr_cu_rope_theta_scale(freq_base, rope_dim);
    const size_t shared = static_cast<size_t>(rope_dim) * sizeof(float);
    rope_kernel<<<static_cast<unsigned>(n_entries), kThreads, shared, as_stream(stream)>>>(v, pos, n_heads, head_dim,
                                                                                           rope_dim, theta_scale, neox);
    return launched();
}

extern "C" int kr_cuda_silu_mul(void *stream, float *g, const float *u, int64_t n) {
    if (!g || !u || n < 0) return KR_CUDA_ERR_ARG;
    if (n == 0) return 0;
    silu_mul_kernel<<<flat_blocks(n), kThreads, 0, as_stream(stream)>>>(g, u, n);
    return launched();
}

extern "C" int kr_cuda_add(void *stream, float *x, const float *y, int64_t n) {
    if (!x || !y || n < 0) return KR_CUDA_ERR_ARG;
    if (n == 0) return 0;
    add_kernel<<<flat_blocks(n), kThreads, 0, as_stream(stream)>>>(x, y, n);
    return launched();
}

extern "C" int kr_cuda_add_bias(void *stream, float *y, const float *b, int64_t n_rows, int64_t dim) {
    if (!y || !b || n_rows < 0 || dim <= 0) return KR_CUDA_ERR_ARG;
    if (n_rows == 0) return 0;
    const int64_t n = n_rows * dim;
    add_bias_kernel<<<flat_blocks(n), kThreads, 0, as_stream(stream)>>>(y, b, n, dim);
    return launched();
}

extern "C" int kr_cuda_gather_rows(void *stream, float *dst, const float *src, const int32_t *rows, int64_t n,
                                   int64_t dim) {
    if (!dst || !src || !rows || n < 0 || dim <= 0) return KR_CUDA_ERR_ARG;
    if (n == 0) return 0;
    gather_rows_kernel<<<flat_blocks(n * dim), kThreads, 0, as_stream(stream)>>>(dst, src, rows, n * dim, dim);
    return launched();
}

extern "C" int kr_cuda_kv_store(void *stream, int kv_dtype, uint8_t *pool, const int64_t *offs, const float *src,
                                int64_t n, int64_t row_len) {
    if (!pool || !offs || !src || n < 0 || row_len <= 0) return KR_CUDA_ERR_ARG;
    const bool blocked = kv_dtype == KARA_KV_Q8_0 || kv_dtype == KARA_KV_Q4_0;
    if (!blocked && kv_dtype != KARA_KV_F32 && kv_dtype != KARA_KV_F16) return KR_CUDA_ERR_ARG;
    if (blocked && row_len % KR_CU_QK != 0) return KR_CUDA_ERR_ARG;
    if (n == 0) return 0;
    cudaStream_t s = as_stream(stream);
    const int64_t total = n * row_len;
    if (kv_dtype == KARA_KV_F32)
        kv_store_f32_kernel<<<flat_blocks(total), kThreads, 0, s>>>(pool, offs, src, total, row_len);
    else if (kv_dtype == KARA_KV_F16)
        kv_store_f16_kernel<<<flat_blocks(total), kThreads, 0, s>>>(pool, offs, src, total, row_len);
    else if (kv_dtype == KARA_KV_Q8_0)
        kv_store_blocks_kernel<true>
            <<<flat_blocks(total / KR_CU_QK), kThreads, 0, s>>>(pool, offs, src, total / KR_CU_QK, row_len);
    else
        kv_store_blocks_kernel<false>
            <<<flat_blocks(total / KR_CU_QK), kThreads, 0, s>>>(pool, offs, src, total / KR_CU_QK, row_len);
    return launched();
}
