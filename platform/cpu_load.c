/* cpu_load.c - other processes' runnable tasks (cpu_load.h). */
#include "cpu_load.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <dirent.h>
#include <sched.h>
#endif

#if defined(__linux__)
/* procs_running of /proc/stat, or -1. */
static int procs_running(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "procs_running %d", &n) == 1) break;
    fclose(f);
    return n;
}

/* This process's threads in state R (running or runnable), or -1. */
static int own_running(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* the thread has exited */
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        /* "tid (comm) S ...": the state follows the last ')' (comm may hold one) */
        const char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 'R') n++;
    }
    closedir(d);
    return n;
}
#endif

int kr_cpu_others_running(void) {
#if defined(__linux__)
    int all = procs_running(), own = own_running();
    if (all < 0 || own < 0) return -1;
    return all > own ? all - own : 0;
#else
    return -1;
#endif
}

int kr_cpu_usable_cores(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
