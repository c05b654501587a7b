/* progress.h - the progress report of the long-running commands (eval,
 * eval-kv, quantize), on stderr only. On a terminal: one line rewritten in
 * place with \r a few times a second, padded with spaces rather than
 * erased with an escape code, so NO_COLOR and dumb terminals see no ESC.
 * Piped or redirected (a log file, a CI job): one plain line every few
 * seconds. `--no-progress` (kr_console_progress) turns both off. */
#ifndef KR_PROGRESS_H
#define KR_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kr_progress {
    const char *cmd; /* "eval": the prefix of the plain lines */
    bool enabled, tty;
    double interval; /* seconds between updates */
    double t_start, t_last;
    double total; /* units of work (problems, rows, bytes) */
    int shown;    /* columns of the \r line on screen; 0: none */
    int columns;  /* the terminal's width less one: a longer line would wrap */
} kr_progress;

void kr_progress_init(kr_progress *p, const char *cmd, double total);
/* Report `done` of total, with `what` (may be NULL) naming the current
 * item and `unit` the units ("problems"; NULL: percent only). Prints when
 * the interval has passed, or now with force. */
void kr_progress_update(kr_progress *p, double done, const char *unit, const char *what, bool force);
/* Take the \r line off the screen before other output to the terminal. */
void kr_progress_clear(kr_progress *p);
/* The last report (force) and the end of the \r line. */
void kr_progress_end(kr_progress *p);
/* "12s", "3m05s", "2h10m"; "?" for a negative time. */
void kr_format_eta(char *buf, size_t size, double seconds);
/* Write one status line: on a terminal in place (padded over the previous
 * one), else as a plain line with a newline. */
void kr_progress_line(kr_progress *p, const char *line);
double kr_progress_now(void);

#endif
