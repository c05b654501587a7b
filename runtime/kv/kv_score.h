/*
 * kv_score.h - the window scorer of Kara KV compression
 * (docs/KARA_METHOD.md section 5), for one layer at a time, over plain
 * arrays.
 *
 * Window W = slots [0, n_w) relative to the frontier F; the compressible
 * region C = [0, n_c) with n_c = n_w - n_buf; the buffer = [n_c, n_w).
 * Per query head a (KV head h = a / G), query row i and key slot j:
 *   z_ij = q_i . k_j / sqrt(d),  p_ij = softmax over the row's key set S_i,
 * and the head score of j in C sums p_ij over the mode's query rows:
 *   bidirectional  every row i of W, S_i = keys minus {i} (exclude_self)
 *   causal         every row i of W, S_i = keys j <= i (j < i with exclude_self)
 *   buffer_only    rows of the buffer only, causal as above (SnapKV/R-KV style)
 *   two_sided      sum_{i>j} pc_ij (causal rows) + sum_{k>j, k in keys} pa_jk
 *                  (j's own non-causal row)
 * The key set is W (softmax_over window), C (compressible), or W plus the
 * first n_sink prompt keys, which join the denominators only
 * (window_plus_sinks). With exclude_self false the diagonal is an ordinary
 * entry: in the denominators and, except for two_sided's strict sums, in
 * the scores.
 * GQA: the G head scores of a group are reduced by mean or max; the layer
 * vector is the mean over KV heads. Across layers, kr_kv_score_acc sums
 * layer vectors (mean, or normalized_mean: each divided by its sum over C).
 *
 * Numerics: f32 throughout, max-subtracted softmax; the logits of a tile
 * are small matrix products of its f32 queries with the keys read in place
 * (runs of a block or ring), and the conversions, the products and the
 * softmax come from the kernel table (so results may differ in the last
 * bits between ISAs, never between thread counts). Work is split into units (query head, tile of 32 query rows)
 * whose partial column sums land in disjoint buffers; kr_kv_score_finish
 * adds them in a fixed order, so results are bit-identical for any thread
 * count.
 *
 * SnapKV's scorer (docs/KARA_METHOD.md sections 11 and 13) is this scorer
 * with the whole cache as the window, n_buf = obs_window, mode buffer_only,
 * exclude_self false and gqa_reduce mean.
 *
 * Usage:
 *   size_t bytes = kr_kv_score_scratch_bytes(&shape, n_threads);   // once, budgeted
 *   kr_kv_score_acc_init(&acc, acc_buf, n_c, KR_REDUCE_MEAN);
 *   for each scored layer:
 *       kr_kv_score_prepare(&job, &shape, &opts, &q, &k, &sinks, scratch, bytes, n_threads);
 *       in each thread ith < nth: kr_kv_score_compute(&job, ith, nth);
 *       after the barrier:        kr_kv_score_finish(&job, NULL, &acc);
 *   kr_kv_score_acc_finalize(&acc, s);   // s: n_c scores for selection
 */
#ifndef KR_KV_SCORE_H
#define KR_KV_SCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_modes.h"

struct kr_kernels;

/* Query rows per work unit. Fixed: it sets the summation order, so it
 * never depends on the thread count. */
#define KR_KV_SCORE_TILE 32

/* Where the rows of a tensor live. Row i (a query row of the window, a key
 * slot, a sink) holds n_heads vectors of head_dim elements of `type`, head
 * e at byte offset e * head_stride (0 = packed, head_dim * element size).
 * With idx = first + i the row starts at
 *   paged:  base + table[idx / block_rows] * block_bytes + (idx % block_rows) * stride
 *   ring:   base + (idx mod ring_cap) * stride             (ring_cap > 0)
 *   plain:  base + idx * stride
 * `first` may be negative for a ring (rows below the first read row are
 * never touched). */
typedef struct kr_kv_rows {
    kara_kv_dtype type;
    const void *base;
    size_t stride;      /* bytes between consecutive rows */
    size_t head_stride; /* bytes between heads of a row; 0 = packed */
    int64_t first;
    int32_t ring_cap;     /* > 0: ring of that many rows */
    const int32_t *table; /* non-NULL: paged (block ids) */
    int32_t block_rows;   /* rows per block when paged */
    size_t block_bytes;   /* bytes per block when paged */
} kr_kv_rows;

/* Plain contiguous rows: row i at base + i * stride, heads packed. */
kr_kv_rows kr_kv_rows_plain(kara_kv_dtype type, const void *base, size_t stride);
/* z[r * zs + j] = q_r . key_j (head e, d values) for keys [0, n_keys) of
 * any cache type and query rows r < n_rows (f32, d apart), through the
 * kernel table's register-blocked gemm_nt: f16/f32 keys read in place in
 * runs of fixed stride, q8_0/q4_0 keys dequantised KR_KV_DEQ_ROWS at a time
 * (heads longer than KR_KV_DEQ_MAX_DIM: a dot product per key). The
 * arithmetic of an entry never depends on the thread count. */
#define KR_KV_DEQ_ROWS 16
#define KR_KV_DEQ_MAX_DIM 256
void kr_kv_rows_logits(const struct kr_kernels *kt, const kr_kv_rows *keys, int32_t e, int32_t n_keys, int32_t d,
                       const float *qf, int32_t n_rows, float *z, size_t zs);
/* Head e of rows [i0, i0 + n) as packed f32 rows of d floats, each times
 * scale, through the kernel table's axpy (one rounding). */
void kr_kv_rows_load_heads(const struct kr_kernels *kt, const kr_kv_rows *r, int64_t i0, int32_t n, int32_t e,
                           int32_t d, float scale, float *out);

/* Geometry of one scoring call. */
typedef struct kr_kv_score_shape {
    int32_t n_w;       /* window slots (queries and keys), >= 1 */
    int32_t n_buf;     /* protected buffer at the end of the window, 0 <= n_buf < n_w */
    int32_t n_head;    /* Hq */
    int32_t n_head_kv; /* Hkv, divides Hq */
    int32_t head_dim;  /* d */
    int32_t n_sink;    /* sink keys (used with window_plus_sinks), >= 0 */
} kr_kv_score_shape;

typedef struct kr_kv_score_opts {
    kr_score_mode mode;           /* bidirectional */
    kr_softmax_over softmax_over; /* window */
    bool exclude_self;            /* true */
    kr_reduce gqa_reduce;         /* KR_REDUCE_MEAN or KR_REDUCE_MAX */
    bool value_aware;             /* false; true: each KV head's score of j times ||v_j||_1 (needs v rows) */
} kr_kv_score_opts;

/* The defaults (bidirectional, window, exclude_self, mean;
 * docs/KARA_METHOD.md sections 5 and 12). */
void kr_kv_score_opts_init(kr_kv_score_opts *o);
/* The options of kara_kv_params (score_mode, softmax_over, exclude_self, gqa_reduce). */
void kr_kv_score_opts_from_params(kr_kv_score_opts *o, const kara_kv_params *p);

/* One layer's scoring job; filled by kr_kv_score_prepare. */
typedef struct kr_kv_score_job {
    kr_kv_score_shape shape;
    kr_kv_score_opts opts;
    kr_kv_rows q, k, sink;
    kr_kv_rows v;         /* value rows of the window (value_aware; set after prepare) */
    int32_t n_c;          /* compressible slots: scores are over [0, n_c) */
    int32_t q_lo;         /* first query row read (n_c for buffer_only, else 0; at least n_w - n_q) */
    int32_t n_tiles;      /* query-row tiles per head */
    int32_t tile_rows;    /* rows of a tile's area: KR_KV_SCORE_TILE, or n_q when fewer */
    int32_t n_units;      /* n_head * n_tiles */
    int32_t n_threads;    /* per-thread scratch areas available */
    float *partial;       /* n_units x n_c partial column sums */
    float *layer;         /* n_c: the layer vector when finish gets no output buffer */
    uint8_t *thread_base; /* per-thread areas, thread_bytes apart */
    size_t thread_bytes;
    const struct kr_kernels *kernels; /* dot products (kr_kernels_get) */
} kr_kv_score_job;

/* Scratch bytes a job of this shape needs with up to n_threads threads
 * (includes 64 bytes of alignment slack). 0 when the shape is invalid. */
size_t kr_kv_score_scratch_bytes(const kr_kv_score_shape *shape, int32_t n_threads);

/* Check the shape and options and lay out the scratch. q rows are window
 * rows (n_head heads), k rows window slots (n_head_kv heads), sink rows the
 * sink keys (ignored unless softmax_over is window_plus_sinks; may then be
 * NULL when n_sink is 0). Does not read q or k. Fails with KARA_ERR_ARG (and
 * a message) on a bad shape, option, or a scratch smaller than
 * kr_kv_score_scratch_bytes. */
kara_status kr_kv_score_prepare(kr_kv_score_job *job, const kr_kv_score_shape *shape, const kr_kv_score_opts *opts,
                                const kr_kv_rows *q, const kr_kv_rows *k, const kr_kv_rows *sink, void *scratch,
                                size_t scratch_bytes, int32_t n_threads);

/* Scoring with queries for only part of the window: rows [n_w - n_q, n_w)
 * hold queries (1 <= n_q <= n_w), the older rows are keys only. Each mode
 * then sums over its query rows that lie in that suffix (buffer_only: the
 * buffer rows among them); two_sided's anti-causal half exists only for
 * slots with a query. Kara's threshold trigger (ablation A8) scores the
 * whole generated cache this way with the queries its ring still holds.
 * With n_q = n_w these are kr_kv_score_scratch_bytes / _prepare; the
 * scratch needed shrinks with n_q (tiles over n_q rows only). */
size_t kr_kv_score_scratch_bytes_q(const kr_kv_score_shape *shape, int32_t n_q, int32_t n_threads);
kara_status kr_kv_score_prepare_q(kr_kv_score_job *job, const kr_kv_score_shape *shape, int32_t n_q,
                                  const kr_kv_score_opts *opts, const kr_kv_rows *q, const kr_kv_rows *k,
                                  const kr_kv_rows *sink, void *scratch, size_t scratch_bytes, int32_t n_threads);

/* Compute this thread's share of the units (contiguous range ith of nth).
 * Every ith in [0, nth) must run before kr_kv_score_finish; nth must not
 * exceed the prepared n_threads (KARA_ERR_ARG otherwise, doing nothing). */
kara_status kr_kv_score_compute(const kr_kv_score_job *job, int32_t ith, int32_t nth);

/* Reduce the partial sums in a fixed order: per head over tiles, per group
 * (mean/max), times ||v_j||_1 of the KV head with value_aware, mean over KV heads. Writes the layer vector (n_c floats) to
 * layer_out (NULL: into the job's scratch) and adds it to acc when non-NULL. */
struct kr_kv_score_acc;
void kr_kv_score_finish(const kr_kv_score_job *job, float *layer_out, struct kr_kv_score_acc *acc);

/* Single-threaded convenience: compute(0, 1) then finish. */
void kr_kv_score_run(const kr_kv_score_job *job, float *layer_out, struct kr_kv_score_acc *acc);

/* Aggregation of layer vectors over scored layers (docs/KARA_METHOD.md
 * section 5, "Heads and layers"). */
typedef struct kr_kv_score_acc {
    float *sum; /* n_c, caller memory */
    int32_t n_c;
    int32_t n_layers;       /* layer vectors added so far */
    kr_reduce layer_reduce; /* KR_REDUCE_MEAN or KR_REDUCE_NORMALIZED_MEAN */
} kr_kv_score_acc;

/* Zero buf (n_c floats) and start an aggregation. Fails with KARA_ERR_ARG on
 * a reduce other than mean / normalized_mean or n_c < 0. */
kara_status kr_kv_score_acc_init(kr_kv_score_acc *acc, float *buf, int32_t n_c, kr_reduce layer_reduce);
/* Add one layer vector. normalized_mean divides it by its sum over C first
 * (a layer whose sum is not positive adds nothing but still counts). */
void kr_kv_score_acc_add(kr_kv_score_acc *acc, const float *layer);
/* out[j] = sum[j] / n_layers (out may be acc->sum; zeros when no layer). */
void kr_kv_score_acc_finalize(const kr_kv_score_acc *acc, float *out);

#endif /* KR_KV_SCORE_H */
