/*
 * cuda_attention.cu - kr_cuda_attention: softmax(scale q . K^T) . V over the
 * paged KV pool (cuda_ops.h, kr_cuda_attn_args), for every entry and query
 * head: in one pass with no scratch memory, or split-K (below).
 *
 * Thread mapping. One block of 8 warps per (entry, KV head, chunk of up to
 * 4 of that KV head's query heads): the chunk's queries share every K and V
 * row the block reads. Warp w takes the slots w, w + 8, w + 16, ... of
 * [0, n_vis) (with split-K, of the block's range); in a warp, lane l holds
 * head dimensions l, l + 32, ... (head_dim / 32 rounded up, at most 8 per
 * lane), so a warp reads a row's head as consecutive bytes. Per slot a
 * warp forms the chunk's scores (per-lane partial dot products, summed by
 * a shuffle butterfly so every lane has them) and folds each into its
 * query's online softmax
 * (cuda_softmax.h: running max, running sum, rescaled accumulator). At the
 * end the 8 warps' partial states are merged through shared memory and
 * out = acc / l. Memory is O(head_dim) per warp whatever n_vis (1 to
 * 40960 and beyond).
 *
 * Rows: slot s of entry e is in block tables[table_off[e] + s / block_size]
 * at offset s % block_size; its K row of the layer at pool + block *
 * bytes_per_block + (layer * 2 * block_size + offset) * slot_bytes, its V
 * row block_size slots further. f32 and f16 take any head_dim up to 256;
 * q8_0 / q4_0 need head_dim % 32 == 0 (a head is then whole blocks, lane l
 * reads element l of each), else KR_CUDA_ERR_ARG.
 *
 * The queries are multiplied by scale before the dot products, as the CPU
 * does (forward.c attn_chunk).
 *
 * Split-K (a->n_split > 1, cuda_splitk.h): the same kernel runs one block
 * per (entry, KV head, chunk, split) over the split's range of slots and
 * writes each query head's partial record (m, l, unnormalised acc) instead
 * of out; combine_kernel then merges a head's records into out. Decode
 * then keeps every SM busy at long contexts.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_common.h"
#include "cuda_kvquant.h"
#include "cuda_ops.h"
#include "cuda_softmax.h"
#include "cuda_splitk.h"
#include "kara.h"

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxGroup = KR_CU_ATTN_MAX_GROUP; /* query heads per block */
constexpr int kMaxHeadDim = KR_CUDA_ATTN_MAX_DIM;
/* Slots a warp loads ahead before folding them in: more loads in flight
 * per warp hide the latency of the table lookup and the row reads. */
constexpr int kUnroll = 2;

/* Value d = lane + 32 i of KV head `kvh` in a row of type DT (d < hd is
 * the caller's: for blocked types hd % 32 == 0 so d always is). */
template <int DT>
__device__ __forceinline__ float load_value(const uint8_t *row, int32_t kvh, int32_t hd, int i, int lane) {
    const int64_t v = static_cast<int64_t>(kvh) * hd + 32 * i + lane;
    if (DT == KARA_KV_F32) return reinterpret_cast<const float *>(row)[v];
    if (DT == KARA_KV_F16) return __half2float(__ushort_as_half(reinterpret_cast<const unsigned short *>(row)[v]));
    const int64_t b = v / KR_CU_QK;
    if (DT == KARA_KV_Q8_0) return kr_cu_dequant_q8_0(row + b * KR_CU_Q8_0_BYTES, lane);
    return kr_cu_dequant_q4_0(row + b * KR_CU_Q4_0_BYTES, lane);
}

/* The head's DPL values of this lane from a row (0 past head_dim). */
template <int DT, int DPL>
__device__ __forceinline__ void load_head(float *out, const uint8_t *row, int32_t kvh, int32_t hd, int lane) {
#pragma unroll
    for (int i = 0; i < DPL; i++) out[i] = 32 * i + lane < hd ? load_value<DT>(row, kvh, hd, i, lane) : 0.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* See the file comment. Block index = ((entry * n_head_kv + kv head) *
 * n_chunks + chunk) * n_split + split; a chunk is gsize query heads of the
 * KV head's group. n_split 1 writes out, more write partial records. */
template <int DT, int DPL>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(kr_cuda_attn_args a, int32_t gsize, int32_t n_chunks, int32_t n_split) {
    __shared__ float s_acc[kWarps][DPL * 32];
    __shared__ kr_cu_softmax_state s_st[kWarps];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int32_t group = a.n_head / a.n_head_kv, hd = a.head_dim;
    const int32_t split = static_cast<int32_t>(blockIdx.x % n_split);
    const int64_t bid = blockIdx.x / n_split;
    const int32_t chunk = static_cast<int32_t>(bid % n_chunks);
    const int32_t kvh = static_cast<int32_t>((bid / n_chunks) % a.n_head_kv);
    const int64_t e = bid / n_chunks / a.n_head_kv;
    const int32_t h0 = kvh * group + chunk * gsize;
    const int32_t ng = group - chunk * gsize < gsize ? group - chunk * gsize : gsize;

    float q[kMaxGroup][DPL], acc[kMaxGroup][DPL];
    kr_cu_softmax_state st[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; g++) {
        st[g] = kr_cu_softmax_init();
        const float *qh = a.q + (e * a.n_head + h0 + (g < ng ? g : 0)) * hd;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = 32 * i + lane;
            q[g][i] = g < ng && d < hd ? qh[d] * a.scale : 0.0f;
            acc[g][i] = 0.0f;
        }
    }

    int32_t lo, nv;
    kr_cu_splitk_range(a.n_vis[e], n_split, split, &lo, &nv);
    const int32_t bs = a.block_size;
    const int32_t *table = a.tables + a.table_off[e];
    const size_t k_base = static_cast<size_t>(a.layer) * 2 * bs, v_gap = static_cast<size_t>(bs) * a.slot_bytes;
    for (int32_t s0 = lo + warp; s0 < nv; s0 += kWarps * kUnroll) {
        float kv[kUnroll][DPL], vv[kUnroll][DPL];
        bool live[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            const int32_t s = s0 + u * kWarps;
            live[u] = s < nv;
            if (!live[u]) continue;
            const uint8_t *krow = a.pool + static_cast<size_t>(table[s / bs]) * a.bytes_per_block +
                (k_base + static_cast<size_t>(s % bs)) * a.slot_bytes;
            load_head<DT, DPL>(kv[u], krow, kvh, hd, lane);
            load_head<DT, DPL>(vv[u], krow + v_gap, kvh, hd, lane);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            if (!live[u]) continue;
#pragma unroll
            for (int g = 0; g < kMaxGroup; g++) {
                if (g >= ng) continue;
                float dot = 0.0f;
#pragma unroll
                for (int i = 0; i < DPL; i++) dot += q[g][i] * kv[u][i];
                dot = warp_sum(dot);
                float w;
                const float f = kr_cu_softmax_push(&st[g], dot, &w);
#pragma unroll
                for (int i = 0; i < DPL; i++) acc[g][i] = acc[g][i] * f + w * vv[u][i];
            }
        }
    }

    /* merge the warps' partial states, one query head at a time */
#pragma unroll
    for (int g = 0; g < kMaxGroup; g++) {
        if (g >= ng) continue;
#pragma unroll
        for (int i = 0; i < DPL; i++) s_acc[warp][32 * i + lane] = acc[g][i];
        if (lane == 0) s_st[warp] = st[g];
        __syncthreads();
        const int64_t head = e * a.n_head + h0 + g;
        float *out = a.out + head * hd;
        float *rec = n_split > 1 ? a.part + (head * n_split + split) * KR_CU_SPLITK_REC(hd) : nullptr;
        for (int d = threadIdx.x; d < hd; d += kThreads) {
            kr_cu_softmax_state m;
            const float o = kr_cu_softmax_merge_n(s_st, &s_acc[0][d], kWarps, DPL * 32, &m);
            if (rec)
                kr_cu_splitk_put(rec, m, d, o);
            else
                out[d] = o * kr_cu_softmax_inv_sum(m);
        }
        __syncthreads();
    }
}

/* Split-K's second step: one block per (entry, query head) merges the
 * head's n_split records into out (cuda_splitk.h). */
__global__ void __launch_bounds__(128) combine_kernel(const float *part, float *out, int32_t hd, int32_t n_split) {
    const int64_t head = blockIdx.x;
    const float *recs = part + head * n_split * KR_CU_SPLITK_REC(hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        out[head * hd + d] = kr_cu_splitk_combine(recs, n_split, KR_CU_SPLITK_REC(hd), d);
}

template <int DT>
int launch_dt(const kr_cuda_attn_args &a, int32_t gsize, int32_t n_chunks, int32_t ns, unsigned blocks,
              cudaStream_t s) {
    switch ((a.head_dim + 31) / 32) {
    case 1: attention_kernel<DT, 1><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 2: attention_kernel<DT, 2><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 3: attention_kernel<DT, 3><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 4: attention_kernel<DT, 4><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 5: attention_kernel<DT, 5><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 6: attention_kernel<DT, 6><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 7: attention_kernel<DT, 7><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    case 8: attention_kernel<DT, 8><<<blocks, kThreads, 0, s>>>(a, gsize, n_chunks, ns); break;
    default: return KR_CUDA_ERR_ARG;
    }
    int rc = static_cast<int>(cudaGetLastError());
    if (rc || ns == 1) return rc;
    combine_kernel<<<static_cast<unsigned>(static_cast<int64_t>(a.n_entries) * a.n_head), 128, 0, s>>>(a.part, a.out,
                                                                                                       a.head_dim, ns);
    return static_cast<int>(cudaGetLastError());
}

/* Bytes of one value (f32, f16) or of a 32-value block (q8_0, q4_0). */
size_t unit_bytes(int dt) {
    switch (dt) {
    case KARA_KV_F32: return 4;
    case KARA_KV_F16: return 2;
    case KARA_KV_Q8_0: return KR_CU_Q8_0_BYTES;
    case KARA_KV_Q4_0: return KR_CU_Q4_0_BYTES;
    default: return 0;
    }
}

} // namespace

/* Checks the arguments the kernel relies on (shapes, a row fitting in a
 * slot, the layer fitting in a block, scratch for split-K), picks the
 * query heads per block (kr_cu_attn_gsize) and launches. */
extern "C" int kr_cuda_attention(void *stream, const kr_cuda_attn_args *a) {
    if (!a || a->n_entries < 0) return KR_CUDA_ERR_ARG;
    if (a->n_entries == 0) return 0;
    if (!a->q || !a->out || !a->pool || !a->n_vis || !a->tables || !a->table_off) return KR_CUDA_ERR_ARG;
    if (a->n_head <= 0 || a->n_head_kv <= 0 || a->n_head % a->n_head_kv != 0) return KR_CUDA_ERR_ARG;
    if (a->head_dim <= 0 || a->head_dim > kMaxHeadDim || a->block_size <= 0 || a->layer < 0) return KR_CUDA_ERR_ARG;
    const size_t unit = unit_bytes(a->kv_dtype);
    if (unit == 0) return KR_CUDA_ERR_ARG;
    const bool blocked = a->kv_dtype == KARA_KV_Q8_0 || a->kv_dtype == KARA_KV_Q4_0;
    if (blocked && a->head_dim % KR_CU_QK != 0) return KR_CUDA_ERR_ARG;
    const size_t row_values = static_cast<size_t>(a->n_head_kv) * static_cast<size_t>(a->head_dim);
    const size_t row_bytes = blocked ? row_values / KR_CU_QK * unit : row_values * unit;
    if (a->slot_bytes < row_bytes) return KR_CUDA_ERR_ARG;
    if (a->bytes_per_block <
        (static_cast<size_t>(a->layer) + 1) * 2 * static_cast<size_t>(a->block_size) * a->slot_bytes)
        return KR_CUDA_ERR_ARG;

    const int32_t ns = a->n_split > 1 ? a->n_split : 1;
    if (ns > KR_CU_SPLITK_MAX || (ns > 1 && !a->part)) return KR_CUDA_ERR_ARG;
    const int32_t group = a->n_head / a->n_head_kv;
    const int32_t gsize = kr_cu_attn_gsize(a->n_entries, a->n_head, a->n_head_kv);
    const int32_t n_chunks = (group + gsize - 1) / gsize;
    const int64_t blocks = static_cast<int64_t>(a->n_entries) * a->n_head_kv * n_chunks * ns;
    if (blocks > INT32_MAX) return KR_CUDA_ERR_ARG;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const unsigned nb = static_cast<unsigned>(blocks);
    switch (a->kv_dtype) {
    case KARA_KV_F32: return launch_dt<KARA_KV_F32>(*a, gsize, n_chunks, ns, nb, s);
    case KARA_KV_F16: return launch_dt<KARA_KV_F16>(*a, gsize, n_chunks, ns, nb, s);
    case KARA_KV_Q8_0: return launch_dt<KARA_KV_Q8_0>(*a, gsize, n_chunks, ns, nb, s);
    default: return launch_dt<KARA_KV_Q4_0>(*a, gsize, n_chunks, ns, nb, s);
    }
}
