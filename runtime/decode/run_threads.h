/* run_threads.h - how many threads each kara_decode call runs on.
 *
 * A parallel region and its barriers cost microseconds when the cores are
 * free, and up to a scheduler time slice per barrier when another process
 * holds one of them: a tiny model's step (a few dozen barriers) then took
 * 100x longer on two threads than on one. So a call whose work is below
 * KR_PARALLEL_MIN_FLOPS runs on one thread, and for larger calls the
 * context measures both choices as it goes (seconds per flop, a moving
 * average of each) and takes the cheaper, trying the other now and then to
 * notice when the machine gets busy or quiet: after KR_RUN_THREADS_PROBE_EVERY
 * calls, and twice as long after each probe that lost (up to
 * KR_RUN_THREADS_PROBE_MAX, back to the start when the cheaper mode changes),
 * so a quiet machine pays for about one slow call in a thousand.
 * The kernels' bits do not depend on the thread split, so neither do the
 * results. */
#ifndef KR_RUN_THREADS_H
#define KR_RUN_THREADS_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"

/* Work (multiply-adds x 2) below which a call runs on one thread: about
 * 0.1-0.3 ms of one core (docs/PERFORMANCE.md, "Threads on a busy machine"). */
#define KR_PARALLEL_MIN_FLOPS 8e6
/* Calls larger than this are never probed on one thread (a long prefill of a
 * big model would stall): they use every thread. */
#define KR_PROBE_MAX_FLOPS 4e9
#define KR_RUN_THREADS_PROBE_EVERY 32
#define KR_RUN_THREADS_PROBE_MAX 1024
/* Before anything is measured, calls below this run on one thread first. */
#define KR_START_PARALLEL_FLOPS 256e6

typedef struct kr_run_threads_state {
    double flops_per_token;   /* weights' multiply-adds x 2 */
    double flops_per_context; /* attention's, per token and cached position */
    double sec_per_flop[2];   /* moving averages: [0] one thread, [1] all; 0 = not measured */
    double work;              /* of the current call */
    int32_t mode;             /* of the current call: 0 one thread, 1 all, -1 not timed */
    int32_t since_probe;      /* timed calls since the other mode was last tried */
    int32_t probe_every;      /* calls between tries of the other mode */
    bool probing;             /* the current call is such a try */
    int32_t best;             /* the cheaper mode when last compared */
} kr_run_threads_state;

void kr_run_threads_init(kara_context *c);
/* Sets c->run_threads for a validated batch of n_tokens; returns the start
 * time to pass to kr_run_threads_record. */
double kr_run_threads_choose(kara_context *c, int32_t n_tokens);
void kr_run_threads_record(kara_context *c, double t0);

#endif
