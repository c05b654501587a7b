/*
 * score_case.h - a random scoring span for the device scorer's tests
 * (tests/unit/test_cuda_math_score.c on the host, tests/cuda/
 * test_cuda_score.c on a GPU): a paged pool of K and V rows of one layer
 * in a shuffled block table, a query ring whose window wraps, sink keys,
 * and the CPU scorer's layer vector for them (runtime/kv/kv_score.h), the
 * reference both compare with.
 */
#ifndef KR_TEST_SCORE_CASE_H
#define KR_TEST_SCORE_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_score.h"

typedef struct kr_score_case {
    /* shape: window [first, first + n_w) of the sequence, its last n_q rows
     * with queries at ring positions q_first + i */
    int32_t n_w, n_buf, n_q, n_head, n_head_kv, head_dim, n_sink;
    int32_t first, block_size, ring_cap;
    int64_t q_first;
    kara_kv_dtype kv_type, q_type;
    kr_kv_score_opts opts;
    /* one layer's pool: block b's K rows at b * block_bytes, its V rows
     * block_size slots further */
    uint8_t *pool;
    size_t pool_bytes, slot_bytes, block_bytes;
    int32_t *table;
    uint8_t *ring;
    size_t ring_bytes, q_row_bytes;
    /* the K row offset of key r: sinks (slots 0 .. n_sink - 1), then the window */
    int64_t *key_offs;
} kr_score_case;

/* A random case: values N(0, amp^2), the block table shuffled, the ring
 * start chosen so the window wraps when it can. */
void kr_score_case_make(kr_score_case *c, uint64_t seed, int32_t n_w, int32_t n_buf, int32_t n_q, int32_t n_head,
                        int32_t n_head_kv, int32_t head_dim, int32_t n_sink, kara_kv_dtype kv_type,
                        kara_kv_dtype q_type, const kr_kv_score_opts *opts, float amp);
/* The CPU scorer's layer vector (n_w - n_buf floats). */
kara_status kr_score_case_cpu(const kr_score_case *c, float *layer_out);
void kr_score_case_free(kr_score_case *c);
/* The largest |got - ref| / (1 + |ref|) over n scores, and where (*at). */
float kr_score_case_worst(const float *got, const float *ref, int32_t n, int32_t *at);

#endif /* KR_TEST_SCORE_CASE_H */
