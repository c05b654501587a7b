/* text_pipeline.h - the pieces of turning generated tokens into released
 * text that the single-sequence generator (generate.c) and the batch engine
 * (batch_text.c) share: waiting for whole UTF-8 characters, finding stop
 * strings across token boundaries and holding back a suffix that could
 * still become one, and telling whether a prompt ends inside <think>. */
#ifndef KR_TEXT_PIPELINE_H
#define KR_TEXT_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "think_splitter.h"

#define KR_STOP_MAX_LEN 255
typedef char kr_stop_text[KR_STOP_MAX_LEN + 1];

/* Bytes of s[0..n) that end on a UTF-8 character boundary: an incomplete
 * trailing character waits for the next token. Invalid bytes count as
 * complete so they cannot hold the stream back. */
size_t kr_utf8_complete(const char *s, size_t n);
/* Offset of the earliest complete stop string in buf[from..len), or -1. */
long kr_stop_find(const kr_stop_text *text, const size_t *text_len, int n_stop, const char *buf, size_t len,
                  size_t from);
/* Length of the longest suffix of buf[start..len) that is a proper prefix
 * of a stop string: it must wait for the next bytes. */
size_t kr_stop_holdback(const kr_stop_text *text, const size_t *text_len, int n_stop, const char *buf, size_t len,
                        size_t start);
/* Does the prompt end inside a think block ("<think>" then only white
 * space)? Decided on the text of its last tail_tokens tokens, rendered into
 * tail (room for tail_tokens * piece_cap bytes). */
bool kr_prompt_opens_think(const kara_model *m, const int32_t *tokens, int32_t n, int32_t tail_tokens, char *tail,
                           int32_t piece_cap);

/* The text of one generation on its way out: token bytes wait for whole
 * UTF-8 characters, the think splitter tags each byte thinking or answer,
 * and stop strings are found across token boundaries. Both the generator
 * and each batch slot own one; buf/chan (cap bytes each, one channel byte
 * per text byte) are the owner's, allocated once. */
typedef struct kr_text_stream {
    kr_stop_text stop[KARA_MAX_STOP_STRINGS];
    size_t stop_len[KARA_MAX_STOP_STRINGS];
    int n_stop;
    size_t stop_max; /* longest stop string */
    kr_think_splitter split;
    bool answer_only;   /* thinking is not split off: every byte is answer */
    bool think_ends_nl; /* the thinking text so far ends with '\n' */
    char utf8[4];       /* an incomplete UTF-8 character held back */
    int n_utf8;
    char *buf;
    uint8_t *chan;
    size_t cap, len;
    bool overflow; /* more than cap bytes (a sizing bug, reported by the owner) */
} kr_text_stream;

/* Copy the stop strings (each 1..KR_STOP_MAX_LEN bytes, checked by the
 * caller). */
void kr_text_stream_set_stops(kr_text_stream *ts, const char *const *stop, int n_stop);
/* Start a new generation: empty buffer, nothing held, the splitter inside
 * a think block when in_think. Keeps stops and buffers. */
void kr_text_stream_reset(kr_text_stream *ts, bool in_think, bool split_thinking);
/* Push len bytes of text through (scratch holds at least len + 4 bytes and
 * may overlap text from its 4th byte on). end_of_stream releases what is
 * held. Stop strings are searched from max(from, the new text - the
 * longest stop + 1); returns the offset of one found (the buffer is cut
 * there) or -1. */
long kr_text_stream_push(kr_text_stream *ts, char *scratch, const char *text, size_t len, bool end_of_stream,
                         size_t from);
/* Bytes at the end of buf[start..len) that could still become a stop
 * string and must wait. */
size_t kr_text_stream_holdback(const kr_text_stream *ts, size_t start);
/* Forget the first n bytes (already handed out). */
void kr_text_stream_drop(kr_text_stream *ts, size_t n);

/* The longest text any token of m renders to: the size of a piece buffer
 * that never needs to grow. */
int32_t kr_longest_piece(const kara_model *m);

/* The reasoning budget's forced close: once a sequence has thought for its
 * budget, it is made to write "</think>\n\n" (after a '\n' unless the
 * thinking already ends with one) instead of sampling. */
#define KR_THINK_CLOSE_MAX_TOKENS 32
typedef struct kr_think_close {
    int32_t nl[KR_THINK_CLOSE_MAX_TOKENS], n_nl;       /* "\n</think>\n\n" */
    int32_t plain[KR_THINK_CLOSE_MAX_TOKENS], n_plain; /* "</think>\n\n" */
} kr_think_close;
/* Tokenizes both closes once per model. A model without a tokenizer gets
 * empty closes (budgets then have no effect). */
kara_status kr_think_close_init(kr_think_close *c, const kara_model *m);

/* Per sequence: the rest of a close under way. Zero-initialize to reset. */
typedef struct kr_think_force {
    const int32_t *next;
    int32_t left;
} kr_think_force;
/* True with *tok set when this step's token is forced: a close is under
 * way, or the sequence is thinking (in_think) and n_think has reached a
 * budget >= 0, which starts one (ends_nl: the thinking so far ends with
 * '\n'). False when the token is to be sampled. */
bool kr_think_force_next(kr_think_force *f, const kr_think_close *c, bool in_think, bool ends_nl, int32_t n_think,
                         int32_t budget, int32_t *tok);

#endif
