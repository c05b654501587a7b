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
 *
 * Decode steps and prompt batches are learned apart (their cost per flop
 * differs several times, so one average would flip between them). A try of
 * all threads is first priced by a ping: parallel regions in which every
 * thread is busy for its share of one region of the call (the call's
 * one-thread time / (threads x regions)), timed. When the ping's region
 * time x the call's regions exceeds what one thread is measured to need for
 * the call, the try is skipped (it counts as a try that lost): beside a busy
 * core, one try of a small model's prompt on two threads cost 190 calls of
 * one thread. (Empty regions priced that try as cheap: a thread that is not
 * busy yields less of its core's time slice.) Before one thread is measured
 * the ping is weighed against a fast core's speed instead. Before any ping,
 * when other processes' runnable tasks (cpu_load.h, the least of three
 * reads: a passing task is not a busy core) leave fewer free cores than the
 * threads would use, the try is refused outright and priced at
 * KR_BUSY_TRY_COST x one thread's time: beside a busy core the ping itself
 * lasts a time slice, paid inside a call that takes a few milliseconds on
 * one thread, and the calls right after it ran slower while the workers
 * spun. There is no
 * ceiling on the size of a call that may run on one thread: a large prompt
 * is tried on one thread once, early. A try of all threads that beats one
 * thread must do it twice in a row (the slower of the two times counts),
 * and so must a first call on all threads that beat the first on one:
 * beside a busy core one lucky call on both threads was kept, and the next
 * ran 30x slower. The context's first timed call is not recorded: cold
 * caches and first touches made it 3x slower than the next, so the mode it
 * ran on looked worse than it is.
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
#define KR_RUN_THREADS_PROBE_EVERY 32
#define KR_RUN_THREADS_PROBE_MAX 1024
/* Before anything is measured, calls below this run on one thread first;
 * larger ones on all threads, unless the ping prices the call's parallel
 * regions above what one fast core (KR_ONE_THREAD_FLOPS_FAST, flops per
 * second: AVX-512 VNNI int8 prompt GEMM) would need for the whole call.
 * Beside a busy core the shipped model's 128-token prompt (256 MFLOP) ran
 * its first timed calls on both threads, 2-3x slower than on one. */
#define KR_START_PARALLEL_FLOPS 256e6
#define KR_ONE_THREAD_FLOPS_FAST 200e9
/* What a try of all threads refused because other processes hold the cores
 * counts as, in one thread's time: a loss, so the next try backs off. */
#define KR_BUSY_TRY_COST 2.0
/* The longest a ping lasts (a few scheduler time slices). */
#define KR_PING_MAX_SECONDS 0.008
/* Calls of at least this many entries are prompt batches, learned apart
 * from decode steps. */
#define KR_BATCH_CLASS_TOKENS 16

/* What the context has learned about one class of calls. */
typedef struct kr_run_threads_class {
    double sec_per_flop[2]; /* moving averages: [0] one thread, [1] all; 0 = not measured */
    int32_t since_probe;    /* timed calls since the other mode was last tried */
    int32_t probe_every;    /* calls between tries of the other mode */
    int32_t best;           /* the cheaper mode when last compared */
    double pending;         /* seconds per flop of a try of all threads that beat one thread, until the
                             * next call confirms it (kr_run_threads_record); 0 = none */
} kr_run_threads_class;

typedef struct kr_run_threads_state {
    double flops_per_token;                         /* weights' multiply-adds x 2 */
    double flops_per_context;                       /* attention's, per token and cached position */
    kr_run_threads_class cls[2];                    /* [0] decode steps, [1] prompt batches */
    double work;                                    /* of the current call */
    int32_t cur;                                    /* class of the current call */
    int32_t mode;                                   /* of the current call: 0 one thread, 1 all, -1 not timed */
    bool probing;                                   /* the current call is such a try */
    int64_t regions;                                /* parallel regions run so far (kr_parallel_run) */
    int64_t regions_at_start;                       /* ... when the current call started */
    int64_t regions_per_call;                       /* of the last timed call; 0 = not known yet */
    double (*ping)(kara_context *, double, double); /* kr_parallel_ping (tests replace it) */
    int (*others_running)(void);                    /* kr_cpu_others_running (tests replace it) */
    int32_t cores;                                  /* cores this process may run on */
    int32_t busy_skips;                             /* tries of all threads refused: other processes hold cores */
    int32_t skipped;                                /* tries of all threads skipped on the ping's price */
    bool warm;                                      /* a timed call has run (the context's first is not recorded) */
} kr_run_threads_state;

void kr_run_threads_init(kara_context *c);
/* Sets c->run_threads for a validated batch of n_tokens; returns the start
 * time to pass to kr_run_threads_record. */
double kr_run_threads_choose(kara_context *c, int32_t n_tokens);
void kr_run_threads_record(kara_context *c, double t0);

#endif
