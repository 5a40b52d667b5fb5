/*
 * test_clock.h - the monotonic clock in milliseconds and a sleep of so many
 * milliseconds, for the test programs (one copy instead of one per program).
 */
#ifndef CCS_TEST_CLOCK_H
#define CCS_TEST_CLOCK_H

#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
static inline double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sleeps MS milliseconds (less when a signal interrupts it). */
static inline void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif /* CCS_TEST_CLOCK_H */
