/* batch_output.h - the results file of `kara batch`: what is already in it
 * (resume), and appending one result at a time so that a job killed at any
 * moment loses at most the requests still running.
 *
 * Durability: the file is opened O_APPEND and locked (flock) against a
 * second job writing it; each result is one write(2) of the whole line,
 * newline included, followed by fdatasync(2). A SIGKILL therefore leaves
 * either the complete line or, if the write itself was cut short, a torn
 * last line; on resume the torn line is cut off (ftruncate) and its request
 * runs again, so every request ends up answered exactly once. fdatasync
 * makes each line survive a power loss too, at the cost of one disk flush
 * per finished request (small beside the seconds a request takes). */
#ifndef KR_BATCH_OUTPUT_H
#define KR_BATCH_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "strset.h"

typedef struct kr_batch_output {
    int fd;
    const char *path;
    kr_strset answered;       /* custom_ids with a result line */
    kr_strset answered_lines; /* input line numbers (decimal) of error lines without custom_id */
    int n_ok, n_failed;       /* result lines found when opening */
    long truncated;           /* bytes of a torn last line that were cut off */
} kr_batch_output;

/* Open (creating it) for appending. resume: read the results already there
 * and cut off a torn last line; otherwise empty the file. Returns -1 on
 * success, else an exit code after printing "kara batch: ..." to stderr. */
int kr_batch_output_open(kr_batch_output *o, const char *path, bool resume);
/* Is this request already answered? */
bool kr_batch_output_has(const kr_batch_output *o, const char *custom_id, int line);
/* Append one line (with its '\n') durably; 0 or an errno value. */
int kr_batch_output_append(kr_batch_output *o, const char *line, size_t len);
void kr_batch_output_close(kr_batch_output *o);

#endif
