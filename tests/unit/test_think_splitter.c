/* test_think_splitter.c - the streaming think/answer splitter fed every
 * possible split of its input (into two and three parts, byte by byte, and
 * random cuts): the tagged output must not depend on where the input was
 * cut. Covers tags split at any byte, partial tags at the end ("<thi",
 * "</think" without '>'), near misses, DeepSeek-R1's pre-filled block (no
 * opening tag), a missing closing tag, several blocks, and keep_tags. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "think_splitter.h"

/* The output as one string with the channel marked: answer bytes as they
 * are, thinking bytes wrapped in [T:...] per run after merging runs. */
typedef struct collected {
    char text[512];
    kara_channel chan[512];
    size_t n;
    int n_calls;
    bool empty_run;
} collected;

static void collect(void *user, kara_channel channel, const char *text, size_t len) {
    collected *c = user;
    c->n_calls++;
    if (len == 0) c->empty_run = true;
    for (size_t i = 0; i < len && c->n < sizeof c->text; i++) {
        c->text[c->n] = text[i];
        c->chan[c->n] = channel;
        c->n++;
    }
}

/* Render as "A:abc|T:x|A:\n\nans" (runs of one channel merged). */
static void describe(const collected *c, char *out, size_t size) {
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        if (i == 0 || c->chan[i] != c->chan[i - 1])
            o += (size_t)snprintf(out + o, size - o, "%s%c:", i ? "|" : "",
                                  c->chan[i] == KARA_CHANNEL_THINK ? 'T' : 'A');
        if (o + 1 < size) {
            out[o++] = c->text[i];
            out[o] = '\0';
        }
    }
}

/* Feed input cut at the given offsets (ascending), then flush. */
static void run_split(const char *input, const size_t *cuts, int n_cuts, bool start_in_think, bool keep_tags, char *out,
                      size_t size, collected *c) {
    kr_think_splitter s;
    kr_think_splitter_init(&s, start_in_think, keep_tags);
    memset(c, 0, sizeof *c);
    size_t len = strlen(input), prev = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        kr_think_splitter_feed(&s, input + prev, end - prev, collect, c);
        CHECK(s.n_held >= 0 && s.n_held < 8);
        prev = end;
    }
    kr_think_splitter_flush(&s, collect, c);
    CHECK(s.n_held == 0);
    describe(c, out, size);
}

typedef struct split_case {
    const char *input;
    bool start_in_think, keep_tags;
    const char *expected;
} split_case;

static const split_case cases[] = {
    {"abc<think>x</think>\n\nans", false, false, "A:abc|T:x|A:\n\nans"},
    {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, false, "T:\nLet me see.\n|A:\n\nThe answer is 4."},
    /* DeepSeek-R1: the template pre-filled "<think>\n", the output has no opening tag */
    {"Okay, 2+2.\n</think>\n\n**4**", true, false, "T:Okay, 2+2.\n|A:\n\n**4**"},
    /* missing closing tag at the end of the stream: all of it is thinking */
    {"<think>still thinking when the tokens ran out", false, false, "T:still thinking when the tokens ran out"},
    {"pre-filled and never closed", true, false, "T:pre-filled and never closed"},
    /* partial tags at the end are plain text of the current channel */
    {"hello <thi", false, false, "A:hello <thi"},
    {"<think>abc</think", false, false, "T:abc</think"},
    {"<think>abc</", false, false, "T:abc</"},
    {"<", false, false, "A:<"},
    /* near misses and tag-like text */
    {"a<b<thinx<think>y", false, false, "A:a<b<thinx|T:y"},
    {"<<think>>", false, false, "A:<|T:>"},
    {"<think><think></think>", false, false, "T:<think>"},
    {"</think>stray close in an answer", false, false, "A:</think>stray close in an answer"},
    {"x</think></think>y", true, false, "T:x|A:</think>y"},
    {"<think></think>", false, false, ""},
    {"<THINK>not a tag</THINK>", false, false, "A:<THINK>not a tag</THINK>"},
    /* several blocks */
    {"<think>a</think>b<think>c</think>d", false, false, "T:a|A:b|T:c|A:d"},
    /* UTF-8 passes through untouched, tags next to multi-byte characters */
    {"\xe2\x9c\x93<think>\xc3\xa9</think>\xf0\x9f\x98\x80", false, false,
     "A:\xe2\x9c\x93|T:\xc3\xa9|A:\xf0\x9f\x98\x80"},
    /* keep_tags: the tags stay in the text, tagged as thinking */
    {"a<think>b</think>c", false, true, "A:a|T:<think>b</think>|A:c"},
    {"r\n</think>\n\nx", true, true, "T:r\n</think>|A:\n\nx"},
};

static void test_every_split(void) {
    char got[1024];
    collected c;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const split_case *sc = &cases[k];
        size_t len = strlen(sc->input);
        int failures = 0;
        /* whole, then every cut into two and three parts */
        run_split(sc->input, NULL, 0, sc->start_in_think, sc->keep_tags, got, sizeof got, &c);
        CHECK_MSG(!strcmp(got, sc->expected), "'%s' whole: got '%s', expected '%s'", sc->input, got, sc->expected);
        CHECK_MSG(!c.empty_run, "'%s': an empty run was emitted", sc->input);
        for (size_t i = 0; i <= len; i++)
            for (size_t j = i; j <= len; j++) {
                size_t cuts[2] = {i, j};
                run_split(sc->input, cuts, 2, sc->start_in_think, sc->keep_tags, got, sizeof got, &c);
                if ((strcmp(got, sc->expected) != 0 || c.empty_run) && failures++ < 3)
                    CHECK_MSG(false, "'%s' cut at %zu,%zu: got '%s', expected '%s'", sc->input, i, j, got,
                              sc->expected);
            }
        /* byte by byte */
        size_t every[512];
        for (size_t i = 0; i < len; i++) every[i] = i + 1;
        run_split(sc->input, every, (int)(len ? len - 1 : 0), sc->start_in_think, sc->keep_tags, got, sizeof got, &c);
        CHECK_MSG(!strcmp(got, sc->expected), "'%s' byte by byte: got '%s'", sc->input, got);
        CHECK_MSG(failures == 0, "'%s': %d splits into three parts disagreed", sc->input, failures);
    }
}

/* Random cuts of a long stream built from the cases. */
static void test_random_splits(void) {
    static const char *input = "intro <think>first thought < not a tag </thin no</think>\n\nanswer one <th"
                               "ink>second</think>\nanswer two </think> <thin";
    const char *expected = "A:intro |T:first thought < not a tag </thin no|A:\n\nanswer one |T:second|A:\nanswer two "
                           "</think> <thin";
    char got[1024];
    collected c;
    size_t len = strlen(input);
    unsigned seed = 12345;
    int bad = 0;
    for (int trial = 0; trial < 2000; trial++) {
        size_t cuts[32];
        int n = 0;
        size_t at = 0;
        while (n < 32) {
            seed = seed * 1103515245u + 12345u;
            at += 1 + (seed >> 16) % 9;
            if (at >= len) break;
            cuts[n++] = at;
        }
        run_split(input, cuts, n, false, false, got, sizeof got, &c);
        if (strcmp(got, expected) != 0 && bad++ < 3) CHECK_MSG(false, "trial %d: got '%s'", trial, got);
    }
    CHECK_EQ_INT(bad, 0);
}

/* Nothing that could still be a tag leaves before the next bytes decide. */
static void test_hold_back(void) {
    kr_think_splitter s;
    collected c = {0};
    char got[256];
    kr_think_splitter_init(&s, false, false);
    kr_think_splitter_feed(&s, "abc<thi", 7, collect, &c);
    describe(&c, got, sizeof got);
    CHECK_MSG(!strcmp(got, "A:abc"), "held back: got '%s'", got);
    CHECK_EQ_INT(s.n_held, 4);
    kr_think_splitter_feed(&s, "nk>", 3, collect, &c);
    CHECK(s.in_think);
    kr_think_splitter_feed(&s, "hm</th", 6, collect, &c);
    describe(&c, got, sizeof got);
    CHECK_MSG(!strcmp(got, "A:abc|T:hm"), "got '%s'", got);
    kr_think_splitter_feed(&s, "ank", 3, collect, &c); /* "</tha": not a tag */
    describe(&c, got, sizeof got);
    CHECK_MSG(!strcmp(got, "A:abc|T:hm</thank"), "got '%s'", got);
    CHECK(s.in_think);
    CHECK_EQ_INT(s.n_tags, 1);
}

int main(void) {
    test_every_split();
    test_random_splits();
    test_hold_back();
    return kr_test_finish();
}
