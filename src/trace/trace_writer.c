/*
 * trace_writer.c - the background thread that drains every ring into this
 * process's trace file (docs/trace-format.md), and the synchronous flush used
 * at MPI_Finalize, at exit and on fatal signals.  All file I/O of ccshim
 * happens here, never on the hot path.
 *
 * One owner at a time writes the file: the owner is a thread id taken with a
 * compare-and-swap rather than a mutex, so a fatal-signal handler can try to
 * take it without deadlocking on a lock its own thread already holds.
 */
#include "private_file.h"
#include "ccs_config.h"
#include "ccshim.h"
#include "log.h"
#include "registry.h"
#include "callsite.h"
#include "clock.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "pysite.h"
#include "record.h"
#include "ring.h"
#include "trace_format.h"
#include "thread.h"
#include "trace_writer.h"
#include "uncovered.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>


static atomic_long owner; /* tid writing the file, 0 when none */
static int fd = -1;
static int failed; /* tracing gave up (logged) */
static char path[4096];
/* Prepared outside signal handlers (ccs_writer_prepare): the file's name and
 * its META chunk, so that a fatal-signal flush only calls open and write. */
static char prep_path[4096], prep_meta[6000];
static size_t prep_meta_len;
static atomic_int prepared;
static int in_signal; /* flush from a signal handler: async-signal-safe calls only */
static size_t comm_cursor;
static uint32_t site_cursor;
static uint32_t pysite_cursor;
static int uncovered_written; /* the META line of uncovered.h is in the file */
static uint64_t records_written;
static pthread_t thread;

#define BATCH 4096
static struct ccs_record batch[BATCH];

#define MAX_MODULES 512
static struct {
    const void *base;
    uint32_t id;
} modules[MAX_MODULES];
static uint32_t nmodules;

static long tid(void) { return (long)syscall(SYS_gettid); }

static int write_all(const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_chunk(uint32_t type, const void *a, size_t alen, const void *b, size_t blen)
{
    struct ccs_chunk c = {.type = type, .length = (uint32_t)(alen + blen)};
    if (write_all(&c, sizeof c) || (alen && write_all(a, alen)) || (blen && write_all(b, blen)))
        return -1;
    return 0;
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '-' || *s == '_'))
            *s = '_';
}

static int take(int wait_ms);
static void give(void);

/* This program's path (/proc/self/exe), read once; "" when unknown.  For
 * the META chunk and the main program's MODULE chunk; the caller owns the
 * file, outside signal handlers. */
static const char *self_exe(void)
{
    static char exe[4096];
    if (!exe[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
    }
    return exe;
}

/* Computes the file's name and META for the current identity (not in a
 * signal handler: snprintf, readlink); the caller owns the file. */
static void prepare_owned(void)
{
    if (!ccs_cfg.trace_dir || !*ccs_cfg.trace_dir)
        return;
    char host[256], job[256];
    snprintf(host, sizeof host, "%s", ccs_hostname());
    snprintf(job, sizeof job, "%s", ccs_job_id());
    sanitize(host);
    sanitize(job);
    int rank = ccs_world_rank();
    char rbuf[16];
    if (rank >= 0)
        snprintf(rbuf, sizeof rbuf, "%d", rank);
    else
        snprintf(rbuf, sizeof rbuf, "x");
    atomic_store(&prepared, 0);
    int pl = snprintf(prep_path, sizeof prep_path, "%s/ccshim-%s-%s-r%s-p%d%s", ccs_cfg.trace_dir, job, host, rbuf,
                      (int)getpid(), CCS_TRACE_SUFFIX);
    int ml = snprintf(prep_meta, sizeof prep_meta, "host=%s\njob=%s\nexe=%s\nversion=%s\nrank=%d\nsize=%d\n",
                      ccs_hostname(), ccs_job_id(), self_exe(), ccshim_version(), rank, ccs_world_size());
    if (pl < 0 || (size_t)pl >= sizeof prep_path || ml < 0 || (size_t)ml >= sizeof prep_meta)
        return; /* too long: open_trace says so */
    prep_meta_len = (size_t)ml;
    atomic_store(&prepared, 1);
}

/* Opens the file and writes the header and META.  0 or -1 (logged, except
 * in a signal handler). */
static int open_trace(void)
{
    int rank = ccs_world_rank();
    if (!in_signal)
        prepare_owned(); /* the identity now */
    if (!atomic_load(&prepared)) {
        if (!in_signal)
            CCS_LOG(WARN, "CCSHIM_TRACE_DIR: the trace file's name or its metadata is too long; tracing is off");
        return -1;
    }
    memcpy(path, prep_path, sizeof path);
    fd = ccs_open_private(path, 0); /* never through a planted link; 0600 */
    if (fd < 0) {
        if (!in_signal)
            CCS_LOG(WARN, "CCSHIM_TRACE_DIR: cannot create trace file '%.300s': %s; tracing is off", path,
                    strerror(errno));
        return -1;
    }
    struct ccs_trace_header h = {.version = CCS_TRACE_VERSION,
                                 .byteorder = CCS_TRACE_BYTEORDER,
                                 .header_size = sizeof h,
                                 .record_size = sizeof(struct ccs_record),
                                 .rank = rank,
                                 .size = ccs_world_size(),
                                 .pid = (uint32_t)getpid(),
                                 .start_realtime_ns = ccs_clock_start_realtime_ns(),
                                 .start_mono_ns = ccs_clock_start_mono_ns()};
    memcpy(h.magic, CCS_TRACE_MAGIC, 8);
    uncovered_written = 0;
    if (write_all(&h, sizeof h) || write_chunk(CCS_CHUNK_META, prep_meta, prep_meta_len, NULL, 0)) {
        if (!in_signal)
            CCS_LOG(WARN, "CCSHIM_TRACE_DIR: cannot write trace file '%.300s': %s; tracing is off", path,
                    strerror(errno));
        close(fd);
        fd = -1;
        return -1;
    }
    return 0;
}

static uint32_t module_id(const void *base, const char *fname)
{
    /* dladdr names the main program as it was started (argv[0], maybe a
     * relative path or a bare name found through PATH): the tools need a
     * path they can open, so use the executable's own. */
    if (fname[0] != '/' && self_exe()[0])
        fname = self_exe();
    for (uint32_t i = 0; i < nmodules; i++)
        if (modules[i].base == base)
            return modules[i].id;
    if (nmodules >= MAX_MODULES)
        return 0;
    uint32_t id = nmodules + 1;
    modules[nmodules].base = base;
    modules[nmodules].id = id;
    nmodules++;
    struct ccs_trace_module m = {.id = id, .path_len = (uint32_t)strlen(fname)};
    write_chunk(CCS_CHUNK_MODULE, &m, sizeof m, fname, m.path_len);
    return id;
}

/* Writes the sites seen since the last pass, in id order. */
static void write_sites(void)
{
    uint32_t n = ccs_site_count();
    while (site_cursor < n) {
        void *pcs[CCS_MAX_STACK];
        uint32_t depth;
        if (ccs_site_get(site_cursor + 1, pcs, &depth) != 0)
            return; /* still being unwound: next pass */
        struct {
            struct ccs_trace_site s;
            struct ccs_trace_frame f[CCS_MAX_STACK];
        } out = {.s = {.id = site_cursor + 1, .depth = depth}};
        char names[CCS_MAX_STACK * 128];
        size_t nl = 0;
        for (uint32_t i = 0; i < depth; i++) {
            Dl_info di;
            memset(&out.f[i], 0, sizeof out.f[i]);
            /* pc - 1: a return address may already belong to the next function.
             * (Not in a signal handler: dladdr is not async-signal-safe; the
             * address stays raw there.) */
            if (!in_signal && dladdr((char *)pcs[i] - 1, &di) && di.dli_fname) {
                out.f[i].module = module_id(di.dli_fbase, di.dli_fname);
                out.f[i].offset = (uint64_t)((char *)pcs[i] - (char *)di.dli_fbase);
                if (di.dli_sname) {
                    size_t l = strnlen(di.dli_sname, 127);
                    memcpy(names + nl, di.dli_sname, l);
                    names[nl + l] = 0;
                    out.f[i].sym_len = (uint32_t)(l + 1);
                    nl += l + 1;
                }
            } else {
                out.f[i].offset = (uint64_t)(uintptr_t)pcs[i];
            }
        }
        write_chunk(CCS_CHUNK_SITE, &out, sizeof out.s + depth * sizeof out.f[0], names, nl);
        site_cursor++;
    }
}

/* Writes the annotated (Python) sites interned since the last pass. */
static void write_pysites(void)
{
    uint32_t n = ccs_pysite_count();
    for (; pysite_cursor < n; pysite_cursor++) {
        const char *t = ccs_pysite_text(pysite_cursor + 1);
        if (!t)
            return;
        struct ccs_trace_pysite p = {.id = pysite_cursor + 1, .text_len = (uint32_t)strlen(t)};
        if (write_chunk(CCS_CHUNK_PYSITE, &p, sizeof p, t, p.text_len) != 0)
            return;
    }
}

/* Writes the communicators described since the last pass. */
static void write_comms(void)
{
    struct ccs_trace_comm defs[64];
    size_t k;
    while ((k = ccs_comm_defs(comm_cursor, defs, 64)) > 0) {
        for (size_t i = 0; i < k; i++)
            write_chunk(CCS_CHUNK_COMM, &defs[i], sizeof defs[i], NULL, 0);
        comm_cursor += k;
    }
}

/* At the process's end (exit or a fatal signal): the calls still in
 * progress, one per thread at most (a ring's in-flight record, which the
 * drain never reads: it is published to the ring only when the call
 * returns), in one INFLIGHT chunk, so that a call a rank was blocked in
 * when it was killed is in its trace.  Async-signal-safe: loads, the
 * clock's ticks, write. */
static void write_inflight(void)
{
    static struct ccs_record fl[64];
    size_t n = 0;
    uint32_t pid = (uint32_t)getpid();
    uint64_t now = ccs_ticks();
    for (struct ccs_ring *r = ccs_ring_first(); r && n < 64; r = r->next) {
        if (r->pid != pid)
            continue;
        struct ccs_record *p = atomic_load_explicit(&r->inflight, memory_order_acquire);
        if (!p)
            continue;
        ccs_record_snapshot(p, &fl[n]); /* its thread may still write times and flags */
        if (atomic_load_explicit(&r->inflight, memory_order_acquire) != p)
            continue; /* it returned while we looked: published after this last drain, so not in the trace */
        fl[n].fingerprint = ccs_record_fingerprint(&fl[n]);
        uint64_t t0 = fl[n].t_start;
        fl[n].t_start = ccs_ticks_to_ns(t0);
        fl[n].t_dur = t0 && now > t0 ? ccs_ticks_delta_ns(now - t0) : 0; /* so far */
        n++;
    }
    if (!n)
        return;
    write_comms(); /* what they name, first */
    write_sites();
    write_pysites();
    write_chunk(CCS_CHUNK_INFLIGHT, fl, n * sizeof fl[0], NULL, 0);
}

static uint64_t total_dropped(void)
{
    uint64_t d = 0;
    for (struct ccs_ring *r = ccs_ring_first(); r; r = r->next)
        d += atomic_load(&r->drain.lost);
    return d;
}

/* The flush itself; the caller owns the file. */
static int flush_owned(int reason, int signo)
{
    if (failed)
        return -1;
    if (fd < 0) {
        /* Wait for the rank before naming the file, unless this is the end;
         * and for something to write: a process that records nothing (a
         * shell or helper that inherited the preload) leaves no trace. */
        if (ccs_world_rank() < 0 && reason < 0)
            return 0;
        struct ccs_trace_comm one;
        size_t ulen;
        /* (A process noted as using communication ccshim does not see gets
         * a trace at the end, with no records: the audit says why.) */
        int any = ccs_comm_defs(0, &one, 1) > 0 || ccs_site_count() > 0 ||
                  (reason >= 0 && ccs_uncovered_meta(&ulen) != NULL);
        for (struct ccs_ring *r = ccs_ring_first(); r && !any; r = r->next)
            any = atomic_load(&r->head) > 0 || atomic_load(&r->drain.lost) > 0;
        if (!any)
            return 0;
        if (open_trace() != 0) {
            failed = 1;
            return -1;
        }
    }
    ccs_clock_recalibrate();
    size_t ulen;
    const char *umeta = ccs_uncovered_meta(&ulen);
    if (umeta && !uncovered_written) /* a META chunk of its own: readers join them */
        uncovered_written = write_chunk(CCS_CHUNK_META, umeta, ulen, NULL, 0) == 0;
    write_comms();
    write_sites();
    write_pysites();
    for (struct ccs_ring *r = ccs_ring_first(); r; r = r->next) {
        size_t n;
        while ((n = ccs_ring_drain(r, batch, BATCH)) > 0) {
            for (size_t i = 0; i < n; i++) {
                batch[i].fingerprint = ccs_record_fingerprint(&batch[i]);
                batch[i].t_start = ccs_ticks_to_ns(batch[i].t_start);
                batch[i].t_dur = ccs_ticks_delta_ns(batch[i].t_dur);
            }
            /* What these records name first (a communicator created, a
             * site first called, since the pass began): a reader then
             * meets every definition before its first use, except a site
             * another thread is still unwinding (write_sites stops there). */
            write_comms();
            write_sites();
            write_pysites();
            if (write_chunk(CCS_CHUNK_RECORDS, batch, n * sizeof batch[0], NULL, 0) != 0) {
                if (!in_signal)
                    CCS_LOG(WARN, "CCSHIM_TRACE_DIR: write to '%.300s' failed: %s; tracing is off", path,
                            strerror(errno));
                failed = 1;
                return -1;
            }
            records_written += n;
        }
    }
    write_sites(); /* sites first seen by the records just written */
    write_pysites();
    if (reason == CCS_END_EXIT || reason == CCS_END_SIGNAL)
        write_inflight();
    if (reason >= 0) {
        struct ccs_trace_end e = {.records = records_written,
                                  .dropped = total_dropped(),
                                  .steps = ccs_step_now(),
                                  .reason = reason,
                                  .signo = signo};
        write_chunk(CCS_CHUNK_END, &e, sizeof e, NULL, 0);
    }
    return 0;
}

/* Takes the file.  WAIT_MS bounds the wait (signal handlers); -1 = forever. */
static int take(int wait_ms)
{
    long me = tid(), none = 0;
    if (atomic_load(&owner) == me)
        return -1; /* a signal arrived in the middle of our own flush */
    for (int waited = 0;; waited++) {
        none = 0;
        if (atomic_compare_exchange_strong(&owner, &none, me))
            return 0;
        if (wait_ms >= 0 && waited >= wait_ms)
            return -1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void give(void) { atomic_store(&owner, 0); }

void ccs_writer_prepare(void)
{
    if (take(-1) != 0)
        return;
    prepare_owned();
    give();
}

int ccs_writer_flush(int reason, int signo)
{
    if (!ccs_cfg.trace_dir || !*ccs_cfg.trace_dir)
        return -1;
    if (take(reason == CCS_END_SIGNAL ? 200 : -1) != 0)
        return -1;
    in_signal = reason == CCS_END_SIGNAL;
    int rc = flush_owned(reason, signo);
    in_signal = 0;
    give();
    return rc;
}

static void *writer_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {ccs_cfg.flush_ms / 1000, (ccs_cfg.flush_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (ccs_cfg.trace_dir && *ccs_cfg.trace_dir && !failed) {
            take(-1);
            flush_owned(-1, 0);
            give();
        }
    }
    return NULL;
}

static atomic_int start_once;

void ccs_writer_start(void)
{
    if (atomic_exchange(&start_once, 1))
        return;
    if (ccs_cfg.trace_dir && *ccs_cfg.trace_dir) {
        if (ccs_thread_start(writer_main, NULL, 256 * 1024, &thread) != 0)
            CCS_LOG(WARN, "cannot start the background writer thread; the trace is written only at exit");
    }
}

/* The trace file's name, or NULL when there is none or tracing gave up (a
 * full disk): the summary never names a trace that was switched off. */
const char *ccs_writer_path(void)
{
    return fd >= 0 && !failed ? path : NULL;
}

static void writer_atfork_child(void)
{
    /* The parent's file and thread are the parent's: start afresh. */
    if (fd >= 0)
        close(fd);
    fd = -1;
    failed = 0;
    path[0] = 0;
    atomic_store(&prepared, 0);
    comm_cursor = 0;
    site_cursor = 0;
    pysite_cursor = 0;
    nmodules = 0;
    records_written = 0;
    atomic_store(&owner, 0);
    atomic_store(&start_once, 0); /* the child starts its own writer */
}

static const struct ccs_feature writer = {
    .name = "trace writer",
    .first_call = ccs_writer_start,
    .flush = ccs_writer_flush,
    .fork_child = writer_atfork_child,
    .prepare_signal = ccs_writer_prepare,
    .trace_path = ccs_writer_path,
};

__attribute__((constructor)) static void writer_ctor(void) { ccs_feature_register(&writer); }
