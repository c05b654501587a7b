/* batch_draft.c - spec DRAFT in the batch engine (batch_engine.h): the
 * draft model guesses for every decoding slot together, in sequence i of
 * the draft context for slot i. Why together: a draft step of a small
 * model costs little more for several sequences than for one (its weights
 * are read once per decode), so one decode per drafted position serves all
 * slots, where slot after slot would cost a decode per slot and position.
 *
 * Each slot's history is its tokens (prompt, generated, the pending one)
 * followed by the guesses made so far this step. Its draft sequence is cut
 * back to the longest prefix it shares with that history, short of the last
 * token, whose logits give the next guess; a decode then feeds every
 * active slot what its sequence lacks (the whole prompt the first time, a
 * token or two in steady state, one guess per later decode). */
#include <stdlib.h>
#include <string.h>

#include "batch_engine.h"
#include "model_draft.h"
#include "monotonic_clock.h"
#include "status.h"

kara_status kr_batch_draft_init(kara_engine *e, const kara_engine_params *p) {
    kr_batch_drafter *d = &e->dr;
    memset(d, 0, sizeof *d);
    kara_status st = kr_model_draft_check(p->draft_ctx, e->ctx, "engine's");
    if (st) return st;
    int32_t n_seq = kr_context_n_seq_max(p->draft_ctx);
    if (n_seq < e->n_slots)
        return kr_set_error(KARA_ERR_ARG,
                            "kara_engine_create: the draft context holds %d sequence%s and the engine runs %d at once: "
                            "spec DRAFT needs one draft sequence per request (n_seq_max >= %d)",
                            n_seq, n_seq == 1 ? "" : "s", e->n_slots, e->n_slots);
    if (!(p->draft_p_min >= 0.0f && p->draft_p_min <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "kara_engine_create: draft_p_min %g outside [0, 1]", (double)p->draft_p_min);
    d->p_min = p->draft_p_min;
    d->n_ctx = kara_context_n_ctx(p->draft_ctx);
    d->n_batch = kara_context_n_batch(p->draft_ctx);
    d->n_vocab = kara_model_n_vocab(kara_context_model(p->draft_ctx));
    size_t ns = (size_t)e->n_slots, nb = (size_t)d->n_batch;
    d->toks = malloc(ns * (size_t)d->n_ctx * sizeof *d->toks);
    d->n_toks = calloc(ns, sizeof *d->n_toks);
    d->row = malloc(ns * sizeof *d->row);
    d->want = calloc(ns, sizeof *d->want);
    d->fed = calloc(ns, sizeof *d->fed);
    d->b_tok = malloc(nb * sizeof *d->b_tok);
    d->b_pos = malloc(nb * sizeof *d->b_pos);
    d->b_seq = malloc(nb * sizeof *d->b_seq);
    d->b_logits = malloc(nb);
    if (!d->toks || !d->n_toks || !d->row || !d->want || !d->fed || !d->b_tok || !d->b_pos || !d->b_seq ||
        !d->b_logits) {
        kr_batch_draft_free(e);
        return kr_set_error(KARA_ERR_NOMEM, "out of memory creating the batch engine's drafter");
    }
    st = kara_seq_clear(p->draft_ctx, -1);
    if (st) {
        kr_batch_draft_free(e);
        return st;
    }
    d->ctx = p->draft_ctx;
    return KARA_OK;
}

void kr_batch_draft_free(kara_engine *e) {
    kr_batch_drafter *d = &e->dr;
    free(d->toks);
    free(d->n_toks);
    free(d->row);
    free(d->want);
    free(d->fed);
    free(d->b_tok);
    free(d->b_pos);
    free(d->b_seq);
    free(d->b_logits);
    memset(d, 0, sizeof *d);
}

/* Token j of slot s's history: its tokens, then this step's guesses. */
static int32_t hist_at(const kr_batch_slot *s, int32_t j) { return j < s->n_tok ? s->tokens[j] : s->pre[j - s->n_tok]; }

/* Cut draft sequence i back to the prefix it shares with the slot's tokens,
 * short of the last one (decoded again for its logits). False if the draft
 * context refuses. */
static bool cut_back(kara_engine *e, int32_t i) {
    kr_batch_drafter *d = &e->dr;
    const kr_batch_slot *s = &e->slots[i];
    const int32_t *held = d->toks + (size_t)i * (size_t)d->n_ctx;
    int32_t k = 0, lim = d->n_toks[i] < s->n_tok - 1 ? d->n_toks[i] : s->n_tok - 1;
    while (k < lim && held[k] == s->tokens[k]) k++;
    if (k == d->n_toks[i]) return true;
    if (kara_seq_truncate(d->ctx, i, k) != KARA_OK) {
        /* a full-KV context takes any cut; if it does not, start over */
        if (kara_seq_clear(d->ctx, i) != KARA_OK) return false;
        k = 0;
    }
    d->n_toks[i] = k;
    return true;
}

/* One draft decode: every active slot's missing history, as much as fits,
 * with logits for a slot's last entry when it ends its history. Returns
 * the entry count (0: nothing to do) and leaves the decode's status. */
static int32_t draft_decode(kara_engine *e, kara_status *st) {
    kr_batch_drafter *d = &e->dr;
    int32_t n = 0, rows = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
        d->row[i] = -1;
        d->fed[i] = 0;
        if (!d->want[i]) continue;
        const kr_batch_slot *s = &e->slots[i];
        int32_t h = s->n_tok + s->n_pre, c = h - d->n_toks[i];
        if (c > d->n_batch - n) c = d->n_batch - n;
        d->fed[i] = c;
        for (int32_t j = 0; j < c; j++, n++) {
            int32_t pos = d->n_toks[i] + j;
            d->b_tok[n] = hist_at(s, pos);
            d->b_pos[n] = pos;
            d->b_seq[n] = i;
            d->b_logits[n] = (int8_t)(pos == h - 1);
            if (d->b_logits[n]) d->row[i] = rows++;
        }
    }
    *st = KARA_OK;
    if (n == 0) return 0;
    kara_batch b = {.n_tokens = n, .tokens = d->b_tok, .pos = d->b_pos, .seq_id = d->b_seq, .logits = d->b_logits};
    double t0 = kr_monotonic_seconds();
    *st = kara_decode(d->ctx, &b);
    e->stats.draft_seconds += kr_monotonic_seconds() - t0;
    return n;
}

void kr_batch_draft_all(kara_engine *e) {
    kr_batch_drafter *d = &e->dr;
    int32_t active = 0;
    for (int32_t i = 0; i < e->n_slots; i++) {
        kr_batch_slot *s = &e->slots[i];
        s->n_pre = 0;
        d->want[i] = 0;
        bool decoding = s->state == KR_SLOT_RUNNING && s->n_tok - s->n_fed == 1 && s->n_fed >= s->n_prompt;
        if (!decoding || s->n_tok > d->n_ctx) continue;
        int32_t max = kr_batch_spec_max(e, s);
        if (max < 1 || !cut_back(e, i)) continue;
        d->want[i] = max;
        active++;
    }
    while (active > 0) {
        kara_status st;
        if (draft_decode(e, &st) == 0) break;
        if (st != KARA_OK) { /* nothing was appended: this step's guesses end here */
            if (st != KARA_ERR_CONTEXT_FULL && st != KARA_ERR_KV_BUDGET)
                kr_log(KARA_LOG_WARN, "batch engine: draft model: %s (no more drafts this step)", kara_last_error());
            break;
        }
        for (int32_t i = 0; i < e->n_slots; i++) {
            if (!d->want[i]) continue;
            kr_batch_slot *s = &e->slots[i];
            int32_t *held = d->toks + (size_t)i * (size_t)d->n_ctx;
            for (int32_t j = d->n_toks[i]; j < d->n_toks[i] + d->fed[i]; j++) held[j] = hist_at(s, j);
            d->n_toks[i] += d->fed[i];
            if (d->row[i] < 0) continue; /* its history did not all fit: the rest goes in the next decode */
            float p;
            int32_t t = kr_model_draft_argmax(kara_get_logits(d->ctx, d->row[i]), d->n_vocab, d->p_min, &p);
            bool stop = p < d->p_min;
            if (!stop) s->pre[s->n_pre++] = t;
            /* the last guess is not decoded; nor one past the draft context */
            if (stop || s->n_pre >= d->want[i] || d->n_toks[i] + 1 > d->n_ctx) {
                d->want[i] = 0;
                active--;
            }
        }
    }
}
