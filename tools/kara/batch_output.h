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
 * per finished request (small beside the seconds a request takes).
 *
 * Changed requests: each line carries the hash of the request it answers
 * (batch_jsonl.h); kr_batch_output_lookup gives it, and
 * kr_batch_output_rewrite takes the answers of requests that changed out
 * of the output (into OUTPUT.superseded), crash-safely: the new content is
 * written to a temporary file of its own beside the output (safe_output.h;
 * beside a symlink's target, so the link stays), made durable, locked and
 * renamed over it, so a kill at any moment leaves either the old or the new
 * file.
 *
 * The output must be absent or a regular file that is no input of the run
 * (safe_output.h): checked before it is opened, so that --no-resume never
 * empties the input, the model or a device. */
#ifndef KR_BATCH_OUTPUT_H
#define KR_BATCH_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "strset.h"

#include "batch_jsonl.h"

/* What the output says about one request: its first result line (later
 * ones are duplicates, reported and moved out by a rewrite). */
typedef struct kr_batch_answer {
    uint64_t hash; /* the request hash it carries */
    bool has_hash; /* false: it carries none (written by an older version) */
    bool failed;   /* an error line */
    bool limit;    /* an error of a limit (kv_budget_exceeded, context_length_exceeded) */
    int out_line;  /* where it is in the output */
} kr_batch_answer;

typedef struct kr_batch_output {
    int fd;
    const char *path;
    kr_strset answered;       /* custom_ids with a result line -> index in ans */
    kr_strset answered_lines; /* input line numbers (decimal) of error lines without custom_id -> the same */
    kr_batch_answer *ans;
    int n_keys, cap_keys;
    int n_ok, n_failed;    /* requests answered when opening (or after a rewrite), error lines among them */
    int n_dup;             /* result lines for a request answered by an earlier line */
    char dup_example[160]; /* the first of them, for the report */
    long truncated;        /* bytes of a torn last line that were cut off */
    bool newline_added;    /* the last line lacked its '\n' (a complete line: given one) */
} kr_batch_output;

/* Open (creating it) for appending. resume: read the results already there
 * and cut off a torn last line (a complete one without its '\n' gets one;
 * duplicates are reported); otherwise empty the file. Returns -1 on
 * success, else an exit code after printing "kara batch: ..." to stderr. */
int kr_batch_output_open(kr_batch_output *o, const char *path, bool resume);
/* Is this request already answered? */
bool kr_batch_output_has(const kr_batch_output *o, const char *custom_id, int line);

/* What the output says about a request: NULL when it is not answered. */
const kr_batch_answer *kr_batch_output_lookup(const kr_batch_output *o, const char *custom_id, int line);
enum { KR_REWRITE_KEEP, KR_REWRITE_DROP, KR_REWRITE_HOLD };
/* Rewrite the output: classify says what becomes of each line - kept,
 * dropped (moved to OUTPUT.superseded) or moved to hold_path (--ordered
 * takes it back from there); a line for a request answered by an earlier
 * line is dropped whatever classify says. The index is rebuilt from the
 * kept lines. 0 or an errno value (the old output is then intact).
 * The side files are merged, not appended to: their old complete lines,
 * then the new lines they do not hold yet, written to a temporary file and
 * renamed over them, so a failure at any point (a full disk) leaves each
 * either as it was or complete, and a rewrite repeated after a failure
 * adds no line twice. */
int kr_batch_output_rewrite(kr_batch_output *o, int (*classify)(void *user, const kr_batch_scanned *r), void *user,
                            const char *hold_path, int *n_dropped, int *n_held);
/* Append one line (with its '\n') durably; 0 or an errno value. */
int kr_batch_output_append(kr_batch_output *o, const char *line, size_t len);
void kr_batch_output_close(kr_batch_output *o);

/* Replace the file at path with buf[0..len): written to path.rewrite
 * (created exclusively), made durable, renamed over it. 0 or an errno. */
int kr_batch_write_atomic(const char *path, const char *buf, size_t len);
/* The whole file behind fd, NUL-terminated, malloc'd (NULL on error). */
char *kr_batch_read_fd(int fd, size_t *len);
/* The same for a results file of ours (output, hold) that we append to:
 * a last line without its '\n' that is a complete result (a write cut
 * just before the newline) is not torn, so it gets its '\n' in the file
 * (through fd, O_APPEND) and in the text; *added says so. Other JSON gets
 * it in the text only (the scan refuses it, the file untouched); a line
 * that does not parse is left for the scan to cut. */
char *kr_batch_read_results(int fd, size_t *len, bool *added);

#endif
