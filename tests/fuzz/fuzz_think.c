/* fuzz_think.c - the streaming think splitter on arbitrary text cut into
 * arbitrary pieces (tags may split at any byte). The first byte gives the
 * flags and the cut points' seed. Whatever the cuts, the tagged output is
 * the same as feeding the text whole; with the tags kept, the output joined
 * is the input. */
#include <string.h>

#include "fuzz.h"
#include "think_splitter.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

typedef struct sink {
    char *buf;
    size_t n;
    kara_channel ch[1 << 14];
} sink;

/* Every byte with its channel. */
static void collect(void *user, kara_channel channel, const char *text, size_t len) {
    sink *s = user;
    FUZZ_CHECK(len > 0, "an empty run");
    for (size_t i = 0; i < len && s->n < sizeof s->ch / sizeof s->ch[0]; i++) {
        s->buf[s->n] = text[i];
        s->ch[s->n++] = channel;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    bool start_in_think = data[0] & 1, keep_tags = data[0] & 2;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    static sink whole, cut;
    static char wb[1 << 14], cb[1 << 14];
    whole.buf = wb;
    cut.buf = cb;
    whole.n = cut.n = 0;
    kr_think_splitter s;
    kr_think_splitter_init(&s, start_in_think, keep_tags);
    kr_think_splitter_feed(&s, text, len, collect, &whole);
    kr_think_splitter_flush(&s, collect, &whole);
    kr_think_splitter_init(&s, start_in_think, keep_tags);
    uint32_t r = data[0] * 2654435761u + 1;
    for (size_t i = 0; i < len;) {
        r = r * 1103515245u + 12345u;
        size_t k = 1 + (r >> 16) % 9;
        if (k > len - i) k = len - i;
        kr_think_splitter_feed(&s, text + i, k, collect, &cut);
        i += k;
    }
    kr_think_splitter_flush(&s, collect, &cut);
    FUZZ_CHECK(whole.n == cut.n && !memcmp(whole.buf, cut.buf, whole.n) &&
                   !memcmp(whole.ch, cut.ch, whole.n * sizeof whole.ch[0]),
               "cut into pieces: %zu bytes out, whole: %zu", cut.n, whole.n);
    if (keep_tags)
        FUZZ_CHECK(whole.n == len && !memcmp(whole.buf, text, len), "tags kept: the output is not the input");
    return 0;
}
