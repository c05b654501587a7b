/*
 * batch_engine.c - continuous batching over one context (kara.h, "Batch
 * engine").
 *
 * Every running request owns one slot; slot i always decodes into sequence
 * i of the context, so a context with n_seq_max sequences runs at most
 * n_seq_max requests. A step is one kara_decode: the pending token of every
 * decoding slot (one entry each, logits on) followed by prompt chunks of
 * slots still prefilling, within prefill_chunk tokens and n_batch entries,
 * so new arrivals never stall the running ones.
 *
 * Life of a slot:
 *   queue --admit--> RUNNING: tokens[0, n_tok) = prompt + generated; the
 *     first n_fed are in the cache; when n_fed == n_tok the logits of the
 *     last entry give the next token, which becomes pending (n_tok grows).
 *   RUNNING --KV budget exhausted, youngest--> PREEMPTED: the sequence is
 *     cleared (n_fed = 0) but tokens, sampler and text state are kept;
 *     re-admitted before any new request, it re-decodes its tokens
 *     ("recompute", as vLLM does) and carries on exactly where it was.
 *   RUNNING --finished--> FINISHED: events are read, the slot is freed at
 *     the next step.
 *
 * Feeding rules that keep the KV policy's view right: the runtime marks the
 * end of a prompt at the sequence's first single-token decode, so a prompt
 * chunk is never a lone token (except a one-token prompt), and generated
 * tokens go one per step, also when a preempted request re-decodes them, so
 * every KV event happens at the same token as in the first pass.
 *
 * Everything is allocated by kara_engine_create; a step allocates nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_engine.h"
#include "params_size.h"
#include "status.h"
#include "monotonic_clock.h"

void kara_engine_params_init(kara_engine_params *p) {
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->max_queue = 64;
    p->prefill_chunk = 256;
    p->max_repeat_last_n = 256;
    p->draft_max = 8;
    p->draft_p_min = 0.75f;
}

void kara_engine_request_init(kara_engine_request *r) {
    memset(r, 0, sizeof *r);
    kara_sampler_params_init(&r->sampling);
    r->max_tokens = -1;
    r->reasoning_budget = -1;
    r->split_thinking = true;
    r->think_start = KARA_THINK_START_AUTO;
}

/* splitmix64 finaliser: seeds of neighbouring ids land far apart. */
static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t kara_engine_seed(uint64_t seed, uint64_t id) { return mix64(seed ^ mix64(id)); }

/* ------------------------------------------------------------------------ */
/* Create / free                                                             */
/* ------------------------------------------------------------------------ */

kara_status kara_engine_create(kara_context *ctx, const kara_engine_params *params, kara_engine **out) {
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_engine_create: out is NULL");
    *out = NULL;
    if (!ctx) return kr_set_error(KARA_ERR_ARG, "kara_engine_create: ctx is NULL");
    kara_status sz = kr_params_size_check(params, sizeof *params, "kara_engine_create", "kara_engine_params_init");
    if (sz) return sz;
    kara_engine_params defaults;
    if (!params) {
        kara_engine_params_init(&defaults);
        params = &defaults;
    }
    if (params->max_queue < 1 || params->prefill_chunk < 2 || params->max_repeat_last_n < 0)
        return kr_set_error(KARA_ERR_ARG,
                            "kara_engine_create: max_queue must be >= 1, prefill_chunk >= 2, max_repeat_last_n >= 0");
    if (params->spec != KARA_SPEC_NONE && params->spec != KARA_SPEC_NGRAM && params->spec != KARA_SPEC_DRAFT)
        return kr_set_error(KARA_ERR_ARG, "kara_engine_create: speculative mode %d is none of none, ngram, draft",
                            (int)params->spec);
    if (params->spec != KARA_SPEC_NONE && (params->draft_max < 1 || params->draft_max > KARA_MAX_DRAFT))
        return kr_set_error(KARA_ERR_ARG, "kara_engine_create: draft_max %d outside [1, %d]", params->draft_max,
                            KARA_MAX_DRAFT);
    int32_t n_slots = kr_context_n_seq_max(ctx), n_batch = kara_context_n_batch(ctx);
    if (n_batch < n_slots + 2)
        return kr_set_error(KARA_ERR_ARG,
                            "kara_engine_create: the context's n_batch (%d) must be at least n_seq_max + 2 (%d): "
                            "every running sequence decodes one token per step and a prompt chunk needs room",
                            n_batch, n_slots + 2);
    kara_engine *e = calloc(1, sizeof *e);
    if (!e) return kr_set_error(KARA_ERR_NOMEM, "out of memory creating a batch engine");
    e->ctx = ctx;
    e->model = kara_context_model(ctx);
    e->p = *params;
    e->n_slots = n_slots;
    e->n_ctx = kara_context_n_ctx(ctx);
    e->n_batch = n_batch;
    e->n_vocab = kara_model_n_vocab(e->model);
    /* under KV compression too, where the method can take drafted entries back (kara_seq_verify_room) */
    e->spec = params->spec != KARA_SPEC_NONE && kara_seq_verify_room(ctx, 0) > 0;
    e->stats.spec_on = e->spec;
    kara_status st = kr_gen_model_init(&e->gm, e->model);
    if (!st && params->spec == KARA_SPEC_DRAFT) { /* checked even where compression keeps it off */
        st = kr_batch_draft_init(e, params);
        if (!e->spec) kr_batch_draft_free(e);
    }
    e->slots = calloc((size_t)n_slots, sizeof *e->slots);
    e->queue = calloc((size_t)params->max_queue, sizeof *e->queue);
    e->b_tok = malloc((size_t)e->n_batch * sizeof(int32_t));
    e->b_pos = malloc((size_t)e->n_batch * sizeof(int32_t));
    e->b_seq = malloc((size_t)e->n_batch * sizeof(int32_t));
    e->b_logits = malloc((size_t)e->n_batch);
    e->b_gen = malloc((size_t)e->n_batch);
    e->tail = malloc((size_t)e->gm.piece_cap * KR_BATCH_TAIL_TOKENS + 1);
    if (!st && (!e->slots || !e->queue || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits || !e->b_gen || !e->tail))
        st = kr_set_error(KARA_ERR_NOMEM, "out of memory creating a batch engine");
    kara_sampler_params sp;
    kara_sampler_params_init(&sp);
    sp.repeat_last_n = params->max_repeat_last_n;
    for (int32_t i = 0; !st && i < n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        s->tokens = malloc((size_t)e->n_ctx * sizeof(int32_t));
        if (!s->tokens) st = kr_set_error(KARA_ERR_NOMEM, "out of memory for batch slots");
        if (!st) st = kr_gen_seq_init(&s->out, &e->gm, &sp);
        if (!st && e->spec && !e->dr.ctx) st = kr_ngram_init(&s->ngram, e->n_ctx, e->gm.line_end, e->gm.n_vocab);
    }
    if (!st) kara_seq_clear(ctx, -1);
    if (st) {
        kara_engine_free(e);
        return st;
    }
    e->ev_slot = n_slots;
    *out = e;
    return KARA_OK;
}

void kara_engine_free(kara_engine *e) {
    if (!e) return;
    if (e->slots)
        for (int32_t i = 0; i < e->n_slots; i++) {
            free(e->slots[i].tokens);
            kr_gen_seq_free(&e->slots[i].out);
            kr_ngram_free(&e->slots[i].ngram);
        }
    free(e->slots);
    kr_batch_draft_free(e);
    free(e->queue);
    free(e->b_tok);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_logits);
    free(e->b_gen);
    kr_gen_model_free(&e->gm);
    free(e->tail);
    free(e);
}

/* ------------------------------------------------------------------------ */
/* Submission                                                                */
/* ------------------------------------------------------------------------ */

int32_t kara_engine_queue_room(const kara_engine *e) { return e ? e->p.max_queue - e->q_len : 0; }

/* The generated tokens a request may have: its max_tokens, and never more
 * positions than the context size. */
static int32_t max_generated(const kara_engine *e, const kara_engine_request *r, bool *ctx_capped) {
    int32_t room = e->n_ctx - r->n_prompt;
    *ctx_capped = r->max_tokens < 0 || r->max_tokens > room;
    return *ctx_capped ? room : r->max_tokens;
}

kara_status kara_engine_submit(kara_engine *e, const kara_engine_request *r) {
    if (!e || !r) return kr_set_error(KARA_ERR_ARG, "kara_engine_submit: NULL argument");
    if (!r->prompt || r->n_prompt < 1) return kr_set_error(KARA_ERR_ARG, "the prompt is empty");
    if (r->n_prompt >= e->n_ctx)
        return kr_set_error(KARA_ERR_CONTEXT_FULL,
                            "the prompt has %d tokens but the context holds %d positions (room is needed for at "
                            "least one generated token)",
                            r->n_prompt, e->n_ctx);
    for (int32_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab)
            return kr_set_error(KARA_ERR_TOKEN, "prompt token %d (at %d) is outside the vocabulary of %d", r->prompt[i],
                                i, e->n_vocab);
    if (r->max_tokens < -1 || r->reasoning_budget < -1)
        return kr_set_error(KARA_ERR_ARG, "max_tokens and reasoning_budget must be >= -1");
    if (r->n_stop < 0 || r->n_stop > KARA_MAX_STOP_STRINGS)
        return kr_set_error(KARA_ERR_ARG, "at most %d stop strings", KARA_MAX_STOP_STRINGS);
    for (int i = 0; i < r->n_stop; i++) {
        size_t n = r->stop[i] ? strlen(r->stop[i]) : 0;
        if (n < 1 || n > KR_STOP_MAX_LEN)
            return kr_set_error(KARA_ERR_ARG, "stop string %d must have 1..%d bytes", i + 1, KR_STOP_MAX_LEN);
    }
    const kara_sampler_params *sp = &r->sampling;
    if (sp->repeat_last_n < 0 || sp->repeat_last_n > e->p.max_repeat_last_n || sp->repeat_penalty <= 0 ||
        sp->top_p <= 0 || sp->min_p > 1 || isnan(sp->temperature))
        return kr_set_error(KARA_ERR_ARG,
                            "invalid sampling parameters (repeat_last_n 0..%d, repeat_penalty > 0, top_p > 0, "
                            "min_p <= 1)",
                            e->p.max_repeat_last_n);
    /* a request that cannot fit even in an empty pool fails now */
    bool capped;
    int32_t G = max_generated(e, r, &capped);
    char why[512];
    if (!kr_batch_method_holds(e, r->n_prompt, G, why, sizeof why)) return kr_set_error(KARA_ERR_KV_BUDGET, "%s", why);
    const kr_kv_plan *plan = kr_context_kv_plan(e->ctx);
    int64_t need = kr_batch_request_blocks(e, r->n_prompt, G) + plan->reserve_blocks;
    if (need > plan->n_blocks)
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "the KV budget cannot hold this request: %d prompt tokens and up to %d generated ones "
                            "need %lld blocks (%llu bytes) under method %s, the pool has %d blocks (%llu bytes); "
                            "lower max_tokens or raise kv_cache.budget",
                            r->n_prompt, G, (long long)need, (unsigned long long)(need * (int64_t)plan->block_bytes),
                            kara_kv_method_name(plan->p.method), plan->n_blocks,
                            (unsigned long long)plan->n_blocks * plan->block_bytes);
    if (e->q_len >= e->p.max_queue)
        return kr_set_error(KARA_ERR_ARG, "kara_engine_submit: the queue is full (%d requests); step first",
                            e->p.max_queue);
    e->queue[(e->q_head + e->q_len) % e->p.max_queue] = *r;
    e->q_len++;
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */
/* ------------------------------------------------------------------------ */

static int32_t slot_index(const kara_engine *e, const kr_batch_slot *s) { return (int32_t)(s - e->slots); }

/* First admission of a request into a free slot: copy what the request
 * owns, seed its sampler from (seed, id), prepare the text pipeline. */
static kara_status slot_start(kara_engine *e, kr_batch_slot *s, const kara_engine_request *r) {
    kara_sampler_params sp = r->sampling;
    sp.seed = kara_engine_seed(r->sampling.seed, r->id);
    bool capped;
    int32_t max_gen = max_generated(e, r, &capped);
    kr_gen_request gr = {max_gen,
                         capped ? KARA_STOP_CONTEXT_FULL : KARA_STOP_MAX_TOKENS,
                         r->reasoning_budget,
                         r->ignore_eog,
                         false,
                         r->split_thinking};
    gr.in_think = r->think_start == KARA_THINK_START_THINK ||
        (r->think_start == KARA_THINK_START_AUTO &&
         kr_prompt_opens_think(e->model, r->prompt, r->n_prompt, KR_BATCH_TAIL_TOKENS, e->tail, e->gm.piece_cap));
    kara_status st = kr_gen_seq_start(&s->out, &sp, &gr, r->stop, r->n_stop, r->prompt, r->n_prompt);
    if (st) return st;
    s->req = *r;
    s->order = e->next_order++;
    memcpy(s->tokens, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    s->n_tok = s->n_prompt = r->n_prompt;
    s->n_fed = s->n_fed_max = 0;
    s->max_gen = max_gen;
    s->peak_blocks = kr_batch_request_blocks(e, r->n_prompt, s->max_gen);
    s->n_preempted = 0;
    s->ostart = s->orel = 0;
    s->done_reported = false;
    s->error[0] = '\0';
    s->logits_row = -1;
    s->n_draft = 0;
    if (e->spec && !e->dr.ctx) kr_ngram_cut(&s->ngram, 0);
    s->state = KR_SLOT_RUNNING;
    return KARA_OK;
}

/* End a request with an error (it keeps the text it produced). */
static void slot_fail(kara_engine *e, kr_batch_slot *s, kara_status st, const char *msg) {
    snprintf(s->error, sizeof s->error, "%s", msg);
    s->out.final = st; /* an error overrides a pending DONE */
    s->out.reason = KARA_STOP_NONE;
    s->orel = s->out.ts.len;
    kara_seq_clear(e->ctx, slot_index(e, s));
    s->state = KR_SLOT_FINISHED;
    e->stats.requests_failed++;
}

static void slot_preempt(kara_engine *e, kr_batch_slot *s) {
    kara_seq_clear(e->ctx, slot_index(e, s));
    s->n_fed = 0;
    s->n_preempted++;
    s->state = KR_SLOT_PREEMPTED;
    e->stats.preemptions++;
}

/* Blocks a running slot may still take before its peak. */
static int64_t slot_growth(const kara_engine *e, const kr_batch_slot *s) {
    int64_t held = kr_context_seq_blocks(e->ctx, slot_index(e, s));
    return s->peak_blocks > held ? s->peak_blocks - held : 0;
}

/* Admission (docs/KARA_METHOD.md section 2): kara_seq_admit's check (free
 * blocks for the request's peak, plus reserve_blocks where that applies),
 * and - unless admission is optimistic - the blocks every running request
 * may still grow by, so that admitted requests do not push each other out.
 * Preempted requests come back first, oldest first; new ones only when none
 * waits. */
static void admit(kara_engine *e) {
    for (;;) {
        int32_t running = 0;
        int64_t growth = 0;
        kr_batch_slot *free_slot = NULL, *waiting = NULL;
        for (int32_t i = 0; i < e->n_slots; i++) {
            kr_batch_slot *s = &e->slots[i];
            if (s->state == KR_SLOT_RUNNING) {
                running++;
                growth += slot_growth(e, s);
            } else if (s->state == KR_SLOT_FREE && !free_slot) {
                free_slot = s;
            } else if (s->state == KR_SLOT_PREEMPTED && (!waiting || s->order < waiting->order)) {
                waiting = s;
            }
        }
        kr_batch_slot *s = waiting ? waiting : free_slot;
        if (!s || (!waiting && e->q_len == 0)) return;
        const kara_engine_request *r = waiting ? &waiting->req : &e->queue[e->q_head];
        bool capped;
        int32_t G = waiting ? waiting->max_gen : max_generated(e, r, &capped);
        int64_t need = waiting ? waiting->peak_blocks : kr_batch_request_blocks(e, r->n_prompt, G);
        bool fits = kara_seq_admit(e->ctx, slot_index(e, s), r->n_prompt, G) == KARA_OK &&
            (e->p.optimistic_admission ||
             need + growth + kr_context_kv_plan(e->ctx)->reserve_blocks <= kr_context_blocks_free(e->ctx));
        if (!fits && running > 0) return; /* wait for running requests to finish */
        if (waiting) {
            /* fits, or nothing runs: an empty pool holds it (checked at submit) */
            waiting->state = KR_SLOT_RUNNING;
            continue;
        }
        kara_engine_request req = *r;
        e->q_head = (e->q_head + 1) % e->p.max_queue;
        e->q_len--;
        kara_status st = slot_start(e, s, &req);
        if (st) {
            /* cannot happen after submit's checks; report it on the request */
            s->req = req;
            s->order = e->next_order++;
            s->n_prompt = req.n_prompt;
            s->out.n_generated = s->out.n_think = s->n_preempted = 0;
            s->out.ts.len = s->ostart = s->orel = 0;
            s->done_reported = false;
            slot_fail(e, s, st, kara_last_error());
        }
    }
}

/* How many of a slot's unfed tokens go into this step, and from where;
 * 0 when it must wait. See the feeding rules at the top. */
static int32_t feed_count(const kr_batch_slot *s, int32_t budget) {
    int32_t left = s->n_tok - s->n_fed;
    if (left <= 0) return 0;
    if (s->n_fed < s->n_prompt) {
        int32_t rem = s->n_prompt - s->n_fed, k = rem < budget ? rem : budget;
        if (k < rem && rem - k == 1) k--;
        if (k == 1 && s->n_fed > 0) k = 0; /* a lone prompt token would end the prompt early */
        return k;
    }
    /* generated tokens, re-decoded after a preemption too, go one per step:
     * the KV policy then sees the sequence exactly as in its first pass
     * (a multi-token append would be taken for the next turn of a chat) */
    return 1 <= budget ? 1 : 0;
}

/* Fill the batch: decoding slots first (one entry each, and their drafts
 * in the room the others leave), then chunks of prefilling or recomputing
 * slots, oldest first. Returns the entry count and the number of logits
 * rows. */
static int32_t build_batch(kara_engine *e, int32_t *n_rows) {
    int32_t n = 0, rows = 0, decoding_left = 0, n_decoding;
    for (int32_t i = 0; i < e->n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        s->batch_n = 0;
        s->logits_row = -1;
        s->n_draft = 0;
        decoding_left += s->state == KR_SLOT_RUNNING && s->n_tok - s->n_fed == 1 && s->n_fed >= s->n_prompt;
    }
    n_decoding = decoding_left;
    /* pass 1: decoding slots; pass 2: the rest, by age */
    for (int pass = 0; pass < 2; pass++) {
        int32_t prefill_left = e->p.prefill_chunk;
        for (;;) {
            kr_batch_slot *pick = NULL;
            for (int32_t i = 0; i < e->n_slots; i++) {
                kr_batch_slot *s = &e->slots[i];
                if (s->state != KR_SLOT_RUNNING || s->batch_n || s->n_fed >= s->n_tok) continue;
                bool decoding = s->n_tok - s->n_fed == 1 && s->n_fed >= s->n_prompt;
                if ((pass == 0) != decoding) continue;
                if (!pick || s->order < pick->order) pick = s;
            }
            if (!pick) break;
            int32_t room = e->n_batch - n;
            int32_t budget = pass == 0 ? room : (prefill_left < room ? prefill_left : room);
            int32_t k = feed_count(pick, budget);
            pick->batch_n = -1; /* visited */
            if (k <= 0) continue;
            int32_t seq = slot_index(e, pick);
            for (int32_t j = 0; j < k; j++) {
                int32_t t = pick->n_fed + j;
                e->b_tok[n] = pick->tokens[t];
                e->b_pos[n] = t;
                e->b_seq[n] = seq;
                e->b_logits[n] = (int8_t)(t == pick->n_tok - 1);
                e->b_gen[n] = 0;
                if (e->b_logits[n]) pick->logits_row = rows++;
                n++;
            }
            if (pass == 0 && --decoding_left >= 0) {
                kr_batch_spec_draft(e, pick, e->n_batch - n - decoding_left, n_decoding);
                /* a verify step continues the request's generation: under KV
                 * compression its entries count as generated tokens and can be
                 * taken back (kara_batch.generated_entries) */
                if (pick->n_draft > 0) e->b_gen[n - 1] = 1;
                for (int32_t j = 0; j < pick->n_draft; j++, n++) {
                    e->b_tok[n] = pick->draft[j];
                    e->b_pos[n] = pick->n_fed + 1 + j;
                    e->b_seq[n] = seq;
                    e->b_logits[n] = 1;
                    e->b_gen[n] = 1;
                    rows++;
                }
                k += pick->n_draft;
            }
            pick->batch_n = k;
            if (pass == 1) prefill_left -= k;
        }
    }
    *n_rows = rows;
    return n;
}

/* The youngest running request: the one to preempt. */
static kr_batch_slot *youngest(kara_engine *e, int32_t *running) {
    kr_batch_slot *y = NULL;
    *running = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        if (s->state != KR_SLOT_RUNNING) continue;
        (*running)++;
        if (!y || s->order > y->order) y = s;
    }
    return y;
}

/* One new token for a slot whose tokens are all in the cache: chosen, its
 * text pushed, and the request finished when it ends (gen_seq.c). */
void kr_batch_next_token(kara_engine *e, kr_batch_slot *s) {
    int32_t tok = -1;
    kr_gen_seq_next(&s->out, &e->gm, kara_get_logits(e->ctx, s->logits_row), s->orel, &tok);
    if (s->out.final < 0) {
        char msg[KR_BATCH_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", kara_last_error());
        slot_fail(e, s, s->out.final, msg);
        return;
    }
    if (s->out.n_generated > (int32_t)(s->n_tok - s->n_prompt)) {
        /* a token was chosen (also the last one, which is not decoded) */
        s->tokens[s->n_tok++] = tok;
        e->stats.tokens_generated++;
    }
}

/* After a token: what may be handed out now. At the end everything held is
 * released (a partial tag is text), unless a stop string ended the output. */
static void settle_text(kara_engine *e, kr_batch_slot *s) {
    if (s->out.final > 0) kr_gen_seq_flush(&s->out, &e->gm, s->orel);
    s->orel = kr_gen_seq_releasable(&s->out, s->orel);
}

/* ------------------------------------------------------------------------ */
/* The step                                                                  */
/* ------------------------------------------------------------------------ */

/* Start of a step: release finished slots, drop the text handed out. */
static void housekeeping(kara_engine *e) {
    for (int32_t i = 0; i < e->n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        if (s->state == KR_SLOT_FINISHED) {
            s->state = KR_SLOT_FREE;
            continue;
        }
        if (s->state == KR_SLOT_FREE || s->orel == 0) continue;
        kr_text_stream_drop(&s->out.ts, s->orel);
        s->orel = s->ostart = 0;
    }
    e->ev_slot = 0;
}

static void refresh_kv_stats(kara_engine *e) {
    kara_kv_stats ks;
    kara_context_kv_stats(e->ctx, &ks);
    e->stats.kv_events = ks.events;
    e->stats.kv_forced_events = ks.forced_events;
    e->stats.kv_recompress_events = ks.recompress_events;
    e->stats.kv_bytes = kara_context_kv_bytes(e->ctx);
    e->stats.kv_bytes_peak = kara_context_kv_bytes_peak(e->ctx);
    e->stats.kv_cache_bytes_peak = ks.cache_bytes_peak;
    e->stats.kv_reserved_bytes = ks.reserved_bytes;
    e->stats.kv_slots_evicted = ks.slots_evicted;
    e->stats.kv_seq_tokens = ks.seq_tokens;
}

/* A slot's entries were decoded: advance it, count, and pick its next
 * token when all its tokens are in the cache. */
static void after_decode(kara_engine *e, kr_batch_slot *s) {
    if (s->n_draft > 0) { /* its pending token, then the drafts as they are chosen */
        s->n_fed++;
        if (s->n_fed > s->n_fed_max) s->n_fed_max = s->n_fed;
        kr_batch_spec_accept(e, s);
        return;
    }
    int32_t end = s->n_fed + s->batch_n;
    int32_t redo_end = end < s->n_fed_max ? end : s->n_fed_max;
    if (redo_end > s->n_fed) e->stats.tokens_recomputed += (uint64_t)(redo_end - s->n_fed);
    int32_t new_from = s->n_fed > s->n_fed_max ? s->n_fed : s->n_fed_max;
    int32_t prompt_end = end < s->n_prompt ? end : s->n_prompt;
    if (prompt_end > new_from) e->stats.tokens_prefilled += (uint64_t)(prompt_end - new_from);
    s->n_fed = end;
    if (s->n_fed > s->n_fed_max) s->n_fed_max = s->n_fed;
    if (s->n_fed == s->n_tok && s->logits_row >= 0) kr_batch_next_token(e, s);
}

/* A decode failed for a reason other than the budget (a request the
 * context refuses): decode each slot's entries on their own, so the one at
 * fault ends with the error and the others go on. Nothing is appended by a
 * failing kara_decode, so retrying is safe. */
static void decode_one_by_one(kara_engine *e) {
    for (int32_t i = 0; i < e->n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        if (s->state != KR_SLOT_RUNNING || s->batch_n <= 0) continue;
        if (s->n_draft > 0) { /* its pending token alone */
            s->batch_n -= s->n_draft;
            s->n_draft = 0;
        }
        int32_t k = s->batch_n;
        for (int32_t j = 0; j < k; j++) {
            int32_t t = s->n_fed + j;
            e->b_tok[j] = s->tokens[t];
            e->b_pos[j] = t;
            e->b_seq[j] = i;
            e->b_logits[j] = (int8_t)(t == s->n_tok - 1);
        }
        s->logits_row = e->b_logits[k - 1] ? 0 : -1;
        kara_batch b = {.n_tokens = k, .tokens = e->b_tok, .pos = e->b_pos, .seq_id = e->b_seq, .logits = e->b_logits};
        double td = kr_monotonic_seconds();
        kara_status st = kara_decode(e->ctx, &b);
        e->stats.decode_seconds += kr_monotonic_seconds() - td;
        e->stats.steps++;
        if (st == KARA_OK) {
            after_decode(e, s);
        } else {
            char msg[KR_BATCH_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", kara_last_error());
            slot_fail(e, s, st, msg);
        }
    }
}

/* kara_decode appends nothing when it fails in validation, but a KV policy
 * event that fails after the forward pass leaves the step decoded: tell the
 * two apart by the positions the context now holds. */
static bool decode_appended(const kara_engine *e) {
    for (int32_t i = 0; i < e->n_slots; i++) {
        const kr_batch_slot *s = &e->slots[i];
        if (s->state == KR_SLOT_RUNNING && s->batch_n > 0 && kara_seq_n_past(e->ctx, i) != s->n_fed) return true;
    }
    return false;
}

kara_status kara_engine_step(kara_engine *e) {
    if (!e) return kr_set_error(KARA_ERR_ARG, "kara_engine_step: NULL engine");
    double t0 = kr_monotonic_seconds();
    housekeeping(e);
    admit(e);
    kara_context *c = e->ctx;
    int32_t n = 0, rows = 0;
    kara_status st = KARA_OK;
    e->no_drafts = false;
    if (e->spec && e->dr.ctx) kr_batch_draft_all(e);
    for (;;) {
        n = build_batch(e, &rows);
        if (n == 0) break;
        kara_batch b = {.n_tokens = n,
                        .tokens = e->b_tok,
                        .pos = e->b_pos,
                        .seq_id = e->b_seq,
                        .logits = e->b_logits,
                        .generated_entries = e->b_gen};
        double td = kr_monotonic_seconds();
        st = kara_decode(c, &b);
        e->stats.decode_seconds += kr_monotonic_seconds() - td;
        if (st && decode_appended(e)) {
            /* the forward pass ran and the KV policy failed after it: the
             * tokens are in the cache and the logits are valid, so go on */
            kr_log(KARA_LOG_WARN, "batch engine: %s (after the step was decoded; continuing)", kara_last_error());
            st = KARA_OK;
        }
        if (st == KARA_ERR_ABORTED) { /* the caller's abort callback: nothing was decoded, every slot is as it was */
            e->stats.step_seconds += kr_monotonic_seconds() - t0;
            return st;
        }
        if (st != KARA_ERR_KV_BUDGET) break;
        if (e->spec && !e->no_drafts) { /* drafts never cost a preemption: the batch again without them */
            e->no_drafts = true;
            continue;
        }
        /* pool pressure the policy could not relieve (docs/KARA_METHOD.md
         * section 9) */
        int32_t running;
        kr_batch_slot *y = youngest(e, &running);
        if (!y) break;
        if (kr_kv_plan_preempts(kr_context_kv_plan(c)) && running > 1) {
            slot_preempt(e, y);
        } else {
            char msg[KR_BATCH_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", kara_last_error());
            slot_fail(e, y, KARA_ERR_KV_BUDGET, msg);
        }
    }
    if (n > 0 && st == KARA_OK) {
        e->stats.steps++;
        for (int32_t i = 0; i < e->n_slots; i++) {
            kr_batch_slot *s = &e->slots[i];
            if (s->state == KR_SLOT_RUNNING && s->batch_n > 0) after_decode(e, s);
        }
    } else if (n > 0) {
        decode_one_by_one(e);
    }
    /* finished requests leave the context now; their events are read next */
    int32_t running = 0, preempted = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        if (s->state == KR_SLOT_RUNNING && s->out.final) {
            settle_text(e, s);
            kara_seq_clear(c, i);
            s->state = KR_SLOT_FINISHED;
            e->stats.requests_done++;
        } else if (s->state == KR_SLOT_RUNNING) {
            settle_text(e, s);
        }
        running += s->state == KR_SLOT_RUNNING;
        preempted += s->state == KR_SLOT_PREEMPTED;
    }
    e->stats.running = running;
    e->stats.preempted = preempted;
    e->stats.queued = e->q_len;
    if (running > e->stats.peak_running) e->stats.peak_running = running;
    refresh_kv_stats(e);
    e->stats.step_seconds += kr_monotonic_seconds() - t0;
    bool events = false;
    for (int32_t i = 0; i < e->n_slots && !events; i++) {
        const kr_batch_slot *s = &e->slots[i];
        events = s->state == KR_SLOT_FINISHED || (s->state != KR_SLOT_FREE && s->orel > s->ostart);
    }
    if (n == 0 && !events && running == 0 && preempted == 0 && e->q_len == 0) return KARA_DONE;
    return KARA_OK;
}

bool kara_engine_next_event(kara_engine *e, kara_engine_event *ev) {
    if (!e || !ev) return false;
    for (; e->ev_slot < e->n_slots; e->ev_slot++) {
        kr_batch_slot *s = &e->slots[e->ev_slot];
        if (s->state == KR_SLOT_FREE) continue;
        memset(ev, 0, sizeof *ev);
        ev->id = s->req.id;
        ev->user = s->req.user;
        if (s->ostart < s->orel) {
            size_t i = s->ostart;
            uint8_t ch = s->out.ts.chan[i];
            while (i < s->orel && s->out.ts.chan[i] == ch) i++;
            ev->kind = KARA_ENGINE_TEXT;
            ev->channel = (kara_channel)ch;
            ev->text = s->out.ts.buf + s->ostart;
            ev->len = (int32_t)(i - s->ostart);
            s->ostart = i;
            return true;
        }
        if (s->state == KR_SLOT_FINISHED && !s->done_reported) {
            s->done_reported = true;
            ev->kind = KARA_ENGINE_DONE;
            ev->status = s->out.final;
            ev->reason = s->out.reason;
            ev->error = s->out.final < 0 ? s->error : NULL;
            ev->n_prompt = s->n_prompt;
            ev->n_generated = s->out.n_generated;
            ev->n_think = s->out.n_think;
            ev->n_preempted = s->n_preempted;
            return true;
        }
    }
    return false;
}

void kara_engine_get_stats(const kara_engine *e, kara_engine_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    *out = e->stats;
    const kara_context *c = e->ctx;
    kara_kv_stats ks;
    kara_context_kv_stats(c, &ks);
    const kr_kv_plan *plan = kr_context_kv_plan(c);
    out->kv_budget = plan->p.budget ? plan->p.budget : ks.pool_bytes + ks.reserved_bytes;
    out->kv_blocks_total = ks.blocks_total;
    out->kv_blocks_free = ks.blocks_free;
}
