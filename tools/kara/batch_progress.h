/* batch_progress.h - the progress report of `kara batch`, on stderr only:
 * on a terminal one line rewritten in place (\r) a few times a second;
 * otherwise (a log file, a Slurm or Kubernetes job) one plain line every
 * few seconds. Both say done/total, failed, output tokens/s, ETA and KV use. */
#ifndef KR_BATCH_PROGRESS_H
#define KR_BATCH_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"

typedef struct kr_batch_progress {
    bool enabled, tty;
    double interval; /* seconds between updates */
    double t_start, t_last;
    int total;        /* requests of this shard */
    int done_before;  /* answered in an earlier run */
    int done, failed; /* this run */
    bool line_open;   /* a \r line is on screen */
    int shown;        /* its width */
} kr_batch_progress;

void kr_batch_progress_init(kr_batch_progress *p, bool enabled, int total, int done_before);
/* Print if the interval has passed (force: now). */
void kr_batch_progress_update(kr_batch_progress *p, const kara_engine_stats *s, bool force);
/* End the \r line before other output. */
void kr_batch_progress_end(kr_batch_progress *p);

#endif
