/*
 * runtime.c - start-up and shut-down of libccshim (configuration, signals,
 * fork, the exit summary) and the public API of include/ccshim.h; what the
 * process is (rank, host, job, step) is process.c's.
 */
#include <config.h>
#include "ccs_config.h"
#include "ccshim.h"
#include "clock.h"
#include "comm.h"
#include "log.h"
#include "private_file.h"
#include "process.h"
#include "pysite.h"
#include "record.h"
#include "step.h"
#include "registry.h"
#include "ring.h"
#include "runtime.h"
#include "uncovered.h"
#include "ccs_kinds.h"
#include "trace_format.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Defined (1) by libccshim-mpi.so only (src/mpi/mpi_setup.c): there the
 * fatal-signal handlers wait for MPI_Init, so that the MPI library's own
 * handlers are installed first and stay in charge of their backtrace. */
extern const int ccs_mpi_library __attribute__((weak, visibility("hidden")));
static int under_mpi_library(void)
{
    return &ccs_mpi_library != NULL && ccs_mpi_library;
}

static atomic_int inited, finished_exit;

static const char *env_getenv(const char *name) { return getenv(name); }
static void report_config(const char *msg) { ccs_log(CCS_LOG_WARN, "%s", msg); }


/* mkdir -p; 0 or -1 with errno. */
static int make_dirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* A trace directory that other users can write to (/tmp, a group's
 * scratch directory) gets the job's files in a subdirectory of its own,
 * DIR/ccshim-UID-JOB (0700): there nobody else can plant a link at the
 * predictable name of a trace, a desync report or a flight dump. */
static char private_trace_dir[4096];

static void check_trace_dir(void)
{
    const char *d = ccs_cfg.trace_dir;
    if (!d || !*d)
        return;
    if (make_dirs(d) != 0 || access(d, W_OK | X_OK) != 0) {
        CCS_LOG(WARN, "CCSHIM_TRACE_DIR='%s' is not a writable directory (%s); tracing is off, the job runs on",
                d, strerror(errno));
        ccs_cfg.trace_dir = "";
        return;
    }
    int rc = ccs_private_subdir(d, ccs_job_id(), private_trace_dir, sizeof private_trace_dir);
    if (rc < 0) {
        CCS_LOG(WARN,
                "CCSHIM_TRACE_DIR='%s' is writable by other users and its subdirectory '%s' is not this user's "
                "own (%s); tracing is off, the job runs on",
                d, private_trace_dir, strerror(errno));
        ccs_cfg.trace_dir = "";
    } else if (rc == 1) {
        CCS_LOG(INFO, "CCSHIM_TRACE_DIR='%s' is writable by other users: this job's files go to '%s' (mode 0700)", d,
                private_trace_dir);
        ccs_cfg.trace_dir = private_trace_dir;
    }
}

/* ------------------------------------------------------------ signals
 *
 * Installed where the job left the default and, after MPI_Init, in front of
 * the MPI library's own handlers (Open MPI's backtrace): ours flushes the
 * trace with async-signal-safe calls only (the file's name and metadata are
 * prepared beforehand), puts the previous action back and lets it run: a
 * fault re-executes the faulting instruction, a sent signal is raised again.
 * A handler of the application's own is never replaced nor preceded.
 */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM};
#define NSIG_HANDLED (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction old_actions[NSIG_HANDLED];
static volatile sig_atomic_t installed[NSIG_HANDLED];

static void on_fatal(int signo, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    ccs_runtime_finish(CCS_END_SIGNAL, signo);
    for (size_t i = 0; i < NSIG_HANDLED; i++)
        if (fatal_signals[i] == signo && installed[i]) {
            installed[i] = 0;
            sigaction(signo, &old_actions[i], NULL);
        }
    errno = saved;
    /* A fault (si_code > 0) happens again on return, now under the previous
     * action (the MPI library's handler or the default); a signal that was
     * sent (kill, raise, abort) is sent again. */
    if (!si || si->si_code <= 0 || signo == SIGABRT || signo == SIGTERM)
        raise(signo);
}

/* The MPI library's handlers may be preceded; the application's may not.
 * (Install time, not a signal handler: dladdr is fine here.) */
static int mpi_library_handler(const struct sigaction *sa)
{
    void *fn = (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
    Dl_info di;
    if (!fn || !dladdr(fn, &di) || !di.dli_fname)
        return 0;
    const char *base = strrchr(di.dli_fname, '/');
    base = base ? base + 1 : di.dli_fname;
    static const char *const libs[] = {"libopen-pal", "libmpi",    "libopen-rte", "libpmix",  "libprrte",
                                       "libucs",      "libfabric", "libmpich",    "libhwloc", NULL};
    for (const char *const *l = libs; *l; l++)
        if (strncmp(base, *l, strlen(*l)) == 0)
            return 1;
    return 0;
}

static void install_signal_handlers(void)
{
    if (!(ccs_cfg.signals && ccs_cfg.trace_dir && *ccs_cfg.trace_dir))
        return;
    ccs_features_prepare_signal(); /* the handler only opens and writes */
    for (size_t i = 0; i < NSIG_HANDLED; i++) {
        struct sigaction cur;
        if (installed[i] || sigaction(fatal_signals[i], NULL, &cur) != 0)
            continue;
        int dfl = !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
        if (!dfl && !mpi_library_handler(&cur))
            continue; /* the application's own (or ignored): leave it first */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sigfillset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        old_actions[i] = cur;
        installed[i] = sigaction(fatal_signals[i], &sa, NULL) == 0;
    }
}

void ccs_runtime_signals_after_mpi_init(void)
{
    install_signal_handlers();
}

/* --------------------------------------------------------------- fork */

static void atfork_child(void)
{
    ccs_process_forked(); /* a different process: its identity from env again */
    ccs_ring_reset_all(); /* the parent's records are the parent's */
    ccs_comm_forked();    /* no half-written step turns left behind */
    ccs_pysite_forked();
    ccs_features_fork_child();
}

/* --------------------------------------------------------------- init */

static void at_exit(void) { ccs_runtime_finish(CCS_END_EXIT, 0); }

int ccs_runtime_init(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&inited, &expect, 1))
        return atomic_load(&ccs_active) ? 0 : -1;
    ccs_process_detect();
    ccs_config_load(&ccs_cfg, env_getenv, report_config);
    ccs_process_detect_job();
    ccs_log_open();
    if (ccs_cfg.disable) {
        CCS_LOG(INFO, "CCSHIM_DISABLE=1: forwarding every call unchanged");
        return -1;
    }
    /* Two copies of ccshim in one process (libccshim.so and libccshim-mpi.so
     * both preloaded) would count everything twice: the first one wins. */
    void *first = dlsym(RTLD_DEFAULT, "ccshim_version");
    if (first && first != (void *)ccshim_version) {
        Dl_info di;
        CCS_LOG(WARN, "another copy of ccshim is already loaded (%s); this one (%s) stays inactive",
                dladdr(first, &di) && di.dli_fname ? di.dli_fname : "?",
                dladdr((void *)ccshim_version, &di) && di.dli_fname ? di.dli_fname : "?");
        return -1;
    }
    ccs_clock_init();
    check_trace_dir();
    pthread_atfork(NULL, NULL, atfork_child);
    atexit(at_exit);
    /* Calls are timed (two timestamp reads, no syscall) where something
     * reads the times: the trace, and the live metrics' seconds in
     * collectives. */
    if ((ccs_cfg.trace_dir && *ccs_cfg.trace_dir) || (ccs_cfg.metrics && *ccs_cfg.metrics))
        ccs_timing = 1;
    /* Under MPI, after MPI_Init (mpi_setup.c): the MPI library installs its
     * handlers only where it finds the default. */
    if (!under_mpi_library())
        install_signal_handlers();
    atomic_store(&ccs_active, 1);
    CCS_LOG(DEBUG, "ccshim %s active (rank %d of %d, job %s, trace dir '%s')", ccshim_version(), ccs_world_rank(),
            ccs_world_size(), ccs_job_id(), ccs_cfg.trace_dir);
    return 0;
}

__attribute__((constructor)) static void ccs_ctor(void) { ccs_runtime_init(); }

void ccs_runtime_set_world(int rank, int size)
{
    int changed = rank != ccs_world_rank();
    ccs_process_set_world(rank, size);
    if (changed && strstr(ccs_cfg.log ? ccs_cfg.log : "", "%r"))
        ccs_log_open(); /* the log file name names the rank */
}


/* ------------------------------------------------------------ summary */

/* An async-signal-safe line builder (the summary is also written from a
 * fatal-signal handler): no stdio, no locale, bounded. */
struct line {
    char b[1024];
    size_t n;
    int cut;
};

static void put_s(struct line *l, const char *s)
{
    for (; *s; s++) {
        if (l->n + 1 >= sizeof l->b - 16) {
            l->cut = 1;
            return;
        }
        l->b[l->n++] = *s;
    }
}

static void put_u(struct line *l, uint64_t v)
{
    char d[24];
    int i = 0;
    do
        d[i++] = (char)('0' + v % 10);
    while ((v /= 10) && i < 24);
    char out[25];
    int o = 0;
    while (i)
        out[o++] = d[--i];
    out[o] = 0;
    put_s(l, out);
}

static void put_i(struct line *l, int64_t v)
{
    if (v < 0) {
        put_s(l, "-");
        v = -v;
    }
    put_u(l, (uint64_t)v);
}

static void summarise(int reason, int signo)
{
    uint64_t counts[CCS_KIND_MAX] = {0}, coll = 0, p2p = 0, dropped = 0, any = 0;
    for (struct ccs_ring *r = ccs_ring_first(); r; r = r->next) {
        for (int k = 0; k < CCS_KIND_MAX; k++)
            counts[k] += r->counts[k];
        dropped += atomic_load(&r->drain.lost);
    }
    for (int k = 0; k < CCS_KIND_MAX; k++)
        any += counts[k];
    /* A process that recorded nothing (a shell, a helper of the launcher
     * that inherited the preload) says nothing. */
    if (!any && !ccs_step_now() && !dropped)
        return;
    struct line l = {.n = 0};
    put_s(&l, "ccshim[");
    put_i(&l, ccs_world_rank());
    put_s(&l, "@");
    put_s(&l, ccs_hostname());
    put_s(&l, "]: summary");
    if (reason == CCS_END_SIGNAL) {
        put_s(&l, " (signal ");
        put_i(&l, signo);
        put_s(&l, ")");
    }
    struct line kinds = {.n = 0};
    for (int k = 0; k < CCS_KIND_MAX; k++) {
        int cls = ccs_kind_class((unsigned)k);
        if (!counts[k] || (cls != CCS_CLASS_COLL && cls != CCS_CLASS_P2P))
            continue;
        if (cls == CCS_CLASS_COLL)
            coll += counts[k];
        else
            p2p += counts[k];
        if (kinds.n)
            put_s(&kinds, ", ");
        put_s(&kinds, ccs_kind_name((unsigned)k));
        put_s(&kinds, " ");
        put_u(&kinds, counts[k]);
    }
    kinds.b[kinds.n] = 0;
    const char *tp = ccs_features_trace_path();
    put_s(&l, ": ");
    put_u(&l, coll);
    put_s(&l, " collectives, ");
    put_u(&l, p2p);
    put_s(&l, " point-to-point (");
    put_s(&l, kinds.n ? kinds.b : "none");
    put_s(&l, kinds.cut ? "...[truncated]), " : "), ");
    put_u(&l, ccs_step_now());
    put_s(&l, " steps, trace ");
    put_s(&l, tp ? tp : (ccs_cfg.trace_dir && *ccs_cfg.trace_dir ? "off (not written)" : "off"));
    put_s(&l, ", ");
    put_u(&l, dropped);
    put_s(&l, " dropped");
    if (l.cut) {
        memcpy(l.b + l.n, "...[truncated]", 14);
        l.n += 14;
    }
    l.b[l.n++] = '\n';
    ccs_log_raw(l.b, (unsigned long)l.n);
}

/* Calls of this process's own rings (after a fork the list still holds
 * the parent's): its collectives, and its point-to-point calls too where
 * P2P. */
static uint64_t own_calls(int p2p)
{
    uint64_t n = 0;
    uint32_t me = (uint32_t)getpid();
    for (struct ccs_ring *r = ccs_ring_first(); r; r = r->next)
        for (int k = 0; k < CCS_KIND_MAX && r->pid == me; k++) {
            int cls = ccs_kind_class((unsigned)k);
            n += cls == CCS_CLASS_COLL || (p2p && cls == CCS_CLASS_P2P) ? r->counts[k] : 0;
        }
    return n;
}

uint64_t ccs_process_collectives(void) { return own_calls(0); }

/* Collectives and point-to-point calls this process recorded. */
static uint64_t recorded_calls(void)
{
    return own_calls(1);
}

void ccs_runtime_finish(int reason, int signo)
{
    if (!atomic_load(&ccs_active))
        return;
    if (reason == CCS_END_EXIT || reason == CCS_END_SIGNAL) {
        if (atomic_exchange(&finished_exit, 1))
            return;
    }
    uint64_t calls = reason == CCS_END_EXIT ? recorded_calls() : 0;
    if (reason == CCS_END_EXIT)
        ccs_uncovered_at_exit(calls); /* before the last flush: the trace says it */
    if (reason != CCS_END_SIGNAL)
        ccs_features_finish(reason); /* e.g. coalescing's last verification */
    ccs_features_flush(reason, signo);
    if ((reason == CCS_END_EXIT || reason == CCS_END_SIGNAL) && ccs_cfg.summary) {
        summarise(reason, signo);
    }
    if (reason == CCS_END_EXIT)
        ccs_uncovered_say(calls);
}

/* ---------------------------------------------------------- public API */

/* Collectives issued so far on the live communicators (a retired one drops
 * out of the sum: ccshim_step_collectives saturates at 0 then). */
static void add_seq(struct ccs_comm *c, void *arg)
{
    *(uint64_t *)arg += atomic_load_explicit(&c->seq, memory_order_relaxed);
}

static uint64_t collectives_so_far(void)
{
    uint64_t n = 0;
    ccs_comm_foreach(add_seq, &n);
    return n;
}

static _Atomic uint64_t collectives_at_mark;

uint64_t ccshim_step_collectives(void)
{
    uint64_t now = collectives_so_far(), then = atomic_load(&collectives_at_mark);
    return now > then ? now - then : 0;
}

/* Set once a language helper says this process marks its steps. */
static atomic_int step_marking;

void ccshim_step_marking(void) { atomic_store_explicit(&step_marking, 1, memory_order_relaxed); }

int ccs_step_marking(void)
{
    return atomic_load_explicit(&step_marking, memory_order_relaxed) || atomic_load(&ccs_step) > 0;
}

/* The collective ccshim does not intercept that this process is in
 * (ccshim_foreign_begin, ccshim_foreign_call): its name, group size, start
 * and identity, under a sequence word (odd while written) so that desync's
 * thread, which reads it twice a second, never publishes half a name or an
 * identity of another call.  Calls nest (all_gather_object calls
 * all_gather): only the outermost is named. */
static _Atomic uint32_t foreign_seq, foreign_size;
static _Atomic int foreign_depth;
static _Atomic uint64_t foreign_t0;
static char foreign_what[CCS_FOREIGN_MAX];
static struct ccs_foreign_id foreign_id;

static void foreign_enter(const char *what, int group_size, const struct ccs_foreign_id *id)
{
    if (atomic_fetch_add(&foreign_depth, 1) != 0 || !what)
        return;
    atomic_fetch_add(&foreign_seq, 1);
    size_t n = strnlen(what, sizeof foreign_what - 1);
    for (size_t i = 0; i < n; i++) /* printable ASCII only: it goes into verdict lines */
        foreign_what[i] = what[i] >= 0x20 && what[i] < 0x7f ? what[i] : '?';
    foreign_what[n] = 0;
    foreign_id = *id;
    atomic_store(&foreign_size, group_size > 0 ? (uint32_t)group_size : 0);
    atomic_store(&foreign_t0, ccs_clock_mono_ms());
    atomic_fetch_add(&foreign_seq, 1);
}

/* This thread's outermost torch.distributed call (ccshim_foreign_call),
 * recorded in its ring when it returns (ccshim_foreign_end): the calls
 * nest on the thread that makes them, whatever other threads do. */
static __thread struct {
    int depth;      /* foreign calls this thread is inside */
    uint16_t kind;  /* ccs_kind to record, 0: the outermost is not recorded */
    uint16_t call;  /* enum ccs_torch_call */
    uint64_t group; /* its COMM id */
    uint64_t t0;    /* ccs_ticks at its start */
} tl_call __attribute__((tls_model("initial-exec")));

void ccshim_foreign_begin(const char *what, int group_size)
{
    static const struct ccs_foreign_id none;
    if (tl_call.depth++ == 0)
        tl_call.kind = 0;
    foreign_enter(what, group_size, &none);
}

/* The torch.distributed call KIND on GROUP (this process member GROUP_RANK
 * of GROUP_SIZE) as a record's kind and the group described for the
 * trace; 0 when it is not recorded. */
static unsigned foreign_record_kind(unsigned call, uint64_t group, int group_rank, int group_size)
{
    unsigned kind = ccs_torch_call_kind(call);
    if (!kind || ccs_comm_define_group(group, group_rank, group_size) != 0)
        return 0;
    return kind;
}

void ccshim_foreign_call(const char *what, uint64_t group, int group_rank, int group_size, uint64_t seq,
                         const char *kind, const char *prev_kind)
{
    struct ccs_foreign_id id = {0};
    /* An identity the rules can compare, or none: a call of a kind not in
     * the list, or without its group or seq, is named only. */
    unsigned k = ccs_torch_call_lookup(kind);
    if (group && seq && seq <= CCS_FOREIGN_MAX_SEQ && k != CCS_TC_NONE)
        id = (struct ccs_foreign_id){group, seq, (uint16_t)k, (uint16_t)ccs_torch_call_lookup(prev_kind)};
    if (tl_call.depth++ == 0) {
        tl_call.kind = (uint16_t)foreign_record_kind(k, group, group_rank, group_size);
        tl_call.call = (uint16_t)k;
        tl_call.group = group;
        tl_call.t0 = ccs_timing ? ccs_ticks() : 0;
    }
    foreign_enter(what, group_size, &id);
}

void ccshim_foreign_issued(uint64_t group, int group_rank, int group_size, const char *kind)
{
    unsigned k = ccs_torch_call_lookup(kind), rk = foreign_record_kind(k, group, group_rank, group_size);
    if (rk)
        ccs_record_foreign(rk, k, group, CCS_F_NONBLOCKING, ccs_timing ? ccs_ticks() : 0, 0);
}

void ccshim_foreign_end(void)
{
    if (tl_call.depth > 0 && --tl_call.depth == 0 && tl_call.kind) {
        ccs_record_foreign(tl_call.kind, tl_call.call, tl_call.group, 0, tl_call.t0, 0);
        tl_call.kind = 0;
    }
    int d = atomic_load(&foreign_depth);
    while (d > 0 && !atomic_compare_exchange_weak(&foreign_depth, &d, d - 1))
        ;
    if (d == 1)
        atomic_store(&foreign_t0, 0);
}

int ccs_foreign_now(uint64_t now_ms, char *what, size_t n, uint32_t *ms, uint32_t *size, struct ccs_foreign_id *id)
{
    for (int tries = 0; tries < 4; tries++) {
        uint32_t s0 = atomic_load(&foreign_seq);
        uint64_t t0 = atomic_load(&foreign_t0);
        if (!t0 || atomic_load(&foreign_depth) == 0)
            return 0;
        if (s0 & 1u)
            continue;
        size_t k = 0;
        for (; k + 1 < n && k < sizeof foreign_what && foreign_what[k]; k++)
            what[k] = foreign_what[k];
        what[k] = 0;
        *size = atomic_load(&foreign_size);
        *id = foreign_id;
        if (atomic_load(&foreign_seq) != s0 || atomic_load(&foreign_t0) != t0)
            continue;
        uint64_t d = now_ms > t0 ? now_ms - t0 : 0;
        *ms = d > UINT32_MAX ? UINT32_MAX : (d ? (uint32_t)d : 1);
        return k > 0;
    }
    return 0;
}

/* Units of work in this step and the last (backward passes, counted by a
 * language helper): desync's step boundary names them (step.h). */
static _Atomic uint32_t units_now, units_prev;

void ccshim_step_units(uint32_t n) { atomic_store_explicit(&units_now, n, memory_order_relaxed); }

_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t) && _Alignof(_Atomic uint32_t) == _Alignof(uint32_t),
               "ccshim_step_units_word hands out the count as a plain 32-bit word");

/* For a helper that counts on every forward pass: a store from ctypes costs
 * a tenth of a foreign call (relaxed, as ccshim_step_units). */
uint32_t *ccshim_step_units_word(void) { return (uint32_t *)&units_now; }

void ccs_step_units(uint32_t *now, uint32_t *prev)
{
    *now = atomic_load_explicit(&units_now, memory_order_relaxed);
    *prev = atomic_load_explicit(&units_prev, memory_order_relaxed);
}

uint64_t ccshim_step_mark(void)
{
    atomic_store(&collectives_at_mark, collectives_so_far());
    atomic_store_explicit(&units_prev, atomic_exchange_explicit(&units_now, 0, memory_order_relaxed),
                          memory_order_relaxed);
    uint64_t s = atomic_fetch_add(&ccs_step, 1) + 1;
    ccs_record_mark(CCS_KIND_STEP, (uint32_t)s);
    ccs_features_step(s); /* e.g. coalescing's verification and learning */
    return s;
}

uint64_t ccshim_step_current(void) { return atomic_load(&ccs_step); }

const char *ccshim_version(void) { return PACKAGE_VERSION; }

int ccshim_flush(void) { return ccs_features_flush(CCS_END_FLUSH, 0); }
