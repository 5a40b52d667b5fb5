/*
 * symbolize_dw.c - names a program counter with its function and, where
 * debug information exists, its file and line, through elfutils' libdwfl
 * (libdw.so.1), for the desync reports.  Diagnostic path only: libdw is
 * dlopen'ed RTLD_LOCAL on the first report (so its symbols and those of the
 * libraries it needs never join the job's namespace, and a job that never
 * gets a verdict never loads it); when it is missing, or was not found at
 * configure time, names come from dladdr (ccs_site_symbolize).
 */
#include <config.h>
#include "log.h"
#include "callsite.h"
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_ELFUTILS_LIBDWFL_H
#include "dwline.h"

/* The functions used, resolved from the dlopen'ed library (dwline.c). */
static struct ccs_dw dw;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int tried, usable, missing_logged;
static Dwfl *dwfl;
static Dwfl_Callbacks callbacks;
static pid_t report_pid;

static int load(void)
{
    if (tried)
        return usable;
    tried = 1;
    char why[200];
    if (ccs_dw_load(&dw, why, sizeof why) != 0) {
        ccs_log_once(&missing_logged, CCS_LOG_INFO, "%s: report frames are named through dladdr only", why);
        return 0;
    }
    usable = 1;
    callbacks.find_elf = dw.find_elf;
    /* The standard search ends by asking the debuginfod servers named in
     * DEBUGINFOD_URLS (set by some distributions' login scripts) for every
     * module with no local debug information: a report would then wait on
     * the network, DEBUGINFOD_TIMEOUT (90 s) per module where a firewall
     * drops the packets, with the verdict's diagnosis and an abort behind
     * it.  With the variable set, separate debug information comes from
     * local files by build ID (/usr/lib/debug/.build-id) only. */
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (urls && *urls) {
        callbacks.find_debuginfo = dw.build_id_find_debuginfo;
        CCS_LOG(INFO, "DEBUGINFOD_URLS is set: desync reports do not ask a debuginfod server (a report must not "
                      "wait on the network); separate debug information comes from /usr/lib/debug by build ID");
    } else {
        callbacks.find_debuginfo = dw.find_debuginfo;
    }
    return 1;
}

/* (Re)reads this process's modules: at first use, after a fork, and when
 * an address falls outside every module known (a library loaded since). */
static int report_modules(void)
{
    if (!dwfl && !(dwfl = dw.begin(&callbacks)))
        return -1;
    dw.report_begin(dwfl);
    int rc = dw.proc_report(dwfl, getpid());
    dw.report_end(dwfl, NULL, NULL);
    report_pid = getpid();
    return rc == 0 ? 0 : -1;
}

static int symbolize(void *pc, char *buf, size_t n)
{
    if (!load())
        return -1;
    if ((!dwfl || report_pid != getpid()) && report_modules() != 0)
        return -1;
    /* A return address: the call is the instruction before it. */
    Dwarf_Addr a = (Dwarf_Addr)(uintptr_t)pc - 1;
    Dwfl_Module *m = dw.addrmodule(dwfl, a);
    if (!m && (report_modules() != 0 || !(m = dw.addrmodule(dwfl, a))))
        return -1;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *fn = dw.addrinfo(m, a, &off, &sym, NULL, NULL, NULL);
    Dwarf_Addr start = 0;
    const char *mod = dw.module_info(m, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    /* File and line for the job's own modules; the system's libraries (libc,
     * the MPI) by function only: loading their separate debug information
     * would cost most of the report's time for lines nobody reads.  The
     * line is ccshim-audit's (dwline.c): the call's own, in the function
     * the author wrote it in. */
    int system_lib = mod && (strncmp(mod, "/lib/", 5) == 0 || strncmp(mod, "/lib64/", 7) == 0 ||
                             strncmp(mod, "/usr/lib/", 9) == 0 || strncmp(mod, "/usr/lib64/", 11) == 0);
    struct ccs_dw_where where;
    int have_line = !system_lib && ccs_dw_where(&dw, m, a + 1, &where) == 0;
    if (!fn)
        return -1;
    const char *base = mod ? strrchr(mod, '/') : NULL;
    int w = snprintf(buf, n, "%s+0x%llx", fn, (unsigned long long)off + 1);
    if (have_line && w > 0 && (size_t)w < n) {
        w += snprintf(buf + w, n - (size_t)w, " at %s:%d", where.file, where.line);
        if (where.inl_func[0] && where.inl_line > 0 && w > 0 && (size_t)w < n)
            w += snprintf(buf + w, n - (size_t)w, " (inlined %s at %s:%d)", where.inl_func, where.inl_file,
                          where.inl_line);
    }
    if (w > 0 && (size_t)w < n)
        snprintf(buf + w, n - (size_t)w, " (%s+0x%llx)", base ? base + 1 : mod ? mod : "?",
                 (unsigned long long)((uintptr_t)pc - start));
    return 0;
}

void ccs_site_symbolize_full(void *pc, char *buf, size_t n)
{
    pthread_mutex_lock(&lock);
    int rc = symbolize(pc, buf, n);
    pthread_mutex_unlock(&lock);
    if (rc != 0)
        ccs_site_symbolize(pc, buf, n);
}

#else

void ccs_site_symbolize_full(void *pc, char *buf, size_t n) { ccs_site_symbolize(pc, buf, n); }

#endif

/* ------------------------------------------------ another rank's call site */

struct find_mod {
    const char *path;
    size_t len;
    uintptr_t base;
    int found;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct find_mod *f = arg;
    /* dladdr names the main program as it was started (argv[0]). */
    const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : program_invocation_name;
    if (name && strlen(name) == f->len && memcmp(name, f->path, f->len) == 0) {
        f->base = (uintptr_t)info->dlpi_addr;
        f->found = 1;
        return 1;
    }
    return 0;
}

int ccs_site_resymbolize(const char *text, char *out, size_t n)
{
    /* Only the bare "MODULE+0xOFFSET" form (no symbol was exported). */
    const char *plus = strrchr(text, '+');
    if (!plus || strchr(text, ' ') || strncmp(plus, "+0x", 3) != 0)
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long off = strtoull(plus + 3, &end, 16);
    if (errno || !end || *end)
        return -1;
    struct find_mod f = {text, (size_t)(plus - text), 0, 0};
    dl_iterate_phdr(find_cb, &f);
    if (!f.found)
        return -1;
    ccs_site_symbolize_full((void *)(f.base + (uintptr_t)off), out, n);
    return 0;
}
