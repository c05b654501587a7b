/*
 * model_draft.h - drafts for speculative decoding from a second, smaller
 * model with the same vocabulary, run greedily in a context of its own.
 *
 * The draft context's sequence 0 follows the generator's history: before a
 * draft it is cut back to what it shares with the history (the tokens the
 * target rejected go) and the rest is decoded, then each drafted token is
 * the draft model's argmax, decoded in turn for the next one. Drafting
 * stops at max tokens, at a token the draft model gives less than p_min
 * probability (a guess it doubts costs a verify entry and is seldom right),
 * or where the draft context is full. The target model checks every drafted
 * token, so a wrong guess costs time, never text. Nothing is allocated
 * after init.
 */
#ifndef KR_MODEL_DRAFT_H
#define KR_MODEL_DRAFT_H

#include <stdint.h>

#include "kara.h"

typedef struct kr_model_draft {
    kara_context *ctx;
    int32_t n_ctx, n_batch, n_vocab;
    float p_min;
    int32_t *toks;  /* what sequence 0 of ctx holds, n_ctx entries */
    int32_t n_toks; /* how many */
} kr_model_draft;

/* KARA_OK when dctx can draft for target: another context (whose: "generator's", "engine's"), not compressing its
 * KV, the same vocabulary (every token's text equal; else the first token that differs is named). KARA_ERR_ARG. */
kara_status kr_model_draft_check(kara_context *dctx, kara_context *target, const char *whose);

/* The draft's guess from logits l: their argmax, and in *p its probability (1 when p_min is 0: not computed). */
int32_t kr_model_draft_argmax(const float *l, int32_t n_vocab, float p_min, float *p);

/* Checks that dctx can draft for target (another context, not compressing
 * its KV, the same vocabulary: every token's text equal), clears its
 * sequence 0 and allocates the bookkeeping. KARA_ERR_ARG (the reason
 * named), KARA_ERR_NOMEM. */
kara_status kr_model_draft_init(kr_model_draft *d, kara_context *dctx, kara_context *target, float p_min);
void kr_model_draft_free(kr_model_draft *d);

/* Up to max (<= KARA_MAX_DRAFT) drafted tokens to follow hist[0, n) into
 * out: *n_out of them (0: none, also when the draft context is full or
 * over its budget). KARA_OK, or another error of the draft context's
 * kara_decode. */
kara_status kr_model_draft_run(kr_model_draft *d, const int32_t *hist, int32_t n, int32_t max, int32_t *out,
                               int32_t *n_out);

#endif /* KR_MODEL_DRAFT_H */
