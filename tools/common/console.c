/* console.c - see console.h. Plain read(2) on a file descriptor: no
 * readline; the terminal's own line editing (canonical mode) applies.
 * Interactive sessions use line_editor.c instead (kara chat). */
#include "console.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool kr_console_fancy(void) {
    const char *term = getenv("TERM");
    return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && term && term[0] && strcmp(term, "dumb") != 0;
}

static kr_color_mode g_color = KR_COLOR_AUTO;
static bool g_progress = true;

void kr_console_set_color(kr_color_mode m) { g_color = m; }

bool kr_console_color(int fd) {
    if (g_color != KR_COLOR_AUTO) return g_color == KR_COLOR_ON;
    const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
    if (no && no[0]) return false;
    return isatty(fd) && term && term[0] && strcmp(term, "dumb") != 0;
}

void kr_console_set_progress(bool on) { g_progress = on; }
bool kr_console_progress(void) { return g_progress; }

int kr_console_take_flags(int argc, char **argv) {
    int n = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-progress")) {
            g_progress = false;
            continue;
        }
        const char *v = !strncmp(a, "--color=", 8) ? a + 8 : NULL;
        if (v || !strcmp(a, "--color") || !strcmp(a, "-co")) {
            if (!v && i + 1 < argc &&
                (!strcmp(argv[i + 1], "auto") || !strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off")))
                v = argv[++i];
            g_color = !v || !strcmp(v, "on") ? KR_COLOR_ON : !strcmp(v, "off") ? KR_COLOR_OFF : KR_COLOR_AUTO;
            continue;
        }
        argv[n++] = argv[i];
    }
    argv[n] = NULL;
    return n;
}

void kr_line_reader_init(kr_line_reader *r, int fd) {
    memset(r, 0, sizeof *r);
    r->fd = fd;
}

static bool grow(char **line, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    char *p = realloc(*line, n);
    if (!p) return false;
    *line = p;
    *cap = n;
    return true;
}

/* Bytes accumulate in *line until a '\n', so a line of any length comes
 * back whole; after an interruption the partial line stays in *line
 * (r->partial bytes) and the next call goes on from there. */
kr_line_status kr_read_line(kr_line_reader *r, char **line, size_t *cap) {
    for (;;) {
        while (r->pos < r->len) {
            char c = r->buf[r->pos++];
            if (r->over && c != '\n') continue; /* the rest of a line over the limit */
            if (!grow(line, cap, r->partial + 2)) return KR_LINE_ERROR;
            if (c == '\n' && r->over) {
                r->over = false;
                (*line)[r->partial = 0] = '\0';
                return KR_LINE_TOO_LONG;
            }
            if (c != '\n' && r->max && r->partial >= r->max) {
                r->over = true;
                continue;
            }
            if (c == '\n') {
                size_t n = r->partial;
                if (n > 0 && (*line)[n - 1] == '\r') n--;
                (*line)[n] = '\0';
                r->partial = 0;
                return KR_LINE_OK;
            }
            (*line)[r->partial++] = c;
        }
        if (r->eof) {
            if (r->over) {
                r->over = false;
                (*line)[r->partial = 0] = '\0';
                return KR_LINE_TOO_LONG;
            }
            if (r->partial == 0) return KR_LINE_EOF;
            (*line)[r->partial] = '\0';
            r->partial = 0;
            return KR_LINE_OK;
        }
        ssize_t got = read(r->fd, r->buf, sizeof r->buf);
        r->pos = r->len = 0;
        if (got < 0) return errno == EINTR ? KR_LINE_INTERRUPTED : KR_LINE_ERROR;
        if (got == 0)
            r->eof = true;
        else
            r->len = (size_t)got;
    }
}
