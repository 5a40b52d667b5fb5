/*
 * clock.c - the trace's time base.  The hot path reads raw ticks (the TSC on
 * x86-64: a few ns, no system call); the writer converts them to ns since
 * start with a ratio measured against CLOCK_MONOTONIC, refined each time the
 * writer recalibrates, so the longer a job runs the better the ratio.
 * Also the slow paths' milliseconds: a monotonic clock and a sleep.
 */
#include "clock.h"
#include "record.h"
#include <errno.h>
#include <time.h>

static uint64_t tick0, mono0, real0;
static _Atomic double ns_per_tick = 1.0;

uint64_t ccs_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ccs_clock_init(void)
{
    real0 = realtime_ns();
    mono0 = ccs_clock_mono_ns();
    tick0 = ccs_ticks();
#if defined(__x86_64__) || defined(__i386__)
    /* A first estimate over ~1 ms; recalibration refines it. */
    uint64_t m, t;
    do {
        m = ccs_clock_mono_ns();
        t = ccs_ticks();
    } while (m - mono0 < 1000000);
    if (t > tick0)
        ns_per_tick = (double)(m - mono0) / (double)(t - tick0);
#endif
}

void ccs_clock_recalibrate(void)
{
#if defined(__x86_64__) || defined(__i386__)
    uint64_t m = ccs_clock_mono_ns(), t = ccs_ticks();
    if (t > tick0 && m > mono0 + 1000000)
        ns_per_tick = (double)(m - mono0) / (double)(t - tick0);
#endif
}

uint64_t ccs_ticks_to_ns(uint64_t ticks)
{
    if (ticks <= tick0)
        return 0;
    return (uint64_t)((double)(ticks - tick0) * ns_per_tick);
}

uint64_t ccs_ticks_delta_ns(uint64_t dticks) { return (uint64_t)((double)dticks * ns_per_tick); }
uint64_t ccs_clock_start_mono_ns(void) { return mono0; }
uint64_t ccs_clock_start_realtime_ns(void) { return real0; }

uint64_t ccs_clock_mono_ms(void) { return ccs_clock_mono_ns() / 1000000u; }

void ccs_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
