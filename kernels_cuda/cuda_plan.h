/*
 * cuda_plan.h - what the CUDA backend reserves on the GPU for a model, a
 * KV budget and a batch size, worked out on the host before any device
 * call: one allocation, cut into aligned regions (weights, norm and bias
 * vectors, the KV pool, the activation buffers, the logits, the matrix
 * products' scratch, the per-pass index arrays, split-K attention's
 * partial records). Plain C, tested on the
 * CPU in every build (tests/unit/test_cuda_plan.c).
 */
#ifndef KR_CUDA_PLAN_H
#define KR_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KR_CUDA_ALIGN 256 /* bytes: every region and buffer starts on this */

typedef enum kr_cuda_region {
    KR_CUDA_R_WEIGHTS,   /* matrices, in the file's block layouts */
    KR_CUDA_R_VECTORS,   /* norms and biases, f32 */
    KR_CUDA_R_POOL,      /* the KV pool: the host cache's blocks, the same layout */
    KR_CUDA_R_ACTS,      /* activation buffers, n_batch rows each (backend.h's kr_buf order) */
    KR_CUDA_R_LOGITS,    /* n_batch rows of n_vocab */
    KR_CUDA_R_SCRATCH,   /* kr_cuda_matmul's f16 weight tile and activations */
    KR_CUDA_R_INDEX,     /* per pass: tokens, positions, KV offsets, block tables, output rows */
    KR_CUDA_R_RING,      /* the KV policy's query ring: the host ring's bytes, the same layout (0 without) */
    KR_CUDA_R_KVSCORE,   /* the window scorer's and compaction's buffers (kr_cuda_kvscore; 0 without scoring) */
    KR_CUDA_R_ATTN_PART, /* split-K attention's partial records (cuda_splitk.h), f32 */
    KR_CUDA_R_COUNT
} kr_cuda_region;

/* The activation buffers in backend.h's kr_buf order: X, XN, Q, K, V,
 * ATTN, GATE, UP, PROJ. */
#define KR_CUDA_N_ACTS 9

/* The per-pass index arrays, in KR_CUDA_R_INDEX. */
typedef enum kr_cuda_index {
    KR_CUDA_I_TOKENS,    /* int32, n_batch */
    KR_CUDA_I_POS,       /* int32, n_batch */
    KR_CUDA_I_K_OFFS,    /* int64, n_batch: pool byte offset of each entry's K row in layer 0 */
    KR_CUDA_I_N_VIS,     /* int32, n_batch */
    KR_CUDA_I_TABLE_OFF, /* int32, n_batch */
    KR_CUDA_I_TABLES,    /* int32, n_seq_max * max_blocks_per_seq: the batch's sequences' block tables */
    KR_CUDA_I_ROWS,      /* int32, n_batch: the entries whose logits are asked for */
    KR_CUDA_I_Q_OFFS,    /* int64, n_batch: ring byte offset of each entry's query in the first scored layer, or -1 */
    KR_CUDA_I_COUNT
} kr_cuda_index;

/* The buffers of KR_CUDA_R_KVSCORE (cuda_ops.h, kr_cuda_score_args and
 * kr_cuda_kv_move): with T = ceil(score_q_max / 32) tiles, S = score_slots_max,
 * K = score_keys_max and M = move_slots_max. The scorer's five are empty
 * without scoring; the two move arrays are placed whenever M > 0, since
 * every method that evicts compacts (streaming, recent and random too). */
typedef enum kr_cuda_kvscore {
    KR_CUDA_S_PARTIAL,  /* f32, n_head * T * S */
    KR_CUDA_S_ZBUF,     /* f32, n_head * T * K */
    KR_CUDA_S_LAYER,    /* f32, S */
    KR_CUDA_S_ACC,      /* f32, S */
    KR_CUDA_S_KEY_OFFS, /* int64, K */
    KR_CUDA_S_MOVE_SRC, /* int64, M */
    KR_CUDA_S_MOVE_DST, /* int64, M */
    KR_CUDA_S_COUNT
} kr_cuda_kvscore;

typedef struct kr_cuda_plan_in {
    int64_t n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int64_t n_batch, n_seq_max, max_blocks_per_seq;
    uint64_t weight_bytes; /* sum of the matrices' bytes in their file layouts */
    uint64_t vector_bytes; /* sum of the vectors' bytes (f32), each rounded up to KR_CUDA_ALIGN */
    uint64_t pool_bytes;   /* the host cache's n_blocks * bytes_per_block */
    uint64_t ring_bytes;   /* the KV policy's query ring (0: none) */
    /* window scoring (all 0 when the policy never scores): the most query
     * rows of a span (the ring's capacity), the most slots of a sequence,
     * and those plus the sink keys */
    int64_t score_q_max, score_slots_max, score_keys_max;
    /* a compaction's moves: the most of one event (a sequence's slots);
     * 0 only for a context that never compacts */
    int64_t move_slots_max;
} kr_cuda_plan_in;

typedef struct kr_cuda_plan {
    uint64_t off[KR_CUDA_R_COUNT], size[KR_CUDA_R_COUNT]; /* bytes from the allocation's start */
    uint64_t act_off[KR_CUDA_N_ACTS];                     /* within KR_CUDA_R_ACTS */
    uint64_t index_off[KR_CUDA_I_COUNT];                  /* within KR_CUDA_R_INDEX */
    uint64_t score_off[KR_CUDA_S_COUNT];                  /* within KR_CUDA_R_KVSCORE */
    int64_t score_tiles;                                  /* T: the most (query head, tile) units per head */
    int64_t move_slots;                                   /* M: the moves the two move arrays hold */
    uint64_t max_cols;                                    /* widest matrix input: n_embd, n_ff or n_head * head_dim */
    uint64_t total;                                       /* the one allocation */
} kr_cuda_plan;

/* Device scratch of kr_cuda_matmul (cuda_ops.h) for n_batch entries of at
 * most max_cols values: an f16 tile of KR_CUDA_TILE_ROWS weight rows and
 * the entries converted to f16, each aligned, and one alignment unit of
 * slack (cuda_matmul.cu rounds the base up). */
uint64_t kr_cuda_plan_matmul_scratch(int64_t max_cols, int64_t n_batch);

/* Fill *plan from *in; false (plan zeroed) when a dimension is not
 * positive (the scoring sizes: negative, or some but not all zero; the
 * moves: negative, or fewer than the scored slots) or a size overflows 64
 * bits. */
bool kr_cuda_plan_make(kr_cuda_plan *plan, const kr_cuda_plan_in *in);

#endif /* KR_CUDA_PLAN_H */
