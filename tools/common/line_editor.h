/* line_editor.h - a small line editor for interactive commands (kara chat):
 * raw terminal mode, cursor movement by code point, in-memory history,
 * Ctrl-L, and type-ahead kept for the next prompt. Written for Kara (no
 * libedit/readline: a static build with no terminfo; docs/CHAT.md).
 *
 * Three layers, the first two pure (no I/O, tested by
 * tests/unit/test_line_editor.c):
 *   kr_le_decode_key  bytes -> one key (escape sequences, UTF-8)
 *   kr_le_apply       key -> an edit of a kr_le_state (buffer, history)
 *   kr_line_editor    the terminal: raw mode, reading, redrawing. */
#ifndef KR_LINE_EDITOR_H
#define KR_LINE_EDITOR_H

#include <stdbool.h>
#include <stddef.h>

#include "console.h" /* kr_line_status */

/* ---- keys ------------------------------------------------------------- */

typedef enum kr_le_key_kind {
    KR_KEY_NONE = 0, /* an unknown sequence or a control byte: ignored */
    KR_KEY_TEXT,     /* one UTF-8 code point, in text[0..len) */
    KR_KEY_ENTER,
    KR_KEY_LEFT,
    KR_KEY_RIGHT,
    KR_KEY_WORD_LEFT,  /* Alt-b, Ctrl-Left */
    KR_KEY_WORD_RIGHT, /* Alt-f, Ctrl-Right */
    KR_KEY_HOME,       /* also Ctrl-A */
    KR_KEY_END,        /* also Ctrl-E */
    KR_KEY_UP,         /* also Ctrl-P */
    KR_KEY_DOWN,       /* also Ctrl-N */
    KR_KEY_BACKSPACE,  /* DEL (0x7f) or Ctrl-H */
    KR_KEY_DELETE,     /* ESC [ 3 ~ */
    KR_KEY_KILL_LINE,  /* Ctrl-U: line start to the cursor (all of it at the end) */
    KR_KEY_KILL_END,   /* Ctrl-K: cursor to the end */
    KR_KEY_KILL_WORD,  /* Ctrl-W: the word before the cursor */
    KR_KEY_CLEAR,      /* Ctrl-L */
    KR_KEY_CTRL_D,     /* EOF on an empty line, else Delete */
    KR_KEY_TAB         /* inserts four spaces (a tab would break the column count) */
} kr_le_key_kind;

typedef struct kr_le_key {
    kr_le_key_kind kind;
    char text[4];
    int len;
} kr_le_key;

/* Decode the key at the front of b[0..n). Returns the bytes it takes, or 0
 * when b holds only the start of a sequence: more input may complete it.
 * With at_end (no more input is coming soon) a partial sequence is taken
 * as it stands (a lone ESC, a cut UTF-8 sequence: KR_KEY_NONE). A "\r\n"
 * pair is one Enter. n must be > 0. */
size_t kr_le_decode_key(const unsigned char *b, size_t n, bool at_end, kr_le_key *out);

/* ---- the edit buffer and history -------------------------------------- */

#define KR_LE_HISTORY_MAX 200

typedef struct kr_le_state {
    char *buf; /* the line, UTF-8, NUL-terminated */
    size_t len, cap;
    size_t cur;  /* the cursor: a byte offset on a code point boundary */
    char **hist; /* oldest first, at most hist_max */
    int n_hist, hist_max;
    int hidx;    /* entry shown while browsing; n_hist = the line being typed */
    char *saved; /* the line being typed, kept while browsing the history */
} kr_le_state;

typedef enum kr_le_result {
    KR_LE_CONTINUE = 0, /* the buffer may have changed: redraw */
    KR_LE_SUBMIT,       /* Enter: the line is buf */
    KR_LE_EOF,          /* Ctrl-D on an empty line */
    KR_LE_CLEAR_SCREEN, /* Ctrl-L: clear, then redraw */
    KR_LE_NOMEM
} kr_le_result;

/* hist_max <= 0: KR_LE_HISTORY_MAX. Returns false when out of memory. */
bool kr_le_state_init(kr_le_state *s, int hist_max);
void kr_le_state_free(kr_le_state *s);
/* Empty the buffer and leave history browsing (a new line starts). */
void kr_le_reset(kr_le_state *s);
kr_le_result kr_le_apply(kr_le_state *s, const kr_le_key *k);
/* Add a line to the history unless it is empty or equals the newest entry;
 * the oldest entry goes when the history is full. False: out of memory. */
bool kr_le_history_add(kr_le_state *s, const char *line);
/* Code points in buf[0..n) (the editor counts one column per code point). */
size_t kr_le_utf8_count(const char *buf, size_t n);

/* ---- the terminal ----------------------------------------------------- */

/* Raw mode on fd (a terminal): no echo, no canonical line, no CR->NL, no
 * flow control, output processing and Ctrl-C's SIGINT kept (Ctrl-Z and
 * Ctrl-\ made plain bytes so the process is never stopped or killed with
 * the terminal raw). The first call saves the mode to go back to. */
bool kr_term_raw(int fd);
/* Back to the saved mode, if raw. Async-signal-safe (tcsetattr only), so
 * signal handlers call it before _exit; registered with atexit too. */
void kr_term_restore(void);

typedef struct kr_line_editor {
    int in_fd, out_fd;
    bool color; /* escape sequences allowed on out_fd (else none at all) */
    kr_le_state st;
    unsigned char in[512]; /* bytes read and not yet decoded: type-ahead */
    size_t in_pos, in_len;
    bool active;        /* a prompt is on the screen with st.buf after it */
    const char *prompt; /* plain text; bold when color */
    size_t last_cols;   /* columns of text the last redraw wrote after the prompt */
    char *out;          /* the redraw, built then written at once */
    size_t out_len, out_cap;
    bool eof;
    bool skip_lf; /* the last Enter was a '\r': a '\n' right after it is the same Enter */
} kr_line_editor;

bool kr_line_editor_init(kr_line_editor *e, int in_fd, int out_fd, bool color);
void kr_line_editor_free(kr_line_editor *e);
/* Show prompt and edit a line in raw mode (entered on the first call; left
 * by kr_term_restore). KR_LINE_OK: *line (malloc'd, grown as needed, as
 * kr_read_line) holds it. KR_LINE_INTERRUPTED: a signal arrived; the line
 * being edited is kept and the next call goes on with it. KR_LINE_EOF:
 * Ctrl-D on an empty line or end of input. Bytes typed before the call
 * (during a reply) are edited first. */
kr_line_status kr_le_read(kr_line_editor *e, const char *prompt, char **line, size_t *cap);

#endif
