/* batch_progress.c - the progress line of `kara batch` (batch_progress.h). */
#include "batch_progress.h"
#include "console.h"
#include "monotonic_clock.h"
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kr_batch_progress_init(kr_batch_progress *p, bool enabled, int total, int done_before) {
    p->enabled = enabled && kr_console_progress(); /* --no-progress, any command */
    const char *term = getenv("TERM");
    p->tty = isatty(STDERR_FILENO) != 0 && !(term && !strcmp(term, "dumb"));
    p->interval = p->tty ? 0.25 : 5.0;
    p->t_start = p->t_last = kr_monotonic_seconds();
    p->total = total;
    p->done_before = done_before;
    p->done = p->failed = 0;
    p->line_open = false;
    p->shown = 0;
}

void kr_batch_progress_update(kr_batch_progress *p, const kara_engine_stats *s, bool force) {
    if (!p->enabled) return;
    double now = kr_monotonic_seconds();
    if (!force && now - p->t_last < p->interval) return;
    p->t_last = now;
    double el = now - p->t_start;
    int done = p->done_before + p->done, left = p->total - done;
    double rate = el > 0 ? s->tokens_generated / el : 0;
    /* requests per second so far, counting only what finished in this run */
    double eta = p->done > 0 && el > 0 ? left / (p->done / el) : -1;
    char eta_s[32];
    kr_format_eta(eta_s, sizeof eta_s, left == 0 ? 0 : eta);
    double kv = s->kv_budget ? 100.0 * (double)s->kv_bytes / (double)s->kv_budget : 0;
    char line[256];
    snprintf(line, sizeof line,
             "%d/%d done, %d failed, %.1f tok/s, ETA %s, KV %.0f%% of %.0f MiB, running %d, queued %d", done, p->total,
             p->failed, rate, eta_s, kv, (double)s->kv_budget / 1048576.0, s->running, s->queued + s->preempted);
    if (p->tty) {
        /* spaces over a longer previous line, not "\033[K": no escape codes */
        int n = (int)strlen(line);
        fprintf(stderr, "\r%s%*s", line, p->shown > n ? p->shown - n : 0, "");
        if (p->shown > n) fprintf(stderr, "\r%s", line);
        p->shown = n;
        p->line_open = true;
    } else {
        fprintf(stderr, "kara batch: [%.0fs] %s\n", el, line);
    }
    fflush(stderr);
}

void kr_batch_progress_end(kr_batch_progress *p) {
    if (p->line_open) {
        fputc('\n', stderr);
        p->line_open = false;
        p->shown = 0;
    }
}
