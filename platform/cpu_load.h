/* cpu_load.h - how many cores other processes are keeping busy right now,
 * read without running anything on the cores: a try of all threads beside
 * a busy core costs a scheduler time slice per parallel region, and even
 * the ping that prices it costs a slice (run_threads.h). */
#ifndef KR_CPU_LOAD_H
#define KR_CPU_LOAD_H

/* Runnable tasks of the whole system that are not this process's own
 * running threads (Linux: procs_running of /proc/stat minus the threads of
 * /proc/self/task in state R), or -1 where that cannot be read. A snapshot:
 * it counts tasks, not their share of a core. */
int kr_cpu_others_running(void);
/* Cores this process may run on (its affinity mask), at least 1. */
int kr_cpu_usable_cores(void);

#endif
