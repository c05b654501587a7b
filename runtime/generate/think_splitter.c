/* think_splitter.c - see think_splitter.h. Neither tag repeats its first
 * byte '<', so after a mismatch no suffix of the held bytes can start a
 * tag: the matcher only ever needs to re-test the mismatching byte. */
#include "think_splitter.h"

#include <string.h>

void kr_think_splitter_init(kr_think_splitter *s, bool start_in_think, bool keep_tags) {
    memset(s, 0, sizeof *s);
    s->in_think = start_in_think;
    s->keep_tags = keep_tags;
}

static const char *wanted_tag(const kr_think_splitter *s) { return s->in_think ? KR_THINK_CLOSE : KR_THINK_OPEN; }

static kara_channel channel_of(const kr_think_splitter *s) {
    return s->in_think ? KARA_CHANNEL_THINK : KARA_CHANNEL_ANSWER;
}

static void emit_held(kr_think_splitter *s, kr_think_emit_fn emit, void *user) {
    if (s->n_held > 0) emit(user, channel_of(s), s->held, (size_t)s->n_held);
    s->n_held = 0;
}

void kr_think_splitter_feed(kr_think_splitter *s, const char *text, size_t len, kr_think_emit_fn emit, void *user) {
    size_t run = 0; /* start of the bytes passed through unchanged, not yet emitted */
    for (size_t i = 0; i < len; i++) {
        const char *tag = wanted_tag(s);
        size_t tag_len = strlen(tag);
        char c = text[i];
        if (s->n_held > 0) {
            if (c == tag[s->n_held]) {
                s->held[s->n_held++] = c;
                if ((size_t)s->n_held == tag_len) {
                    /* a whole tag: switch channels; the tag itself is markup */
                    if (s->keep_tags) emit(user, KARA_CHANNEL_THINK, tag, tag_len);
                    s->n_held = 0;
                    s->in_think = !s->in_think;
                    s->n_tags++;
                }
                run = i + 1;
                continue;
            }
            emit_held(s, emit, user); /* not a tag after all */
            run = i;
        }
        if (c == tag[0]) {
            if (i > run) emit(user, channel_of(s), text + run, i - run);
            s->held[0] = c;
            s->n_held = 1;
            run = i + 1;
        }
    }
    if (s->n_held == 0 && len > run) emit(user, channel_of(s), text + run, len - run);
}

void kr_think_splitter_flush(kr_think_splitter *s, kr_think_emit_fn emit, void *user) { emit_held(s, emit, user); }
