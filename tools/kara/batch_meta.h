/* batch_meta.h - OUTPUT.meta: what the answers of a `kara batch` output
 * were computed with, so that a resume does not mix answers of another
 * model or other settings into it.
 *
 * The record is a side file (the output stays a plain OpenAI Batch JSONL
 * file that any consumer reads): one JSON object of strings, written
 * through a temporary file and a rename, so it is always whole:
 *   model.hash   content hash of the model file, every byte (weights,
 *                tokenizer, chat template and hyperparameters all change
 *                answers; a hash of the tensor data alone would miss a new
 *                tokenizer or template);
 *   model.file   its path (shown, not compared);
 *   every configuration key that changes an answer: runtime.device,
 *   context.size, sampling.*, kv_cache.*, kara.*, baselines.*, chat.*, and
 *   batch.ignore_eos. Not recorded: threads, context.batch, --prefill-chunk,
 *   batch.max_concurrency, speculative.* (the same text whatever their
 *   values) and paths of the job.
 * Under kv_cache.method full, context.size, kv_cache.budget and
 * kv_cache.seq_tokens are limits: they decide whether a request fits, not
 * its answer, so a resume may change them (the error lines of limits are
 * then retried); under a method that evicts they shape every answer and
 * count like the other keys.
 *
 * A resume whose record differs is refused (exit 78) naming each key,
 * old -> new, unless --on-changed rerun is given explicitly: every answer
 * of the output then moves to OUTPUT.superseded and runs again. */
#ifndef KR_BATCH_META_H
#define KR_BATCH_META_H

#include <stdbool.h>

#include "json.h"
#include "kara.h"

typedef struct kr_batch_meta_check {
    bool drop_all;       /* --on-changed rerun over changed settings: every answer runs again */
    bool limits_changed; /* a limit (kv_cache.method full) differs: retry the error lines of limits */
    bool recorded;       /* the output had a record */
} kr_batch_meta_check;

/* This run's record and where it goes (OUTPUT.meta). */
typedef struct kr_batch_meta {
    kr_jbuf rec;
    char *path;
    kr_batch_meta_check c; /* what the comparison found */
} kr_batch_meta;

/* Build this run's record and, on resume, compare it with the output's
 * (kr_batch_meta_compare; the output or its hold file holding anything
 * counts as answers; m->c says what it found). Returns -1 to go on, else an exit code after
 * printing the problem. */
int kr_batch_meta_open(kr_batch_meta *m, const kara_config *cfg, bool ignore_eos, bool resume, int n_answered,
                       const char *hold_path);
/* Write the record (before any answer of this run): -1, or 74 after
 * printing the problem. */
int kr_batch_meta_commit(const kr_batch_meta *m);
void kr_batch_meta_free(kr_batch_meta *m);

/* The record of this run into out (one line). Returns -1, or an exit code
 * after printing the problem (the model file cannot be read: 66). */
int kr_batch_meta_build(const kara_config *cfg, bool ignore_eos, kr_jbuf *out);
/* Compare the record at path with now. have_answers: the output answers
 * something (else any record is simply replaced). rerun: --on-changed
 * rerun was given explicitly. Returns -1 to go on (*c says what to do),
 * else an exit code after printing the problem. */
int kr_batch_meta_compare(const char *path, const kr_jbuf *now, bool have_answers, bool rerun, kr_batch_meta_check *c);
/* Write now to path atomically; 0 or an errno value. */
int kr_batch_meta_write(const char *path, const kr_jbuf *now);

#endif
