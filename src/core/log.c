/* log.c - one prefix, one destination, one write(2) per line. */
#include "log.h"
#include "ccs_config.h"
#include "private_file.h"
#include "process.h"
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int log_fd = 2;

#define CUT_MARK "...[truncated]"

int ccs_expand_pattern(const char *pat, char *out, unsigned long n)
{
    size_t o = 0;
    const char *p;
    for (p = pat; *p && o + 1 < n; p++) {
        if (*p != '%' || !p[1]) {
            out[o++] = *p;
            continue;
        }
        char tmp[128];
        switch (*++p) {
        case 'r': snprintf(tmp, sizeof tmp, "%d", ccs_world_rank()); break;
        case 'p': snprintf(tmp, sizeof tmp, "%d", (int)getpid()); break;
        case 'h': snprintf(tmp, sizeof tmp, "%s", ccs_hostname()); break;
        case 'j': snprintf(tmp, sizeof tmp, "%s", ccs_job_id()); break;
        case '%': snprintf(tmp, sizeof tmp, "%%"); break;
        default: snprintf(tmp, sizeof tmp, "%%%c", *p); break;
        }
        size_t l = strlen(tmp);
        if (l > n - 1 - o)
            return out[o] = 0, -1;
        memcpy(out + o, tmp, l);
        o += l;
    }
    out[o] = 0;
    return *p ? -1 : 0;
}

/* A line into BUF (N bytes, N > sizeof CUT_MARK + 1): the prefix, then FMT;
 * a line too long ends in CUT_MARK.  Returns its length with the newline. */
static size_t format_line(char *buf, size_t n, const char *prefix, const char *fmt, va_list ap)
{
    int p = snprintf(buf, n, "ccshim[%d@%s]: %s", ccs_world_rank(), ccs_hostname(), prefix);
    size_t o = p < 0 ? 0 : (size_t)p >= n - 1 ? n - 2 : (size_t)p;
    int m = vsnprintf(buf + o, n - 1 - o, fmt, ap); /* room kept for the newline */
    if (m < 0)
        m = 0;
    if ((size_t)p >= n - 1 || (size_t)m >= n - 1 - o) { /* cut: say so */
        o = n - 2 - (sizeof CUT_MARK - 1);
        memcpy(buf + o, CUT_MARK, sizeof CUT_MARK - 1);
        o += sizeof CUT_MARK - 1;
    } else {
        o += (size_t)m;
    }
    buf[o++] = '\n';
    return o;
}

static size_t format_linef(char *buf, size_t n, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t format_linef(char *buf, size_t n, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = format_line(buf, n, prefix, fmt, ap);
    va_end(ap);
    return len;
}

void ccs_log_open(void)
{
    const char *dest = ccs_cfg.log;
    if (!dest || !*dest || strcmp(dest, "stderr") == 0) {
        int old = atomic_exchange(&log_fd, 2);
        if (old > 2)
            close(old);
        return;
    }
    char path[4096];
    int fits = ccs_expand_pattern(dest, path, sizeof path) == 0;
    int fd = fits ? ccs_open_private(path, 1) : -1; /* never through a planted link; 0600 */
    if (fd < 0) {
        /* Said once (this runs again when the rank becomes known); the
         * values cut so that the line stays readable. */
        static int warned;
        if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            return;
        char msg[1024];
        size_t n = format_linef(
            msg, sizeof msg, "warning: ", "CCSHIM_LOG='%.300s%s': %s%.300s%s%s; logging to stderr", dest,
            strlen(dest) > 300 ? CUT_MARK : "", fits ? "cannot open '" : "expands to more than 4095 bytes",
            fits ? path : "", fits && strlen(path) > 300 ? CUT_MARK : "", fits ? "'" : "");
        if (write(2, msg, n) < 0) { /* nothing more to do */
        }
        return;
    }
    int old = atomic_exchange(&log_fd, fd);
    if (old > 2)
        close(old);
}

static void vlog(int level, const char *fmt, va_list ap)
{
    static const char *names[] = {"error: ", "warning: ", "", "debug: ", ""};
    char buf[2048];
    if (level > ccs_cfg.log_level && level != CCS_LOG_ERROR && level != CCS_LOG_NOTE)
        return;
    size_t n = format_line(buf, sizeof buf, names[level >= 0 && level <= CCS_LOG_NOTE ? level : 0], fmt, ap);
    ccs_log_raw(buf, (unsigned long)n);
}

void ccs_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

void ccs_log_once(int *flag, int level, const char *fmt, ...)
{
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

void ccs_log_raw(const char *text, unsigned long len)
{
    int fd = atomic_load(&log_fd);
    while (len > 0) {
        ssize_t w = write(fd, text, len);
        if (w <= 0)
            return;
        text += w;
        len -= (unsigned long)w;
    }
}
