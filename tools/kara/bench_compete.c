/* bench_compete.c - see bench_compete.h. */
#include "bench_compete.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t kr_compete_start(int cpu) {
    fflush(stdout); /* the child must not flush the parent's buffered output again */
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "kara bench: --compete: cannot start the competing process: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void)sched_setaffinity(0, sizeof set, &set);
        volatile unsigned long spin = 0;
        for (;;) spin++; /* until the parent kills it */
    }
    return pid;
}

void kr_compete_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}
