/* batch_resume.h - what a resumed `kara batch` job still has to run, and
 * what it does about requests that changed since they were answered.
 *
 * Each result line carries the hash of the input line it answers
 * (kr_batch_request_hash, batch_jsonl.h). On resume a request whose last
 * answer (in the output, or in OUTPUT.hold) has another hash changed under
 * its custom_id; --on-changed says what happens:
 *   rerun (default): its old answer moves from the output to
 *     OUTPUT.superseded and it runs again, so the output still answers
 *     every request exactly once; with --ordered the answers after it in
 *     input order move to OUTPUT.hold and come back after it, so the
 *     output stays in input order;
 *   refuse: nothing is run, the changed requests are listed (exit 65);
 *   keep: the old answers stand (what versions without the hash did).
 * Lines without a hash (written by an older version) are trusted, and so
 * are lines carrying the raw-bytes hash of older versions when it matches.
 *
 * Error lines are retried whatever the policy: an error line without a
 * custom_id (the input line did not parse) whose input line now has one,
 * and with limits_changed (batch_meta.h) the errors of limits
 * (kv_budget_exceeded, context_length_exceeded). Their old lines move to
 * OUTPUT.superseded like changed answers. With drop_all (settings changed
 * under an explicit --on-changed rerun) every line of the output and of
 * OUTPUT.hold is superseded. Duplicate result lines (a request answered
 * twice) are moved out too; the first answer stays. */
#ifndef KR_BATCH_RESUME_H
#define KR_BATCH_RESUME_H

#include <stdbool.h>
#include <stdint.h>

#include "batch_input.h"
#include "batch_meta.h" /* the settings check that sets drop_all and limits_changed */
#include "batch_order.h"
#include "batch_output.h"
#include "strset.h"

/* The numbers of kara_config.batch_on_changed (batch.on_changed or --on-changed: rerun, refuse, keep). */
typedef enum { KR_ON_CHANGED_RERUN = 0, KR_ON_CHANGED_REFUSE = 1, KR_ON_CHANGED_KEEP = 2 } kr_on_changed;

/* A shard's requests: slot (rank in the shard's input order) -> input line
 * index, custom_id -> slot, slot -> request hash. */
typedef struct kr_batch_slots {
    const kr_batch_input *in;
    const int *shard;
    int n_shard;
    const kr_strset *ids;
    const uint64_t *hash;
    const uint64_t *raw_hash; /* slot -> the raw-bytes hash of older versions */
} kr_batch_slots;

/* The slot a result answers: by custom_id, or for an error line without
 * one by its input line; -1 when it is not this shard's. */
int kr_batch_slot_of(const kr_batch_slots *s, const char *custom_id, int line);

typedef struct kr_batch_resume {
    const kr_batch_slots *slots;
    const kr_batch_order *ord;
    kr_on_changed policy;
    bool drop_all;       /* settings changed under --on-changed rerun: everything runs again */
    bool limits_changed; /* retry the error lines of limits */
    int answered;        /* slots the output answers (after a rerun rewrite) */
    int legacy;          /* of them, by lines without a request hash */
    int changed;         /* slots whose answer is for another version of the request */
    int superseded;      /* lines moved to OUTPUT.superseded */
    int moved;           /* --ordered: lines moved to OUTPUT.hold to keep input order */
    int hold_stale;      /* OUTPUT.hold lines for another version of their request */
    int fixed;           /* error lines of input lines that did not parse and now do: retried */
    int limits;          /* error lines of limits retried (limits_changed) */
    int dropped;         /* drop_all: answers superseded */
} kr_batch_resume;

/* Mark in ord what the output answers, applying the policy to changed
 * requests (rewriting the output for rerun). Returns -1 to go on, else an
 * exit code after printing the problem. */
int kr_batch_resume_scan(kr_batch_resume *r, kr_batch_output *out, kr_batch_order *ord);
/* slot_of for kr_batch_order_open (user: the kr_batch_resume): a held
 * result for another version of its request is dropped (rerun), taken
 * (keep) or counted for refusal (refuse). */
int kr_batch_resume_hold_slot(void *user, const kr_batch_scanned *r);
/* Before kr_batch_order_open, with refuse: 65 (after listing them) when
 * OUTPUT.hold answers changed requests, else -1. It only reads the file. */
int kr_batch_resume_hold_check(kr_batch_resume *r, const kr_batch_order *ord);
/* After the run: the error lines the output holds, if any (the exit
 * status is 1 iff there are any), how many are new, the first old ones
 * named. */
void kr_batch_resume_errors(const kr_batch_slots *s, const kr_batch_output *out, int failed_new, int failed_old);
/* The resume notes: changed requests and what was done, old-format lines. */
void kr_batch_resume_report(const kr_batch_resume *r, const char *out_path, const char *hold_path);

#endif
