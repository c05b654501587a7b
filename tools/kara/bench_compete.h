/* bench_compete.h - `kara bench --compete`: a CPU-bound process pinned to
 * one core for the length of the benchmark, the busy device of an app that
 * shares its CPU with a UI or a camera pipeline (issue 17's threads bar:
 * -t 2 beside it must not be much slower than -t 1). */
#ifndef KR_BENCH_COMPETE_H
#define KR_BENCH_COMPETE_H

#include <sys/types.h>

/* Start the competitor on CPU `cpu`; returns its pid, or -1 (message
 * printed) when it cannot be started. */
pid_t kr_compete_start(int cpu);
/* Stop it (SIGKILL) and reap it. */
void kr_compete_stop(pid_t pid);

#endif
