/*
 * think_splitter.h - a streaming splitter that tags every byte of generated
 * text as thinking or answer. Tags may arrive split across tokens at any
 * byte; a possible partial tag is held back until the next bytes decide it.
 * The state is a few bytes: no allocation.
 */
#ifndef KR_THINK_SPLITTER_H
#define KR_THINK_SPLITTER_H

#include <stdbool.h>
#include <stddef.h>

#include "kara.h"

#define KR_THINK_OPEN "<think>"
#define KR_THINK_CLOSE "</think>"

/* Receives one run of bytes of one channel (len > 0). */
typedef void (*kr_think_emit_fn)(void *user, kara_channel channel, const char *text, size_t len);

typedef struct kr_think_splitter {
    bool in_think;  /* inside a think block: looking for "</think>" */
    bool keep_tags; /* pass the tags through (tagged THINK) instead of dropping them */
    int n_held;     /* bytes of a possible tag seen so far */
    char held[8];   /* those bytes (a proper prefix of the tag looked for) */
    int n_tags;     /* tags completed so far */
} kr_think_splitter;

/* start_in_think: the prompt already opened the block (DeepSeek-R1's
 * pre-filled "<think>\n"), so output starts as thinking with no tag. */
void kr_think_splitter_init(kr_think_splitter *s, bool start_in_think, bool keep_tags);

/* Feed bytes; complete runs go to emit, in order. */
void kr_think_splitter_feed(kr_think_splitter *s, const char *text, size_t len, kr_think_emit_fn emit, void *user);

/* End of stream: held bytes were not a tag after all and go out as text of
 * the current channel (an unclosed think block stays thinking). */
void kr_think_splitter_flush(kr_think_splitter *s, kr_think_emit_fn emit, void *user);

#endif /* KR_THINK_SPLITTER_H */
