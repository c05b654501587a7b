/*
 * kv_redund.h - the redundancy of cached keys that the rkv baseline (R-KV,
 * Cai et al. 2025; docs/KARA_METHOD.md section 11) subtracts from attention,
 * for one layer at a time, over plain or paged key rows.
 *
 * For KV head h and the m key rows of a span, with k'_j = k_j / (|k_j| + 1e-8):
 *   S_ij    = k'_i . k'_j for i != j (the diagonal is 0);
 *   last(i) = the highest j != i with S_ij > threshold (none if no such j);
 *   c_j     = sum over rows i of S_ij, less S_ij for every row i whose
 *             last(i) is j;
 *   r_h(j)  = softmax over the span of c_j / m.
 * Each row thus drops its similarity to its newest near-duplicate, so of a
 * group of similar keys the newest looks least redundant (the paper's
 * "keep the most recent of the redundant tokens"). A key with many close
 * neighbours gets a large r. The layer's redundancy is the mean of r_h over
 * the KV heads.
 *
 * S is symmetric in exact arithmetic; the column sums are taken as row sums
 * (sum over i of S_ji), so that a work unit of rows owns every output it
 * writes.
 *
 * Numerics and threads: f32; a work unit is (KV head, tile of
 * KR_KV_REDUND_TILE rows): its rows are normalised once, their products
 * with all m keys come from the kernel table's gemm_nt (keys read in place)
 * and each unit writes only its own rows' sums, so the result is
 * bit-identical for any thread count (it may differ in the last bits
 * between instruction sets). Cost: about 2 m^2 d flops per KV head.
 *
 * Usage:
 *   kr_kv_redund_prepare(&job, &keys, m, n_head_kv, head_dim, threshold, scratch, bytes, n_threads);
 *   in each thread ith < nth: kr_kv_redund_compute(&job, ith, nth);
 *   after the barrier:        kr_kv_redund_finish(&job, acc);   // acc[j] += mean over heads of r_h(j)
 */
#ifndef KR_KV_REDUND_H
#define KR_KV_REDUND_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_score.h"

/* Rows per work unit: fixed, so the summation order never depends on the
 * thread count. */
#define KR_KV_REDUND_TILE 32

typedef struct kr_kv_redund_job {
    kr_kv_rows k; /* the span's key rows (n_head_kv heads of head_dim) */
    int32_t m, n_head_kv, head_dim;
    float threshold;
    int32_t n_tiles, n_units, n_threads;
    float *inv_norm;      /* n_head_kv x m: 1 / (|k| + 1e-8) */
    float *rowsum;        /* n_head_kv x m: sum over j != i of S_ij */
    float *slast;         /* n_head_kv x m: S_i,last(i) (0 when there is none) */
    int32_t *last;        /* n_head_kv x m: last(i), -1 when there is none */
    float *col;           /* m: one head's c at finish */
    uint8_t *thread_base; /* per-thread areas: a tile of rows and their products with every key */
    size_t thread_bytes;
    const void *kernels;
} kr_kv_redund_job;

/* Scratch bytes a span of up to m keys needs with up to n_threads threads
 * (with 64 bytes of alignment slack); 0 for a bad shape. */
size_t kr_kv_redund_scratch_bytes(int32_t m, int32_t n_head_kv, int32_t head_dim, int32_t n_threads);

/* Check the shape, lay out the scratch and compute the keys' norms (one
 * thread, in row order). KARA_ERR_ARG (with a message) on a bad shape,
 * threshold or scratch. */
kara_status kr_kv_redund_prepare(kr_kv_redund_job *job, const kr_kv_rows *keys, int32_t m, int32_t n_head_kv,
                                 int32_t head_dim, float threshold, void *scratch, size_t scratch_bytes,
                                 int32_t n_threads);

/* This thread's contiguous share ith of nth of the units; every ith must
 * run before kr_kv_redund_finish (nth <= the prepared n_threads). */
kara_status kr_kv_redund_compute(const kr_kv_redund_job *job, int32_t ith, int32_t nth);

/* acc[j] += mean over KV heads of r_h(j), for j < m (a fixed order). */
void kr_kv_redund_finish(const kr_kv_redund_job *job, float *acc);

/* Single-threaded convenience: compute(0, 1) then finish. */
void kr_kv_redund_run(const kr_kv_redund_job *job, float *acc);

#endif /* KR_KV_REDUND_H */
