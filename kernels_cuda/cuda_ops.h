/*
 * cuda_ops.h - the CUDA kernels, as host functions a C file can call.
 *
 * Every pointer named as a device pointer lives in GPU memory; `stream` is
 * a cudaStream_t passed as void * so that C code needs no CUDA header.
 * Each call enqueues its work on the stream and returns 0, or the
 * cudaError_t / cublasStatus_t code of a failed launch (negative for
 * cuBLAS, KR_CUDA_ERR_ARG for arguments the kernels do not take,
 * KR_CUDA_ERR_NO_BLAS when libcublas cannot be opened). Nothing here
 * allocates: scratch comes from the caller (cuda_plan.h sizes it).
 *
 * Weight types are kr_type values (kernels_cpu/kernels.h) in the file's
 * layout: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K. KV types are kara_kv_dtype values (kara.h): f32, f16, and
 * q8_0 / q4_0 in GGML's 32-value blocks (runtime/kv/kv_quant.h).
 */
#ifndef KR_CUDA_OPS_H
#define KR_CUDA_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KR_CUDA_ERR_ARG (-1000)
#define KR_CUDA_ERR_NO_BLAS (-1001) /* libcublas could not be opened (it is loaded on first use) */

/* ---- matrix products (cuda_matmul.cu) ---- */

/* Entries up to which kr_cuda_matmul runs the dequantising GEMV (one pass
 * over the weights for all entries); above it, weight tiles are
 * dequantised to f16 in scratch and multiplied by cuBLAS. */
#define KR_CUDA_GEMV_MAX 8
/* Weight rows dequantised per cuBLAS tile. */
#define KR_CUDA_TILE_ROWS 4096

/* Whether the kernels take weights of this kr_type. */
bool kr_cuda_weight_type_ok(int wtype);
/* A cuBLAS handle bound to the stream (*handle: cublasHandle_t). */
int kr_cuda_blas_create(void **handle, void *stream);
void kr_cuda_blas_destroy(void *handle);
/* Device scratch bytes kr_cuda_matmul needs for up to n_batch entries of
 * rows of at most max_cols values (the f16 weight tile and activations). */
size_t kr_cuda_matmul_scratch_bytes(int64_t max_cols, int64_t n_batch);
/* y[b][r] = sum over c < n_cols of W[r][c] * x[b][c] for b < n, r < n_rows.
 * W (device): n_rows rows of row_bytes in type wtype; x (device): n rows
 * of n_cols floats; y (device): rows ldy floats apart. */
int kr_cuda_matmul(void *stream, void *blas, int wtype, const void *w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                   const float *x, int64_t n, float *y, int64_t ldy, void *scratch, size_t scratch_bytes);
/* x[i][:] = row tokens[i] of the table (device, type wtype, row_bytes
 * apart) dequantised to n_embd floats; tokens (device) n entries. */
int kr_cuda_embed(void *stream, int wtype, const void *table, size_t row_bytes, const int32_t *tokens, int64_t n,
                  int64_t n_embd, float *x);

/* ---- elementwise (cuda_elementwise.cu) ---- */

/* y = x / sqrt(mean(x^2) + eps) * w per row of dim values (y may be x). */
int kr_cuda_rmsnorm(void *stream, float *y, const float *x, const float *w, int64_t n_rows, int64_t dim, float eps);
/* RoPE in place on n_entries rows of n_heads heads of head_dim values; the
 * first rope_dim values of each head are rotated, at entry i's position
 * pos[i] (device), angles as kernels_cuda/cuda_rope.h computes them. neox:
 * pairs (j, j + rope_dim/2), else (2j, 2j + 1). */
int kr_cuda_rope(void *stream, float *v, const int32_t *pos, int64_t n_entries, int32_t n_heads, int32_t head_dim,
                 int32_t rope_dim, float freq_base, bool neox);
/* g = silu(g) * u over n values. */
int kr_cuda_silu_mul(void *stream, float *g, const float *u, int64_t n);
/* x += y over n values. */
int kr_cuda_add(void *stream, float *x, const float *y, int64_t n);
/* y[i][d] += b[d] for n_rows rows of dim values. */
int kr_cuda_add_bias(void *stream, float *y, const float *b, int64_t n_rows, int64_t dim);
/* dst[i][:] = src[rows[i]][:] for i < n (rows: device), dim floats each. */
int kr_cuda_gather_rows(void *stream, float *dst, const float *src, const int32_t *rows, int64_t n, int64_t dim);
/* Row i of n (row_len floats at src + i * row_len) stored in type kv_dtype
 * at pool + offs[i] (offs: device byte offsets); the bytes the CPU's
 * kr_kv_row_store writes. Rows whose offset is negative are not stored
 * (the query ring's entries the KV policy does not keep). */
int kr_cuda_kv_store(void *stream, int kv_dtype, uint8_t *pool, const int64_t *offs, const float *src, int64_t n,
                     int64_t row_len);

/* ---- attention over the paged KV pool (cuda_attention.cu) ---- */

/* The pool has the CPU cache's layout (runtime/kv/kv_cache.h): block b's K
 * row of slot o in layer l is at pool + b * bytes_per_block + (l * 2 *
 * block_size + o) * slot_bytes, its V row at (l * 2 + 1) instead of l * 2;
 * a row holds n_head_kv heads of head_dim values of type kv_dtype. */
typedef struct kr_cuda_attn_args {
    const float *q; /* device: n_entries rows of n_head * head_dim (after RoPE) */
    float *out;     /* device: the same shape */
    int32_t n_entries, n_head, n_head_kv, head_dim;
    const uint8_t *pool; /* device */
    size_t bytes_per_block, slot_bytes;
    int32_t block_size, layer, kv_dtype;
    const int32_t *n_vis;     /* device: per entry, the slots it sees: [0, n_vis) */
    const int32_t *tables;    /* device: block tables of the entries' sequences, concatenated */
    const int32_t *table_off; /* device: per entry, where its sequence's table starts in tables */
    float scale;              /* 1 / sqrt(head_dim) */
    /* split-K (cuda_splitk.h): 0 or 1, one pass per (entry, head); more,
     * each entry's slots cut into n_split ranges whose partial records go
     * to part (device: n_entries * n_head * n_split records of head_dim + 2
     * floats) and are then combined into out. kr_cu_splitk_choose picks it. */
    int32_t n_split;
    float *part;
} kr_cuda_attn_args;
/* The widest head the attention kernel takes (a warp holds 8 values of it
 * per lane). */
#define KR_CUDA_ATTN_MAX_DIM 256
/* out = softmax(scale * q . K^T) . V per entry and query head (query head h
 * reads KV head h / (n_head / n_head_kv)). */
int kr_cuda_attention(void *stream, const kr_cuda_attn_args *a);

/* ---- Kara's window scorer and compaction (cuda_score.cu) ---- */

/* One scored layer of a span (runtime/kv/kv_score.h has the definitions;
 * cuda_score.h the per-row rules). Units are (query head, tile of
 * KR_CU_SCORE_TILE query rows) as on the CPU; one block per unit walks its
 * rows in order, so the column sums need no atomics. */
typedef struct kr_cuda_score_args {
    int32_t n_w, n_buf, n_q;             /* window, protected buffer, rows with queries (the last n_q) */
    int32_t n_head, n_head_kv, head_dim; /* head_dim <= KR_CUDA_SCORE_MAX_DIM, n_head_kv <= KR_CUDA_SCORE_MAX_KV */
    int32_t n_sink;                      /* sink keys in front of every softmax (0 unless window_plus_sinks) */
    int32_t mode, softmax_over;          /* kr_score_mode, kr_softmax_over */
    bool exclude_self, gqa_max, value_aware, normalized; /* normalized: layer_reduce normalized_mean */
    /* queries: window row i's query (n_head heads, type q_type) at
     * q_ring + ((q_first + i) mod ring_cap) * q_row_bytes */
    const uint8_t *q_ring;
    int64_t q_first;
    int32_t ring_cap, q_type;
    size_t q_row_bytes;
    /* keys: the K row of key r (sinks r < n_sink, then window rows) at
     * pool + key_offs[r] (device), type kv_type; its V row v_delta further */
    const uint8_t *pool;
    const int64_t *key_offs;
    int64_t v_delta;
    int32_t kv_type;
    /* device scratch: partial n_head * n_tiles * n_c, zbuf n_head * n_tiles
     * * (n_sink + n_w), layer n_c; acc (n_c) gets the layer vector added */
    float *partial, *zbuf, *layer, *acc;
} kr_cuda_score_args;
#define KR_CUDA_SCORE_MAX_DIM 1024
#define KR_CUDA_SCORE_MAX_KV 64
/* Score one layer into a->acc (see above). */
int kr_cuda_score_layer(void *stream, const kr_cuda_score_args *a);
/* A compaction's moves in order (runtime/kv/kv_compact.h: every
 * destination at or below its source): for each of n_layers layers (the
 * first at pool, then layer_bytes apart) the K row at src[m] goes to
 * dst[m] (device byte offsets) and the V row v_delta further likewise.
 * One block per (layer, K or V) runs the moves in order. */
int kr_cuda_kv_move(void *stream, uint8_t *pool, const int64_t *src, const int64_t *dst, int32_t n_moves,
                    int32_t n_layers, int64_t layer_bytes, int64_t v_delta, int64_t row_bytes);

#ifdef __cplusplus
}
#endif

#endif /* KR_CUDA_OPS_H */
