/*
 * fuzz_log.c - the log (src/core/log.h) for the side-channel fuzz targets:
 * every line is formatted, as the library formats it, so that a bad
 * argument still shows, then dropped (printed to stderr when
 * CCSHIM_FUZZ_LOG is set).  The real log.c needs the process identity
 * (process.c), which the targets leave out.
 */
#include "log.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void vlog(const char *fmt, va_list ap)
{
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (getenv("CCSHIM_FUZZ_LOG"))
        fprintf(stderr, "ccshim: %s\n", buf);
}

void ccs_log(int level, const char *fmt, ...)
{
    va_list ap;
    (void)level;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void ccs_log_once(int *flag, int level, const char *fmt, ...)
{
    va_list ap;
    (void)level;
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        return;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}
