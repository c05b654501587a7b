/* gen_seq.c - choosing each next token of a generation and pushing its
 * text (gen_seq.h), shared by the generator and the batch engine. */
#include "gen_seq.h"

#include <stdlib.h>
#include <string.h>

#include "sampler_internal.h"
#include "status.h"

kara_status kara_gen_model_init(kara_gen_model *gm, const kara_model *m) {
    memset(gm, 0, sizeof *gm);
    gm->model = m;
    gm->n_vocab = kara_model_n_vocab(m);
    gm->piece_cap = kara_longest_piece(m);
    gm->bos = kara_token_bos(m);
    char kind[16];
    gm->strip_bos_space = kara_model_meta_str(m, "tokenizer.ggml.model", kind, sizeof kind, NULL) &&
                          !strcmp(kind, "llama");
    gm->piece = malloc((size_t)gm->piece_cap + 8);
    if (!gm->piece) return kara_set_error(KARA_ERR_NOMEM, "out of memory for token text");
    kara_status st = kara_think_close_init(&gm->close, m);
    if (st) kara_gen_model_free(gm);
    return st;
}

void kara_gen_model_free(kara_gen_model *gm) {
    free(gm->piece);
    memset(gm, 0, sizeof *gm);
}

kara_status kara_gen_seq_init(kara_gen_seq *s, const kara_gen_model *gm, const kara_sampler_params *sp) {
    memset(s, 0, sizeof *s);
    s->ts.cap = KARA_STOP_MAX_LEN + (size_t)gm->piece_cap + 64;
    s->ts.buf = malloc(s->ts.cap);
    s->ts.chan = malloc(s->ts.cap);
    kara_status st = s->ts.buf && s->ts.chan ? KARA_OK : kara_set_error(KARA_ERR_NOMEM, "out of memory for output text");
    if (!st) st = kara_sampler_create(sp, gm->n_vocab, &s->smp);
    if (st) kara_gen_seq_free(s);
    return st;
}

void kara_gen_seq_free(kara_gen_seq *s) {
    kara_sampler_free(s->smp);
    free(s->ts.buf);
    free(s->ts.chan);
    memset(s, 0, sizeof *s);
}

kara_status kara_gen_seq_start(kara_gen_seq *s, const kara_sampler_params *sp, const kara_gen_request *req,
                               const char *const *stop, int n_stop, const int32_t *prompt, int32_t n_prompt) {
    if (sp) {
        kara_status st = kara_sampler_reconfigure(s->smp, sp);
        if (st) return st;
    }
    for (int32_t i = 0; i < n_prompt; i++) kara_sampler_accept(s->smp, prompt[i]);
    s->req = *req;
    s->prev = n_prompt > 0 ? prompt[n_prompt - 1] : -1;
    s->force = (kara_think_force){0};
    s->n_generated = s->n_think = s->n_forced = 0;
    s->final = KARA_OK;
    s->reason = KARA_STOP_NONE;
    s->flushed = false;
    kara_text_stream_set_stops(&s->ts, stop, n_stop);
    kara_text_stream_reset(&s->ts, req->in_think, req->split_thinking);
    return KARA_OK;
}

void kara_gen_seq_finish(kara_gen_seq *s, kara_status st, kara_stop_reason reason) {
    if (s->final) return;
    s->final = st;
    s->reason = reason;
}

/* Push text through the stream (text lies in gm->piece past its first 4
 * bytes, or is empty); a stop string found ends the generation. */
static void push_text(kara_gen_seq *s, kara_gen_model *gm, const char *text, size_t len, bool end, size_t from) {
    if (kara_text_stream_push(&s->ts, gm->piece, text, len, end, from) >= 0)
        kara_gen_seq_finish(s, KARA_STOPPED, KARA_STOP_STRING);
}

static bool at_max(const kara_gen_seq *s) { return s->req.max_tokens >= 0 && s->n_generated >= s->req.max_tokens; }

bool kara_gen_seq_next(kara_gen_seq *s, kara_gen_model *gm, const float *logits, size_t from, int32_t *tok) {
    if (s->final) return false;
    if (at_max(s)) {
        kara_gen_seq_finish(s, KARA_DONE, s->req.at_max);
        return false;
    }
    bool was_thinking = s->ts.split.in_think;
    bool forced = kara_think_force_next(&s->force, &gm->close, s->ts.split.in_think, s->ts.think_ends_nl, s->n_think,
                                        s->req.reasoning_budget, tok);
    if (forced) {
        kara_sampler_accept(s->smp, *tok);
    } else if (kara_sampler_sample(s->smp, logits, tok) != KARA_OK) {
        kara_gen_seq_finish(s, KARA_ERR_ARG, KARA_STOP_NONE);
        return false;
    }
    if (!forced && !s->req.ignore_eog && kara_token_is_eog(gm->model, *tok)) {
        kara_gen_seq_finish(s, KARA_DONE, KARA_STOP_EOG);
        return false;
    }
    s->n_generated++;
    if (was_thinking && !forced) s->n_think++;
    if (forced) s->n_forced++;
    int32_t len = 0;
    kara_token_to_piece(gm->model, *tok, gm->piece + 4, gm->piece_cap, false, &len); /* piece_cap fits any */
    const char *text = gm->piece + 4;
    /* a SentencePiece decoder drops the space prefix of the word after BOS */
    if (len > 0 && gm->strip_bos_space && s->prev == gm->bos && text[0] == ' ') {
        text++;
        len--;
    }
    s->prev = *tok;
    if (len > 0) push_text(s, gm, text, (size_t)len, false, from);
    if (s->ts.overflow) {
        kara_gen_seq_finish(s, kara_set_error(KARA_ERR_INTERNAL, "generation output buffer overflow"),
                            KARA_STOP_NONE);
        return false;
    }
    if (s->final) return false; /* a stop string: the token need not be decoded */
    if (at_max(s)) {
        kara_gen_seq_finish(s, KARA_DONE, s->req.at_max);
        return false;
    }
    return true;
}

void kara_gen_seq_flush(kara_gen_seq *s, kara_gen_model *gm, size_t from) {
    if (s->flushed) return;
    s->flushed = true;
    if (s->reason == KARA_STOP_STRING) return;
    kara_status keep = s->final;
    kara_stop_reason keep_reason = s->reason;
    s->final = KARA_OK;
    push_text(s, gm, "", 0, true, from);
    if (!s->final) {
        s->final = keep;
        s->reason = keep_reason;
    }
}

size_t kara_gen_seq_releasable(const kara_gen_seq *s, size_t from) {
    return s->ts.len - (s->final ? 0 : kara_text_stream_holdback(&s->ts, from));
}
