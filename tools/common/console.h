/* console.h - terminal helpers for interactive commands: whether colours
 * may be used, and a line reader over a file descriptor that reports an
 * interrupting signal instead of retrying, so Ctrl-C at a prompt is seen. */
#ifndef KR_CONSOLE_H
#define KR_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

#define KR_ANSI_DIM "\033[2m"
#define KR_ANSI_BOLD "\033[1m"
#define KR_ANSI_RESET "\033[0m"

/* True when stdin and stdout are both terminals and TERM is not "dumb"
 * (and set): an interactive session (a placeholder may be erased, a line
 * edited). Whether it may be coloured is kr_console_color's answer. */
bool kr_console_fancy(void);

/* --color auto|on|off, shared by every command (set by the flag parser). */
typedef enum kr_color_mode { KR_COLOR_AUTO = 0, KR_COLOR_ON, KR_COLOR_OFF } kr_color_mode;
void kr_console_set_color(kr_color_mode m);
/* True when ANSI styling may be written to fd: --color on; or auto, fd a
 * terminal, TERM set and not "dumb", and NO_COLOR unset or empty
 * (no-color.org). A file or a pipe never gets an escape code in auto. */
bool kr_console_color(int fd);

/* --no-progress, shared by every command (set by the flag parser). */
void kr_console_set_progress(bool on);
bool kr_console_progress(void);
/* For commands with a parser of their own (inspect, tokenize, gen-model,
 * quantize): take --color [auto|on|off] and --no-progress out of argv
 * (applying them) so every command accepts them. Returns the new argc. */
int kr_console_take_flags(int argc, char **argv);

typedef struct kr_line_reader {
    int fd;
    char buf[4096];
    size_t pos, len; /* unread bytes are buf[pos..len) */
    size_t partial;  /* bytes of an unfinished line already in the caller's buffer */
    size_t max;      /* longest line kept, in bytes; 0: no limit (kr_line_reader_init) */
    bool eof, over;  /* over: the current line passed max; its bytes are dropped up to its '\n' */
} kr_line_reader;

typedef enum kr_line_status {
    KR_LINE_OK = 0,          /* *line holds a line without its '\n' (and without a '\r' before it) */
    KR_LINE_EOF = 1,         /* end of input (a last line without '\n' is returned as OK first) */
    KR_LINE_INTERRUPTED = 2, /* a signal arrived while waiting; a partial line is kept for the next call */
    KR_LINE_TOO_LONG = 3,    /* a line longer than max, read to its end and dropped; *line is empty */
    KR_LINE_ERROR = -1       /* read error or out of memory */
} kr_line_status;

void kr_line_reader_init(kr_line_reader *r, int fd);

/* Read one line into a malloc'd, growing buffer (*line, *cap; both may
 * start NULL/0; pass the same buffer on every call). */
kr_line_status kr_read_line(kr_line_reader *r, char **line, size_t *cap);

#endif
