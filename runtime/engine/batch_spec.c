/* batch_spec.c - speculative decoding in the batch engine (batch_engine.h):
 * a decoding slot's pending token goes into the step's batch with up to
 * draft_max tokens drafted from its own text (generate/ngram_draft.h) or
 * by a draft model (batch_draft.c),
 * logits for each. After the decode the slot chooses its tokens from those
 * rows in order, with the same sampler call a one-token step makes, while
 * each matches the drafted token already in the cache; the first that does
 * not (or the end of the request) cuts the unchecked rest back out of the
 * sequence. Every entry's logits are those of a one-token step, so each
 * request's text is what it is without drafts. */
#include <string.h>

#include "batch_engine.h"

int32_t kr_batch_spec_max(const kara_engine *e, const kr_batch_slot *s) {
    int32_t max = e->p.draft_max;
    if (max > e->n_ctx - s->n_tok) max = e->n_ctx - s->n_tok; /* positions n_tok .. n_tok + max - 1 */
    int32_t left = s->max_gen - (s->n_tok - s->n_prompt);     /* tokens the request may still choose */
    if (max > left) max = left;
    /* under KV compression: short of the next window's scoring and of an
     * eviction (kara_seq_verify_room counts the pending token too) */
    int32_t room = kara_seq_verify_room(e->ctx, (int32_t)(s - e->slots)) - 1;
    return max < room ? max : room;
}

void kr_batch_spec_draft(kara_engine *e, kr_batch_slot *s, int32_t room, int32_t n_decoding) {
    s->n_draft = 0;
    if (!e->spec || e->no_drafts) return;
    int32_t max = kr_batch_spec_max(e, s);
    if (max > room) max = room;
    if (max < 1) return;
    if (e->dr.ctx) { /* the draft model's guesses, made before the batch */
        s->n_draft = s->n_pre < max ? s->n_pre : max;
        memcpy(s->draft, s->pre, (size_t)s->n_draft * sizeof *s->draft);
        return;
    }
    s->n_draft = kr_ngram_draft(&s->ngram, s->tokens, s->n_tok, max, kr_ngram_min_prob(n_decoding), s->draft);
}

void kr_batch_spec_accept(kara_engine *e, kr_batch_slot *s) {
    int32_t seq = (int32_t)(s - e->slots), j = 0;
    e->stats.n_verify++;
    e->stats.n_drafted += (uint64_t)s->n_draft;
    for (;;) {
        int32_t before = s->n_tok;
        kr_batch_next_token(e, s);
        if (s->state != KR_SLOT_RUNNING || s->out.final || j == s->n_draft) break;
        if (s->n_tok == before || s->tokens[s->n_tok - 1] != s->draft[j]) break;
        /* the draft was right: that token is in the cache already, and the
         * logits of its entry give the next one */
        e->stats.n_accepted++;
        s->n_fed++;
        if (s->n_fed > s->n_fed_max) s->n_fed_max = s->n_fed;
        s->logits_row++;
        j++;
    }
    s->n_draft = 0;
    /* the unchecked drafts leave the cache (a finished or failed request's
     * sequence is cleared anyway) */
    if (s->state == KR_SLOT_RUNNING && kara_seq_n_past(e->ctx, seq) > s->n_fed &&
        kara_seq_truncate(e->ctx, seq, s->n_fed) != KARA_OK) {
        /* cannot happen: drafts stay within kara_seq_verify_room, where the
         * KV policy can take them back; recompute the request then, as
         * after a preemption */
        kara_seq_clear(e->ctx, seq);
        s->n_fed = 0;
    }
}
