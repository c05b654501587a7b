/* gen_seq.c - choosing each next token of a generation and pushing its
 * text (gen_seq.h), shared by the generator and the batch engine. */
#include "gen_seq.h"

#include <stdlib.h>
#include <string.h>

#include "sampler_internal.h"
#include "status.h"

kara_status kr_gen_model_init(kr_gen_model *gm, const kara_model *m) {
    memset(gm, 0, sizeof *gm);
    gm->model = m;
    gm->n_vocab = kara_model_n_vocab(m);
    gm->piece_cap = kr_longest_piece(m);
    gm->bos = kara_token_bos(m);
    char kind[16];
    gm->strip_bos_space =
        kara_model_meta_str(m, "tokenizer.ggml.model", kind, sizeof kind, NULL) && !strcmp(kind, "llama");
    gm->piece = malloc((size_t)gm->piece_cap + 8);
    gm->line_end = malloc((size_t)gm->n_vocab);
    if (!gm->piece || !gm->line_end) {
        kr_gen_model_free(gm);
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for token text");
    }
    for (int32_t t = 0; t < gm->n_vocab; t++) {
        int32_t len = 0;
        if (kara_token_to_piece(m, t, gm->piece, gm->piece_cap + 8, false, &len)) len = 0;
        gm->line_end[t] = len > 0 && memchr(gm->piece, '\n', (size_t)len) != NULL;
    }
    kara_status st = kr_think_close_init(&gm->close, m);
    if (st) kr_gen_model_free(gm);
    return st;
}

void kr_gen_model_free(kr_gen_model *gm) {
    free(gm->piece);
    free(gm->line_end);
    memset(gm, 0, sizeof *gm);
}

kara_status kr_gen_seq_init(kr_gen_seq *s, const kr_gen_model *gm, const kara_sampler_params *sp) {
    memset(s, 0, sizeof *s);
    s->ts.cap = KR_STOP_MAX_LEN + (size_t)gm->piece_cap + 64;
    s->ts.buf = malloc(s->ts.cap);
    s->ts.chan = malloc(s->ts.cap);
    kara_status st = s->ts.buf && s->ts.chan ? KARA_OK : kr_set_error(KARA_ERR_NOMEM, "out of memory for output text");
    if (!st) st = kara_sampler_create(sp, gm->n_vocab, &s->smp);
    if (st) kr_gen_seq_free(s);
    return st;
}

void kr_gen_seq_free(kr_gen_seq *s) {
    kara_sampler_free(s->smp);
    free(s->ts.buf);
    free(s->ts.chan);
    memset(s, 0, sizeof *s);
}

kara_status kr_gen_seq_start(kr_gen_seq *s, const kara_sampler_params *sp, const kr_gen_request *req,
                             const char *const *stop, int n_stop, const int32_t *prompt, int32_t n_prompt) {
    if (sp) {
        kara_status st = kr_sampler_reconfigure(s->smp, sp);
        if (st) return st;
    }
    for (int32_t i = 0; i < n_prompt; i++) kara_sampler_accept(s->smp, prompt[i]);
    s->req = *req;
    s->prev = n_prompt > 0 ? prompt[n_prompt - 1] : -1;
    s->force = (kr_think_force){0};
    s->n_generated = s->n_think = s->n_forced = 0;
    s->final = KARA_OK;
    s->reason = KARA_STOP_NONE;
    s->flushed = false;
    kr_text_stream_set_stops(&s->ts, stop, n_stop);
    kr_text_stream_reset(&s->ts, req->in_think, req->split_thinking);
    return KARA_OK;
}

void kr_gen_seq_finish(kr_gen_seq *s, kara_status st, kara_stop_reason reason) {
    if (s->final) return;
    s->final = st;
    s->reason = reason;
}

/* Push text through the stream (text lies in gm->piece past its first 4
 * bytes, or is empty); a stop string found ends the generation. */
static void push_text(kr_gen_seq *s, kr_gen_model *gm, const char *text, size_t len, bool end, size_t from) {
    if (kr_text_stream_push(&s->ts, gm->piece, text, len, end, from) >= 0)
        kr_gen_seq_finish(s, KARA_STOPPED, KARA_STOP_STRING);
}

static bool at_max(const kr_gen_seq *s) { return s->req.max_tokens >= 0 && s->n_generated >= s->req.max_tokens; }

bool kr_gen_seq_next(kr_gen_seq *s, kr_gen_model *gm, const float *logits, size_t from, int32_t *tok) {
    if (s->final) return false;
    if (at_max(s)) {
        kr_gen_seq_finish(s, KARA_DONE, s->req.at_max);
        return false;
    }
    bool was_thinking = s->ts.split.in_think;
    bool forced = kr_think_force_next(&s->force, &gm->close, s->ts.split.in_think, s->ts.think_ends_nl, s->n_think,
                                      s->req.reasoning_budget, tok);
    if (forced) {
        kara_sampler_accept(s->smp, *tok);
    } else {
        kara_status st = kara_sampler_sample(s->smp, logits, tok);
        if (st) { /* non-finite logits: a model error, reported as such */
            kr_gen_seq_finish(s, st, KARA_STOP_NONE);
            return false;
        }
    }
    if (!forced && !s->req.ignore_eog && kara_token_is_eog(gm->model, *tok)) {
        kr_gen_seq_finish(s, KARA_DONE, KARA_STOP_EOG);
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
        kr_gen_seq_finish(s, kr_set_error(KARA_ERR_INTERNAL, "generation output buffer overflow"), KARA_STOP_NONE);
        return false;
    }
    if (s->final) return false; /* a stop string: the token need not be decoded */
    if (at_max(s)) {
        kr_gen_seq_finish(s, KARA_DONE, s->req.at_max);
        return false;
    }
    return true;
}

void kr_gen_seq_flush(kr_gen_seq *s, kr_gen_model *gm, size_t from) {
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

size_t kr_gen_seq_releasable(const kr_gen_seq *s, size_t from) {
    return s->ts.len - (s->final ? 0 : kr_text_stream_holdback(&s->ts, from));
}
