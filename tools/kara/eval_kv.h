/* eval_kv.h - the pieces of `kara eval-kv` (cmd_eval_kv.c): measuring one
 * KV method against the `full` reference (eval_kv_run.c) and writing the
 * results as a table, CSV or JSON (eval_kv_report.c). */
#ifndef KR_EVAL_KV_H
#define KR_EVAL_KV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kara.h"

#define KR_EVAL_MAX_DEPTHS 9
#define KR_EVAL_MAX_REGIONS 512

/* What every method is measured on: the same tokens and caps. */
typedef struct kr_eval_setup {
    kara_model *model;
    int32_t n_vocab;
    const int32_t *prompt; /* the short prompt (BOS first when the vocab adds one) */
    int32_t n_prompt;
    const int32_t *text; /* tokens fed one per decode after the prompt, as if generated */
    int32_t n_text;      /* predictions scored (n_text - 1 tokens are fed) */
    int32_t n_free;      /* cap of the free-running comparison */
    int32_t region;      /* region size for the retention profile */
    /* needle in generated text: filler (a prefix of text) with the needle
     * at each depth, then the question; greedy n_answer tokens after it */
    int32_t n_filler;
    const int32_t *needle;
    int32_t n_needle;
    const int32_t *question;
    int32_t n_question;
    int32_t n_answer;
    const char *code; /* what the answer must start with, e.g. "48213" */
    int32_t n_depths;
    float depths[KR_EVAL_MAX_DEPTHS];
} kr_eval_setup;

/* The reference (`full`) run: every step's logits and its greedy stream. */
typedef struct kr_eval_ref {
    float *logits;   /* n_text x n_vocab */
    int32_t *greedy; /* n_free tokens */
    double nll_mean;
} kr_eval_ref;

/* One method's results (one row of the report). */
typedef struct kr_eval_row {
    char label[40]; /* "kara", "full(t=2)", ... */
    kara_kv_method method;
    float retention;       /* < 0: not applicable */
    float cap_share;       /* a cap row (--budgets): its cap as a share of full's peak bytes; < 0: none */
    uint64_t cap_bytes;    /* that cap in bytes (kv.budget), 0: none */
    int32_t budget_tokens; /* 0: not applicable */
    int32_t threads;
    /* teacher-forced replay */
    int32_t steps;
    double mean_slots; /* slots held after each decode, averaged */
    uint64_t peak_kv_bytes;
    double kl_mean, kl_max;   /* KL(p_full || p_method), nats */
    int32_t steps_compressed; /* steps whose logits saw an evicted cache */
    double kl_mean_compressed;
    double top1; /* fraction of steps with the same argmax as full */
    double nll_mean, ppl_ratio;
    /* free-running */
    int32_t first_div; /* index of the first greedy token differing from full; n_free when none */
    /* needle */
    int32_t n_depths;
    bool needle_hit[KR_EVAL_MAX_DEPTHS];
    int32_t needle_digits[KR_EVAL_MAX_DEPTHS]; /* leading characters of the code reproduced */
    float needle_kept[KR_EVAL_MAX_DEPTHS];     /* fraction of needle tokens still cached at the question */
    /* retention per region of the replay */
    int32_t n_regions;
    float region_kept[KR_EVAL_MAX_REGIONS];
    float region_min;
    /* systems (replay only) */
    uint64_t events, slots_evicted;
    double event_s, decode_s;
    /* a cap row whose method could not run within its cap: why (empty: it ran) */
    char error[200];
} kr_eval_row;

/* Run every measurement of one method (the context parameters say which).
 * make_ref: this is the reference run; fills *ref (allocates its arrays)
 * and compares against itself. On failure returns the status and writes a
 * message into err. */
kara_status kr_eval_method(const kr_eval_setup *s, const kara_context_params *cp, kr_eval_ref *ref, bool make_ref,
                           kr_eval_row *row, char *err, size_t err_size);
void kr_eval_ref_free(kr_eval_ref *ref);

/* Header facts for the report. */
typedef struct kr_eval_meta {
    const char *model_path;
    const char *model_desc;
    const char *text_path; /* "(built-in)" when none */
    int32_t n_ctx;
    const kara_kv_params *kv; /* the base settings (interval, buffer, ...) */
} kr_eval_meta;

void kr_eval_print_table(FILE *f, const kr_eval_setup *s, const kr_eval_meta *meta, const kr_eval_row *rows,
                         int n_rows);
/* Write CSV (one row per method; lists joined by ';') or JSON, by the
 * file's extension (.json: JSON, anything else: CSV), through
 * safe_output.h. 0, or the exit code (73, 74) after a message. */
int kr_eval_write(const char *path, const kr_eval_setup *s, const kr_eval_meta *meta, const kr_eval_row *rows,
                  int n_rows);
/* The CSV column names, comma-separated (the header line). */
const char *kr_eval_csv_header(void);

#endif
