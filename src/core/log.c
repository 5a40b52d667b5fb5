/* log.c - one prefix, one destination, one write(2) per line. */
#include "log.h"
#include "ccs_config.h"
#include "shim.h"
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int log_fd = 2;

/* Expands %r %p %h %j in PAT into OUT. */
static void expand_pattern(const char *pat, char *out, size_t n)
{
    size_t o = 0;
    for (const char *p = pat; *p && o + 1 < n; p++) {
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
            l = n - 1 - o;
        memcpy(out + o, tmp, l);
        o += l;
    }
    out[o] = 0;
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
    expand_pattern(dest, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        char msg[4200];
        int n = snprintf(msg, sizeof msg, "ccshim[%d@%s]: CCSHIM_LOG='%s': cannot open '%s'; logging to stderr\n",
                         ccs_world_rank(), ccs_hostname(), dest, path);
        if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */
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
    int n = snprintf(buf, sizeof buf, "ccshim[%d@%s]: %s", ccs_world_rank(), ccs_hostname(),
                     names[level >= 0 && level <= CCS_LOG_NOTE ? level : 0]);
    if (n < 0 || (size_t)n >= sizeof buf)
        return;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n > sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
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
