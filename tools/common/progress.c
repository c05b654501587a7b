/* progress.c - see progress.h. */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "console.h"

double kr_progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void kr_progress_init(kr_progress *p, const char *cmd, double total) {
    const char *term = getenv("TERM");
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->enabled = kr_console_progress();
    p->tty = isatty(STDERR_FILENO) && term && term[0] && strcmp(term, "dumb") != 0;
    p->interval = p->tty ? 0.25 : 10.0;
    p->t_start = kr_progress_now();
    p->t_last = p->t_start;
    p->total = total;
    struct winsize ws;
    p->columns = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 ? ws.ws_col - 1 : 79;
}

void kr_format_eta(char *buf, size_t size, double s) {
    if (s < 0)
        snprintf(buf, size, "?");
    else if (s < 90)
        snprintf(buf, size, "%.0fs", s);
    else if (s < 5400)
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

void kr_progress_line(kr_progress *p, const char *line) {
    if (!p->enabled) return;
    if (p->tty) {
        int n = (int)strlen(line);
        /* spaces over the rest of a longer previous line: no "\033[K" */
        fprintf(stderr, "\r%s%*s", line, p->shown > n ? p->shown - n : 0, "");
        if (p->shown > n) fprintf(stderr, "\r%s", line);
        p->shown = n > 0 ? n : 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

void kr_progress_clear(kr_progress *p) {
    if (!p->enabled || !p->tty || !p->shown) return;
    fprintf(stderr, "\r%*s\r", p->shown, "");
    fflush(stderr);
    p->shown = 0;
}

void kr_progress_update(kr_progress *p, double done, const char *unit, const char *what, bool force) {
    if (!p->enabled) return;
    double now = kr_progress_now();
    if (!force && now - p->t_last < p->interval) return;
    p->t_last = now;
    double el = now - p->t_start;
    double eta = done > 0 && p->total > done ? el * (p->total - done) / done : done >= p->total ? 0 : -1;
    char eta_s[32], line[320], count[96] = "";
    kr_format_eta(eta_s, sizeof eta_s, eta);
    if (unit) snprintf(count, sizeof count, "%.0f/%.0f %s, ", done, p->total, unit);
    int n = snprintf(line, sizeof line, "%s: %s%.0f%%, %.0fs elapsed, ETA %s%s%s", p->cmd, count,
                     p->total > 0 ? 100.0 * done / p->total : 100.0, el, eta_s, what ? ", " : "", what ? what : "");
    /* a terminal line must not wrap, or \r rewrites only its last row */
    if (p->tty && n > p->columns) line[p->columns] = '\0';
    kr_progress_line(p, line);
}

void kr_progress_end(kr_progress *p) {
    if (p->enabled && p->tty && p->shown) {
        fputc('\n', stderr);
        fflush(stderr);
        p->shown = 0;
    }
}
