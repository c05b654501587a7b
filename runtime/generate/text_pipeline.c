/* text_pipeline.c - see text_pipeline.h. */
#include "text_pipeline.h"

#include <string.h>

#include "status.h"
#include "think_splitter.h"

size_t kr_utf8_complete(const char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xc0) == 0x80) continue; /* continuation byte */
        size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

long kr_stop_find(const kr_stop_text *text, const size_t *text_len, int n_stop, const char *buf, size_t len,
                  size_t from) {
    long best = -1;
    for (int i = 0; i < n_stop; i++) {
        size_t m = text_len[i];
        for (size_t at = from; at + m <= len; at++) {
            if (best >= 0 && (long)at >= best) break;
            if (!memcmp(buf + at, text[i], m)) {
                best = (long)at;
                break;
            }
        }
    }
    return best;
}

size_t kr_stop_holdback(const kr_stop_text *text, const size_t *text_len, int n_stop, const char *buf, size_t len,
                        size_t start) {
    size_t avail = len - start, best = 0;
    for (int i = 0; i < n_stop; i++) {
        size_t m = text_len[i];
        for (size_t k = m - 1 < avail ? m - 1 : avail; k > best; k--)
            if (!memcmp(buf + len - k, text[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

bool kr_prompt_opens_think(const kara_model *m, const int32_t *tokens, int32_t n, int32_t tail_tokens, char *tail,
                           int32_t piece_cap) {
    size_t len = 0;
    for (int32_t i = n > tail_tokens ? n - tail_tokens : 0; i < n; i++) {
        int32_t k = 0;
        if (kara_token_to_piece(m, tokens[i], tail + len, piece_cap, true, &k) == KARA_OK) len += (size_t)k;
    }
    while (len > 0 && (tail[len - 1] == ' ' || tail[len - 1] == '\n' || tail[len - 1] == '\t' || tail[len - 1] == '\r'))
        len--;
    size_t tl = strlen(KR_THINK_OPEN);
    return len >= tl && !memcmp(tail + len - tl, KR_THINK_OPEN, tl);
}

static kara_status tokenize_close(const kara_model *m, const char *text, int32_t *ids, int32_t *n) {
    int32_t k = 0;
    *n = 0;
    if (!kara_model_has_tokenizer(m)) return KARA_OK; /* the budget is inert */
    kara_status st = kara_tokenize(m, text, -1, ids, KR_THINK_CLOSE_MAX_TOKENS, false, true, &k);
    /* the tokenizer's work buffers can run out of memory: that is NOMEM, not a bug (issue 19) */
    if (st == KARA_ERR_NOMEM) return kr_error_prefix(st, "cannot tokenize the think close tag");
    if (st != KARA_OK)
        return kr_set_error(KARA_ERR_INTERNAL, "cannot tokenize \"%s\" in %d tokens", text, KR_THINK_CLOSE_MAX_TOKENS);
    *n = k;
    return KARA_OK;
}

kara_status kr_think_close_init(kr_think_close *c, const kara_model *m) {
    kara_status st = tokenize_close(m, "\n" KR_THINK_CLOSE "\n\n", c->nl, &c->n_nl);
    if (!st) st = tokenize_close(m, KR_THINK_CLOSE "\n\n", c->plain, &c->n_plain);
    return st;
}

bool kr_think_force_next(kr_think_force *f, const kr_think_close *c, bool in_think, bool ends_nl, int32_t n_think,
                         int32_t budget, int32_t *tok) {
    if (f->left == 0 && in_think && budget >= 0 && n_think >= budget) {
        f->next = ends_nl ? c->plain : c->nl;
        f->left = ends_nl ? c->n_plain : c->n_nl;
    }
    if (f->left <= 0) return false;
    f->left--;
    *tok = *f->next++;
    return true;
}

void kr_text_stream_set_stops(kr_text_stream *ts, const char *const *stop, int n_stop) {
    ts->n_stop = n_stop;
    ts->stop_max = 0;
    for (int i = 0; i < n_stop; i++) {
        ts->stop_len[i] = strlen(stop[i]);
        memcpy(ts->stop[i], stop[i], ts->stop_len[i] + 1);
        if (ts->stop_len[i] > ts->stop_max) ts->stop_max = ts->stop_len[i];
    }
}

void kr_text_stream_reset(kr_text_stream *ts, bool in_think, bool split_thinking) {
    kr_think_splitter_init(&ts->split, in_think, !split_thinking);
    ts->answer_only = !split_thinking;
    ts->think_ends_nl = in_think; /* a pre-filled block ends "<think>\n" */
    ts->n_utf8 = 0;
    ts->len = 0;
    ts->overflow = false;
}

/* Splitter output lands in the buffer with one channel byte per text byte,
 * so runs of one channel can be handed out later. */
static void on_split(void *user, kara_channel channel, const char *text, size_t len) {
    kr_text_stream *ts = user;
    if (channel == KARA_CHANNEL_THINK) ts->think_ends_nl = text[len - 1] == '\n';
    if (ts->answer_only) channel = KARA_CHANNEL_ANSWER;
    if (ts->len + len > ts->cap) { /* cannot happen: cap covers a token, the holds and a stop suffix */
        ts->overflow = true;
        len = ts->cap - ts->len;
    }
    memcpy(ts->buf + ts->len, text, len);
    memset(ts->chan + ts->len, (int)channel, len);
    ts->len += len;
}

long kr_text_stream_push(kr_text_stream *ts, char *scratch, const char *text, size_t len, bool end_of_stream,
                         size_t from) {
    size_t before = ts->len;
    memmove(scratch + ts->n_utf8, text, len);
    memcpy(scratch, ts->utf8, (size_t)ts->n_utf8);
    size_t n = (size_t)ts->n_utf8 + len;
    size_t ok = end_of_stream ? n : kr_utf8_complete(scratch, n);
    ts->n_utf8 = (int)(n - ok);
    memcpy(ts->utf8, scratch + ok, (size_t)ts->n_utf8);
    kr_think_splitter_feed(&ts->split, scratch, ok, on_split, ts);
    if (end_of_stream) kr_think_splitter_flush(&ts->split, on_split, ts);
    if (ts->n_stop == 0 || ts->len == before) return -1;
    if (before > ts->stop_max - 1 + from) from = before - (ts->stop_max - 1);
    long at = kr_stop_find(ts->stop, ts->stop_len, ts->n_stop, ts->buf, ts->len, from);
    if (at >= 0) ts->len = (size_t)at;
    return at;
}

size_t kr_text_stream_holdback(const kr_text_stream *ts, size_t start) {
    return kr_stop_holdback(ts->stop, ts->stop_len, ts->n_stop, ts->buf, ts->len, start);
}

void kr_text_stream_drop(kr_text_stream *ts, size_t n) {
    memmove(ts->buf, ts->buf + n, ts->len - n);
    memmove(ts->chan, ts->chan + n, ts->len - n);
    ts->len -= n;
}

int32_t kr_longest_piece(const kara_model *m) {
    int32_t longest = 1, n_vocab = kara_model_n_vocab(m);
    for (int32_t t = 0; t < n_vocab; t++) {
        int32_t n = 0;
        kara_token_to_piece(m, t, NULL, 0, true, &n); /* KARA_ERR_BUFFER with the size needed */
        if (n > longest) longest = n;
    }
    return longest;
}
