/*
 * cuda_score.cu - Kara's window scorer and the compaction's row moves on
 * the device (cuda_ops.h: kr_cuda_score_layer, kr_cuda_kv_move).
 *
 * Scoring one layer takes three launches:
 *   1. one block per unit (query head a, tile of 32 query rows), rows in
 *      order: the row's query (times 1 / sqrt(d)) into shared memory, its
 *      logits against the sinks and the keys it needs into its own strip
 *      of zbuf (a thread per key), then the softmax(es) of
 *      kr_cu_score_row_plan by block reductions of the max and the sum,
 *      and the probabilities added to the unit's column sums in partial
 *      (column j always by thread j mod blockDim, so no atomics);
 *   2. a thread per column j: kr_cu_score_column over the units (the CPU's
 *      kr_kv_score_finish order), times ||v_j||_1 per KV head when
 *      value-aware, into layer;
 *   3. one block adds layer to acc (normalized_mean: divided by its sum).
 * Probabilities are exp(z - max) / sum, one division each; the CPU's
 * kernel-table softmax multiplies by the reciprocal, so results agree to
 * rounding, not bit for bit (tests/cuda/test_cuda_score.c states the
 * tolerance).
 *
 * Speed is not tuned: a thread reads a whole key head for one logit. A
 * window event scores about interval + buffer rows once per interval
 * tokens, a small part of a decode step's work.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_common.h"
#include "cuda_ops.h"
#include "cuda_score.h"
#include "kara.h"

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

/* The block's max (op 0) or sum (op 1) of v, in every thread. */
__device__ float block_reduce(float v, bool sum, float *red) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = sum ? v + w : fmaxf(v, w);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); /* red may still be read by the previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < kWarps; w++) r = sum ? r + red[w] : fmaxf(r, red[w]);
    return r;
}

/* max and sum of exp(z - max) over z[0, n) without z[skip] (skip < 0: none). */
__device__ void softmax_stats(const float *z, int32_t n, int32_t skip, float *red, float *m_out, float *s_out) {
    float m = -INFINITY;
    for (int32_t j = threadIdx.x; j < n; j += kThreads)
        if (j != skip) m = fmaxf(m, z[j]);
    m = block_reduce(m, false, red);
    float s = 0.0f;
    for (int32_t j = threadIdx.x; j < n; j += kThreads)
        if (j != skip) s += expf(z[j] - m);
    *s_out = block_reduce(s, true, red);
    *m_out = m;
}

__global__ void __launch_bounds__(kThreads)
    score_units_kernel(kr_cuda_score_args a, int32_t n_c, int32_t q_lo, int32_t n_tiles, int32_t key_hi) {
    extern __shared__ float qs[]; /* head_dim floats */
    __shared__ float red[kWarps];
    const int32_t u = blockIdx.x, head = u / n_tiles, tile = u % n_tiles;
    const int32_t d = a.head_dim, ns = a.n_sink, h = head / (a.n_head / a.n_head_kv);
    const int32_t r0 = q_lo + tile * KR_CU_SCORE_TILE;
    const int32_t r1 = r0 + KR_CU_SCORE_TILE < a.n_w ? r0 + KR_CU_SCORE_TILE : a.n_w;
    float *part = a.partial + static_cast<int64_t>(u) * n_c;
    float *z = a.zbuf + static_cast<int64_t>(u) * (ns + a.n_w);
    const float scale = 1.0f / sqrtf(static_cast<float>(d));
    for (int32_t j = threadIdx.x; j < n_c; j += kThreads) part[j] = 0.0f;
    for (int32_t i = r0; i < r1; i++) {
        const kr_cu_score_row p = kr_cu_score_row_plan(a.mode, a.exclude_self, i, n_c, key_hi, ns);
        int64_t qi = (a.q_first + i) % a.ring_cap;
        if (qi < 0) qi += a.ring_cap;
        const uint8_t *qrow = a.q_ring + qi * static_cast<int64_t>(a.q_row_bytes);
        __syncthreads(); /* the previous row is done with qs and z */
        for (int32_t t = threadIdx.x; t < d; t += kThreads)
            qs[t] = KR_CU_MUL(kr_cu_kv_value(a.q_type, qrow, static_cast<int64_t>(head) * d + t), scale);
        __syncthreads();
        for (int32_t j = threadIdx.x; j < ns + p.n_keys; j += kThreads)
            z[j] = kr_cu_kv_dot(a.kv_type, a.pool + a.key_offs[j], static_cast<int64_t>(h) * d, qs, d);
        __syncthreads();
        float m, s;
        if (p.anti_ok) { /* two_sided: row i's own mass on strictly later keys goes to column i */
            softmax_stats(z, ns + p.anti_n, p.anti_skip >= 0 ? ns + p.anti_skip : -1, red, &m, &s);
            float later = 0.0f;
            for (int32_t j = i + 1 + threadIdx.x; j < p.anti_n; j += kThreads)
                if (j != p.anti_skip) later += expf(z[ns + j] - m) / s;
            later = block_reduce(later, true, red);
            if (threadIdx.x == i % kThreads) part[i] += later; /* column i's owner */
        }
        if (p.main_ok) {
            const int32_t skip = p.main_skip >= 0 && p.main_skip < p.main_n ? ns + p.main_skip : -1;
            softmax_stats(z, ns + p.main_n, skip, red, &m, &s);
            for (int32_t j = threadIdx.x; j < p.add_n; j += kThreads)
                if (j != p.add_skip) part[j] += expf(z[ns + j] - m) / s;
        }
    }
}

__global__ void score_columns_kernel(kr_cuda_score_args a, int32_t n_c, int32_t n_tiles) {
    const int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_c) return;
    float vn[KR_CUDA_SCORE_MAX_KV];
    if (a.value_aware) {
        const uint8_t *vrow = a.pool + a.key_offs[a.n_sink + j] + a.v_delta;
        for (int32_t h = 0; h < a.n_head_kv; h++)
            vn[h] = kr_cu_kv_l1(a.kv_type, vrow, static_cast<int64_t>(h) * a.head_dim, a.head_dim);
    }
    a.layer[j] = kr_cu_score_column(a.partial, j, n_c, n_tiles, a.n_head_kv, a.n_head / a.n_head_kv, a.gqa_max,
                                    a.value_aware ? vn : nullptr);
}

__global__ void __launch_bounds__(kThreads) score_acc_kernel(const float *layer, float *acc, int32_t n_c,
                                                             bool normalized) {
    __shared__ float red[kWarps];
    float w = 1.0f;
    if (normalized) {
        float t = 0.0f;
        for (int32_t j = threadIdx.x; j < n_c; j += kThreads) t += layer[j];
        t = block_reduce(t, true, red);
        w = t > 0.0f ? 1.0f / t : 0.0f;
    }
    for (int32_t j = threadIdx.x; j < n_c; j += kThreads) acc[j] += layer[j] * w;
}

/* One block per (layer, K or V): the moves in order, a row at a time. */
__global__ void kv_move_kernel(uint8_t *pool, const int64_t *src, const int64_t *dst, int32_t n_moves,
                               int64_t layer_bytes, int64_t v_delta, int64_t row_bytes) {
    uint8_t *base = pool + static_cast<int64_t>(blockIdx.x >> 1) * layer_bytes + (blockIdx.x & 1) * v_delta;
    for (int32_t m = 0; m < n_moves; m++) {
        const uint8_t *from = base + src[m];
        uint8_t *to = base + dst[m];
        for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) to[b] = from[b];
        __syncthreads(); /* a later move may read what this one wrote */
    }
}

} // namespace

extern "C" int kr_cuda_score_layer(void *stream, const kr_cuda_score_args *a) {
    if (!a || a->n_w < 1 || a->n_buf < 0 || a->n_buf >= a->n_w || a->n_q < 1 || a->n_q > a->n_w || a->n_head < 1 ||
        a->n_head_kv < 1 || a->n_head % a->n_head_kv || a->n_head_kv > KR_CUDA_SCORE_MAX_KV || a->head_dim < 1 ||
        a->head_dim > KR_CUDA_SCORE_MAX_DIM || a->n_sink < 0 || a->ring_cap < 1 || !a->q_ring || !a->pool ||
        !a->key_offs || !a->partial || !a->zbuf || !a->layer || !a->acc || a->mode < KR_SCORE_BIDIRECTIONAL ||
        a->mode > KR_SCORE_BUFFER_ONLY || (a->mode == KR_SCORE_BUFFER_ONLY && a->n_buf < 1))
        return KR_CUDA_ERR_ARG;
    const bool blocked_q = a->q_type == KARA_KV_Q8_0 || a->q_type == KARA_KV_Q4_0;
    const bool blocked_k = a->kv_type == KARA_KV_Q8_0 || a->kv_type == KARA_KV_Q4_0;
    if ((blocked_q || blocked_k) && a->head_dim % KR_CU_QK) return KR_CUDA_ERR_ARG;
    const int32_t n_c = a->n_w - a->n_buf;
    const int32_t q_lo = kr_cu_score_q_lo(a->mode, a->n_w, n_c, a->n_q);
    const int32_t n_tiles = (a->n_w - q_lo + KR_CU_SCORE_TILE - 1) / KR_CU_SCORE_TILE;
    const int32_t key_hi = kr_cu_score_key_hi(a->softmax_over, a->n_w, n_c);
    cudaStream_t st = as_stream(stream);
    score_units_kernel<<<static_cast<unsigned>(a->n_head * n_tiles), kThreads,
                         static_cast<size_t>(a->head_dim) * sizeof(float), st>>>(*a, n_c, q_lo, n_tiles, key_hi);
    int rc = launched();
    if (rc) return rc;
    score_columns_kernel<<<static_cast<unsigned>((n_c + kThreads - 1) / kThreads), kThreads, 0, st>>>(*a, n_c,
                                                                                                      n_tiles);
    if ((rc = launched())) return rc;
    score_acc_kernel<<<1, kThreads, 0, st>>>(a->layer, a->acc, n_c, a->normalized);
    return launched();
}

extern "C" int kr_cuda_kv_move(void *stream, uint8_t *pool, const int64_t *src, const int64_t *dst, int32_t n_moves,
                               int32_t n_layers, int64_t layer_bytes, int64_t v_delta, int64_t row_bytes) {
    if (!pool || !src || !dst || n_moves < 0 || n_layers < 0 || row_bytes <= 0 || v_delta < row_bytes ||
        layer_bytes < 2 * v_delta || n_layers > 32768)
        return KR_CUDA_ERR_ARG;
    if (!n_moves || !n_layers) return 0;
    kv_move_kernel<<<static_cast<unsigned>(2 * n_layers), 256, 0, as_stream(stream)>>>(pool, src, dst, n_moves,
                                                                                      layer_bytes, v_delta, row_bytes);
    return launched();
}
