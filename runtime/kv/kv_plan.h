/*
 * kv_plan.h - every capacity formula of the KV cache in one place: the
 * bytes of a block, what the policy reserves beside the pool (query rings,
 * scoring scratch), how many blocks the pool gets from kv_cache.budget,
 * each sequence's share (seq_tokens), the decode-time baselines' token
 * budget, and the most slots a request can hold (admission).
 *
 * The context sizes itself from a plan, the batch engine admits requests
 * and fits its concurrency with plans, and the policy reads its share and
 * margin from one; none of them repeats the arithmetic.
 *
 * Shares do not depend on which sequences run: a sequence's share is fixed
 * when the context is created, so what it evicts, and when, depends only on
 * its own tokens and the configuration (docs/KV_COMPRESSION.md,
 * "Determinism").
 */
#ifndef KR_KV_PLAN_H
#define KR_KV_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"

/* The model dimensions the KV cache depends on. */
typedef struct kr_kv_shape {
    int32_t n_layer, n_head, n_head_kv, head_dim;
} kr_kv_shape;

typedef struct kr_kv_plan {
    kara_kv_params p; /* as configured */
    kr_kv_shape shape;
    int32_t n_ctx, n_seq_max;
    uint64_t block_bytes;   /* K and V of every layer for block_size slots */
    int32_t blocks_per_seq; /* blocks that hold n_ctx slots */
    /* The policy scores (query rings, scorer scratch). False for `full`, and
     * for on-demand window methods whose shares hold the whole context:
     * they can never need to evict, so they reserve nothing. */
    bool scoring;
    uint64_t reserved_bytes; /* rings + scratch, counted in the budget */
    int32_t max_slots;       /* slots one sequence can hold at once: n_ctx, or fewer where the budget's
                                * KV rows are fewer; the policy's per-slot buffers are sized by it */
    int32_t n_blocks;        /* blocks in the pool */
    int32_t reserve_blocks;  /* kept free at admission: kv_cache.reserve_blocks for per_window methods
                                * (whose peaks are estimates), 0 where the share bounds a request */
    int32_t seq_tokens;      /* a sequence's share in slots (<= n_ctx): on-demand window methods evict at
                                * it; per_window ones only when kv_cache.seq_tokens is set */
    int32_t budget_tokens;   /* streaming, snapkv, h2o, kara threshold: slots an event keeps */
    int32_t margin;          /* on-demand eviction frees this many slots below seq_tokens */
} kr_kv_plan;

/* True when p compresses by periodic window events: kara with trigger
 * periodic, chunkkv, recent, random. False for full and for the methods
 * that fire when a cache reaches its token budget (streaming, snapkv, h2o,
 * kara with trigger threshold). */
bool kr_kv_params_periodic(const kara_kv_params *p);
/* How far past budget_tokens a threshold method's cache grows before its
 * event: snapkv's and rkv's trigger_slack, lazy's window, kara's
 * trigger_slack (auto = interval) with trigger threshold, 1 otherwise
 * (streaming and h2o fire on the first slot over). */
int32_t kr_kv_trigger_slack(const kara_kv_params *p);

/* Threads that score a window at most (the rest of the context's threads
 * wait): the scorer's scratch, reserved in the budget, holds one tile per
 * worker, so with a fixed count the reservation, and every sequence's share
 * with it, is the same whatever runtime.threads says. Scoring is a small
 * part of decode time (docs/PERFORMANCE.md). */
#define KR_KV_SCORE_WORKERS 4

/* What a scoring policy reserves beside the pool, buffer by buffer, in one
 * place so the policy's allocation and the budget arithmetic cannot
 * disagree. */
typedef struct kr_kv_reservation {
    bool window_method, needs_scores, needs_h2o;
    bool online_scores; /* kara.score.mode online: a window's scores are its slots' attention sums (needs_h2o) */
    bool h2o_max;       /* online_max: the forward pass keeps each slot's largest probability, not the sum */
    bool needs_redund;  /* rkv: the keys' redundancy scorer (kv_redund.h) */
    int32_t ring_cap;   /* queries kept per sequence and scored layer */
    int32_t n_scored;   /* scored layers */
    int32_t score_n;    /* longest span an event scores */
    int32_t score_q;    /* most query rows an event scores with (<= score_n) */
    int32_t score_buf;  /* rows of a scored span that are not candidates (buffer or observation window) */
    size_t slot_state;  /* bytes of the method's own state per slot and sequence (lazy's steps) */
    size_t ring, h2o, score_scratch, select_scratch, floats, keep, moves;
    size_t per_layer;      /* selection_scope per_layer: the extra groups' pos[] and stored-score rows */
    size_t slot_states;    /* slot_state for every slot of every sequence */
    size_t redund_scratch; /* rkv: the redundancy scorer's scratch for the whole context */
} kr_kv_reservation;

void kr_kv_reserve_shape(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots);
void kr_kv_reserve_sizes(kr_kv_reservation *s, const kara_kv_params *p, const kr_kv_shape *shape, int32_t n_seq_max,
                         int32_t max_slots);
uint64_t kr_kv_reserve_total(const kr_kv_reservation *s);
/* Bytes a scoring policy reserves besides the block pool (rings, scratch). */
uint64_t kr_kv_policy_bytes(const kara_kv_params *p, int32_t n_layer, int32_t n_head, int32_t n_head_kv,
                            int32_t head_dim, int32_t n_seq_max, int32_t max_slots);

/* The smallest kv_cache.budget whose pool holds n_blocks blocks beside the
 * reservation of a scoring method (which grows with the slots the budget
 * can hold, up to n_ctx). */
uint64_t kr_kv_budget_for_blocks(const kara_kv_params *p, int32_t n_layer, int32_t n_head, int32_t n_head_kv,
                                 int32_t head_dim, int32_t n_seq_max, int32_t n_ctx, int32_t n_blocks);

/* Bytes of one block of block_size slots (K and V of every layer). */
uint64_t kr_kv_block_bytes(const kara_kv_params *p, const kr_kv_shape *shape);

/* The plan of a context. KARA_ERR_KV_BUDGET (message naming the bytes)
 * when kv_cache.budget cannot hold the reservations and one block;
 * KARA_ERR_CONFIG for inconsistent KV settings. */
kara_status kr_kv_plan_make(kr_kv_plan *plan, const kara_kv_params *p, const kr_kv_shape *shape, int32_t n_ctx,
                            int32_t n_seq_max);

/* Window methods (periodic events over a window: kara with trigger periodic,
 * chunkkv, recent, random) evict by windows. */
bool kr_kv_plan_window_method(const kr_kv_plan *plan);

/* Slots the newest, not yet scored part of a window method's cache can
 * reach (interval + buffer + max_defer + 1): the query ring's rows. */
int32_t kr_kv_window_slots(const kara_kv_params *p);

/* Whether a sequence the pool cannot hold is preempted and recomputed
 * (kara.on_pool_exhausted: preempt) rather than failed. */
bool kr_kv_plan_preempts(const kr_kv_plan *plan);

/* Blocks that hold n slots. */
int64_t kr_kv_plan_blocks(const kr_kv_plan *plan, int64_t slots);

/* The most slots a request of n_prompt tokens and up to n_predict generated
 * ones (-1: up to the context) holds at any moment under the plan. */
int64_t kr_kv_plan_peak_slots(const kr_kv_plan *plan, int32_t n_prompt, int32_t n_predict);

/* Can the plan run such a request at all? False, with the reason in why,
 * when its protected slots (the prompt, the unscored window, the eviction
 * margin; the baselines' prompt or sinks) exceed what one sequence may
 * keep. */
bool kr_kv_plan_holds(const kr_kv_plan *plan, int32_t n_prompt, int32_t n_predict, char *why, size_t why_size);

#endif /* KR_KV_PLAN_H */
