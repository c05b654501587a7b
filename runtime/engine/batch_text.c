/* batch_text.c - the text of each request in the batch engine, through
 * the slot's kara_text_stream (UTF-8 hold, think splitter, stop strings):
 * what a slot may hand out after each token, and how it ends. Per slot, no
 * allocation. */
#include <string.h>

#include "batch_engine.h"
#include "text_pipeline.h"

/* Push bytes through the pipeline (text lives past the first 4 bytes of
 * e->piece, or is empty); a stop string found ends the request. */
void kara_batch_text_push(kara_engine *e, kara_batch_slot *s, const char *text, size_t len, bool end_of_stream) {
    if (kara_text_stream_push(&s->ts, e->piece, text, len, end_of_stream, s->orel) >= 0)
        kara_batch_slot_finish(s, KARA_STOPPED, KARA_STOP_STRING);
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
    size_t hold = s->final ? 0 : kara_text_stream_holdback(&s->ts, s->orel);
    s->orel = s->ts.len - hold;
}

/* Does the prompt end inside a think block ("<think>" then white space)? */
bool kara_batch_prompt_opens_think(kara_engine *e, const int32_t *tokens, int32_t n) {
    return kara_prompt_opens_think(e->model, tokens, n, KARA_BATCH_TAIL_TOKENS, e->tail, e->piece_cap);
}

