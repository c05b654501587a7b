/* monotonic_clock.h - seconds on a monotonic clock, for timing (events,
 * decode speed, benchmarks); only differences are meaningful. */
#ifndef KARA_MONOTONIC_CLOCK_H
#define KARA_MONOTONIC_CLOCK_H

double kara_monotonic_seconds(void);

#endif
