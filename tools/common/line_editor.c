/* line_editor.c - see line_editor.h. One row per line: a line wider than
 * the terminal scrolls sideways, so a redraw never has to move up a row
 * and needs no escape sequence at all (NO_COLOR writes none). */
#include "line_editor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define ESC_WAIT_MS 40 /* how long a lone ESC waits for the rest of a sequence */
#define TAB_SPACES "    "

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

static size_t key(kr_le_key *k, kr_le_key_kind kind, size_t used) {
    k->kind = kind;
    return used;
}

/* CSI: ESC [ params intermediates final. Modifiers (";5" Ctrl, ";3" Alt)
 * on Left/Right move by word; other modified keys act unmodified. */
static size_t decode_csi(const unsigned char *b, size_t n, bool at_end, kr_le_key *k) {
    size_t i = 2;
    while (i < n && b[i] >= 0x30 && b[i] <= 0x3f) i++;
    while (i < n && b[i] >= 0x20 && b[i] <= 0x2f) i++;
    if (i == n) return at_end ? key(k, KR_KEY_NONE, n) : 0;
    unsigned char fin = b[i];
    if (fin < 0x40 || fin > 0x7e) return key(k, KR_KEY_NONE, i); /* malformed: drop what came before */
    size_t used = i + 1;
    int p1 = 0;
    size_t j = 2;
    while (j < i && b[j] >= '0' && b[j] <= '9') p1 = p1 * 10 + (b[j++] - '0');
    bool word = false;
    if (j < i && b[j] == ';') {
        int mod = 0;
        for (j++; j < i && b[j] >= '0' && b[j] <= '9'; j++) mod = mod * 10 + (b[j] - '0');
        word = mod == 3 || mod == 5;
    }
    switch (fin) {
    case 'A': return key(k, KR_KEY_UP, used);
    case 'B': return key(k, KR_KEY_DOWN, used);
    case 'C': return key(k, word ? KR_KEY_WORD_RIGHT : KR_KEY_RIGHT, used);
    case 'D': return key(k, word ? KR_KEY_WORD_LEFT : KR_KEY_LEFT, used);
    case 'H': return key(k, KR_KEY_HOME, used);
    case 'F': return key(k, KR_KEY_END, used);
    case '~':
        if (p1 == 1 || p1 == 7) return key(k, KR_KEY_HOME, used);
        if (p1 == 4 || p1 == 8) return key(k, KR_KEY_END, used);
        if (p1 == 3) return key(k, KR_KEY_DELETE, used);
        return key(k, KR_KEY_NONE, used);
    default: return key(k, KR_KEY_NONE, used);
    }
}

static size_t decode_esc(const unsigned char *b, size_t n, bool at_end, kr_le_key *k) {
    if (n == 1) return at_end ? key(k, KR_KEY_NONE, 1) : 0;
    if (b[1] == '[') return decode_csi(b, n, at_end, k);
    if (b[1] == 'O') { /* SS3: application-mode arrows, Home, End */
        if (n == 2) return at_end ? key(k, KR_KEY_NONE, 2) : 0;
        switch (b[2]) {
        case 'A': return key(k, KR_KEY_UP, 3);
        case 'B': return key(k, KR_KEY_DOWN, 3);
        case 'C': return key(k, KR_KEY_RIGHT, 3);
        case 'D': return key(k, KR_KEY_LEFT, 3);
        case 'H': return key(k, KR_KEY_HOME, 3);
        case 'F': return key(k, KR_KEY_END, 3);
        default: return key(k, KR_KEY_NONE, 3);
        }
    }
    if (b[1] == 0x1b) return key(k, KR_KEY_NONE, 1); /* Escape pressed, then another sequence */
    if (b[1] == 'b') return key(k, KR_KEY_WORD_LEFT, 2);
    if (b[1] == 'f') return key(k, KR_KEY_WORD_RIGHT, 2);
    return key(k, KR_KEY_NONE, 2); /* Alt-<key>: nothing bound */
}

/* One UTF-8 code point; an invalid or cut sequence is dropped (its
 * complete bytes only, so the next key is not lost). */
static size_t decode_utf8(const unsigned char *b, size_t n, bool at_end, kr_le_key *k) {
    unsigned char c = b[0];
    size_t need = c < 0x80       ? 1
        : c >= 0xc2 && c <= 0xdf ? 2
        : c >= 0xe0 && c <= 0xef ? 3
        : c >= 0xf0 && c <= 0xf4 ? 4
                                 : 0;
    if (need == 0) return key(k, KR_KEY_NONE, 1);
    size_t i = 1;
    while (i < need && i < n && (b[i] & 0xc0) == 0x80) i++;
    if (i < need) {
        if (i == n && !at_end) return 0;
        return key(k, KR_KEY_NONE, i);
    }
    k->kind = KR_KEY_TEXT;
    memcpy(k->text, b, need);
    k->len = (int)need;
    return need;
}

size_t kr_le_decode_key(const unsigned char *b, size_t n, bool at_end, kr_le_key *k) {
    memset(k, 0, sizeof *k);
    unsigned char c = b[0];
    switch (c) {
    case '\r': return key(k, KR_KEY_ENTER, n > 1 && b[1] == '\n' ? 2 : 1);
    case '\n': return key(k, KR_KEY_ENTER, 1);
    case 0x1b: return decode_esc(b, n, at_end, k);
    case 0x01: return key(k, KR_KEY_HOME, 1);
    case 0x02: return key(k, KR_KEY_LEFT, 1);
    case 0x04: return key(k, KR_KEY_CTRL_D, 1);
    case 0x05: return key(k, KR_KEY_END, 1);
    case 0x06: return key(k, KR_KEY_RIGHT, 1);
    case 0x08:
    case 0x7f: return key(k, KR_KEY_BACKSPACE, 1);
    case 0x09: return key(k, KR_KEY_TAB, 1);
    case 0x0b: return key(k, KR_KEY_KILL_END, 1);
    case 0x0c: return key(k, KR_KEY_CLEAR, 1);
    case 0x0e: return key(k, KR_KEY_DOWN, 1);
    case 0x10: return key(k, KR_KEY_UP, 1);
    case 0x15: return key(k, KR_KEY_KILL_LINE, 1);
    case 0x17: return key(k, KR_KEY_KILL_WORD, 1);
    default:
        if (c < 0x20) return key(k, KR_KEY_NONE, 1); /* Ctrl-C, Ctrl-Z etc. as bytes: never text */
        return decode_utf8(b, n, at_end, k);
    }
}

/* ------------------------------------------------------------------------ */
/* The buffer and the history                                                */
/* ------------------------------------------------------------------------ */

static bool reserve(kr_le_state *s, size_t need) {
    if (need + 1 <= s->cap) return true;
    size_t cap = s->cap ? s->cap : 128;
    while (cap < need + 1) cap *= 2;
    char *p = realloc(s->buf, cap);
    if (!p) return false;
    s->buf = p;
    s->cap = cap;
    return true;
}

bool kr_le_state_init(kr_le_state *s, int hist_max) {
    memset(s, 0, sizeof *s);
    s->hist_max = hist_max > 0 ? hist_max : KR_LE_HISTORY_MAX;
    s->hist = calloc((size_t)s->hist_max, sizeof *s->hist);
    if (!s->hist || !reserve(s, 0)) {
        kr_le_state_free(s);
        return false;
    }
    s->buf[0] = '\0';
    return true;
}

void kr_le_state_free(kr_le_state *s) {
    for (int i = 0; i < s->n_hist; i++) free(s->hist[i]);
    free(s->hist);
    free(s->buf);
    free(s->saved);
    memset(s, 0, sizeof *s);
}

void kr_le_reset(kr_le_state *s) {
    s->len = s->cur = 0;
    if (s->buf) s->buf[0] = '\0';
    s->hidx = s->n_hist;
    free(s->saved);
    s->saved = NULL;
}

size_t kr_le_utf8_count(const char *buf, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)buf[i] & 0xc0) != 0x80;
    return c;
}

static size_t prev_cp(const kr_le_state *s, size_t i) {
    if (i == 0) return 0;
    i--;
    while (i > 0 && ((unsigned char)s->buf[i] & 0xc0) == 0x80) i--;
    return i;
}

static size_t next_cp(const kr_le_state *s, size_t i) {
    if (i >= s->len) return s->len;
    i++;
    while (i < s->len && ((unsigned char)s->buf[i] & 0xc0) == 0x80) i++;
    return i;
}

static bool is_space(char c) { return c == ' ' || c == '\t'; }

static size_t word_left(const kr_le_state *s, size_t i) {
    while (i > 0 && is_space(s->buf[i - 1])) i--;
    while (i > 0 && !is_space(s->buf[i - 1])) i--;
    return i;
}

static size_t word_right(const kr_le_state *s, size_t i) {
    while (i < s->len && is_space(s->buf[i])) i++;
    while (i < s->len && !is_space(s->buf[i])) i++;
    return i;
}

static bool insert(kr_le_state *s, const char *t, size_t n) {
    if (!reserve(s, s->len + n)) return false;
    memmove(s->buf + s->cur + n, s->buf + s->cur, s->len - s->cur + 1);
    memcpy(s->buf + s->cur, t, n);
    s->len += n;
    s->cur += n;
    return true;
}

/* Remove buf[a..b) and leave the cursor at a. */
static void erase(kr_le_state *s, size_t a, size_t b) {
    memmove(s->buf + a, s->buf + b, s->len - b + 1);
    s->len -= b - a;
    s->cur = a;
}

static bool set_text(kr_le_state *s, const char *t) {
    size_t n = strlen(t);
    if (!reserve(s, n)) return false;
    memcpy(s->buf, t, n + 1);
    s->len = s->cur = n;
    return true;
}

/* Up/Down: the line being typed is kept aside while older lines are
 * shown, and comes back below the newest. */
static kr_le_result browse(kr_le_state *s, int dir) {
    int to = s->hidx + dir;
    if (to < 0 || to > s->n_hist) return KR_LE_CONTINUE;
    if (s->hidx == s->n_hist) {
        free(s->saved);
        s->saved = strdup(s->buf);
        if (!s->saved) return KR_LE_NOMEM;
    }
    s->hidx = to;
    const char *t = to == s->n_hist ? (s->saved ? s->saved : "") : s->hist[to];
    return set_text(s, t) ? KR_LE_CONTINUE : KR_LE_NOMEM;
}

kr_le_result kr_le_apply(kr_le_state *s, const kr_le_key *k) {
    switch (k->kind) {
    case KR_KEY_TEXT: return insert(s, k->text, (size_t)k->len) ? KR_LE_CONTINUE : KR_LE_NOMEM;
    case KR_KEY_TAB: return insert(s, TAB_SPACES, sizeof TAB_SPACES - 1) ? KR_LE_CONTINUE : KR_LE_NOMEM;
    case KR_KEY_ENTER: return KR_LE_SUBMIT;
    case KR_KEY_CLEAR: return KR_LE_CLEAR_SCREEN;
    case KR_KEY_LEFT: s->cur = prev_cp(s, s->cur); break;
    case KR_KEY_RIGHT: s->cur = next_cp(s, s->cur); break;
    case KR_KEY_WORD_LEFT: s->cur = word_left(s, s->cur); break;
    case KR_KEY_WORD_RIGHT: s->cur = word_right(s, s->cur); break;
    case KR_KEY_HOME: s->cur = 0; break;
    case KR_KEY_END: s->cur = s->len; break;
    case KR_KEY_BACKSPACE: erase(s, prev_cp(s, s->cur), s->cur); break;
    case KR_KEY_CTRL_D:
        if (s->len == 0) return KR_LE_EOF;
        /* fall through */
    case KR_KEY_DELETE: erase(s, s->cur, next_cp(s, s->cur)); break;
    case KR_KEY_KILL_LINE: erase(s, 0, s->cur); break;
    case KR_KEY_KILL_END: erase(s, s->cur, s->len); break;
    case KR_KEY_KILL_WORD: erase(s, word_left(s, s->cur), s->cur); break;
    case KR_KEY_UP: return browse(s, -1);
    case KR_KEY_DOWN: return browse(s, +1);
    case KR_KEY_NONE: break;
    }
    return KR_LE_CONTINUE;
}

bool kr_le_history_add(kr_le_state *s, const char *line) {
    if (!line[0] || (s->n_hist > 0 && !strcmp(s->hist[s->n_hist - 1], line))) return true;
    char *c = strdup(line);
    if (!c) return false;
    if (s->n_hist == s->hist_max) {
        free(s->hist[0]);
        memmove(s->hist, s->hist + 1, (size_t)(s->n_hist - 1) * sizeof *s->hist);
        s->n_hist--;
    }
    s->hist[s->n_hist++] = c;
    s->hidx = s->n_hist;
    return true;
}

/* ------------------------------------------------------------------------ */
/* The terminal mode                                                         */
/* ------------------------------------------------------------------------ */

static struct termios g_orig;
static int g_term_fd = -1;
static volatile sig_atomic_t g_raw;

void kr_term_restore(void) {
    if (g_raw) {
        tcsetattr(g_term_fd, TCSANOW, &g_orig);
        g_raw = 0;
    }
}

bool kr_term_raw(int fd) {
    if (g_raw) return true;
    static bool registered;
    if (g_term_fd < 0 || g_term_fd != fd) {
        if (tcgetattr(fd, &g_orig) != 0) return false;
        g_term_fd = fd;
    }
    if (!registered) {
        atexit(kr_term_restore);
        registered = true;
    }
    struct termios t = g_orig;
    t.c_iflag &= ~(tcflag_t)(BRKINT | ICRNL | INLCR | IGNCR | INPCK | ISTRIP | IXON);
    t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | IEXTEN);
    t.c_lflag |= ISIG | NOFLSH; /* Ctrl-C still signals; type-ahead survives it */
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    t.c_cc[VSUSP] = _POSIX_VDISABLE;
    t.c_cc[VQUIT] = _POSIX_VDISABLE;
#ifdef VDSUSP
    t.c_cc[VDSUSP] = _POSIX_VDISABLE;
#endif
    /* TCSANOW, not TCSAFLUSH: bytes already typed are type-ahead, kept */
    if (tcsetattr(fd, TCSANOW, &t) != 0) return false;
    g_raw = 1;
    return true;
}

/* ------------------------------------------------------------------------ */
/* The editor                                                                */
/* ------------------------------------------------------------------------ */

bool kr_line_editor_init(kr_line_editor *e, int in_fd, int out_fd, bool color) {
    memset(e, 0, sizeof *e);
    e->in_fd = in_fd;
    e->out_fd = out_fd;
    e->color = color;
    return kr_le_state_init(&e->st, 0);
}

void kr_line_editor_free(kr_line_editor *e) {
    kr_le_state_free(&e->st);
    free(e->out);
    memset(e, 0, sizeof *e);
}

static void put(kr_line_editor *e, const char *s, size_t n) {
    if (e->out_len + n > e->out_cap) {
        size_t cap = e->out_cap ? e->out_cap : 256;
        while (cap < e->out_len + n) cap *= 2;
        char *p = realloc(e->out, cap);
        if (!p) return; /* the redraw is cut short; the line itself is intact */
        e->out = p;
        e->out_cap = cap;
    }
    memcpy(e->out + e->out_len, s, n);
    e->out_len += n;
}

static void puts_(kr_line_editor *e, const char *s) { put(e, s, strlen(s)); }

static void flush_out(kr_line_editor *e) {
    size_t off = 0;
    while (off < e->out_len) {
        ssize_t w = write(e->out_fd, e->out + off, e->out_len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    e->out_len = 0;
}

static void term_size(int fd, int *cols, int *rows) {
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0) {
        if (ws.ws_col > 0) *cols = ws.ws_col;
        if (ws.ws_row > 0) *rows = ws.ws_row;
    }
}

static void put_prompt(kr_line_editor *e) {
    if (e->color) puts_(e, KR_ANSI_BOLD);
    puts_(e, e->prompt);
    if (e->color) puts_(e, KR_ANSI_RESET);
}

/* Byte offset of the code point number cp of buf (len if past the end). */
static size_t cp_offset(const kr_le_state *s, size_t cp) {
    size_t i = 0;
    while (cp-- > 0 && i < s->len) i = next_cp(s, i);
    return i;
}

/* Redraw the prompt and the visible part of the line on the cursor's row.
 * Without colour: "\r", prompt, text, spaces over the old tail, then
 * backspaces or "\r" and a reprint to put the cursor in place. */
static void refresh(kr_line_editor *e) {
    const kr_le_state *s = &e->st;
    int cols, rows;
    term_size(e->out_fd, &cols, &rows);
    size_t pw = kr_le_utf8_count(e->prompt, strlen(e->prompt));
    size_t avail = (size_t)cols > pw + 1 ? (size_t)cols - pw - 1 : 1; /* the last column stays free: no wrap */
    size_t total = kr_le_utf8_count(s->buf, s->len), ccp = kr_le_utf8_count(s->buf, s->cur);
    size_t first = ccp >= avail ? ccp - avail + 1 : 0;
    size_t shown = total - first < avail ? total - first : avail;
    size_t b0 = cp_offset(s, first), b1 = cp_offset(s, first + shown);
    size_t col = ccp - first;

    puts_(e, "\r");
    put_prompt(e);
    put(e, s->buf + b0, b1 - b0);
    size_t pad = e->last_cols > shown ? e->last_cols - shown : 0;
    if (e->color) {
        puts_(e, "\033[K");
        if (col < shown) {
            char mv[32];
            int n = snprintf(mv, sizeof mv, "\r\033[%zuC", pw + col);
            put(e, mv, (size_t)n);
        }
    } else {
        for (size_t i = 0; i < pad; i++) put(e, " ", 1);
        if (col < shown || pad > 0) {
            size_t back = shown - col + pad;
            if (back <= 8) {
                for (size_t i = 0; i < back; i++) put(e, "\b", 1);
            } else {
                puts_(e, "\r");
                put_prompt(e);
                put(e, s->buf + b0, cp_offset(s, first + col) - b0);
            }
        }
    }
    e->last_cols = shown;
    flush_out(e);
}

/* Ctrl-L. With colour: home and erase. Without: a screenful of newlines
 * pushes everything up out of sight (a form feed is only a line feed to
 * xterm and tmux), and the prompt is redrawn on the bottom row. */
static void clear_screen(kr_line_editor *e) {
    if (e->color) {
        puts_(e, "\033[H\033[2J");
    } else {
        int cols, rows;
        term_size(e->out_fd, &cols, &rows);
        puts_(e, "\r");
        for (int i = 0; i < rows; i++) put(e, "\n", 1);
    }
    e->last_cols = 0;
    flush_out(e);
}

static bool copy_line(const kr_le_state *s, char **line, size_t *cap) {
    if (s->len + 1 > *cap) {
        size_t n = *cap ? *cap : 256;
        while (n < s->len + 1) n *= 2;
        char *p = realloc(*line, n);
        if (!p) return false;
        *line = p;
        *cap = n;
    }
    memcpy(*line, s->buf, s->len + 1);
    return true;
}

/* Read more input into e->in. 1: got bytes; 0: end of input; -1 with errno. */
static int fill(kr_line_editor *e) {
    if (e->in_pos == e->in_len) e->in_pos = e->in_len = 0;
    if (e->in_pos > 0) {
        memmove(e->in, e->in + e->in_pos, e->in_len - e->in_pos);
        e->in_len -= e->in_pos;
        e->in_pos = 0;
    }
    ssize_t got = read(e->in_fd, e->in + e->in_len, sizeof e->in - e->in_len);
    if (got < 0) return -1;
    if (got == 0) {
        e->eof = true;
        return 0;
    }
    e->in_len += (size_t)got;
    return 1;
}

/* Whether input arrives within ms (a lone ESC waiting for its sequence). */
static bool input_within(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
}

kr_line_status kr_le_read(kr_line_editor *e, const char *prompt, char **line, size_t *cap) {
    if (!kr_term_raw(e->in_fd)) return KR_LINE_ERROR;
    if (e->eof && e->in_pos == e->in_len && !e->active) return KR_LINE_EOF;
    if (!e->active) {
        kr_le_reset(&e->st);
        e->prompt = prompt;
        e->last_cols = 0;
        e->active = true;
    }
    refresh(e);
    for (;;) {
        bool changed = false;
        while (e->in_pos < e->in_len) {
            const unsigned char *b = e->in + e->in_pos;
            size_t n = e->in_len - e->in_pos;
            if (e->skip_lf) { /* the "\n" of a "\r\n" split over two reads */
                e->skip_lf = false;
                if (b[0] == '\n') {
                    e->in_pos++;
                    continue;
                }
            }
            kr_le_key k;
            bool at_end = e->eof || e->in_len == sizeof e->in;
            size_t used = kr_le_decode_key(b, n, at_end, &k);
            if (used == 0) {
                if (input_within(e->in_fd, ESC_WAIT_MS)) break; /* read the rest */
                used = kr_le_decode_key(b, n, true, &k);
            }
            e->skip_lf = k.kind == KR_KEY_ENTER && used == 1 && b[0] == '\r';
            e->in_pos += used;
            kr_le_result r = kr_le_apply(&e->st, &k);
            if (r == KR_LE_NOMEM) return KR_LINE_ERROR;
            if (r == KR_LE_EOF) {
                e->active = false;
                return KR_LINE_EOF;
            }
            if (r == KR_LE_SUBMIT) {
                e->st.cur = e->st.len;
                refresh(e);
                put(e, "\n", 1);
                flush_out(e);
                e->active = false;
                return copy_line(&e->st, line, cap) ? KR_LINE_OK : KR_LINE_ERROR;
            }
            if (r == KR_LE_CLEAR_SCREEN) clear_screen(e);
            changed = true;
        }
        if (changed) refresh(e); /* once per batch of keys: a paste is drawn once */
        if (e->eof) {
            e->active = false;
            if (e->st.len == 0) return KR_LINE_EOF;
            put(e, "\n", 1);
            flush_out(e);
            return copy_line(&e->st, line, cap) ? KR_LINE_OK : KR_LINE_ERROR;
        }
        if (fill(e) < 0) {
            if (errno == EINTR) return KR_LINE_INTERRUPTED;
            return KR_LINE_ERROR;
        }
    }
}
