/* batch_text.c - the text of each request in the batch engine: token bytes
 * wait for whole UTF-8 characters, the think splitter tags thinking and
 * answer, stop strings are searched across token boundaries and a suffix
 * that could still become one is held back. Per slot, no allocation. */
#include <string.h>

#include "batch_engine.h"
#include "text_pipeline.h"

/* The splitter's output lands in the slot's buffer, one channel byte per
 * text byte, so runs of one channel can be handed out later. */
static void on_split(void *user, kara_channel channel, const char *text, size_t len) {
    kara_batch_slot *s = user;
    if (channel == KARA_CHANNEL_THINK) s->think_ends_nl = text[len - 1] == '\n';
    if (!s->req.split_thinking) channel = KARA_CHANNEL_ANSWER;
    memcpy(s->obuf + s->olen, text, len);
    memset(s->ochan + s->olen, (int)channel, len);
    s->olen += len;
}

/* Push bytes through the pipeline (text lives past the first 4 bytes of
 * e->piece, or is empty) and look for stop strings in what arrived. */
void kara_batch_text_push(kara_engine *e, kara_batch_slot *s, const char *text, size_t len, bool end_of_stream) {
    size_t before = s->olen;
    char *buf = e->piece;
    memmove(buf + s->n_utf8, text, len);
    memcpy(buf, s->utf8, (size_t)s->n_utf8);
    size_t n = (size_t)s->n_utf8 + len;
    size_t ok = end_of_stream ? n : kara_utf8_complete(buf, n);
    s->n_utf8 = (int)(n - ok);
    memcpy(s->utf8, buf + ok, (size_t)s->n_utf8);
    if (s->olen + ok + 16 > e->ocap) { /* cannot happen: ocap covers a token, the holds and a stop suffix */
        s->overflow = true;
        return;
    }
    kara_think_splitter_feed(&s->split, buf, ok, on_split, s);
    if (end_of_stream) kara_think_splitter_flush(&s->split, on_split, s);
    if (s->n_stop > 0 && s->olen > before) {
        size_t from = before > s->stop_max - 1 + s->orel ? before - (s->stop_max - 1) : s->orel;
        long at = kara_stop_find(s->stop_text, s->stop_len, s->n_stop, s->obuf, s->olen, from);
        if (at >= 0) {
            s->olen = (size_t)at;
            kara_batch_slot_finish(s, KARA_STOPPED, KARA_STOP_STRING);
        }
    }
}

/* After a token: what may be handed out now. At the end everything held is
 * released (a partial tag is text), unless a stop string ended the output. */
void kara_batch_text_settle(kara_engine *e, kara_batch_slot *s) {
    if (s->final && s->reason != KARA_STOP_STRING && s->final > 0) {
        kara_status keep = s->final;
        kara_stop_reason keep_reason = s->reason;
        s->final = KARA_OK;
        kara_batch_text_push(e, s, "", 0, true);
        if (!s->final) {
            s->final = keep;
            s->reason = keep_reason;
        }
    }
    size_t hold = s->final ? 0 : kara_stop_holdback(s->stop_text, s->stop_len, s->n_stop, s->obuf, s->olen, s->orel);
    s->orel = s->olen - hold;
}

/* Does the prompt end inside a think block ("<think>" then white space)? */
bool kara_batch_prompt_opens_think(kara_engine *e, const int32_t *tokens, int32_t n) {
    return kara_prompt_opens_think(e->model, tokens, n, KARA_BATCH_TAIL_TOKENS, e->tail, e->piece_cap);
}

