/* console.h - terminal helpers for interactive commands: whether colours
 * may be used, and a line reader over a file descriptor that reports an
 * interrupting signal instead of retrying, so Ctrl-C at a prompt is seen. */
#ifndef KARA_CONSOLE_H
#define KARA_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

#define KARA_ANSI_DIM "\033[2m"
#define KARA_ANSI_BOLD "\033[1m"
#define KARA_ANSI_RESET "\033[0m"

/* True when stdin and stdout are both terminals and TERM is not "dumb"
 * (and set): the only case where ANSI sequences are written. */
bool kara_console_fancy(void);

typedef struct kara_line_reader {
    int fd;
    char buf[4096];
    size_t pos, len;         /* unread bytes are buf[pos..len) */
    size_t partial;          /* bytes of an unfinished line already in the caller's buffer */
    bool eof;
} kara_line_reader;

typedef enum kara_line_status {
    KARA_LINE_OK = 0,          /* *line holds a line without its '\n' (and without a '\r' before it) */
    KARA_LINE_EOF = 1,         /* end of input (a last line without '\n' is returned as OK first) */
    KARA_LINE_INTERRUPTED = 2, /* a signal arrived while waiting; a partial line is kept for the next call */
    KARA_LINE_ERROR = -1       /* read error or out of memory */
} kara_line_status;

void kara_line_reader_init(kara_line_reader *r, int fd);

/* Read one line into a malloc'd, growing buffer (*line, *cap; both may
 * start NULL/0; pass the same buffer on every call). */
kara_line_status kara_read_line(kara_line_reader *r, char **line, size_t *cap);

#endif
