/*
 * generate.c - pull-based generation over a context: the prompt is decoded
 * in n_batch chunks, then every kara_generator_next samples (or forces)
 * tokens until a run of output text can be released.
 *
 * Text pipeline per token:
 *   token -> bytes (kara_token_to_piece)
 *         -> UTF-8 hold (an incomplete trailing character waits)
 *         -> think splitter (tags removed, bytes tagged THINK/ANSWER)
 *         -> output buffer, one channel byte per text byte
 *         -> stop strings (searched across token boundaries; a suffix that
 *            could still become one is held back)
 *         -> released as runs of one channel.
 * Everything is sized at create; nothing is allocated per token.
 *
 * Speculative decoding (spec NGRAM or DRAFT: ngram_draft.h, model_draft.h):
 * a decoded token goes into the cache with up to draft_max drafted tokens
 * after it, logits for each. The next
 * steps choose their tokens from those logits exactly as from a one-token
 * decode (the same sampler call, so the same draws); while each matches the
 * drafted token already in the cache it is taken without a decode, and at
 * the first that does not (or at the end) the unchecked rest is cut back
 * out of the sequence. The batched forward pass gives each entry the
 * logits a one-token step gives it, so the text is plain decoding's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kara.h"
#include "params_size.h"
#include "status.h"
#include "gen_seq.h"
#include "model_draft.h"
#include "ngram_draft.h"
#include "text_pipeline.h"
#include "monotonic_clock.h"

#define TAIL_TOKENS 8 /* prompt tokens examined to see whether it ends inside <think> */

struct kara_generator {
    kara_context *ctx;
    const kara_model *model;
    kara_generator_params p;
    int32_t n_vocab, n_ctx, n_batch;

    /* what this generator has put into a sequence, to reuse a common prefix */
    int32_t *hist;
    int32_t n_hist;
    int32_t hist_seq; /* -1: nothing known */
    int32_t seq;      /* sequence of the current start */
    int32_t pos;      /* next position in it */
    int32_t *batch_pos, *batch_seq;
    int8_t *batch_logits;

    kr_gen_model gm;                           /* forced-close tokens, piece scratch */
    kr_gen_seq out;                            /* token choice and text of the current start (gen_seq.h) */
    char *tail;                                /* rendered tail of the prompt */
    size_t ostart;                             /* next byte of out.ts.buf to hand out */
    kr_stop_text stops[KARA_MAX_STOP_STRINGS]; /* the stop strings, copied at create */

    bool started;
    kara_generator_stats stats;

    /* speculative decoding: the entries of the last decode (a token, then
     * its drafted tokens), how many of its logits rows the steps have used */
    bool spec;
    kr_ngram_index ngram;  /* spec NGRAM */
    kr_model_draft mdraft; /* spec DRAFT */
    int32_t *vbatch;       /* draft_max + 1 tokens */
    int32_t v_n, v_used;
};

void kara_generator_params_init(kara_generator_params *p) {
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    kara_sampler_params_init(&p->sampling);
    p->max_tokens = -1;
    p->reasoning_budget = -1;
    p->split_thinking = true;
    p->think_start = KARA_THINK_START_AUTO;
    p->spec = KARA_SPEC_NONE;
    p->draft_max = 8;
    p->draft_p_min = 0.75f;
}

/* ------------------------------------------------------------------------ */
/* Create / free                                                             */
/* ------------------------------------------------------------------------ */

kara_status kara_generator_create(kara_context *ctx, const kara_generator_params *p, kara_generator **out) {
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_generator_create: out is NULL");
    *out = NULL;
    if (!ctx) return kr_set_error(KARA_ERR_ARG, "kara_generator_create: ctx is NULL");
    kara_status sz = kr_params_size_check(p, sizeof *p, "kara_generator_create", "kara_generator_params_init");
    if (sz) return sz;
    kara_generator_params defaults;
    if (!p) {
        kara_generator_params_init(&defaults);
        p = &defaults;
    }
    if (p->n_stop < 0 || p->n_stop > KARA_MAX_STOP_STRINGS)
        return kr_set_error(KARA_ERR_ARG, "kara_generator_create: n_stop %d outside [0, %d]", p->n_stop,
                            KARA_MAX_STOP_STRINGS);
    for (int i = 0; i < p->n_stop; i++) {
        size_t n = p->stop[i] ? strlen(p->stop[i]) : 0;
        if (n < 1 || n > KR_STOP_MAX_LEN)
            return kr_set_error(KARA_ERR_ARG, "kara_generator_create: stop string %d must have 1..%d bytes", i,
                                KR_STOP_MAX_LEN);
    }
    if (p->max_tokens < -1 || p->reasoning_budget < -1)
        return kr_set_error(KARA_ERR_ARG, "kara_generator_create: max_tokens and reasoning_budget must be >= -1");
    if ((int)p->think_start < 0 || p->think_start > KARA_THINK_START_THINK)
        return kr_set_error(KARA_ERR_ARG, "kara_generator_create: bad think_start %d", (int)p->think_start);
    if ((int)p->spec < KARA_SPEC_NONE || p->spec > KARA_SPEC_DRAFT)
        return kr_set_error(KARA_ERR_ARG, "kara_generator_create: bad spec mode %d", (int)p->spec);
    if (p->spec != KARA_SPEC_NONE && (p->draft_max < 1 || p->draft_max > KARA_MAX_DRAFT))
        return kr_set_error(KARA_ERR_ARG, "kara_generator_create: draft_max %d outside [1, %d]", p->draft_max,
                            KARA_MAX_DRAFT);
    if (p->spec == KARA_SPEC_DRAFT && !(p->draft_p_min >= 0.0f && p->draft_p_min <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "kara_generator_create: draft_p_min %g outside [0, 1]",
                            (double)p->draft_p_min);

    kara_generator *g = calloc(1, sizeof *g);
    if (!g) return kr_set_error(KARA_ERR_NOMEM, "out of memory creating a generator");
    g->ctx = ctx;
    g->model = kara_context_model(ctx);
    g->p = *p;
    g->n_vocab = kara_model_n_vocab(g->model);
    g->n_ctx = kara_context_n_ctx(ctx);
    g->n_batch = kara_context_n_batch(ctx);
    g->hist_seq = -1;
    for (int i = 0; i < p->n_stop; i++) {
        snprintf(g->stops[i], sizeof g->stops[i], "%s", p->stop[i]);
        g->p.stop[i] = g->stops[i];
    }
    kara_status st = kr_gen_model_init(&g->gm, g->model);
    if (!st) st = kr_gen_seq_init(&g->out, &g->gm, &p->sampling);
    /* one entry past n_ctx: a draft is looked up with the token being decoded appended */
    g->hist = malloc(((size_t)g->n_ctx + 1) * sizeof *g->hist);
    g->batch_pos = malloc((size_t)g->n_batch * sizeof *g->batch_pos);
    g->batch_seq = malloc((size_t)g->n_batch * sizeof *g->batch_seq);
    g->batch_logits = malloc((size_t)g->n_batch);
    g->tail = malloc((size_t)g->gm.piece_cap * TAIL_TOKENS + 1);
    /* room 0: a KV method that cannot take drafted tokens back (h2o, lazy, read tracking without verify_max) */
    g->spec = p->spec != KARA_SPEC_NONE && kara_seq_verify_room(ctx, 0) > 0 && g->n_batch > 1;
    g->vbatch = malloc(((size_t)(g->spec ? p->draft_max : 0) + 1) * sizeof *g->vbatch);
    if (!st && g->spec && p->spec == KARA_SPEC_NGRAM)
        st = kr_ngram_init(&g->ngram, g->n_ctx + 1, g->gm.line_end, g->gm.n_vocab);
    /* the draft context is checked even where the KV method keeps speculation off: a wrong one is a mistake anyway */
    if (!st && p->spec == KARA_SPEC_DRAFT) st = kr_model_draft_init(&g->mdraft, p->draft_ctx, ctx, p->draft_p_min);
    if (!st && (!g->hist || !g->batch_pos || !g->batch_seq || !g->batch_logits || !g->tail || !g->vbatch))
        st = kr_set_error(KARA_ERR_NOMEM, "out of memory creating a generator");
    if (st) {
        kara_generator_free(g);
        return st;
    }
    *out = g;
    return KARA_OK;
}

void kara_generator_free(kara_generator *g) {
    if (!g) return;
    kr_gen_seq_free(&g->out);
    kr_gen_model_free(&g->gm);
    free(g->hist);
    free(g->batch_pos);
    free(g->batch_seq);
    free(g->batch_logits);
    free(g->tail);
    free(g->vbatch);
    kr_ngram_free(&g->ngram);
    kr_model_draft_free(&g->mdraft);
    free(g);
}

void kara_generator_set_abort(kara_generator *g, kara_abort_fn fn, void *user) {
    if (!g) return;
    g->p.abort = fn;
    g->p.abort_user = user;
}

void kara_generator_set_reasoning_budget(kara_generator *g, int32_t budget) {
    if (g) g->p.reasoning_budget = budget < -1 ? -1 : budget;
}

void kara_generator_set_max_tokens(kara_generator *g, int32_t max_tokens) {
    if (g) g->p.max_tokens = max_tokens < -1 ? -1 : max_tokens;
}

kara_stop_reason kara_generator_stop_reason(const kara_generator *g) { return g ? g->out.reason : KARA_STOP_NONE; }

void kara_generator_get_stats(const kara_generator *g, kara_generator_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!g) return;
    *out = g->stats;
    out->n_generated = g->out.n_generated;
    out->n_think = g->out.n_think;
    out->n_forced = g->out.n_forced;
}

/* ------------------------------------------------------------------------ */
/* Text pipeline                                                             */
/* ------------------------------------------------------------------------ */

/* The next run of one channel that may be released, or false. */
static bool take_run(kara_generator *g, kara_piece *out) {
    size_t end = kr_gen_seq_releasable(&g->out, g->ostart);
    if (end <= g->ostart) return false;
    const kr_text_stream *ts = &g->out.ts;
    size_t i = g->ostart;
    uint8_t ch = ts->chan[i];
    while (i < end && ts->chan[i] == ch) i++;
    out->text = ts->buf + g->ostart;
    out->len = (int32_t)(i - g->ostart);
    out->channel = (kara_channel)ch;
    out->token = g->out.flushed ? -1 : g->out.prev;
    g->ostart = i;
    return true;
}

/* Drop the bytes returned by the previous call (kept until now so that the
 * returned pointer stayed valid). */
static void compact(kara_generator *g) {
    if (g->ostart == 0) return;
    kr_text_stream_drop(&g->out.ts, g->ostart);
    g->ostart = 0;
}

/* ------------------------------------------------------------------------ */
/* Prompt                                                                    */
/* ------------------------------------------------------------------------ */

static bool aborted(kara_generator *g) { return g->p.abort && g->p.abort(g->p.abort_user); }

/* Take the drafted tokens no step has confirmed back out of the sequence,
 * so that it holds exactly the history. */
static kara_status drop_unchecked(kara_generator *g) {
    if (g->v_used + 1 >= g->v_n) return KARA_OK;
    g->v_n = g->v_used + 1;
    return kara_seq_truncate(g->ctx, g->seq, g->pos);
}

/* Decode tokens[from..n) at positions g->pos.. in chunks of n_batch,
 * logits for the very last token only. */
static kara_status decode_prompt(kara_generator *g, const int32_t *tokens, int32_t from, int32_t n) {
    int32_t i = from;
    while (i < n) {
        if (aborted(g)) return kr_set_error(KARA_ERR_ABORTED, "generation aborted while decoding the prompt");
        int32_t k = n - i < g->n_batch ? n - i : g->n_batch;
        for (int32_t j = 0; j < k; j++) {
            g->batch_pos[j] = g->pos + j;
            g->batch_seq[j] = g->seq;
            g->batch_logits[j] = (int8_t)(i + j == n - 1);
        }
        kara_batch b = {.n_tokens = k,
                        .tokens = tokens + i,
                        .pos = g->batch_pos,
                        .seq_id = g->batch_seq,
                        .logits = g->batch_logits};
        kara_status st = kara_decode(g->ctx, &b);
        if (st) return st;
        memcpy(g->hist + g->n_hist, tokens + i, (size_t)k * sizeof *tokens);
        g->n_hist += k;
        g->pos += k;
        i += k;
    }
    return KARA_OK;
}

/* After kara_seq_state_load: the sequence holds these tokens, so the next
 * start with a prompt that begins with them decodes only the rest. */
kara_status kara_generator_adopt(kara_generator *g, int32_t seq_id, const int32_t *tokens, int32_t n) {
    if (!g || seq_id < 0 || n < 0 || (n > 0 && !tokens) || n > g->n_ctx)
        return kr_set_error(KARA_ERR_ARG, "kara_generator_adopt: invalid arguments");
    if (kara_seq_n_past(g->ctx, seq_id) != n)
        return kr_set_error(KARA_ERR_ARG, "kara_generator_adopt: sequence %d holds %d positions, %d tokens given",
                            seq_id, kara_seq_n_past(g->ctx, seq_id), n);
    memcpy(g->hist, tokens, (size_t)n * sizeof *tokens);
    g->n_hist = g->pos = n;
    g->hist_seq = seq_id;
    g->started = false;
    return KARA_OK;
}

kara_status kara_generator_start(kara_generator *g, int32_t seq_id, const int32_t *tokens, int32_t n) {
    if (!g || (n > 0 && !tokens)) return kr_set_error(KARA_ERR_ARG, "kara_generator_start: NULL argument");
    if (g->started && drop_unchecked(g)) g->hist_seq = -1; /* cannot happen (spec needs truncation); forget it */
    g->started = false;
    if (n < 1) return kr_set_error(KARA_ERR_ARG, "kara_generator_start: the prompt is empty");
    if (seq_id < 0) return kr_set_error(KARA_ERR_ARG, "kara_generator_start: sequence %d is negative", seq_id);
    if (n > g->n_ctx)
        return kr_set_error(KARA_ERR_CONTEXT_FULL, "the prompt has %d tokens but the context holds %d", n, g->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= g->n_vocab)
            return kr_set_error(KARA_ERR_TOKEN, "prompt token %d (at %d) is outside the vocabulary of %d", tokens[i], i,
                                g->n_vocab);
    double t0 = kr_monotonic_seconds();
    memset(&g->stats, 0, sizeof g->stats);
    g->stats.n_prompt = n;

    /* reuse what the sequence already holds: all of it when it is a prefix
     * of the prompt, else the longest common prefix (a regenerated reply, a
     * reply whose text tokenizes differently in the next turn) when the
     * cache can be cut back to it. At least the prompt's last two tokens are
     * decoded again: the last for its logits, and two so that the KV policy
     * sees prompt text (a single appended token is where it marks the start
     * of generation), as when the whole prompt is decoded */
    bool reuse = false;
    if (g->hist_seq == seq_id && kara_seq_n_past(g->ctx, seq_id) == g->n_hist) {
        int32_t k = 0, max = g->n_hist < n - 2 ? g->n_hist : n - 2;
        while (k < max && g->hist[k] == tokens[k]) k++;
        if (k == g->n_hist) {
            reuse = true;
        } else if (k > 0 && kara_seq_truncate(g->ctx, seq_id, k) == KARA_OK) {
            g->n_hist = g->pos = k;
            reuse = true;
        }
    }
    if (g->spec && g->p.spec == KARA_SPEC_NGRAM) kr_ngram_cut(&g->ngram, reuse ? g->n_hist : 0);
    g->seq = seq_id;
    if (!reuse) {
        kara_status st = kara_seq_clear(g->ctx, seq_id);
        if (st) return st;
        g->n_hist = 0;
        g->pos = 0;
    }
    g->hist_seq = seq_id;
    int32_t from = g->n_hist;
    kara_status st = decode_prompt(g, tokens, from, n);
    if (st) {
        kara_seq_clear(g->ctx, seq_id);
        g->n_hist = 0;
        g->pos = 0;
        return st;
    }
    g->stats.n_prompt_decoded = n - from;
    g->stats.t_prompt_s = kr_monotonic_seconds() - t0;
    g->stats.spec_on = g->spec;
    g->v_n = 1; /* the prompt's last logits */
    g->v_used = 0;

    /* the sampler keeps its random state: a repeated prompt (a regenerated
     * reply) must get a new draw */
    kr_gen_request req = {g->p.max_tokens, KARA_STOP_MAX_TOKENS, g->p.reasoning_budget, g->p.ignore_eog,
                          false,           g->p.split_thinking};
    req.in_think = g->p.think_start == KARA_THINK_START_THINK ||
        (g->p.think_start == KARA_THINK_START_AUTO &&
         kr_prompt_opens_think(g->model, tokens, n, TAIL_TOKENS, g->tail, g->gm.piece_cap));
    st = kr_gen_seq_start(&g->out, NULL, &req, (const char *const *)g->p.stop, g->p.n_stop, tokens, n);
    if (st) return st;
    g->ostart = 0;
    g->started = true;
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Generation                                                                */
/* ------------------------------------------------------------------------ */

/* Decode tok at g->pos with up to draft_max drafted tokens after it (logits
 * for each), or alone when there is no draft or the longer batch does not
 * fit (kara_decode changes nothing when it refuses). */
static kara_status decode_with_draft(kara_generator *g, int32_t tok) {
    int32_t k = 0;
    g->vbatch[0] = tok;
    if (g->spec) {
        int32_t room = g->n_ctx - g->pos - 1, max = g->p.draft_max;
        if (max > room) max = room;
        /* under KV compression: short of the next event (and at most n_batch) */
        room = kara_seq_verify_room(g->ctx, g->seq) - 1;
        if (max > room) max = room;
        g->hist[g->n_hist] = tok; /* drafted with the token being decoded as the history's end */
        if (max > 0 && g->p.spec == KARA_SPEC_NGRAM) {
            k = kr_ngram_draft(&g->ngram, g->hist, g->n_hist + 1, max, KR_DRAFT_MIN_PROB, g->vbatch + 1);
        } else if (max > 0) {
            double t0 = kr_monotonic_seconds();
            kara_status st = kr_model_draft_run(&g->mdraft, g->hist, g->n_hist + 1, max, g->vbatch + 1, &k);
            g->stats.t_draft_s += kr_monotonic_seconds() - t0;
            if (st) return st;
        }
    }
    kara_status st;
    for (;;) {
        for (int32_t j = 0; j <= k; j++) {
            g->batch_pos[j] = g->pos + j;
            g->batch_seq[j] = g->seq;
            g->batch_logits[j] = 1;
        }
        kara_batch b = {.n_tokens = k + 1,
                        .tokens = g->vbatch,
                        .pos = g->batch_pos,
                        .seq_id = g->batch_seq,
                        .logits = g->batch_logits,
                        .generated = k > 0};
        st = kara_decode(g->ctx, &b);
        if (st && k > 0 && (st == KARA_ERR_KV_BUDGET || st == KARA_ERR_CONTEXT_FULL)) {
            k = 0; /* the draft did not fit where the token alone may */
            continue;
        }
        break;
    }
    if (st) return st;
    g->hist[g->n_hist++] = tok;
    g->pos++;
    g->v_n = k + 1;
    g->v_used = 0;
    if (k > 0) {
        g->stats.n_verify++;
        g->stats.n_drafted += k;
    }
    return KARA_OK;
}

/* Choose one token (gen_seq.c) and decode it, unless it is the drafted
 * token already in the cache after the last one. */
static kara_status step(kara_generator *g) {
    if (aborted(g)) {
        kr_gen_seq_finish(&g->out, KARA_STOPPED, KARA_STOP_ABORT);
        return drop_unchecked(g);
    }
    int32_t tok;
    if (!kr_gen_seq_next(&g->out, &g->gm, kara_get_logits(g->ctx, g->v_used), g->ostart, &tok)) {
        kara_status st = drop_unchecked(g);
        if (st) return st;
        return g->out.final < 0 ? g->out.final : KARA_OK;
    }
    if (g->v_used + 1 < g->v_n) {
        if (tok == g->vbatch[g->v_used + 1]) { /* the draft was right: already decoded */
            g->hist[g->n_hist++] = tok;
            g->pos++;
            g->v_used++;
            g->stats.n_accepted++;
            return KARA_OK;
        }
        kara_status st = drop_unchecked(g);
        if (st) return st;
    }
    kara_status st = decode_with_draft(g, tok);
    if (st == KARA_ERR_CONTEXT_FULL) {
        kr_gen_seq_finish(&g->out, KARA_DONE, KARA_STOP_CONTEXT_FULL);
        return KARA_OK;
    }
    return st;
}

kara_status kara_generator_next(kara_generator *g, kara_piece *out) {
    if (!g || !out) return kr_set_error(KARA_ERR_ARG, "kara_generator_next: NULL argument");
    memset(out, 0, sizeof *out);
    if (!g->started) return kr_set_error(KARA_ERR_ARG, "kara_generator_next: call kara_generator_start first");
    double t0 = kr_monotonic_seconds();
    compact(g);
    kara_status result;
    for (;;) {
        /* at the end, held bytes join the output before any more of it is
         * released, so a stop string they complete is still found */
        if (g->out.final > 0) kr_gen_seq_flush(&g->out, &g->gm, g->ostart);
        if (take_run(g, out)) {
            result = KARA_OK;
            break;
        }
        if (g->out.final) {
            result = g->out.final;
            break;
        }
        kara_status st = step(g);
        if (st < 0) {
            kr_gen_seq_finish(&g->out, st, KARA_STOP_NONE);
            g->out.flushed = true;
            result = st;
            break;
        }
    }
    g->stats.t_generate_s += kr_monotonic_seconds() - t0;
    return result;
}
