/* monotonic_clock.h - seconds on a monotonic clock, for timing (events,
 * decode speed, benchmarks); only differences are meaningful. */
#ifndef KR_MONOTONIC_CLOCK_H
#define KR_MONOTONIC_CLOCK_H

double kr_monotonic_seconds(void);

#endif
