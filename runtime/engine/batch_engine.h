/*
 * batch_engine.h - internals of the continuous-batching engine (the public
 * API is the "Batch engine" section of kara.h), shared by its files:
 *   batch_engine.c     slots, admission, one step, events; each slot's
 *                      tokens and text come from a kr_gen_seq
 *                      (generate/gen_seq.h), as the generator's do;
 *   batch_spec.c       speculative decoding: n-gram drafts after a
 *                      slot's pending token, checked in the same step;
 *   batch_draft.c      drafts from a draft model for every decoding slot
 *                      at once, one draft-context decode per drafted
 *                      position;
 *   batch_admission.c  how many KV blocks a request needs at its peak, and
 *                      how many sequences a budget holds (the KV plan).
 */
#ifndef KR_BATCH_ENGINE_H
#define KR_BATCH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context_access.h"
#include "kara.h"
#include "gen_seq.h"
#include "ngram_draft.h"

#define KR_BATCH_TAIL_TOKENS 8
#define KR_BATCH_ERROR_MAX 320

typedef enum kr_batch_slot_state {
    KR_SLOT_FREE = 0,
    KR_SLOT_RUNNING,
    KR_SLOT_PREEMPTED,
    KR_SLOT_FINISHED
} kr_batch_slot_state;

/* One running (or preempted, or just finished) request. */
typedef struct kr_batch_slot {
    kr_batch_slot_state state;
    kara_engine_request req; /* as submitted (prompt and stop pointers are the caller's) */
    uint64_t order;          /* first admission: smaller is older */
    int32_t *tokens;         /* prompt + generated (the last one may be pending), n_ctx */
    int32_t n_tok, n_prompt, n_fed;
    int32_t n_fed_max;   /* most ever fed: tokens below it are recomputed */
    int32_t max_gen;     /* generated tokens allowed (request, then the context size) */
    int64_t peak_blocks; /* admission estimate of its largest footprint */
    int32_t n_preempted;
    kr_gen_seq out;      /* sampler, forced close, text stream, counters, how it ended */
    size_t ostart, orel; /* next byte of out.ts.buf to hand out; end of what may be handed out */
    bool done_reported;
    char error[KR_BATCH_ERROR_MAX];
    int32_t logits_row; /* row of its logits in the last decode, -1 */
    int32_t batch_n;    /* entries it has in the batch being built */
    /* speculative decoding: drafted tokens after its pending one in the
     * batch (their logits rows follow logits_row), and its n-gram index */
    int32_t draft[KARA_MAX_DRAFT];
    int32_t n_draft;
    kr_ngram_index ngram;
    /* spec DRAFT: the draft model's guesses for this step, made before the
     * batch is built (the batch takes as many as its room allows) */
    int32_t pre[KARA_MAX_DRAFT];
    int32_t n_pre;
} kr_batch_slot;

/* spec DRAFT: the draft context and what each of its sequences holds
 * (sequence i drafts for slot i). */
typedef struct kr_batch_drafter {
    kara_context *ctx; /* NULL unless spec DRAFT is on */
    float p_min;
    int32_t n_ctx, n_batch, n_vocab;
    int32_t *toks;                  /* n_slots x n_ctx: the tokens sequence i holds */
    int32_t *n_toks;                /* per slot: how many */
    int32_t *row;                   /* per slot: its logits row in the last draft decode, or -1 */
    int32_t *want;                  /* per slot: guesses it may still make this step (0: done) */
    int32_t *fed;                   /* per slot: its entries in the last draft decode */
    int32_t *b_tok, *b_pos, *b_seq; /* one draft decode, n_batch entries */
    int8_t *b_logits;
} kr_batch_drafter;

struct kara_engine {
    kara_context *ctx;
    const kara_model *model;
    kara_engine_params p;
    int32_t n_slots, n_ctx, n_batch, n_vocab;
    kr_batch_slot *slots;
    uint64_t next_order;

    /* queue of submitted requests (ring) */
    kara_engine_request *queue;
    int32_t q_head, q_len;

    /* one decode */
    int32_t *b_tok, *b_pos, *b_seq;
    int8_t *b_logits;
    int8_t *b_gen; /* per entry: kara_batch.generated_entries */

    kr_gen_model gm; /* forced-close tokens and piece scratch, for every slot */
    char *tail;      /* rendered tail of a prompt */

    /* events of the last step */
    int32_t ev_slot;

    kara_engine_stats stats;
    bool spec; /* speculative decoding on (asked for, and kara_seq_verify_room > 0) */
    kr_batch_drafter dr;
    bool no_drafts; /* this step's batch is being rebuilt without drafts (the pool refused it) */
};

/* ---- batch_spec.c: speculative decoding in the engine ---- */

/* Drafts for a decoding slot whose pending token goes into the batch with
 * at most room more entries, in a step that decodes n_decoding slots (n-gram
 * drafts ask more confidence the more share a step): s->draft and
 * s->n_draft. */
void kr_batch_spec_draft(kara_engine *e, kr_batch_slot *s, int32_t room, int32_t n_decoding);
/* After the decode of a slot with drafts: choose its tokens from the
 * entries' logits while they match the drafts already in the cache, then
 * cut the unchecked rest back out of the sequence. */
void kr_batch_spec_accept(kara_engine *e, kr_batch_slot *s);
/* Most tokens a decoding slot may draft this step, room aside. */
int32_t kr_batch_spec_max(const kara_engine *e, const kr_batch_slot *s);

/* ---- batch_draft.c: spec DRAFT ---- */

/* Checks p->draft_ctx against the engine's context and claims the
 * drafter's bookkeeping (e->n_slots, e->n_ctx set). KARA_ERR_ARG with the
 * reason, KARA_ERR_NOMEM. */
kara_status kr_batch_draft_init(kara_engine *e, const kara_engine_params *p);
void kr_batch_draft_free(kara_engine *e);
/* The draft model's guesses for every decoding slot (s->pre, s->n_pre):
 * each draft sequence is cut back to what it shares with its slot's tokens
 * and the rest decoded, then one decode per drafted position takes every
 * slot still drafting. A slot stops at its most (kr_batch_spec_max), at a
 * guess below p_min, or at the draft context's end; a failed draft decode
 * (which appends nothing) ends this step's guessing, keeping what each slot
 * guessed before it. */
void kr_batch_draft_all(kara_engine *e);

/* One new token for a slot from its logits row (batch_engine.c). */
void kr_batch_next_token(kara_engine *e, kr_batch_slot *s);

/* ---- batch_admission.c (over kv_plan.h) ---- */

/* Blocks a request of P prompt and G generated tokens holds at its peak
 * under the engine's context (reserve_blocks not included). */
int64_t kr_batch_request_blocks(const kara_engine *e, int32_t P, int32_t G);
/* Can the context's KV plan run the request at all (kr_kv_plan_holds)?
 * The reason, when not, goes to why. */
bool kr_batch_method_holds(const kara_engine *e, int32_t P, int32_t G, char *why, size_t why_size);

#endif /* KR_BATCH_ENGINE_H */
