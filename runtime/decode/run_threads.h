/* run_threads.h - how many threads each kara_decode call runs on.
 *
 * A barrier costs microseconds on free cores but up to a scheduler time
 * slice when another process holds one, so small calls run on one thread and
 * larger ones on whichever of one thread or all the context has measured
 * cheaper (seconds per flop, decode steps and prompt batches apart), trying
 * the other now and then with a back-off so a quiet machine rarely pays. A
 * try of all threads is priced first by a ping of busy regions, or refused
 * when other processes leave too few free cores; it must win twice in a row
 * to be kept, and the first timed call is not recorded (cold caches). The
 * measurements behind each rule: docs/PERFORMANCE.md, "Threads on a busy
 * machine". The kernels' bits do not depend on the thread split, so neither
 * do the results. */
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
