/* test_line_editor.c - the pure layers of kara chat's line editor
 * (tools/common/line_editor.c): key decoding (control bytes, CSI and SS3
 * sequences with modifiers, partial sequences waiting for more input, "\r\n"
 * as one Enter, UTF-8 and invalid bytes), edits by code point, the kill
 * keys, Ctrl-D, and the history (bounded, no repeat of the newest, the line
 * being typed kept while browsing). No terminal is touched. */
#include <string.h>

#include "line_editor.h"
#include "test_util.h"

/* Feed bytes as keys into s (at_end: all input is there); returns the last result. */
static kr_le_result feed(kr_le_state *s, const char *bytes) {
    const unsigned char *b = (const unsigned char *)bytes;
    size_t n = strlen(bytes);
    kr_le_result r = KR_LE_CONTINUE;
    while (n > 0) {
        kr_le_key k;
        size_t used = kr_le_decode_key(b, n, true, &k);
        if (used == 0) break;
        r = kr_le_apply(s, &k);
        b += used;
        n -= used;
    }
    return r;
}

static void expect_line(kr_le_state *s, const char *bytes, const char *want, size_t want_cur) {
    kr_le_reset(s);
    feed(s, bytes);
    CHECK_MSG(!strcmp(s->buf, want), "keys '%s': line '%s', want '%s'", bytes, s->buf, want);
    CHECK_MSG(s->cur == want_cur, "keys '%s': cursor %zu, want %zu", bytes, s->cur, want_cur);
    CHECK(s->len == strlen(s->buf));
}

static kr_le_key_kind kind_of(const char *bytes, bool at_end, size_t *used) {
    kr_le_key k;
    *used = kr_le_decode_key((const unsigned char *)bytes, strlen(bytes), at_end, &k);
    return k.kind;
}

static void test_decode(void) {
    static const struct {
        const char *bytes;
        kr_le_key_kind kind;
        size_t used;
    } cases[] = {
        {"a", KR_KEY_TEXT, 1},
        {"\r", KR_KEY_ENTER, 1},
        {"\r\nx", KR_KEY_ENTER, 2},
        {"\n", KR_KEY_ENTER, 1},
        {"\x1b[A", KR_KEY_UP, 3},
        {"\x1b[B", KR_KEY_DOWN, 3},
        {"\x1b[C", KR_KEY_RIGHT, 3},
        {"\x1b[D", KR_KEY_LEFT, 3},
        {"\x1bOA", KR_KEY_UP, 3},
        {"\x1bOH", KR_KEY_HOME, 3},
        {"\x1b[H", KR_KEY_HOME, 3},
        {"\x1b[F", KR_KEY_END, 3},
        {"\x1b[1~", KR_KEY_HOME, 4},
        {"\x1b[4~", KR_KEY_END, 4},
        {"\x1b[3~", KR_KEY_DELETE, 4},
        {"\x1b[1;5D", KR_KEY_WORD_LEFT, 6},
        {"\x1b[1;3C", KR_KEY_WORD_RIGHT, 6},
        {"\x1b[1;2C", KR_KEY_RIGHT, 6},
        {"\x1b[200~", KR_KEY_NONE, 6},
        {"\x1b"
         "b",
         KR_KEY_WORD_LEFT, 2},
        {"\x1bx", KR_KEY_NONE, 2},
        {"\x01", KR_KEY_HOME, 1},
        {"\x05", KR_KEY_END, 1},
        {"\x7f", KR_KEY_BACKSPACE, 1},
        {"\x08", KR_KEY_BACKSPACE, 1},
        {"\x0b", KR_KEY_KILL_END, 1},
        {"\x0c", KR_KEY_CLEAR, 1},
        {"\x15", KR_KEY_KILL_LINE, 1},
        {"\x17", KR_KEY_KILL_WORD, 1},
        {"\x04", KR_KEY_CTRL_D, 1},
        {"\x10", KR_KEY_UP, 1},
        {"\x0e", KR_KEY_DOWN, 1},
        {"\x03", KR_KEY_NONE, 1},
        {"\x1a", KR_KEY_NONE, 1},
        {"\xc3\xb1", KR_KEY_TEXT, 2},
        {"\xe2\x82\xac", KR_KEY_TEXT, 3},
        {"\xf0\x9f\x98\x80", KR_KEY_TEXT, 4},
        {"\x80", KR_KEY_NONE, 1},
        {"\xc3x", KR_KEY_NONE, 1},
        {"\xff", KR_KEY_NONE, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t used;
        kr_le_key_kind kind = kind_of(cases[i].bytes, false, &used);
        CHECK_MSG(kind == cases[i].kind && used == cases[i].used, "case %zu: kind %d used %zu, want %d %zu", i,
                  (int)kind, used, (int)cases[i].kind, cases[i].used);
    }
    /* partial sequences wait for more input unless none is coming */
    static const char *partial[] = {"\x1b", "\x1b[", "\x1b[1;", "\x1bO", "\xe2\x82", "\xf0"};
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        size_t used;
        kind_of(partial[i], false, &used);
        CHECK_MSG(used == 0, "partial %zu: used %zu, want 0 (wait)", i, used);
        kr_le_key_kind kind = kind_of(partial[i], true, &used);
        CHECK_MSG(kind == KR_KEY_NONE && used == strlen(partial[i]), "partial %zu at end: kind %d used %zu", i,
                  (int)kind, used);
    }
    kr_le_key k;
    CHECK(kr_le_decode_key((const unsigned char *)"\xc3\xb1", 2, false, &k) == 2 && k.len == 2 &&
          !memcmp(k.text, "\xc3\xb1", 2));
}

static void test_edit(void) {
    kr_le_state s;
    CHECK(kr_le_state_init(&s, 0));
    expect_line(&s, "hello", "hello", 5);
    expect_line(&s,
                "helo\x1b[D"
                "l",
                "hello", 4);                                     /* insert after Left */
    expect_line(&s, "world\x01hello \x05!", "hello world!", 12); /* Ctrl-A, Ctrl-E */
    expect_line(&s, "abc\x1b[H\x1b[C\x1b[3~", "ac", 1);          /* Home, Right, Delete */
    expect_line(&s, "abc\x7f\x7f", "a", 1);                      /* Backspace */
    expect_line(&s, "\x7f\x1b[3~\x1b[D", "", 0);                 /* nothing to delete or pass */
    expect_line(&s,
                "a\xc3\xb1"
                "b\x1b[DX\x1b[D\x1b[DY",
                "aY\xc3\xb1Xb", 2);                                           /* Left by code point */
    expect_line(&s, "\xe2\x82\xac\xe2\x82\xac\x7f", "\xe2\x82\xac", 3);       /* Backspace a whole code point */
    expect_line(&s, "\xf0\x9f\x98\x80z\x01\x1b[3~", "z", 0);                  /* Delete a 4-byte one */
    expect_line(&s, "\xc3\xb1\x1b[C\x1b[C", "\xc3\xb1", 2);                   /* Right stops at the end */
    expect_line(&s, "one two  \x17", "one ", 4);                              /* Ctrl-W: spaces then the word */
    expect_line(&s, "one two\x1b[D\x1b[D\x15", "wo", 0);                      /* Ctrl-U: start to cursor */
    expect_line(&s, "one two\x01\x1b[C\x0b", "o", 1);                         /* Ctrl-K: cursor to end */
    expect_line(&s, "one two three\x1b[1;5D\x1b[1;5D_", "one _two three", 5); /* Ctrl-Left by word */
    expect_line(&s, "ab\x02\x02\x06x", "axb", 2);                             /* Ctrl-B, Ctrl-F */
    expect_line(&s, "a\tb", "a    b", 6);                                     /* Tab: four spaces */
    expect_line(&s, "a\x03\x1a\x1b[200~b", "ab", 2);                          /* control bytes are never text */

    kr_le_reset(&s);
    CHECK(feed(&s, "\x04") == KR_LE_EOF); /* Ctrl-D on an empty line */
    kr_le_reset(&s);
    CHECK(feed(&s, "ab\x01\x04") == KR_LE_CONTINUE && !strcmp(s.buf, "b")); /* else Delete */
    kr_le_reset(&s);
    CHECK(feed(&s, "ab\x0c") == KR_LE_CLEAR_SCREEN && !strcmp(s.buf, "ab")); /* Ctrl-L keeps the line */
    kr_le_reset(&s);
    CHECK(feed(&s, "ab\r") == KR_LE_SUBMIT && !strcmp(s.buf, "ab"));
    kr_le_state_free(&s);
}

static void test_history(void) {
    kr_le_state s;
    CHECK(kr_le_state_init(&s, 3));
    CHECK(kr_le_history_add(&s, "one"));
    CHECK(kr_le_history_add(&s, "one")); /* the newest again: not added */
    CHECK(kr_le_history_add(&s, ""));    /* empty: not added */
    CHECK_EQ_INT(s.n_hist, 1);
    CHECK(kr_le_history_add(&s, "two"));
    CHECK(kr_le_history_add(&s, "one")); /* not the newest: added */
    CHECK_EQ_INT(s.n_hist, 3);
    CHECK(kr_le_history_add(&s, "three")); /* full: the oldest goes */
    CHECK_EQ_INT(s.n_hist, 3);
    CHECK(!strcmp(s.hist[0], "two") && !strcmp(s.hist[2], "three"));

    kr_le_reset(&s);
    feed(&s, "draft");
    feed(&s, "\x1b[A");
    CHECK(!strcmp(s.buf, "three") && s.cur == 5);
    feed(&s, "\x1b[A\x1b[A\x1b[A"); /* stops at the oldest */
    CHECK(!strcmp(s.buf, "two"));
    feed(&s, "\x1b[B");
    CHECK(!strcmp(s.buf, "one"));
    feed(&s, "\x1b[B\x1b[B\x1b[B"); /* back to the line being typed, and no further */
    CHECK(!strcmp(s.buf, "draft") && s.cur == 5);
    feed(&s, "\x10x"); /* Ctrl-P, then edit the recalled line */
    CHECK(!strcmp(s.buf, "threex"));
    kr_le_reset(&s);
    CHECK(s.buf[0] == '\0' && s.hidx == s.n_hist);
    kr_le_state_free(&s);

    kr_le_state e;
    CHECK(kr_le_state_init(&e, 0));
    feed(&e, "\x1b[A\x1b[Bx"); /* no history: Up and Down change nothing */
    CHECK(!strcmp(e.buf, "x"));
    kr_le_state_free(&e);
}

static void test_count(void) {
    CHECK_EQ_INT(kr_le_utf8_count("a\xc3\xb1\xe2\x82\xac\xf0\x9f\x98\x80", 10), 4);
    CHECK_EQ_INT(kr_le_utf8_count("", 0), 0);
}

int main(void) {
    test_decode();
    test_edit();
    test_history();
    test_count();
    return kr_test_finish();
}
