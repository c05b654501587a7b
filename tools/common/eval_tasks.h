/* eval_tasks.h - the problems `kara eval` reads (JSONL), answer matching,
 * and the result files it writes (CSV, JSON, an SVG plot). */
#ifndef KR_EVAL_TASKS_H
#define KR_EVAL_TASKS_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"

typedef struct kr_eval_task {
    char *id;
    char *prompt;         /* "prompt", or MATH-500's "problem" */
    char *answer;         /* reference answer, as text */
    int32_t think_tokens; /* "think_tokens": the reference solution's thinking length, 0 if not given */
    char where[160];      /* "FILE:LINE", for messages */
} kr_eval_task;

typedef struct kr_eval_tasks {
    kr_eval_task *items;
    int n;
} kr_eval_tasks;

/* Read problems from JSONL files (at most limit per file when > 0). A bad
 * line is reported as FILE:LINE: problem on stderr and fails the load. */
bool kr_eval_tasks_load(kr_eval_tasks *t, const char *const *files, int n_files, int limit);
void kr_eval_tasks_free(kr_eval_tasks *t);

/* The final answer in generated answer text: the content of the last
 * \boxed{...} when there is one, else the text itself, trimmed (a trailing
 * period dropped). */
void kr_eval_extract_answer(const char *text, char *out, size_t size);
/* True when the generated text's answer equals the reference: as numbers
 * when both are numbers, else as trimmed text. */
bool kr_eval_answer_matches(const char *generated, const char *reference);

/* One configuration's results. */
typedef struct kr_task_row {
    char label[56]; /* "full", "default (kara)", "kara", "kara/per_window", "snapkv", ... */
    kara_kv_method method;
    kara_kv_evict evict;
    const char *axis; /* "budget": x is the cap on peak KV bytes as a share of full's; "retention": x is the
                       * per-window retention; "-": full (the reference) or the configured budget */
    double x;
    uint64_t cap_bytes;    /* kv.budget the harness set for this row (0: as configured, no cap of its own) */
    uint64_t kv_peak;      /* peak KV bytes: blocks in use plus query rings and scoring scratch */
    uint64_t block_bytes;  /* bytes of one KV block (the pool's granularity) */
    double peak_share;     /* kv_peak / full's peak bytes on the same problems */
    double cap_share;      /* cap_bytes / full's peak bytes (0: uncapped) */
    char error[320];       /* why the row could not run (or its first problem that could not): an error row */
    int32_t seq_tokens;    /* the share each sequence got (slots) */
    int32_t budget_tokens; /* threshold baselines: slots an event keeps */
    int n, correct;
    int capped;          /* problems that reached their token cap */
    int failed;          /* problems that could not run (an error; counted wrong) */
    double think_tokens; /* mean thinking tokens per problem */
    double cached_slots; /* mean KV slots held per generated step */
    int32_t peak_slots;  /* most slots a problem held */
    int32_t plain_peak;  /* most slots plain decoding of a problem holds: its prompt and output but the last token */
    uint64_t cache_peak; /* bytes of KV blocks at the peak */
    uint64_t reserved;   /* bytes reserved for scoring */
    double tok_s;
    uint64_t events, evicted; /* scoring/compression events, slots evicted */
} kr_task_row;

/* CSV when path ends in .csv, else JSON, the same fields in both (the CSV
 * starts method,row,share,accuracy,peak_share). Written through
 * safe_output.h: 0, or the exit code (73, 74) after a message. */
int kr_eval_write_results(const char *path, const kr_task_row *rows, int n);
/* Accuracy against peak KV bytes as a share of full's: budget rows at their
 * cap, retention rows at the share they reached; one line per label (full as
 * a level line), error rows left out. Returns as kr_eval_write_results. */
int kr_eval_write_svg(const char *path, const kr_task_row *rows, int n);

#endif
