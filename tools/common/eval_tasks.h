/* eval_tasks.h - the problems `kara eval` reads (JSONL), answer matching,
 * and the result files it writes (CSV, JSON, an SVG plot). */
#ifndef KARA_EVAL_TASKS_H
#define KARA_EVAL_TASKS_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"

typedef struct kara_eval_task {
    char *id;
    char *prompt;     /* "prompt", or MATH-500's "problem" */
    char *answer;     /* reference answer, as text */
    char where[160];  /* "FILE:LINE", for messages */
} kara_eval_task;

typedef struct kara_eval_tasks {
    kara_eval_task *items;
    int n;
} kara_eval_tasks;

/* Read problems from JSONL files (at most limit per file when > 0). A bad
 * line is reported as FILE:LINE: problem on stderr and fails the load. */
bool kara_eval_tasks_load(kara_eval_tasks *t, const char *const *files, int n_files, int limit);
void kara_eval_tasks_free(kara_eval_tasks *t);

/* The final answer in generated answer text: the content of the last
 * \boxed{...} when there is one, else the text itself, trimmed (a trailing
 * period dropped). */
void kara_eval_extract_answer(const char *text, char *out, size_t size);
/* True when the generated text's answer equals the reference: as numbers
 * when both are numbers, else as trimmed text. */
bool kara_eval_answer_matches(const char *generated, const char *reference);

/* One configuration's results. */
typedef struct kara_eval_row {
    kara_kv_method method;
    float retention;          /* 0 for full */
    int32_t budget_tokens;    /* baselines: the per-sequence budget they were given (0 = auto) */
    int n, correct;
    double think_tokens;      /* mean thinking tokens per problem */
    double cached_slots;      /* mean KV slots held per generated step */
    uint64_t kv_peak;         /* bytes */
    double tok_s;
    uint64_t events;          /* compression events */
} kara_eval_row;

/* CSV when path ends in .csv, else JSON. */
bool kara_eval_write_results(const char *path, const kara_eval_row *rows, int n);
/* Accuracy against retention, one line per method (full as a level line). */
bool kara_eval_write_svg(const char *path, const kara_eval_row *rows, int n);

#endif
