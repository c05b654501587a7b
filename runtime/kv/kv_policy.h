/*
 * kv_policy.h - what decides which KV slots a sequence keeps
 * (docs/KV_COMPRESSION.md). The forward pass knows none of the methods: it
 * hands the policy each fresh query (kr_kv_policy_query_row) and the
 * attention rows a method asked for (kr_kv_policy_attn_row); before a
 * decode kr_kv_policy_before_append makes room within a sequence's share,
 * and after it kr_kv_policy_step runs the events that are due, through the
 * method's table (kv_method.h, methods/).
 *
 * Regions of a sequence: prompt [0, P) is never compressed; scored history
 * [P, F) holds the windows scored so far (each slot tagged with its window
 * and stored score); the window [F, n) holds fresh slots, its newest
 * `buffer` slots protected. The prompt ends where the first single-token
 * append to the sequence happens (the start of generation); a later
 * multi-token append (the next turn of a chat) closes the current window
 * and is kept whole, like the prompt.
 *
 * Window methods (kara, chunkkv, recent, random) score a window when its
 * compressible part reaches `interval` slots. With kara.evict: on_demand
 * (the default) the event only records the scores and moves F; slots are
 * dropped when the sequence would pass its share (plan.seq_tokens), evenly
 * across the scored windows, each keeping the same fraction of the slots it
 * had, lowest scores first (Token2Chunk for kara), down to seq_tokens -
 * margin. With per_window each event keeps `retention` of its window at
 * once (the paper's setting); the share still caps the sequence.
 *
 * Kara with kara.trigger: threshold (ablation A8) has no window: its
 * frontier stays at P and, like the decode-time baselines (streaming,
 * snapkv, h2o, rkv, lazy), it compresses the whole generated cache once it
 * reaches budget_tokens + trigger_slack slots.
 *
 * With kara.selection_scope: per_layer (ablation A5; kara and chunkkv)
 * every selection group (kv_cache.h: a scored layer and the unscored layers
 * after it) is scored and compacted on its own: its own Keep and pos[] row,
 * the same K, n, frontier and block table in every group.
 *
 * Queries live in a ring indexed by original position (pos % cap): the
 * window always holds consecutive positions, so ring rows never move.
 *
 * Everything is reserved at init; no event allocates.
 */
#ifndef KR_KV_POLICY_H
#define KR_KV_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"
#include "kv_cache.h"
#include "kv_tuning.h"
#include "kv_plan.h"
#include "kv_prior.h"

/* How the policy runs its scoring on the context's threads: run(user, fn,
 * arg) calls fn(arg, ith, nth) on n_threads threads and returns when all
 * are done. */
typedef struct kr_kv_exec {
    int32_t n_threads;
    void (*run)(void *user, void (*fn)(void *arg, int ith, int nth), void *arg);
    void *user;
} kr_kv_exec;

/* A span of a sequence to score (kv_policy_impl.h, kr_kvp_score_span):
 * rows [first, first + n_w) of seq, the last n_buf protected, the last n_q
 * with queries in the ring from position q_first_pos on, by the scored
 * layers in [l_begin, l_end). */
typedef struct kr_kv_span {
    int32_t seq, first, n_w, n_buf, n_q, q_first_pos;
    kr_score_mode mode;
    bool exclude_self;
    int32_t l_begin, l_end;
} kr_kv_span;

typedef struct kr_kv_policy_seq {
    bool prompt_marked; /* generation has started: P is known */
    int32_t n_prompt;   /* P */
    int32_t frontier;   /* F */
    int32_t due_steps;  /* steps this sequence has been due but deferred */
    bool think_done;    /* saw the end-of-thinking token (compress_scope: think_only) */
    uint64_t events;
    uint32_t evictions; /* on-demand evictions (seeds the random baseline's choice) */
    int32_t *tokens;    /* token id of each slot (protect_token_ids) */
    float *scores;      /* stored score of each scored slot, a row per selection group */
    int32_t *win;       /* window of each slot of [P, F): its index, or -1 for slots kept whole */
    int32_t *win_size;  /* slots each window had when it was scored */
    int32_t n_win;
    int32_t n_done;     /* per_window with evict_lag: windows [0, n_done) are compressed */
    float *h2o_acc;     /* H2O: accumulated attention of each slot; window methods (reads_weight): since its window
                     * became due */
    int32_t reads_grid; /* window methods with reads: where the next window starts when every due window is
                         * scored at once (F, or ahead of F while scoring is deferred) */
    /* the method's own state of each slot (kv_method.h, slot_init and
     * observe): n_slot_arrays arrays of max_slots, inside the policy's
     * method_state; NULL when it keeps none. Only its file reads them. */
    int32_t *slot_state;
    int32_t steps; /* attention steps the method observed (its observe hook) */
    /* the last generated batch (a speculative verify step, kv_policy_spec.c):
     * the position and slot it began at (spec_slot -1: none to take back),
     * think_done before it, and the event and eviction counts then */
    int32_t spec_pos, spec_slot;
    bool spec_think;
    int32_t spec_appended; /* entries of the batch appended so far (lazy: each as a step of its own) */
    /* h2o, lazy, read tracking with verify_rows > 1: the batch's attention
     * rows committed but kept (spec_rows of them, 0: none; the sequence then
     * held spec_rows_end slots), and what the commits changed, as it was
     * before them (h2o_acc, or the slot_state arrays, spec_rows_end
     * entries each, and steps) */
    int32_t spec_rows, spec_rows_end;
    void *spec_save;
    int32_t spec_steps;
    uint64_t spec_events;
    uint32_t spec_evictions;
    bool generated; /* the batch being appended continues its generation (kara_batch.generated) */
} kr_kv_policy_seq;

struct kr_kv_method;

typedef struct kr_kv_policy {
    kara_kv_params p;                  /* its research settings: kr_kv_tune(&pol->p) (kv_tuning.h) */
    const struct kr_kv_method *method; /* p.method's table (kv_method.h) */
    kr_kv_plan plan;
    kr_kv_cache *kv; /* the cache it governs */
    kr_kv_exec exec;
    int32_t n_layer, n_head, n_head_kv, head_dim;
    int32_t n_seq_max, max_slots;
    int32_t think_end_token; /* -1 when the vocabulary has none */
    uint8_t *line_end;       /* t2c.mode lines: per token id, its text holds a newline (NULL: no line breaks known) */
    int32_t n_vocab;
    uint8_t *line_flags; /* t2c.mode lines: a region's slots that end a line, gathered for a selection */

    bool window_method; /* kara (trigger periodic), chunkkv, recent, random: periodic events over the window */
    bool scoring;       /* plan.scoring: false when the policy can never need to evict */
    bool needs_scores;  /* window scoring (kara, chunkkv), snapkv, or kara with trigger threshold */
    bool needs_h2o;
    bool online_scores;    /* kara.score.mode online: windows are scored by their slots' sums in h2o_acc */
    bool h2o_max;          /* online_max: h2o rows and h2o_acc hold maxima, refreshed into the scores at eviction */
    int32_t budget_tokens; /* the threshold methods: streaming, snapkv, h2o, rkv, lazy, kara with trigger threshold */

    /* query ring: [seq][scored layer][cap][n_head * head_dim] */
    int32_t ring_cap;
    int32_t n_scored_layers;
    size_t q_row_bytes;
    uint8_t *ring;
    /* H2O: per sequence, [n_head][max_slots] probabilities of the last query */
    float *h2o_probs;
    /* verify batches under h2o, lazy and read tracking: the rows of entries
     * 1 .. verify_rows - 1, [row - 1][seq][n_head][max_slots], and their
     * bytes with the sequences' spec_save (scratch outside the budget) */
    int32_t verify_rows;
    float *verify_probs;
    uint64_t verify_bytes;
    /* one event at a time: scorer scratch, score vectors, selection */
    void *score_scratch;
    size_t score_scratch_bytes;
    void *select_scratch;
    size_t select_scratch_bytes;
    float *layer_scores, *scores, *gather;
    int32_t *keep, *gather_tokens, *gather_keep, *win_keep;
    void *moves;
    void *redund_scratch; /* rkv: the key redundancy scorer's (kv_redund.h) */
    size_t redund_scratch_bytes;
    int32_t *method_state;   /* every sequence's slot_state, claimed up front (the plan's slot_state bytes) */
    int32_t n_slot_arrays;   /* its arrays per sequence: the method's slot_state bytes / 4 */
    uint64_t reserved_bytes; /* rings + scratch, counted in the budget */
    /* the model's retention prior (kr_kv_policy_set_prior), added to kara's
     * window scores with weight p.prior_weight when use_prior */
    kr_kv_prior prior;
    bool use_prior;
    float *prior_vals;    /* the prior of the window being scored: max_slots floats, then the scratch */
    float *prior_scratch; /* inside prior_vals: kr_kv_prior_scratch_floats */

    /* A device that holds the pool and the query ring (kernels_cuda)
     * scores there: n_w - n_buf scores of the span into out, as the host
     * scorer would; NULL on the CPU. */
    kara_status (*dev_score)(void *user, const kr_kv_span *span, float *out);
    void *dev_user;

    kr_kv_policy_seq *seqs;
    kara_kv_stats stats;
    uint64_t step;
} kr_kv_policy;

/* What the policy needs to know of the vocabulary (kv sees no model). */
typedef struct kr_kv_vocab_info {
    int32_t think_end_token; /* </think>, -1 when the vocabulary has none */
    const uint8_t *line_end; /* n_vocab flags: the token's text holds a newline (t2c.mode lines); may be NULL */
    int32_t n_vocab;
} kr_kv_vocab_info;

/* A policy for kv under the plan; exec runs its scoring in parallel. The
 * line-end flags are copied when the selection needs them. */
kara_status kr_kv_policy_init(kr_kv_policy *pol, const kr_kv_plan *plan, kr_kv_cache *kv, const kr_kv_exec *exec,
                              const kr_kv_vocab_info *vocab, int32_t verify_rows);
void kr_kv_policy_free(kr_kv_policy *pol);
/* Give the policy the model's retention prior (the arrays stay the
 * caller's and must outlive the policy). Used only by method kara when it
 * scores windows and kara.score.prior_weight > 0; otherwise it is kept
 * and changes nothing. KARA_ERR_ARG when it does not fit the cache's rows,
 * KARA_ERR_NOMEM. Call once, after kr_kv_policy_init, before any decode. */
kara_status kr_kv_policy_set_prior(kr_kv_policy *pol, const kr_kv_prior *prior);
void kr_kv_policy_seq_clear(kr_kv_policy *pol, int32_t seq);
/* Whether seq's policy state cut back to slots [0, n_keep) equals a fresh
 * decode of those tokens (truncate, save and copy ask this one rule). */
bool kr_kv_policy_can_rewind(const kr_kv_policy *pol, int32_t seq, int32_t n_keep);
/* Before the cache keeps only slots [0, n_keep) of seq (kara_seq_truncate):
 * KARA_ERR_UNSUPPORTED when the policy's state cannot be rolled back exactly. */
kara_status kr_kv_policy_seq_truncate(kr_kv_policy *pol, int32_t seq, int32_t n_keep);

/* Would appending n_new slots to seq keep it within its share? KARA_OK
 * with *n_after = the slots it holds once kr_kv_policy_before_append
 * has evicted what it must (exact on demand; an upper bound per_window),
 * or KARA_ERR_KV_BUDGET (with a message). Changes nothing: kara_decode
 * checks every sequence of a batch with it before changing any. */
kara_status kr_kv_policy_check_room(const kr_kv_policy *pol, int32_t seq, int32_t n_new, int32_t *n_after);

/* Before a decode that appends n_new slots to seq: a multi-token append
 * after generation started closes the window (scored now on demand; the
 * new slots are kept whole), and a window method that would pass the
 * sequence's share evicts scored history (kr_kv_policy_check_room says
 * how much). KARA_ERR_KV_BUDGET when even its whole scored history cannot
 * make the room (never after check_room said yes, on demand). */
kara_status kr_kv_policy_before_append(kr_kv_policy *pol, int32_t seq, int32_t n_new);

/* ---- kv_policy_spec.c: speculative verify batches under compression ---- */

/* The most entries a generated batch of seq may bring now so that no KV
 * event or eviction happens inside it (the next window stays short of its
 * due point, the sequence within its share): 0 when this policy cannot take
 * such entries back at all (a method that sums attention, or events that
 * change what the model sees), 1 when only a single token may go, else at
 * least 2 (INT32_MAX when nothing can be compressed). */
int32_t kr_kv_policy_spec_room(const kr_kv_policy *pol, int32_t seq);
/* Before a decode's appends to seq: note where a generated batch begins
 * (its seqs[seq].generated), so that its entries can be taken back. */
void kr_kv_policy_spec_mark(kr_kv_policy *pol, int32_t seq);
/* Whether cutting seq back to position n_keep only takes back entries of
 * its last generated batch, with no event or eviction since. */
bool kr_kv_policy_spec_can_take_back(const kr_kv_policy *pol, int32_t seq, int32_t n_keep);
/* The policy's part of that: think_done as the kept entries leave it. */
void kr_kv_policy_spec_take_back(kr_kv_policy *pol, int32_t seq, int32_t n_keep);

/* Leading slots of seq that no event will rewrite (the prompt under a
 * method that keeps it, all of them before generation starts): what
 * kara_seq_copy may share rather than copy. */
int32_t kr_kv_policy_shareable(const kr_kv_policy *pol, int32_t seq, int32_t n);
/* Why a device that holds the pool cannot run this policy (it sums
 * attention on the CPU, or its method reads the pool on the host), or NULL
 * when it can. */
const char *kr_kv_policy_host_only(const kr_kv_policy *pol);

/* Called for each appended slot before the forward pass runs; n_new is how
 * many entries this decode brings to the sequence (1 marks generation). */
void kr_kv_policy_on_append(kr_kv_policy *pol, int32_t seq, int32_t slot, int32_t token, int32_t n_new);
/* Where the forward pass stores the post-RoPE query of (layer, position),
 * or NULL when the policy does not need it. */
void *kr_kv_policy_query_row(kr_kv_policy *pol, int32_t seq, int32_t layer, int32_t slot, int32_t pos);
/* H2O, lazy and read tracking: how many attention rows a decode of n_new
 * entries of seq sums (0 for none): its last entry's, or under
 * verify_rows > 1 every entry's of a generated batch, each in a row of its
 * own (row r for the entry of rank r). */
int32_t kr_kv_policy_attn_rows(const kr_kv_policy *pol, int32_t seq, int32_t n_new);
/* The probability row of one head for row `row` of the sequence's newest
 * queries (summed over layers), or NULL when not collected. */
float *kr_kv_policy_attn_row(kr_kv_policy *pol, int32_t seq, int32_t row, int32_t head);
/* After the forward pass: fold rows 0 .. n_rows - 1 into H2O's accumulators
 * or lazy's recurrence tracking, in order, as that many one-token steps
 * would (row r when the sequence held n_slots - n_rows + 1 + r slots). A
 * generated batch under verify_rows > 1 saves what they change first and
 * keeps the rows, for kr_kv_policy_spec_take_back. */
void kr_kv_policy_after_pass(kr_kv_policy *pol, int32_t seq, int32_t n_rows, int32_t n_slots);
/* A pass that did not finish: zero every row of seq. */
void kr_kv_policy_pass_discard(kr_kv_policy *pol, int32_t seq);

/* Run the events that are due after a decode step. */
kara_status kr_kv_policy_step(kr_kv_policy *pol);
/* Pool pressure: free blocks for `need` more blocks. Only with
 * on_pool_exhausted: recompress_history, and only for per_window and the
 * threshold methods, does it take from other sequences (forced events,
 * then history), which makes their answers depend on what runs beside
 * them; otherwise it reports the shortage (KARA_ERR_KV_BUDGET) and the
 * caller preempts (the batch engine) or fails. */
kara_status kr_kv_policy_relieve(kr_kv_policy *pol, int32_t need);

#endif /* KR_KV_POLICY_H */
