/*
 * test_cuda_plan.c - the CUDA backend's memory plan (kernels_cuda/cuda_plan.h),
 * on the host, in every build: regions and buffers aligned, disjoint and
 * inside the one allocation; each sized as the backend uses it; the KV pool
 * exactly the host cache's bytes; the query ring and the window scorer's
 * buffers sized for the largest span; overflow and bad shapes refused.
 */
#include <stdint.h>
#include <string.h>

#include "cuda_ops.h"
#include "cuda_plan.h"
#include "test_util.h"

/* Qwen3-0.6B's shape, a 64 MiB pool, 512-entry batches, 4 sequences. */
static kr_cuda_plan_in qwen3_06b(void) {
    kr_cuda_plan_in in = {.n_embd = 1024,
                          .n_head = 16,
                          .n_head_kv = 8,
                          .head_dim = 128,
                          .n_ff = 3072,
                          .n_vocab = 151936,
                          .n_batch = 512,
                          .n_seq_max = 4,
                          .max_blocks_per_seq = 2560,
                          .weight_bytes = 394000000,
                          .vector_bytes = 28 * 4 * 4096 + 4096,
                          .pool_bytes = 64ull << 20};
    return in;
}

static bool disjoint(uint64_t a0, uint64_t an, uint64_t b0, uint64_t bn) { return a0 + an <= b0 || b0 + bn <= a0; }

static void test_layout(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan p;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.max_cols, 3072); /* n_ff is the widest input (n_head * head_dim = 2048) */
    CHECK_EQ_INT(p.size[KR_CUDA_R_WEIGHTS], in.weight_bytes);
    CHECK_EQ_INT(p.size[KR_CUDA_R_VECTORS], in.vector_bytes);
    CHECK_EQ_INT(p.size[KR_CUDA_R_POOL], in.pool_bytes);
    CHECK_EQ_INT(p.size[KR_CUDA_R_LOGITS], (uint64_t)512 * 151936 * 4);
    CHECK_EQ_INT(p.size[KR_CUDA_R_SCRATCH], kr_cuda_plan_matmul_scratch(3072, 512));
    /* the scratch holds the f16 weight tile and the batch in f16 */
    CHECK(p.size[KR_CUDA_R_SCRATCH] >= (uint64_t)KR_CUDA_TILE_ROWS * 3072 * 2 + (uint64_t)512 * 3072 * 2);
    uint64_t sum = 0;
    for (int r = 0; r < KR_CUDA_R_COUNT; r++) {
        CHECK_MSG(p.off[r] % KR_CUDA_ALIGN == 0, "region %d at %llu is aligned", r, (unsigned long long)p.off[r]);
        CHECK_MSG(p.off[r] + p.size[r] <= p.total, "region %d ends inside the allocation", r);
        for (int q = 0; q < r; q++)
            CHECK_MSG(disjoint(p.off[r], p.size[r], p.off[q], p.size[q]), "regions %d and %d do not overlap", r, q);
        sum += p.size[r];
    }
    /* alignment padding only: at most one alignment unit per region */
    CHECK(p.total >= sum && p.total - sum < (uint64_t)KR_CUDA_R_COUNT * KR_CUDA_ALIGN + KR_CUDA_ALIGN);
    CHECK(p.total % KR_CUDA_ALIGN == 0);

    /* activation buffers: n_batch rows of X, XN, Q, K, V, ATTN, GATE, UP, PROJ */
    const uint64_t cols[KR_CUDA_N_ACTS] = {1024, 1024, 2048, 1024, 1024, 2048, 3072, 3072, 1024};
    for (int b = 0; b < KR_CUDA_N_ACTS; b++) {
        const uint64_t bytes = 512 * cols[b] * 4;
        CHECK_MSG(p.act_off[b] % KR_CUDA_ALIGN == 0, "buffer %d aligned", b);
        CHECK_MSG(p.act_off[b] + bytes <= p.size[KR_CUDA_R_ACTS], "buffer %d inside the activations", b);
        for (int q = 0; q < b; q++)
            CHECK_MSG(disjoint(p.act_off[b], bytes, p.act_off[q], 512 * cols[q] * 4), "buffers %d and %d apart", b, q);
    }
    /* index arrays: the block tables of every sequence fit */
    const uint64_t n_idx[KR_CUDA_I_COUNT] = {512 * 4, 512 * 4,      512 * 8, 512 * 4,
                                             512 * 4, 4 * 2560 * 4, 512 * 4, 512 * 8};
    for (int i = 0; i < KR_CUDA_I_COUNT; i++) {
        CHECK_MSG(p.index_off[i] + n_idx[i] <= p.size[KR_CUDA_R_INDEX], "index array %d inside its region", i);
        for (int q = 0; q < i; q++)
            CHECK_MSG(disjoint(p.index_off[i], n_idx[i], p.index_off[q], n_idx[q]), "index arrays %d and %d apart", i,
                      q);
    }
}

/* The pool follows the budget byte for byte, and nothing else moves. */
static void test_pool_follows_budget(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan a, b;
    CHECK(kr_cuda_plan_make(&a, &in));
    in.pool_bytes += 1ull << 30;
    CHECK(kr_cuda_plan_make(&b, &in));
    CHECK_EQ_INT(b.total - a.total, 1ull << 30);
    CHECK_EQ_INT(b.size[KR_CUDA_R_ACTS], a.size[KR_CUDA_R_ACTS]);
    /* one entry per pass: activations and logits shrink, weights stay */
    in = qwen3_06b();
    in.n_batch = 1;
    CHECK(kr_cuda_plan_make(&b, &in));
    CHECK(b.size[KR_CUDA_R_ACTS] < a.size[KR_CUDA_R_ACTS] && b.size[KR_CUDA_R_LOGITS] == 151936 * 4);
    CHECK_EQ_INT(b.size[KR_CUDA_R_WEIGHTS], a.size[KR_CUDA_R_WEIGHTS]);
}

/* Kara's scoring on the device: the ring region is the host ring's bytes;
 * the scorer's buffers hold every (query head, tile) unit's column sums and
 * logit row for the largest span, and the moves of a whole sequence;
 * without scoring nothing is reserved. */
static void test_scoring_buffers(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan p;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.size[KR_CUDA_R_RING], 0);
    CHECK_EQ_INT(p.size[KR_CUDA_R_KVSCORE], 0);
    in.ring_bytes = 4ull * 28 * 320 * 2048 * 2; /* 4 sequences, 28 layers, 320 rows of 16 x 128 f16 */
    in.score_q_max = 320;
    in.score_slots_max = 40960;
    in.score_keys_max = 40964; /* 4 sinks */
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.size[KR_CUDA_R_RING], in.ring_bytes);
    CHECK_EQ_INT(p.score_tiles, 10);
    const uint64_t units = 16 * 10;
    const uint64_t n[KR_CUDA_S_COUNT] = {units * 40960 * 4, units * 40964 * 4, 40960 * 4, 40960 * 4,
                                         40964 * 8,         40960 * 8,         40960 * 8};
    uint64_t sum = 0;
    for (int i = 0; i < KR_CUDA_S_COUNT; i++) {
        CHECK_MSG(p.score_off[i] % KR_CUDA_ALIGN == 0, "scorer buffer %d aligned", i);
        CHECK_MSG(p.score_off[i] + n[i] <= p.size[KR_CUDA_R_KVSCORE], "scorer buffer %d inside its region", i);
        for (int q = 0; q < i; q++)
            CHECK_MSG(disjoint(p.score_off[i], n[i], p.score_off[q], n[q]), "scorer buffers %d and %d apart", i, q);
        sum += n[i];
    }
    CHECK(p.size[KR_CUDA_R_KVSCORE] >= sum && p.size[KR_CUDA_R_KVSCORE] - sum < KR_CUDA_S_COUNT * KR_CUDA_ALIGN);
    /* a tile more for one query row more */
    in.score_q_max = 321;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.score_tiles, 11);
    /* half a request is refused, as is fewer keys than slots or a negative size */
    in.score_q_max = 0;
    CHECK(!kr_cuda_plan_make(&p, &in));
    in.score_q_max = 320;
    in.score_keys_max = 100;
    CHECK(!kr_cuda_plan_make(&p, &in));
    in.score_keys_max = -1;
    CHECK(!kr_cuda_plan_make(&p, &in));
    in.score_keys_max = INT64_MAX / 8; /* units x keys overflows */
    CHECK(!kr_cuda_plan_make(&p, &in));
}

static void test_refusals(void) {
    kr_cuda_plan p;
    kr_cuda_plan_in in = qwen3_06b();
    in.n_head_kv = 0;
    CHECK(!kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.total, 0);
    in = qwen3_06b();
    in.pool_bytes = UINT64_MAX - 1000; /* a budget that cannot be added to the rest */
    CHECK(!kr_cuda_plan_make(&p, &in));
    in = qwen3_06b();
    in.n_vocab = INT64_MAX / 2; /* logits rows overflow */
    CHECK(!kr_cuda_plan_make(&p, &in));
    in = qwen3_06b();
    in.n_seq_max = INT64_MAX / 2; /* block tables overflow */
    CHECK(!kr_cuda_plan_make(&p, &in));
}

int main(void) {
    test_layout();
    test_pool_follows_budget();
    test_scoring_buffers();
    test_refusals();
    return kr_test_finish();
}
