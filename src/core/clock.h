/*
 * clock.h - time (clock.c): the hot path's cheap ticks (inline) and the
 * slow paths' monotonic clock, sleep and the trace's time base.
 */
#ifndef CCS_CLOCK_H
#define CCS_CLOCK_H

#include "attributes.h"
#include <stdint.h>

/* Cheap monotonic ticks (TSC on x86-64, else CLOCK_MONOTONIC ns). */
static inline uint64_t ccs_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    extern uint64_t ccs_clock_mono_ns(void);
    return ccs_clock_mono_ns();
#endif
}
CCS_HIDDEN uint64_t ccs_clock_mono_ns(void);
/* Slow paths: CLOCK_MONOTONIC in ms; sleeps MS ms (resumed after signals). */
CCS_HIDDEN uint64_t ccs_clock_mono_ms(void);
CCS_HIDDEN void ccs_sleep_ms(long ms);
/* Ticks to ns since start (trace time base); calibrated as time passes. */
CCS_HIDDEN uint64_t ccs_ticks_to_ns(uint64_t ticks);
CCS_HIDDEN uint64_t ccs_ticks_delta_ns(uint64_t dticks);
CCS_HIDDEN void ccs_clock_init(void);
CCS_HIDDEN void ccs_clock_recalibrate(void);
CCS_HIDDEN uint64_t ccs_clock_start_mono_ns(void);
CCS_HIDDEN uint64_t ccs_clock_start_realtime_ns(void);

#endif
