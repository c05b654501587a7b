/* batch_text.c - the text of each request in the batch engine: token bytes
 * wait for whole UTF-8 characters, the think splitter tags thinking and
 * answer, stop strings are searched across token boundaries and a suffix
 * that could still become one is held back. Per slot, no allocation. */
#include <string.h>

#include "batch_engine.h"

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

/* Bytes of t[0..n) that end on a character boundary: an incomplete last
 * character waits for the next token (invalid bytes count as complete, so
 * they cannot hold the stream back). */
static size_t utf8_complete(const char *t, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)t[n - back];
        if ((c & 0xc0) == 0x80) continue;
        size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

/* Offset of the earliest complete stop string at or after from, or -1. */
static long find_stop(const kara_batch_slot *s, size_t from) {
    long best = -1;
    for (int i = 0; i < s->n_stop; i++) {
        size_t m = s->stop_len[i];
        for (size_t at = from; at + m <= s->olen; at++) {
            if (best >= 0 && (long)at >= best) break;
            if (!memcmp(s->obuf + at, s->stop_text[i], m)) {
                best = (long)at;
                break;
            }
        }
    }
    return best;
}

/* Bytes at the end that could still grow into a stop string. */
static size_t stop_holdback(const kara_batch_slot *s) {
    size_t avail = s->olen - s->orel, best = 0;
    for (int i = 0; i < s->n_stop; i++) {
        size_t m = s->stop_len[i];
        for (size_t k = m - 1 < avail ? m - 1 : avail; k > best; k--)
            if (!memcmp(s->obuf + s->olen - k, s->stop_text[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

/* Push bytes through the pipeline (text lives past the first 4 bytes of
 * e->piece, or is empty) and look for stop strings in what arrived. */
void kara_batch_text_push(kara_engine *e, kara_batch_slot *s, const char *text, size_t len, bool end_of_stream) {
    size_t before = s->olen;
    char *buf = e->piece;
    memmove(buf + s->n_utf8, text, len);
    memcpy(buf, s->utf8, (size_t)s->n_utf8);
    size_t n = (size_t)s->n_utf8 + len;
    size_t ok = end_of_stream ? n : utf8_complete(buf, n);
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
        long at = find_stop(s, from);
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
    s->orel = s->olen - (s->final ? 0 : stop_holdback(s));
}

/* Does the prompt end inside a think block ("<think>" then white space)? */
bool kara_batch_prompt_opens_think(kara_engine *e, const int32_t *tokens, int32_t n) {
    size_t len = 0;
    for (int32_t i = n > KARA_BATCH_TAIL_TOKENS ? n - KARA_BATCH_TAIL_TOKENS : 0; i < n; i++) {
        int32_t k = kara_token_to_piece(e->model, tokens[i], e->tail + len, e->piece_cap, true);
        if (k > 0) len += (size_t)k;
    }
    while (len > 0 && strchr(" \n\t\r", e->tail[len - 1])) len--;
    size_t tl = strlen(KARA_THINK_OPEN);
    return len >= tl && !memcmp(e->tail + len - tl, KARA_THINK_OPEN, tl);
}

