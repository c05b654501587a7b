/* monotonic_clock.c - POSIX CLOCK_MONOTONIC behind kr_monotonic_seconds. */
#include "monotonic_clock.h"

#include <time.h>

double kr_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
