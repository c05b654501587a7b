/* model_draft.c - drafts from a smaller model with the same vocabulary
 * (model_draft.h). */
#include "model_draft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* The piece of token t of m into *buf (grown as needed); false on failure. */
static bool piece(const kara_model *m, int32_t t, char **buf, int32_t *cap, int32_t *len) {
    kara_status st = kara_token_to_piece(m, t, *buf, *cap, true, len);
    if (st == KARA_ERR_BUFFER && *len > *cap) {
        char *more = realloc(*buf, (size_t)*len);
        if (!more) return false;
        *buf = more;
        *cap = *len;
        st = kara_token_to_piece(m, t, *buf, *cap, true, len);
    }
    return st == KARA_OK;
}

/* KARA_OK when the two models' vocabularies render every token alike; else
 * KARA_ERR_ARG naming the first that differs. A drafted id must mean the
 * same text to the target, or a right guess would be checked as wrong. */
static kara_status same_vocab(const kara_model *target, const kara_model *draft) {
    if (target == draft) return KARA_OK;
    int32_t nt = kara_model_n_vocab(target), nd = kara_model_n_vocab(draft);
    if (nt != nd)
        return kr_set_error(KARA_ERR_ARG,
                            "the draft model has %d tokens and the target model %d: speculative decoding needs the "
                            "same vocabulary",
                            nd, nt);
    int32_t ca = 256, cb = 256, la = 0, lb = 0;
    char *a = malloc((size_t)ca), *b = malloc((size_t)cb);
    kara_status st = a && b ? KARA_OK : kr_set_error(KARA_ERR_NOMEM, "out of memory comparing vocabularies");
    for (int32_t t = 0; !st && t < nt; t++) {
        if (!piece(target, t, &a, &ca, &la) || !piece(draft, t, &b, &cb, &lb))
            st = kr_set_error(KARA_ERR_NOMEM, "out of memory comparing vocabularies");
        else if (la != lb || memcmp(a, b, (size_t)la))
            st = kr_set_error(KARA_ERR_ARG,
                              "the draft model's token %d is \"%.*s\" but the target model's is \"%.*s\": "
                              "speculative decoding needs the same vocabulary",
                              t, lb > 40 ? 40 : (int)lb, b, la > 40 ? 40 : (int)la, a);
    }
    free(a);
    free(b);
    return st;
}

kara_status kr_model_draft_check(kara_context *dctx, kara_context *target, const char *whose) {
    if (!dctx) return kr_set_error(KARA_ERR_ARG, "speculative mode draft needs a draft model's context (draft_ctx)");
    if (dctx == target)
        return kr_set_error(KARA_ERR_ARG, "the draft context must be another context than the %s", whose);
    if (kara_context_kv_compressing(dctx))
        return kr_set_error(KARA_ERR_ARG,
                            "the draft context compresses its KV cache: it must be able to take rejected tokens back "
                            "(kv_cache.method full, or a budget that holds the context)");
    return same_vocab(kara_context_model(target), kara_context_model(dctx));
}

kara_status kr_model_draft_init(kr_model_draft *d, kara_context *dctx, kara_context *target, float p_min) {
    memset(d, 0, sizeof *d);
    kara_status st = kr_model_draft_check(dctx, target, "generator's");
    if (st) return st;
    st = kara_seq_clear(dctx, 0);
    if (st) return st;
    d->ctx = dctx;
    d->n_ctx = kara_context_n_ctx(dctx);
    d->n_batch = kara_context_n_batch(dctx);
    d->n_vocab = kara_model_n_vocab(kara_context_model(dctx));
    d->p_min = p_min;
    d->toks = malloc((size_t)d->n_ctx * sizeof *d->toks);
    if (!d->toks) return kr_set_error(KARA_ERR_NOMEM, "out of memory creating the draft model's history");
    return KARA_OK;
}

void kr_model_draft_free(kr_model_draft *d) {
    free(d->toks);
    memset(d, 0, sizeof *d);
}

/* Bring sequence 0 to hold exactly hist[0, n), its last entry's logits
 * ready: cut back to the common prefix (at most n - 1 tokens, so the last
 * is decoded again for its logits) and decode the rest. *ok false when the
 * draft context cannot hold it (full, or over its budget). */
static kara_status sync(kr_model_draft *d, const int32_t *hist, int32_t n, bool *ok) {
    *ok = false;
    int32_t k = 0, lim = d->n_toks < n - 1 ? d->n_toks : n - 1;
    while (k < lim && d->toks[k] == hist[k]) k++;
    if (k < d->n_toks) {
        kara_status st = kara_seq_truncate(d->ctx, 0, k);
        if (st) return st;
        d->n_toks = k;
    }
    if (n > d->n_ctx) return KARA_OK;
    while (k < n) {
        int32_t c = n - k < d->n_batch ? n - k : d->n_batch;
        kara_batch b = kara_batch_one_sequence(hist + k, c, k, 0);
        kara_status st = kara_decode(d->ctx, &b);
        if (st == KARA_ERR_CONTEXT_FULL || st == KARA_ERR_KV_BUDGET) return KARA_OK;
        if (st) return st;
        memcpy(d->toks + k, hist + k, (size_t)c * sizeof *hist);
        k += c;
        d->n_toks = k;
    }
    *ok = true;
    return KARA_OK;
}

int32_t kr_model_draft_argmax(const float *l, int32_t n_vocab, float p_min, float *p) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (l[i] > l[best]) best = i;
    double sum = 0;
    if (p_min > 0)
        for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)(l[i] - l[best]));
    *p = p_min > 0 ? (float)(1.0 / sum) : 1.0f;
    return best;
}

kara_status kr_model_draft_run(kr_model_draft *d, const int32_t *hist, int32_t n, int32_t max, int32_t *out,
                               int32_t *n_out) {
    *n_out = 0;
    if (max < 1 || n < 1) return KARA_OK;
    bool ok;
    kara_status st = sync(d, hist, n, &ok);
    if (st || !ok) return st;
    int32_t got = 0;
    for (;;) {
        float p;
        int32_t t = kr_model_draft_argmax(kara_get_logits(d->ctx, -1), d->n_vocab, d->p_min, &p);
        if (p < d->p_min) break;
        out[got++] = t;
        if (got == max || d->n_toks >= d->n_ctx) break;
        kara_batch b = kara_batch_one_sequence(&t, 1, d->n_toks, 0);
        st = kara_decode(d->ctx, &b);
        if (st == KARA_ERR_CONTEXT_FULL || st == KARA_ERR_KV_BUDGET) break;
        if (st) return st;
        d->toks[d->n_toks++] = t;
    }
    *n_out = got;
    return KARA_OK;
}
