/*
 * kv_policy.h - what decides which KV slots a sequence keeps
 * (docs/kara.md sections 3-7 and 10). The forward pass knows none of the
 * methods: it hands the policy each fresh query (kara_kv_policy_query_row)
 * and, for H2O, attention probabilities; after every decode step
 * kara_kv_policy_step runs the compression events that are due and moves
 * the surviving slots down through the paged cache.
 *
 * Regions of a sequence: prompt [0, P) is never compressed; frozen history
 * [P, F) is the output of earlier events; the window [F, n) holds fresh
 * slots, its newest `buffer` slots protected. The prompt ends where the
 * first single-token append to the sequence happens (the start of
 * generation); until then nothing is compressed. Kara with `kara.trigger:
 * threshold` (ablation A8) has no window: its frontier stays at P and, like
 * the decode-time baselines, it compresses the whole generated cache [P, n)
 * once the cache reaches budget_tokens + trigger_slack slots.
 *
 * With kara.selection_scope: per_layer (ablation A5; kara and chunkkv)
 * every selection group (kv_cache.h: a scored layer and the unscored layers
 * after it) is scored and compacted on its own: its own Keep and pos[] row,
 * the same K, n, frontier and block table in every group.
 *
 * Queries live in a ring indexed by original position (pos % cap): the
 * window always holds consecutive positions (the previous event's buffer
 * followed by newer tokens), so ring rows never move.
 */
#ifndef KARA_KV_POLICY_H
#define KARA_KV_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"
#include "kv_cache.h"

struct kara_context;

typedef struct kara_kv_policy_seq {
    bool prompt_marked;    /* generation has started: P is known */
    int32_t n_prompt;      /* P */
    int32_t frontier;      /* F */
    int32_t due_steps;     /* steps this sequence has been due but deferred */
    bool think_done;       /* saw the end-of-thinking token (compress_scope: think_only) */
    uint64_t events;
    int32_t *tokens;       /* token id of each slot (protect_token_ids) */
    float *scores;         /* stored score of each frozen slot (recompress_history), a row per group */
    float *h2o_acc;        /* H2O: accumulated attention of each slot */
} kara_kv_policy_seq;

typedef struct kara_kv_policy {
    kara_kv_params p;
    int32_t n_layer, n_head, n_head_kv, head_dim;
    int32_t n_seq_max, max_slots;
    int32_t think_end_token; /* -1 when the vocabulary has none */

    bool window_method;    /* kara (trigger periodic), chunkkv, recent, random: periodic events over the window */
    bool needs_scores;     /* window scoring (kara, chunkkv), snapkv, or kara with trigger threshold */
    bool needs_h2o;
    int32_t budget_tokens; /* streaming / snapkv / h2o / kara with trigger threshold */

    /* query ring: [seq][scored layer][cap][n_head * head_dim] */
    int32_t ring_cap;
    int32_t n_scored_layers;
    size_t q_row_bytes;
    uint8_t *ring;
    /* H2O: per sequence, [n_head][max_slots] probabilities of the last query */
    float *h2o_probs;
    /* one event at a time: scorer scratch, score vectors, selection */
    void *score_scratch;
    size_t score_scratch_bytes;
    void *select_scratch;
    size_t select_scratch_bytes;
    float *layer_scores, *scores;
    int32_t *keep;
    void *moves;
    uint64_t reserved_bytes; /* rings + scratch, counted in the budget */

    kara_kv_policy_seq *seqs;
    kara_kv_stats stats;
    uint64_t step;
} kara_kv_policy;

/* True when p compresses by periodic window events: kara with trigger
 * periodic, chunkkv, recent, random. False for full and for the methods
 * that fire when a cache reaches its token budget (streaming, snapkv, h2o,
 * kara with trigger threshold). */
bool kara_kv_params_periodic(const kara_kv_params *p);
/* How far past budget_tokens a threshold method's cache grows before its
 * event: snapkv's trigger_slack, kara's trigger_slack (auto = interval)
 * with trigger threshold, 1 otherwise (streaming and h2o fire on the first
 * slot over). */
int32_t kara_kv_trigger_slack(const kara_kv_params *p);

/* Bytes the policy reserves besides the block pool (rings, scratch). */
uint64_t kara_kv_policy_bytes(const kara_kv_params *p, int32_t n_layer, int32_t n_head, int32_t n_head_kv,
                              int32_t head_dim, int32_t n_seq_max, int32_t max_slots, int32_t n_threads);
kara_status kara_kv_policy_init(kara_kv_policy *pol, const kara_kv_params *p, int32_t n_layer, int32_t n_head,
                                int32_t n_head_kv, int32_t head_dim, int32_t n_seq_max, int32_t max_slots,
                                int32_t n_threads, int32_t think_end_token);
void kara_kv_policy_free(kara_kv_policy *pol);
void kara_kv_policy_seq_clear(kara_kv_policy *pol, int32_t seq);

/* Called for each appended slot before the forward pass runs; n_new is how
 * many entries this decode brings to the sequence (1 marks generation). */
void kara_kv_policy_on_append(kara_kv_policy *pol, const kara_kv_cache *kv, int32_t seq, int32_t slot,
                              int32_t token, int32_t n_new);
/* Where the forward pass stores the post-RoPE query of (layer, position),
 * or NULL when the policy does not need it. */
void *kara_kv_policy_query_row(kara_kv_policy *pol, int32_t seq, int32_t layer, int32_t slot, int32_t pos);
/* Before a decode: may seq take n_new more slots? Window methods keep the
 * queries of at most ring_cap window slots, so after the prompt a sequence
 * must be fed at most a few tokens per step. */
kara_status kara_kv_policy_check_append(const kara_kv_policy *pol, const kara_kv_cache *kv, int32_t seq,
                                        int32_t n_new);
/* H2O: the probability row of one head for the sequence's newest query, or
 * NULL when not collected; kara_kv_policy_h2o_commit folds them into the
 * accumulators after the forward pass. */
float *kara_kv_policy_h2o_row(kara_kv_policy *pol, int32_t seq, int32_t head);
void kara_kv_policy_h2o_commit(kara_kv_policy *pol, int32_t seq, int32_t n_slots);

/* Run the events that are due after a decode step. */
kara_status kara_kv_policy_step(struct kara_context *ctx);
/* Pool pressure: free blocks for `need` more blocks if the method allows
 * (force an event, or recompress history). KARA_ERR_KV_BUDGET if it cannot. */
kara_status kara_kv_policy_relieve(struct kara_context *ctx, int32_t need);
/* Blocks a request of n_prompt tokens and n_predict new ones needs at most
 * at any moment under this policy (admission control, section 4.6). */
int64_t kara_kv_policy_blocks_needed(const kara_kv_policy *pol, const kara_kv_cache *kv, int32_t n_prompt,
                                     int32_t n_predict);

#endif /* KARA_KV_POLICY_H */
