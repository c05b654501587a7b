/*
 * batch_engine.h - internals of the continuous-batching engine (the public
 * API is the "Batch engine" section of kara.h), shared by its three files:
 *   batch_engine.c     slots, admission, one step, events;
 *   batch_admission.c  how many KV blocks a request needs at its peak, and
 *                      how many sequences a budget holds (the KV plan);
 *   batch_text.c       token text -> UTF-8 hold -> think splitter -> stop
 *                      strings, per slot.
 */
#ifndef KARA_BATCH_ENGINE_H
#define KARA_BATCH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "kara.h"
#include "text_pipeline.h"
#include "think_splitter.h"

#define KARA_BATCH_TAIL_TOKENS 8
#define KARA_BATCH_ERROR_MAX 320

typedef enum kara_batch_slot_state {
    KARA_SLOT_FREE = 0,
    KARA_SLOT_RUNNING,
    KARA_SLOT_PREEMPTED,
    KARA_SLOT_FINISHED
} kara_batch_slot_state;

/* One running (or preempted, or just finished) request. */
typedef struct kara_batch_slot {
    kara_batch_slot_state state;
    kara_engine_request req;   /* as submitted (prompt and stop pointers are the caller's) */
    uint64_t order;            /* first admission: smaller is older */
    int32_t *tokens;           /* prompt + generated (the last one may be pending), n_ctx */
    int32_t n_tok, n_prompt, n_fed;
    int32_t n_fed_max;         /* most ever fed: tokens below it are recomputed */
    int32_t max_gen;           /* generated tokens allowed (request, then the context size) */
    bool ctx_capped;           /* max_gen comes from the context size */
    int64_t peak_blocks;       /* admission estimate of its largest footprint */
    kara_sampler *smp;
    int32_t n_generated, n_think, n_forced, n_preempted;
    kara_think_force force;    /* rest of a forced "</think>" */
    /* text pipeline */
    kara_text_stream ts;        /* stops, UTF-8 hold, think splitter, output bytes */
    size_t ostart, orel;        /* next byte of ts.buf to hand out; end of what may be handed out */
    /* end */
    kara_status final;          /* KARA_OK while running; DONE, STOPPED or an error */
    kara_stop_reason reason;
    bool done_reported;
    char error[KARA_BATCH_ERROR_MAX];
    int32_t logits_row;         /* row of its logits in the last decode, -1 */
    int32_t batch_n;            /* entries it has in the batch being built */
} kara_batch_slot;

struct kara_engine {
    kara_context *ctx;
    const kara_model *model;
    kara_engine_params p;
    int32_t n_slots, n_ctx, n_batch, n_vocab;
    kara_batch_slot *slots;
    uint64_t next_order;

    /* queue of submitted requests (ring) */
    kara_engine_request *queue;
    int32_t q_head, q_len;

    /* one decode */
    int32_t *b_tok, *b_pos, *b_seq;
    int8_t *b_logits;

    /* text scratch */
    char *piece;
    int32_t piece_cap;
    size_t ocap;               /* bytes of each slot's text buffers */
    char *tail;
    kara_think_close close;    /* "</think>" closes forced by reasoning budgets */

    /* events of the last step */
    int32_t ev_slot;

    kara_engine_stats stats;
};

/* Record how a request ends (the first reason wins). */
static inline void kara_batch_slot_finish(kara_batch_slot *s, kara_status st, kara_stop_reason reason) {
    if (s->final) return;
    s->final = st;
    s->reason = reason;
}

/* ---- batch_admission.c (over kv_plan.h) ---- */

/* Blocks a request of P prompt and G generated tokens holds at its peak
 * under the engine's context (reserve_blocks not included). */
int64_t kara_batch_request_blocks(const kara_engine *e, int32_t P, int32_t G);
/* Can the context's KV plan run the request at all (kara_kv_plan_holds)?
 * The reason, when not, goes to why. */
bool kara_batch_method_holds(const kara_engine *e, int32_t P, int32_t G, char *why, size_t why_size);

/* ---- batch_text.c ---- */

/* Push bytes through a slot's pipeline (text must lie past the first 4
 * bytes of e->piece, or be empty); end_of_stream flushes held bytes. */
void kara_batch_text_push(kara_engine *e, kara_batch_slot *s, const char *text, size_t len, bool end_of_stream);
/* After a token: how much of the output may be handed out (all of it once
 * the request has ended). */
void kara_batch_text_settle(kara_engine *e, kara_batch_slot *s);
/* Does the prompt end inside a think block ("<think>" then white space)? */
bool kara_batch_prompt_opens_think(kara_engine *e, const int32_t *tokens, int32_t n);

#endif /* KARA_BATCH_ENGINE_H */
