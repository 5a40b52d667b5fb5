/*
 * desync.c - early desync detection (docs/desync.md) while it runs: the
 * background thread's period, the policy for verdicts (who reports in
 * full, abort on desync), lingering at exit, and the agreement service.
 * Start-up (the launcher's environment, the secret, the interfaces, the
 * coordinator's address) is desync_start.c's; it hands this file a plan
 * (desync_start.h) that ccs_dsx_begin runs.
 *
 * Every period the thread folds this rank's new records into its status
 * (desync_collect.c), publishes it in the host's shared memory
 * (desync_shm.c), reads the other local ranks' statuses, applies the rules
 * (desync_rules.c) and reports new verdicts (desync_report.c).  When the
 * job spans hosts, the host's leader also forwards the host's statuses to
 * the coordinator in rank 0 (desync_coord.c) and posts its verdicts into
 * shared memory (desync_client.c, over desync_conn.c).  The hot path is
 * untouched: the thread only reads the rings, their in-flight records and
 * the comm table.  Everything this file holds is in one struct, DS, below.
 */
#include "desync.h"
#include "ccs_config.h"
#include "desync_auth.h"
#include "desync_collect.h"
#include "desync_proto.h"
#include "desync_report.h"
#include "desync_rules.h"
#include "desync_search.h"
#include "desync_shm.h"
#include "desync_start.h"
#include "desync_tcp.h"
#include "log.h"
#include "registry.h"
#include "thread.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { OFF = -1, IDLE = 0, STARTING = 1, RUNNING = 2 };

/* How long a MISMATCH waits for the records of every member at its seq
 * (asked from other hosts through the coordinator) before it names the
 * majority of the records in view: the answer takes two or three periods
 * of the hosts and the coordinator, well inside the 1 s target. */
#define RECORD_WAIT_MS 700
/* How long the coordinator's process waits at exit for the other ranks to
 * finish (the final exchange). */
#define FINAL_MS 5000

/* What the detector holds, from ccs_dsx_begin to the process's end. */
static struct {
    atomic_int state; /* OFF, IDLE, STARTING, RUNNING */
    int32_t world_size, world_rank;

    /* The host: its identity, its shared segment, this rank's link to the
     * coordinator when it leads the host (CLIENT), the coordinator itself
     * in rank 0 (COORD). */
    char hostkey[CCS_DSX_HOST];
    struct ccs_dsx_shm *shm;
    const struct ccs_dsx_cred *cred; /* start-up's (desync_start.c), for a rank that comes to lead */
    struct ccs_dsx_coord *coord;
    struct ccs_dsx_client *client;
    int tcp_mode;    /* a coordinator sees the whole job */
    int spans_hosts; /* the job's ranks run on more than one host */
    char coord_host_s[256];
    int coord_port_s;
    int leaving; /* this process is exiting: never take the lead */

    /* The period: this rank's status, and per world rank (the other ranks
     * of this host) our copy of its status, the slot's generation of that
     * copy, its heartbeat and when it last changed (ms); nonzero in
     * PRESUMED_DEAD when the heartbeat stopped. */
    struct ccs_dsx_status me;
    struct ccs_dsx_status scratch;
    struct ccs_dsx_status **peer_status;
    uint64_t *peer_gen, *peer_beat, *peer_beat_ms;
    uint8_t *presumed_dead;
    const struct ccs_dsx_status **view;  /* per world rank: the statuses known this period */
    const struct ccs_dsx_status **local; /* the same, packed: this host's ranks */
    struct ccs_dsx_seen *seen, *reported;
    struct ccs_dsx_vcursor vcursor;         /* the next verdict to read from shared memory */
    struct ccs_dsx_search srch[CCS_DSX_NSEARCH]; /* the host's own search, while this rank runs it */
    uint8_t *search_gone;                   /* per world rank: dead, or exited and gone (host_search) */
    uint64_t last_hash, last_pub, last_dbg; /* own status last published (hash, ms); last debug line (ms) */
    struct ccs_dsx_agree *agree_buf;        /* the host's agreement values, forwarded by its leader */
    size_t agree_cap;
    pthread_mutex_t tick_lock;
    pthread_mutex_t agree_lock;
    pthread_t th;
    pthread_t reporter; /* reports at the job's priority (at_job_priority) */
    uint64_t started_ms;
    void (*_Atomic poll_fn)(uint64_t now_ms); /* ccs_desync_set_poll's */
    _Atomic uint64_t periods; /* periods the thread has run (the exit line: a stalled thread shows) */

    /* Verdicts.  Who writes the whole diagnosis of a verdict into the log
     * (the others write its line only; every rank still writes its full
     * view to the trace directory): for a verdict of this host's rules, the
     * lowest rank of the host still running (LOCAL_REPORTER, set every
     * tick); for one from the coordinator, rank 0, where the coordinator
     * runs. */
    int32_t local_reporter;
    atomic_int life;          /* enum ccs_dsx_life: alive, finalizing, exited */
    atomic_int report_busy;   /* this process is writing a report */
    atomic_int abort_pending; /* 1: end the job when due (abort_when_due); 2: ending it; 3: the abort
                                 function returned (NCCL's: the job's own calls now fail and it ends) */
    uint64_t abort_comm;
    uint64_t abort_armed_ms;  /* monotonic ms of the verdict that armed it */
    uint64_t abort_due_ms;    /* not before (monotonic ms; see on_verdict) */
    uint64_t abort_cap_ms;    /* nor, waiting for this process's report, after */
    /* The communicator of the first verdict this process reported under
     * abort (0: none yet). */
    _Atomic uint64_t ending_comm;

    int invalid_logged, tcp_logged, off_logged, later_logged, hooks_done;
    /* The link to the coordinator failing while this rank exits: said once,
     * then counted (EXIT_LINK_MORE, the last reason) and summed up in one
     * line when the rank goes (a leader lingering against a coordinator
     * that refused it said so 78 times in 1.5 s). */
    int exit_link_said;
    unsigned exit_link_more;
    char exit_link_why[256];
    /* The launcher's ranks on this host identity (0: unknown), and whether
     * all of them were seen in its shared memory (or said not to be). */
    int local_size, local_checked;

    /* Rank 0 without MPI, while its coordinator could not listen (the port
     * taken): tried again every COORD_RETRY_MS (ccs_dsx_retry_coordinator). */
    struct {
        int on;
        char host[256];
        int port;
        int32_t wsize;
        const struct ccs_dsx_cred *cred;
        uint64_t since_ms, next_ms, said_ms;
        unsigned tries;
    } cretry;
} ds = {
    .world_size = -1,
    .world_rank = -1,
    .tick_lock = PTHREAD_MUTEX_INITIALIZER,
    .agree_lock = PTHREAD_MUTEX_INITIALIZER,
    .local_reporter = -1,
};

/* The address marks the verdicts of this host's rules (on_verdict's ARG);
 * it holds nothing. */
static char local_marker;
#define FROM_LOCAL_RULES ((void *)&local_marker)

int ccs_desync_active(void)
{
    return atomic_load(&ds.state) == RUNNING;
}

/* ------------------------------------------------------------ verdicts */

/* ------------------------------------------- reports at the job's priority
 *
 * The background thread runs at nice 10, and a verdict's report names its
 * frames through libdw: hundreds of milliseconds of CPU, which at nice 10,
 * beside ranks spinning in their waits, became seconds (the real-stack
 * report job on 2 cores: 2.5 s, against 0.34 s at the job's priority).  A
 * thread cannot lower its nice value again without a privilege, so a second
 * thread, started beside it at the job's priority, sleeps on a condition
 * variable until a report (or the abort timer's start) is handed to it,
 * runs it while the background thread waits, and sleeps again. */
enum { RW_IDLE, RW_POSTED, RW_DONE };
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    void (*fn)(void *);
    void *arg;
    int state; /* RW_* */
    int up;    /* the thread runs (else the work runs inline) */
} rw = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *reporter_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "ccs-report", 0, 0, 0); /* top -H, /proc/PID/task/TID/comm */
    pthread_mutex_lock(&rw.lock);
    for (;;) {
        while (rw.state != RW_POSTED)
            pthread_cond_wait(&rw.cv, &rw.lock);
        void (*fn)(void *) = rw.fn;
        void *a = rw.arg;
        pthread_mutex_unlock(&rw.lock);
        fn(a);
        pthread_mutex_lock(&rw.lock);
        rw.state = RW_DONE;
        pthread_cond_broadcast(&rw.cv);
    }
    return NULL;
}

/* Runs FN(ARG) on the reporter and waits for it (inline where it could not
 * start). */
static void at_job_priority(void (*fn)(void *), void *arg)
{
    if (!rw.up || pthread_equal(pthread_self(), ds.reporter)) {
        fn(arg);
        return;
    }
    pthread_mutex_lock(&rw.lock);
    while (rw.state != RW_IDLE)
        pthread_cond_wait(&rw.cv, &rw.lock);
    rw.fn = fn;
    rw.arg = arg;
    rw.state = RW_POSTED;
    pthread_cond_broadcast(&rw.cv);
    while (rw.state != RW_DONE)
        pthread_cond_wait(&rw.cv, &rw.lock);
    rw.state = RW_IDLE;
    pthread_cond_broadcast(&rw.cv);
    pthread_mutex_unlock(&rw.lock);
}

/* Under abort, when the job ends (on_verdict sets the times): at the rank
 * reporting in full, once its report is out, and never later than
 * REPORT_BUDGET_MS after its grace, whatever the report does: naming the
 * frames of a large library without debug information (libtorch_cpu.so)
 * takes libdw seconds, more on a loaded host, and the job must end in
 * seconds, not when a report is done. */
#define REPORT_BUDGET_MS 3000

/* If the abort function itself hangs (an MPI_Abort from a second thread of
 * a job that asked for MPI_THREAD_SINGLE is not guaranteed to return or to
 * end anything), the process ends on its own: the launcher then ends the job. */
static void *abort_watchdog(void *arg)
{
    (void)arg;
    ccs_sleep_ms(5000);
    ccs_log(CCS_LOG_ERROR,
            "CCSHIM_ON_DESYNC=abort: the job did not end within 5 s of the abort; ending this process "
            "(exit status 134)");
    _exit(134);
    return NULL;
}

/* Called by the abort timer, by the desync thread after its tick and by a
 * process at its exit: the first to find the abort due ends the job. */
static void abort_when_due(void)
{
    uint64_t now;
    while ((now = ccs_clock_mono_ms()) < ds.abort_due_ms)
        ccs_sleep_ms((long)(ds.abort_due_ms - now));
    while (atomic_load(&ds.report_busy) && ccs_clock_mono_ms() < ds.abort_cap_ms)
        ccs_sleep_ms(10);
    int one = 1;
    if (!atomic_compare_exchange_strong(&ds.abort_pending, &one, 2)) {
        /* Another thread is inside the abort function (2).  When this one
         * is the process's exit, going on would end the process with status
         * 0 in the middle of it (an MPI_Abort not yet sent): it waits until
         * the function returns (3) or its watchdog (5 s) ends the process;
         * bounded, in case the watchdog could not start. */
        for (int i = 0; i < 70 && atomic_load(&ds.abort_pending) == 2; i++)
            ccs_sleep_ms(100);
        return;
    }
    if (atomic_load(&ds.report_busy))
        ccs_log(CCS_LOG_WARN,
                "CCSHIM_ON_DESYNC=abort: this rank's report was still being written %d ms after the verdict "
                "(naming frames, or a trace directory that does not answer); the job ends without the rest of it",
                (int)(ccs_clock_mono_ms() - ds.abort_armed_ms));
    ccs_log(CCS_LOG_ERROR, "CCSHIM_ON_DESYNC=abort: aborting the job after the verdict on comm %#llx",
            (unsigned long long)ds.abort_comm);
    ccs_thread_start(abort_watchdog, NULL, 0, NULL);
    int rc = ccs_abort_job(ds.abort_comm); /* what MPI or NCCL registered (registry.h) */
    if (rc == 0) {
        atomic_store(&ds.abort_pending, 3);
        return;
    }
    if (rc == 1) {
        ccs_log(CCS_LOG_ERROR, "CCSHIM_ON_DESYNC=abort: MPI is finalized in this process, which cannot abort the "
                               "job: it ends with exit status 3, and the ranks still running end the job");
        _exit(3);
    }
    ccs_log(CCS_LOG_ERROR, "no abort function succeeded: ending this process (exit status 134)");
    _exit(134);
}

static void *abort_timer(void *arg)
{
    (void)arg;
    abort_when_due();
    return NULL;
}

/* Started from the reporter: the timer then runs at the job's priority. */
static void start_abort_timer(void *arg)
{
    (void)arg;
    int rc = ccs_thread_start(abort_timer, NULL, 0, NULL);
    if (rc != 0)
        CCS_LOG(WARN, "desync: cannot start the abort timer (%s); the job ends when this process's report is out",
                strerror(rc));
}

struct report_args {
    const struct ccs_dsx_verdict *v;
    int full;
};

static void report_fn(void *arg)
{
    struct report_args *r = arg;
    ccs_dsx_report(r->v, r->full);
}

/* A verdict, from this host's rules (ARG FROM_LOCAL_RULES) or from the
 * coordinator: to the features, then reported, in full where
 * LOCAL_REPORTER (or rank 0 for the coordinator's) says. */
static void on_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    if (!ccs_dsx_seen_add(ds.reported, v->cls, v->comm, ccs_verdict_once(v->cls) ? 0 : v->seq))
        return;
    if (arg == FROM_LOCAL_RULES && ccs_verdict_once(v->cls)) {
        /* Every rank here reports what the first to judge found: each
         * rank's rules judge the host's statuses as read in its own period,
         * and a MISMATCH found in one view (the odd seq's records of every
         * member in it at once) could be missed in the others, or named
         * there later from the hashes alone.  (The other classes follow
         * from states every rank sees for periods: blocked, gone.  Once per
         * communicator, so the posts of a host's ranks that judge it in
         * the same period stay few beside the ring's 16 places.) */
        struct ccs_dsx_verdict *shared = malloc(sizeof *shared);
        if (shared) {
            *shared = *v;
            shared->local = 1;
            ccs_dsx_shm_post_verdict(ds.shm, shared);
            free(shared);
        }
    } else if (v->local) {
        arg = FROM_LOCAL_RULES; /* reported as this host's own (LOCAL_REPORTER in full) */
    }
    if (ccs_verdict_once(v->cls))
        ccs_dsx_seen_add(ds.seen, v->cls, v->comm, 0); /* judged: this rank's rules and search stop there */
    ccs_features_verdict(ccs_dsx_class_name(v->cls), v->comm, v->seq, v->line); /* e.g. metrics (registry.h) */
    if (ccs_verdict_policy(v->cls) == CCS_VERDICT_STOP)
        ccs_verdict_note(); /* a rank waiting at its step boundary stops waiting (registry.h) */
    /* Under abort the first verdict on a communicator ends the job; what
     * the ranks see on it while the job ends (the others now blocked behind
     * the departed rank, a rank in MPI_Finalize) follows from it.  Reporting
     * that would also race: the rank that writes the full report may be
     * gone before it sees it, leaving a verdict without its diagnosis.
     * Said once, at info level.  (Verdicts on other communicators, as the
     * two sides of a cross-communicator deadlock, are reported.) */
    if (ccs_cfg.on_desync == CCS_ON_DESYNC_ABORT && ccs_verdict_policy(v->cls) == CCS_VERDICT_STOP) {
        uint64_t none = 0;
        if (!atomic_compare_exchange_strong(&ds.ending_comm, &none, v->comm) && none == v->comm) {
            ccs_log_once(&ds.later_logged, CCS_LOG_INFO,
                         "desync: a later verdict (%s at seq %llu on comm %#llx) not reported: the job is "
                         "ending on the first",
                         ccs_dsx_class_name(v->cls), (unsigned long long)v->seq, (unsigned long long)v->comm);
            return;
        }
    }
    int full = arg == FROM_LOCAL_RULES ? (ds.local_reporter < 0 || ds.local_reporter == ds.world_rank)
                                       : ds.world_rank == 0;
    /* A rank in MPI_Finalize or exiting leaves the abort to the ranks still
     * running (they see the same verdict): MPI is being torn down under it.
     * Decided before the report, which may take a while (libdw). */
    atomic_store(&ds.report_busy, 1);
    if (ccs_cfg.on_desync == CCS_ON_DESYNC_ABORT && ccs_verdict_policy(v->cls) == CCS_VERDICT_STOP &&
        atomic_load(&ds.life) == CCS_DSX_ALIVE && !atomic_load(&ds.abort_pending)) {
        ds.abort_comm = v->comm;
        /* The rank reporting in full ends the job once its report is out
         * (three periods later at least: the others have written their
         * line by then, at once), or REPORT_BUDGET_MS later without it.
         * Where one process's abort ends the whole job (MPI_Abort), the
         * others give it that time and a second more, and end the job if
         * it did not; where each process ends its own part (ncclCommAbort),
         * each does so a second after the verdict, once its report is out
         * or REPORT_BUDGET_MS later. */
        long period3 = 3 * ccs_cfg.desync_period_ms;
        int wide = ccs_abort_job_wide();
        ds.abort_armed_ms = ccs_clock_mono_ms();
        ds.abort_due_ms = ds.abort_armed_ms + (uint64_t)(full    ? (period3 < 100 ? 100 : period3)
                                                         : wide ? period3 + REPORT_BUDGET_MS + 1000
                                                                : 1000);
        ds.abort_cap_ms = full || !wide ? ds.abort_due_ms + REPORT_BUDGET_MS : ds.abort_due_ms;
        atomic_store(&ds.abort_pending, 1);
        at_job_priority(start_abort_timer, NULL);
    }
    struct report_args ra = {v, full};
    at_job_priority(report_fn, &ra);
    atomic_store(&ds.report_busy, 0);
}


static void post_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_verdict(ds.shm, v);
}

/* The coordinator asks for the records of (COMM, SEQ): every rank of this
 * host publishes what it kept around SEQ. */
static void post_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ds.shm, comm, seq, ccs_clock_mono_ms());
}

/* Records differ here at (COMM, SEQ) (or a member's record of it is not in
 * view): the local ranks publish what they kept around SEQ, and the leader
 * sends those records to the coordinator. */
static void local_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ds.shm, comm, seq, ccs_clock_mono_ms());
    if (ds.client)
        ccs_dsx_client_detail(ds.client, comm);
}

/* ------------------------------------------------ the host's own search
 *
 * Without a coordinator (every rank of the job on this host) the search for
 * the seq where a communicator's members differ (desync_search.c) runs
 * here, in one rank: the lowest whose process is still there (also while
 * it lingers at its exit).  Its probes and requests for records go into
 * shared memory, where every rank here reads them, and every rank's rules
 * then compare the records it asked for.  Before, a silent MISMATCH (a
 * count the collective lets complete) was named only where one rank's view
 * happened to hold every member's record of the odd seq, or 2 s later from
 * the hashes alone, without the operations, or not at all in a shorter job
 * (the test NCCL's 1000-step job: 4 runs in 10). */
static void local_probe(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ds.shm, comm, seq | CCS_DSX_PROBE_BIT, ccs_clock_mono_ms());
}

/* A finished rank (in MPI_Finalize, or exited and lingering) whose status
 * has not been republished for this long is gone, where its pid tells
 * nothing (another PID namespace): a rank's thread republishes at least
 * every 500 ms while its process is there. */
#define GONE_SILENT_MS 2000

/* 1 when local rank R (its status in view) is gone: dead (its pid gone,
 * or its heartbeat stopped: read_peer), or finished and its process no
 * longer there.  (A finished rank is looked for only then: kill(2) at the
 * job's end, not per period.)  Its pid is asked only in this process's own
 * PID namespace; in another (one container per rank) its heartbeat
 * decides. */
static int peer_gone(int32_t r, uint64_t now)
{
    const struct ccs_dsx_status *o = ds.view[r];
    if (!o)
        return 0;
    if (ds.presumed_dead[r] || o->life == CCS_DSX_DIED)
        return 1;
    if (o->life == CCS_DSX_ALIVE)
        return 0;
    int alive = ccs_dsx_status_pid_alive(o);
    if (alive >= 0)
        return !alive;
    return now - ds.peer_beat_ms[r] > GONE_SILENT_MS;
}

static void host_search(uint64_t now)
{
    int32_t owner = -1;
    for (int32_t r = 0; r < ds.world_size; r++) {
        const struct ccs_dsx_status *o = ds.view[r];
        ds.search_gone[r] = !o || (r != ds.world_rank && peer_gone(r, now));
        if (owner < 0 && o && !ds.search_gone[r])
            owner = r;
    }
    if (owner != ds.world_rank) {
        memset(ds.srch, 0, sizeof ds.srch); /* (a search this rank ran is the new owner's to start again) */
        return;
    }
    struct ccs_dsx_search_out out = {.probe = local_probe, .want = post_want};
    ccs_dsx_search_pass(ds.srch, ds.world_size, ds.view, ds.search_gone, ds.seen, now, &out);
    ccs_dsx_shm_set_search(ds.shm, now, ccs_dsx_search_settled(ds.srch, now));
}

static void post_bye(void *arg)
{
    (void)arg;
    ccs_dsx_shm_set_bye(ds.shm);
}

static uint64_t wanted_seq(uint64_t comm, int probe, void *arg)
{
    (void)arg;
    return ds.shm ? ccs_dsx_shm_wanted(ds.shm, comm, probe, ccs_clock_mono_ms()) : 0;
}

static void post_agreed(const struct ccs_dsx_agree *a, void *arg)
{
    (void)arg;
    ccs_dsx_shm_post_agreed(ds.shm, a);
}

/* ------------------------------------------------------------ the period */

static void forward_tcp(size_t nlocal, uint64_t now)
{
    (void)now;
    size_t nag = 0;
    for (size_t i = 0; i < nlocal; i++) {
        if (ds.agree_cap < nag + CCS_DSX_SHM_NAGREE) {
            size_t nc = ds.agree_cap ? ds.agree_cap * 2 : 64;
            struct ccs_dsx_agree *nb = realloc(ds.agree_buf, nc * sizeof *nb);
            if (!nb)
                break;
            ds.agree_buf = nb;
            ds.agree_cap = nc;
        }
        struct ccs_dsx_agree got[CCS_DSX_SHM_NAGREE];
        int k = ccs_dsx_shm_agree_get(ds.shm, ds.local[i]->wrank, got);
        for (int j = 0; j < k; j++)
            if (got[j].comm)
                ds.agree_buf[nag++] = got[j];
    }
    char why[256] = "";
    long to = ccs_cfg.desync_period_ms / 2;
    if (ccs_dsx_client_tick(ds.client, ds.local, nlocal, ds.agree_buf, nag, to < 1 ? 1 : (int)to, why,
                            sizeof why) == 0)
        return;
    /* This rank is exiting (it may have taken the host's link over from a
     * leader that left first): the coordinator's rank may have finished
     * and gone too, which is the job's normal end, and whatever ranks of
     * this host still run take the link over and say so if it is down. */
    if (atomic_load(&ds.life) >= CCS_DESYNC_EXITED && !ds.exit_link_said) {
        ds.exit_link_said = 1;
        CCS_LOG(INFO, "desync side channel: the link to the coordinator ended while this rank was exiting (%s)", why);
    } else if (atomic_load(&ds.life) >= CCS_DESYNC_EXITED) {
        ds.exit_link_more++;
        snprintf(ds.exit_link_why, sizeof ds.exit_link_why, "%s", why);
    } else
        ccs_log_once(&ds.tcp_logged, CCS_LOG_WARN,
                     "desync side channel: %s; detection across hosts is off until the coordinator answers", why);
}

static struct ccs_dsx_thresholds thresholds(void)
{
    return (struct ccs_dsx_thresholds){.block_ms = (uint32_t)ccs_cfg.desync_block_ms,
                                       .straggler_ms = (uint32_t)ccs_cfg.desync_straggler_ms,
                                       .suspect_ms = (uint32_t)(ccs_cfg.desync_block_ms * 2),
                                       .heartbeat_ms = (uint32_t)ccs_cfg.desync_heartbeat_ms,
                                       .mismatch_wait_ms = (uint32_t)(2 * ccs_cfg.desync_period_ms),
                                       .record_wait_ms = RECORD_WAIT_MS};
}

/* Folds this rank's new records into its status and publishes it: what
 * changed at once, an unchanged status twice a second (the heartbeat);
 * readers skip slots that did not change. */
static void publish_own_status(uint64_t now)
{
    ccs_dsx_collect(&ds.me, now);
    ds.me.magic = CCS_DSX_MAGIC;
    ds.me.version = CCS_DSX_VERSION;
    ds.me.wrank = ds.world_rank;
    ds.me.wsize = ds.world_size;
    ds.me.pid = (uint32_t)getpid();
    ccs_dsx_pidns_self(&ds.me.pidns_dev, &ds.me.pidns_ino); /* (read once, by ccs_dsx_shm_open) */
    ds.me.life = (uint32_t)atomic_load(&ds.life);
    ds.me.flags = ccs_step_marking() ? CCS_DSX_ST_MARKS : 0;
    memset(ds.me.foreign, 0, sizeof ds.me.foreign);
    ds.me.foreign_ms = ds.me.foreign_size = 0;
    if (!ccs_foreign_now(now, ds.me.foreign, sizeof ds.me.foreign, &ds.me.foreign_ms, &ds.me.foreign_size))
        memset(ds.me.foreign, 0, sizeof ds.me.foreign), ds.me.foreign_ms = ds.me.foreign_size = 0;
    memcpy(ds.me.host, ds.hostkey, sizeof ds.me.host);
    uint64_t beat = ds.me.beat;
    ds.me.beat = 0;
    uint64_t h = ccs_hash_bytes(
        &ds.me, offsetof(struct ccs_dsx_status, comm) + ds.me.ncomm * sizeof(struct ccs_dsx_comm), 0);
    ds.me.beat = beat;
    if (h != ds.last_hash || now - ds.last_pub >= 500) {
        ds.me.beat++;
        ccs_dsx_shm_publish(ds.shm, &ds.me);
        ds.last_hash = h;
        ds.last_pub = now;
    }
}

/* Local rank world_rank's status from its slot (our copy, read again only when the
 * slot changed), or NULL when there is none valid.  A rank whose process is
 * gone is marked dead in our copy, so the leader tells the coordinator at
 * once; one whose heartbeat stopped is presumed dead. */
static const struct ccs_dsx_status *read_peer(int32_t r, uint64_t now)
{
    char why[200];
    uint64_t g = ds.peer_status[r] ? ds.peer_gen[r] : 0;
    int rc = ccs_dsx_shm_read(ds.shm, r, &ds.scratch, &g, why, sizeof why);
    if (rc < 0)
        ccs_log_once(&ds.invalid_logged, CCS_LOG_WARN, "desync: ignoring rank %d's shared status: %s", r, why);
    if (rc == 1) {
        if (!ds.peer_status[r] && !(ds.peer_status[r] = malloc(sizeof *ds.peer_status[r])))
            return NULL;
        memcpy(ds.peer_status[r], &ds.scratch,
               offsetof(struct ccs_dsx_status, comm) + ds.scratch.ncomm * sizeof(struct ccs_dsx_comm));
        ds.peer_gen[r] = g;
    } else if (rc < 0 || !ds.peer_status[r]) {
        return NULL;
    }
    /* rc 0 with a copy: the slot is being written, or was when its process
     * was killed (its generation then stays odd for good): the last copy
     * stands, so a rank killed while publishing is still seen to die. */
    const struct ccs_dsx_status *o = ds.peer_status[r];
    if (o->beat != ds.peer_beat[r] || !ds.peer_beat_ms[r]) {
        ds.peer_beat[r] = o->beat;
        ds.peer_beat_ms[r] = now;
    }
    /* (Its pid is looked up only in this process's own PID namespace: in
     * another one, one container per rank, the same number names another
     * process or none, and the heartbeat below decides alone.) */
    if (o->life == CCS_DSX_ALIVE && ccs_dsx_status_pid_alive(o) == 0)
        ds.peer_status[r]->life = CCS_DSX_DIED;
    else if (o->life == CCS_DSX_ALIVE && now - ds.peer_beat_ms[r] > (uint64_t)ccs_cfg.desync_heartbeat_ms)
        ds.presumed_dead[r] = 1;
    return o;
}

/* The statuses of this host's ranks into VIEW (by world rank) and LOCAL
 * (packed); returns how many. */
static size_t read_local_statuses(uint64_t now)
{
    size_t nlocal = 0;
    for (int32_t r = 0; r < ds.world_size; r++) {
        ds.presumed_dead[r] = 0;
        ds.view[r] = r == ds.world_rank ? &ds.me : read_peer(r, now);
        if (ds.view[r])
            ds.local[nlocal++] = ds.view[r];
    }
    return nlocal;
}

/* The host's leader is gone (it exited first): take over its link to the
 * coordinator. */
static void lead_if_leader_gone(uint64_t now)
{
    if (!ds.tcp_mode || ds.client || ds.leaving || ccs_dsx_shm_bye(ds.shm))
        return;
    /* The leader (a rank) is gone as read_peer and peer_gone see it; one
     * whose status this rank never saw is not. */
    int32_t cur = ccs_dsx_shm_leader(ds.shm);
    if (cur >= ds.world_size || (cur >= 0 && cur != ds.world_rank && !peer_gone(cur, now)) ||
        !ccs_dsx_shm_claim_leader(ds.shm, cur))
        return;
    struct ccs_dsx_client_cb cb = {
        .verdict = post_verdict, .agreed = post_agreed, .want = post_want, .bye = post_bye};
    ds.client = ccs_dsx_client_new_cred(ds.coord_host_s, ds.coord_port_s, ds.world_size, ds.world_rank, ds.cred,
                                        ds.hostkey, &cb);
    CCS_LOG(INFO, "desync: rank %d now leads host '%s' (the leader is gone)", ds.world_rank, ds.hostkey);
}

/* Ranks the launcher puts on this host identity that never come into its
 * shared memory do not share /dev/shm with this one (one container per
 * rank, each with a /dev/shm of its own, given one CCSHIM_DESYNC_HOST):
 * nothing compares them, and ccshim says so once per rank, a heartbeat
 * period after its start, rather than stay silent.  (With host identities
 * of their own they would talk over TCP: docs/desync.md, "Containers".) */
static void check_local_ranks(uint64_t now)
{
    if (ds.local_checked || ds.local_size <= 0)
        return;
    int32_t seen = ccs_dsx_shm_attached(ds.shm);
    if (seen >= ds.local_size) {
        ds.local_checked = 1;
        return;
    }
    if (now - ds.started_ms < (uint64_t)ccs_cfg.desync_heartbeat_ms)
        return;
    ds.local_checked = 1;
    CCS_LOG(WARN,
            "desync: %d of the %d ranks the launcher puts on host '%s' came into its shared memory (%.0f s after "
            "this one started): the others do not share /dev/shm with this rank (a container per rank with a "
            "/dev/shm of its own?), so they are not compared with it; share /dev/shm between them, or give each "
            "its own CCSHIM_DESYNC_HOST (then they talk over TCP)",
            (int)seen, ds.local_size, ds.hostkey, (double)(now - ds.started_ms) / 1000.0);
}

static void coord_retry(uint64_t now);

/* One period: publish, read the host's statuses, apply the rules to them,
 * forward them to the coordinator (the host's leader), and report the
 * verdicts posted into shared memory. */
static void tick(void)
{
    pthread_mutex_lock(&ds.tick_lock);
    uint64_t now = ccs_clock_mono_ms();
    publish_own_status(now);
    size_t nlocal = read_local_statuses(now);
    ccs_dsx_device_align(ds.view,
                         ds.world_size); /* NCCL completion on the device: agree on the first uncompleted seq */
    struct ccs_dsx_view v = {.wsize = ds.world_size, .st = ds.view, .dead = ds.presumed_dead, .now_ms = now};
    struct ccs_dsx_thresholds t = thresholds();
    t.partial = ds.tcp_mode || ds.spans_hosts; /* members elsewhere: only the coordinator can judge */
    /* The lowest rank here still running reports in full (any rank if none is). */
    ds.local_reporter = -1;
    for (int32_t r = 0; r < ds.world_size && ds.local_reporter < 0; r++)
        if (ds.view[r] && ds.view[r]->life == CCS_DSX_ALIVE && !ds.presumed_dead[r])
            ds.local_reporter = r;
    struct ccs_dsx_sink sink = {.verdict = on_verdict, .arg = FROM_LOCAL_RULES, .want = local_want};
    int nv = ccs_dsx_rules_run(&v, &t, ds.seen, &sink);
    if (ccs_cfg.log_level >= CCS_LOG_DEBUG && now - ds.last_dbg >= 1000) {
        ds.last_dbg = now;
        CCS_LOG(DEBUG, "desync: %zu local statuses, %u comms here, %d new verdicts", nlocal, ds.me.ncomm, nv);
    }
    if (!ds.tcp_mode)
        host_search(now);
    coord_retry(now);
    lead_if_leader_gone(now);
    check_local_ranks(now);
    if (ds.client)
        forward_tcp(nlocal, now);
    struct ccs_dsx_verdict *vd = malloc(sizeof *vd);
    while (vd && ccs_dsx_shm_next_verdict(ds.shm, &ds.vcursor, vd))
        on_verdict(vd, NULL);
    free(vd);
    ccs_detector_pass_note();
    pthread_mutex_unlock(&ds.tick_lock);
}

void ccs_desync_set_poll(void (*fn)(uint64_t now_ms))
{
    atomic_store(&ds.poll_fn, fn);
}

static void *thread_main(void *arg)
{
    (void)arg;
    /* (All signals blocked: started by ccs_thread_start.) */
    prctl(PR_SET_NAME, "ccs-desync", 0, 0, 0);
    /* Below the job's threads: where ranks outnumber cores, this thread
     * takes its turn in their gaps rather than from them (nice 10 still gets
     * about a tenth of a contended core, so detection is never starved). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    while (atomic_load(&ds.state) == RUNNING) {
        ccs_sleep_ms(ccs_cfg.desync_period_ms);
        if (atomic_load(&ds.state) != RUNNING)
            break;
        void (*poll)(uint64_t) = atomic_load(&ds.poll_fn);
        if (poll)
            poll(ccs_clock_mono_ms());
        tick();
        atomic_fetch_add_explicit(&ds.periods, 1, memory_order_relaxed);
        if (atomic_load(&ds.abort_pending) == 1)
            abort_when_due();
    }
    return NULL;
}

/* ------------------------------------------------------------ exit, fork */

/* 1 when every communicator in this rank's status whose members all
 * publish on this host has them all at this rank's last seq, with its
 * hash, as their slots say now: their calls agree through it, and nothing
 * is left to search for this rank to answer (a member's status from
 * before its last calls only makes this 0). */
static int last_seqs_agree(void)
{
    pthread_mutex_lock(&ds.tick_lock);
    read_local_statuses(ccs_clock_mono_ms());
    int ok = 1;
    for (uint32_t q = 0; q < ds.me.ncomm && q < CCS_DSX_MAXCOMM && ok; q++) {
        const struct ccs_dsx_comm *m = &ds.me.comm[q];
        if (m->size < 2)
            continue;
        int32_t n = 0, same = 0;
        for (int32_t r = 0; r < ds.world_size; r++) {
            const struct ccs_dsx_status *o = ds.view[r];
            for (uint32_t k = 0; o && k < o->ncomm && k < CCS_DSX_MAXCOMM; k++)
                if (o->comm[k].id == m->id) {
                    n++;
                    same += o->comm[k].done == m->done && o->comm[k].hash == m->hash;
                    break;
                }
        }
        /* (A communicator some member does not publish, one of more than
         * CCS_DSX_MAXCOMM, is not searched either: nothing to wait for.) */
        ok = n != m->size || same == n;
    }
    pthread_mutex_unlock(&ds.tick_lock);
    return ok;
}

/* On one host the same for the host's own search: a rank stays until its
 * last seqs agree with every member's (last_seqs_agree) or a pass of the
 * search that saw this rank's exit is settled (the last seqs of every
 * communicator agree, or a MISMATCH was judged), at most
 * CCS_DSX_EXIT_SEARCH_MS, and not when no rank has run a pass for five
 * periods (none is searching). */
static void exit_linger_host(void)
{
    /* The common end: every member made the same calls, seen at once (a
     * healthy job's exit waits for nothing; an application of a second
     * would feel even one period). */
    if (last_seqs_agree())
        return;
    uint64_t t0 = ccs_clock_mono_ms(), now = t0, pass = 0, idle = 5u * (uint64_t)ccs_cfg.desync_period_ms;
    for (;;) {
        int settled = ccs_dsx_shm_search(ds.shm, &pass);
        now = ccs_clock_mono_ms();
        if ((settled && pass > t0) || now >= t0 + CCS_DSX_EXIT_SEARCH_MS || (now > pass + idle && now > t0 + idle) ||
            last_seqs_agree())
            break;
        ccs_sleep_ms(5);
    }
    tick(); /* the verdicts of the last pass reported */
    CCS_LOG(DEBUG, "desync: the host's search settled %llu ms after this rank finished",
            (unsigned long long)(ccs_clock_mono_ms() - t0));
}

/* Across hosts, a rank stays (its thread answering the coordinator's
 * probes) until the coordinator says BYE: a MISMATCH in the job's last
 * calls is then still searched for and reported, where the ranks would
 * otherwise be gone before the search narrows to its seq.  The
 * coordinator says BYE once every rank finished and no search is under
 * way (a healthy job: a pass or two, tens of ms), and at most
 * CCS_DSX_EXIT_SEARCH_MS after the last rank finished; a rank that ends
 * long before the others waits that long at most. */
static void exit_linger(void)
{
    if (!ds.tcp_mode) {
        exit_linger_host();
        return;
    }
    uint64_t t0 = ccs_clock_mono_ms(), until = t0 + CCS_DSX_EXIT_SEARCH_MS + 4u * (uint64_t)ccs_cfg.desync_period_ms;
    while (!ccs_dsx_shm_bye(ds.shm) && ccs_clock_mono_ms() < until)
        ccs_sleep_ms(5);
    /* The verdicts the coordinator sent before its BYE are in shared
     * memory now: reported before the process goes. */
    tick();
    uint64_t waited = ccs_clock_mono_ms() - t0;
    if (!ccs_dsx_shm_bye(ds.shm))
        CCS_LOG(INFO, "desync: no BYE from the coordinator %llu ms after this rank finished; detection ends here",
                (unsigned long long)waited);
    else
        CCS_LOG(DEBUG, "desync: the coordinator said BYE %llu ms after this rank finished", (unsigned long long)waited);
}

void ccs_desync_note_exit(int how)
{
    if (atomic_load(&ds.state) != RUNNING || (how != CCS_DESYNC_FINALIZING && how != CCS_DESYNC_EXITED))
        return;
    if (atomic_load(&ds.life) >= how)
        return;
    atomic_store(&ds.life, how);
    tick(); /* publish now: the others must not wait a period to know */
    if (how != CCS_DESYNC_EXITED)
        return;
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(ds.th, &cid) == 0 && clock_gettime(cid, &ts) == 0) {
        double cpu_ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6, wall = (double)(ccs_clock_mono_ms() - ds.started_ms);
        CCS_LOG(INFO, "desync: background thread used %.1f ms of CPU in %.1f s (%.3f%% of a core), %llu periods of %ld ms",
                cpu_ms, wall / 1e3, wall > 0 ? cpu_ms * 100 / wall : 0.0,
                (unsigned long long)atomic_load_explicit(&ds.periods, memory_order_relaxed), ccs_cfg.desync_period_ms);
    }
    /* Linger a few periods while local ranks are blocked: they (and we) can
     * then tell that they wait for a rank that is gone. */
    for (int i = 0; i < 3; i++) {
        int blocked = 0;
        for (int32_t r = 0; r < ds.world_size; r++)
            for (uint32_t k = 0; ds.view[r] && r != ds.world_rank && k < ds.view[r]->ncomm; k++)
                blocked |= ds.view[r]->comm[k].state == CCS_DSX_BLOCKED;
        if (!blocked)
            break;
        ccs_sleep_ms(ccs_cfg.desync_period_ms);
        tick();
    }
    /* The coordinator's process: the final exchange.  The coordinator stays
     * until every rank has said it finishes (a fault in a short job is still
     * judged), then says BYE, so no host is left with a dead connection;
     * this process's thread keeps forwarding its host meanwhile. */
    if (ds.coord && ccs_dsx_coord_finish(ds.coord, FINAL_MS) != 1)
        CCS_LOG(INFO,
                "desync: ranks still running %d ms after the coordinator's rank finished; detection across "
                "hosts ends here",
                FINAL_MS);
    exit_linger();
    pthread_mutex_lock(&ds.tick_lock);
    if (ds.exit_link_more)
        CCS_LOG(INFO,
                "desync side channel: the link to the coordinator failed %u more times while this rank was "
                "exiting (the last: %s)",
                ds.exit_link_more, ds.exit_link_why);
    ds.exit_link_more = 0;
    pthread_mutex_unlock(&ds.tick_lock);
    /* Hand the host's link to the coordinator over to a rank still running. */
    pthread_mutex_lock(&ds.tick_lock);
    ds.leaving = 1;
    ccs_dsx_shm_resign(ds.shm);
    pthread_mutex_unlock(&ds.tick_lock);
    ccs_dsx_shm_release(ds.shm);
    if (atomic_load(&ds.abort_pending) != 0)
        abort_when_due(); /* the job still ends, from here if the timer has not yet ended it, and
                             not with this process's exit in the middle of the timer's abort */
}

/* The end of the run (registry.h: before coalescing's finish, the trace's
 * flush and the summary): at the process's exit, say so and linger. */
static void finish_hook(int reason)
{
    if (reason == CCS_END_EXIT)
        ccs_desync_note_exit(CCS_DESYNC_EXITED);
}

static void atfork_child(void)
{
    /* The thread is the parent's; the slot is the parent's rank.  A forked
     * child is not a rank of the job: detection stays off in it. */
    atomic_store(&ds.state, OFF);
    ds.shm = NULL;
    ds.client = NULL;
    ds.coord = NULL;
    ccs_dsx_collect_reset();
    /* The reporter is the parent's too (its lock may have been held). */
    rw.up = 0;
    pthread_mutex_init(&rw.lock, NULL);
    pthread_cond_init(&rw.cv, NULL);
    rw.state = RW_IDLE;
}

static const struct ccs_feature desync_feature = {
    .name = "desync detection",
    .finish = finish_hook,
    .fork_child = atfork_child,
};

/* ------------------------------------------------ the hand-over from start-up */

/* desync_start.h: desync_start.c claims, may start the coordinator (rank
 * 0), then hands its plan to ccs_dsx_begin. */

void ccs_dsx_say_off(const char *why)
{
    ccs_log_once(&ds.off_logged, CCS_LOG_WARN, "desync detection is off: %s; the job runs on without it", why);
}

int ccs_dsx_start_coordinator(const char *bind_host, int port, int32_t wsize, const struct ccs_dsx_cred *cc,
                              char *why, size_t n)
{
    struct ccs_dsx_thresholds t = thresholds();
    int got = 0;
    /* The coordinator evaluates less often than ranks publish: it sees the
     * whole job, and its targets (1 s, 2 s) leave room. */
    long cp = 5 * ccs_cfg.desync_period_ms;
    ds.coord = ccs_dsx_coord_start_cred(bind_host, port, wsize, cc, &t, (int)(cp < 100 ? 100 : cp), &got, why, n);
    return ds.coord ? got : -1;
}

/* How often a coordinator that could not listen tries again, and how
 * often it says it still cannot. */
#define COORD_RETRY_MS 2000
#define COORD_RETRY_SAY_MS 30000

/* The coordinator's address as a log line shows it. */
static const char *port_text(int port, char *buf, size_t n)
{
    if (port == CCS_DSX_PORT_KEYED)
        snprintf(buf, n, "a port keyed by the secret");
    else
        snprintf(buf, n, "port %d", port);
    return buf;
}

void ccs_dsx_retry_coordinator(const char *bind_host, int port, int32_t wsize, const struct ccs_dsx_cred *cc,
                               const char *why)
{
    char pt[64];
    snprintf(ds.cretry.host, sizeof ds.cretry.host, "%s", bind_host ? bind_host : "");
    ds.cretry.port = port;
    ds.cretry.wsize = wsize;
    ds.cretry.cred = cc;
    ds.cretry.since_ms = ds.cretry.said_ms = ccs_clock_mono_ms();
    ds.cretry.next_ms = ds.cretry.since_ms + COORD_RETRY_MS;
    ds.cretry.tries = 1;
    ds.cretry.on = 1;
    CCS_LOG(WARN,
            "desync: cannot start the coordinator on %s (%s): %s; trying again every %d s (detection across hosts "
            "waits for it; within each host it is on)",
            ds.cretry.host, port_text(port, pt, sizeof pt), why, COORD_RETRY_MS / 1000);
}

/* From the detection thread: the coordinator that could not listen, tried
 * again when due; said when it listens, and every COORD_RETRY_SAY_MS while
 * it cannot. */
static void coord_retry(uint64_t now)
{
    if (!ds.cretry.on || now < ds.cretry.next_ms)
        return;
    if (atomic_load(&ds.life) != CCS_DSX_ALIVE) {
        ds.cretry.on = 0;
        return;
    }
    char why[256], pt[64];
    ds.cretry.tries++;
    ds.cretry.next_ms = now + COORD_RETRY_MS;
    int got =
        ccs_dsx_start_coordinator(ds.cretry.host, ds.cretry.port, ds.cretry.wsize, ds.cretry.cred, why, sizeof why);
    double secs = (double)(ccs_clock_mono_ms() - ds.cretry.since_ms) / 1e3;
    if (got > 0) {
        ds.cretry.on = 0;
        CCS_LOG(WARN,
                "desync: the coordinator listens on %s:%d after %.1f s (%u attempts); detection across hosts is on",
                ds.cretry.host, got, secs, ds.cretry.tries);
    } else if (now - ds.cretry.said_ms >= COORD_RETRY_SAY_MS) {
        ds.cretry.said_ms = now;
        CCS_LOG(WARN, "desync: still cannot start the coordinator on %s (%s) after %.0f s: %s; trying again",
                ds.cretry.host, port_text(ds.cretry.port, pt, sizeof pt), secs, why);
    }
}

int ccs_dsx_begin(const struct ccs_dsx_plan *plan)
{
    char why[512];
    int local_size = plan->local_size, coord_port = plan->coord_port;
    ds.local_size = local_size;
    ds.local_checked = 0;
    const char *coord_host = plan->coord_host;
    memcpy(ds.hostkey, plan->hostkey, sizeof ds.hostkey);
    ds.cred = plan->cred;
    ds.spans_hosts = plan->spans_hosts;
    char key[sizeof plan->shm_key];
    memcpy(key, plan->shm_key, sizeof key);
    ds.shm = ccs_dsx_shm_open(key, ds.world_size, ds.world_rank, local_size, why, sizeof why);
    int can_tcp = coord_host && *coord_host && coord_port > 0 && (ds.cred->secret || ds.cred->peers);
    if (!ds.shm && ccs_dsx_shm_taken(key, ds.world_size) && can_tcp) {
        /* Another user holds the segment's name (it carries the job's
         * random tag or secret, so it had to be learnt): this rank stands
         * alone, as a host of its own, in a private segment of a random
         * name, and talks to the coordinator over TCP. */
        unsigned char rnd[CCS_DSX_NONCE];
        ccs_dsx_auth_nonce(rnd);
        size_t o = strlen(key);
        o += (size_t)snprintf(key + o, sizeof key - o, "|alone%d|", ds.world_rank);
        for (int i = 0; i < 16 && o + 3 < sizeof key; i++)
            o += (size_t)snprintf(key + o, sizeof key - o, "%02x", rnd[i]);
        char alone[CCS_DSX_HOST];
        snprintf(alone, sizeof alone, "%.48s/r%d", ds.hostkey, ds.world_rank);
        CCS_LOG(WARN,
                "desync: %s; rank %d talks to the coordinator over TCP instead, as host '%s' (detection stays on)",
                why, ds.world_rank, alone);
        memcpy(ds.hostkey, alone, sizeof ds.hostkey);
        ds.local_size = 1; /* a host of its own */
        ds.shm = ccs_dsx_shm_open(key, ds.world_size, ds.world_rank, 1, why, sizeof why);
    } else if (!ds.shm && ccs_dsx_shm_taken(key, ds.world_size)) {
        size_t o = strlen(why);
        snprintf(why + o, sizeof why - o,
                 " (another user holds the name; without a coordinator to fall back to, detection on this host "
                 "is off)");
    }
    if (!ds.shm) {
        ccs_dsx_say_off(why);
        atomic_store(&ds.state, OFF);
        return -1;
    }
    size_t w = (size_t)ds.world_size;
    ds.peer_status = calloc(w, sizeof *ds.peer_status);
    ds.view = calloc(w, sizeof *ds.view);
    ds.local = calloc(w, sizeof *ds.local);
    ds.presumed_dead = calloc(w, 1);
    ds.search_gone = calloc(w, 1);
    memset(ds.srch, 0, sizeof ds.srch);
    ds.peer_beat = calloc(w, sizeof *ds.peer_beat);
    ds.peer_gen = calloc(w, sizeof *ds.peer_gen);
    ds.peer_beat_ms = calloc(w, sizeof *ds.peer_beat_ms);
    ds.seen = ccs_dsx_seen_new();
    ds.reported = ccs_dsx_seen_new();
    if (!ds.peer_status || !ds.view || !ds.local || !ds.presumed_dead || !ds.search_gone || !ds.peer_beat || !ds.peer_gen ||
        !ds.peer_beat_ms || !ds.seen || !ds.reported) {
        ccs_dsx_say_off("out of memory");
        atomic_store(&ds.state, OFF);
        return -1;
    }
    ds.tcp_mode = coord_host && *coord_host && coord_port > 0;
    if (ds.tcp_mode) {
        snprintf(ds.coord_host_s, sizeof ds.coord_host_s, "%s", coord_host);
        ds.coord_port_s = coord_port;
    }
    if (ds.tcp_mode && ccs_dsx_shm_is_leader(ds.shm)) {
        struct ccs_dsx_client_cb cb = {
            .verdict = post_verdict, .agreed = post_agreed, .want = post_want, .bye = post_bye};
        ds.client =
            ccs_dsx_client_new_cred(coord_host, coord_port, ds.world_size, ds.world_rank, ds.cred, ds.hostkey, &cb);
        if (!ds.client)
            ccs_dsx_say_off("cannot create the TCP client (out of memory)");
    }
    ccs_dsx_collect_want(wanted_seq, NULL);
    if (!ds.hooks_done) {
        ds.hooks_done = 1;
        ccs_feature_register(&desync_feature);
    }
    atomic_store(&ds.state, RUNNING);
    ccs_agree_register(ccs_desync_agree_u64); /* for coalescing's auto (registry.h) */
    ds.started_ms = ccs_clock_mono_ms();
    if (!rw.up) /* (once per process: it outlives a restart of detection) */
        rw.up = ccs_thread_start(reporter_main, NULL, 1024 * 1024, &ds.reporter) == 0;
    if (ccs_thread_start(thread_main, NULL, 512 * 1024, &ds.th) != 0) {
        ccs_dsx_say_off("cannot start the background thread");
        atomic_store(&ds.state, OFF);
        return -1;
    }
    char at[300];
    if (coord_port == CCS_DSX_PORT_KEYED)
        snprintf(at, sizeof at, "%s (a port keyed by the secret)", coord_host);
    else if (coord_host)
        snprintf(at, sizeof at, "%s:%d", coord_host, coord_port);
    if (ds.client)
        CCS_LOG(INFO,
                "desync detection on: rank %d of %d, host '%s', host leader, coordinator at %s, period %ld ms",
                ds.world_rank, ds.world_size, ds.hostkey, at, ccs_cfg.desync_period_ms);
    else
        CCS_LOG(DEBUG, "desync detection on: rank %d of %d, host '%s', shared memory%s, period %ld ms",
                ds.world_rank, ds.world_size, ds.hostkey,
                ds.tcp_mode ? " (the host leader talks to the coordinator)" : "", ccs_cfg.desync_period_ms);
    return 0;
}

/* State STARTING on success. */
int ccs_dsx_claim_start(void)
{
    if (!ccs_cfg.desync || !atomic_load(&ccs_active))
        return -1;
    if (ccs_world_rank() < 0 || ccs_world_size() <= 1)
        return -1; /* not yet known (or nothing to compare): maybe later */
    int expect = IDLE;
    if (!atomic_compare_exchange_strong(&ds.state, &expect, STARTING))
        return expect == RUNNING ? 0 : -1;
    ds.world_size = ccs_world_size();
    ds.world_rank = ccs_world_rank();
    return 1;
}

/* ------------------------------------------------------------ agreement */

int ccs_desync_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                         uint64_t *agreed_min, int timeout_ms)
{
    if (atomic_load(&ds.state) != RUNNING || !c || !c->agreed || c->size <= 0 || c->rank < 0 || c->rank >= c->size)
        return -1;
    if (c->size == 1) {
        *agreed_max = *agreed_min = mine;
        return 0;
    }
    struct ccs_dsx_agree a = {
        .comm = c->id, .key = key, .max = mine, .min = mine, .crank = c->rank, .size = c->size, .n = 1};
    pthread_mutex_lock(&ds.agree_lock);
    ccs_dsx_shm_agree_put(ds.shm, &a);
    pthread_mutex_unlock(&ds.agree_lock);
    size_t words = ((size_t)c->size + 63) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    if (!bits)
        return -1;
    uint64_t deadline = ccs_clock_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    uint64_t verdicts = ccs_verdicts_seen();
    int rc = -1;
    for (;;) {
        /* A verdict means the job is desynchronised: what is waited for may
         * never come (a rank at its step boundary, docs/coalescing.md). */
        if (atomic_load(&ds.state) != RUNNING || ccs_verdicts_seen() != verdicts)
            break;
        struct ccs_dsx_agree res, got[CCS_DSX_SHM_NAGREE];
        if (ccs_dsx_shm_find_agreed(ds.shm, c->id, key, &res) && (int32_t)res.n == c->size) {
            *agreed_max = res.max;
            *agreed_min = res.min;
            rc = 0;
            break;
        }
        memset(bits, 0, words * sizeof *bits);
        int32_t n = 0;
        uint64_t mx = 0, mn = UINT64_MAX;
        for (int32_t r = 0; r < ds.world_size; r++) {
            int k = ccs_dsx_shm_agree_get(ds.shm, r, got);
            for (int j = 0; j < k; j++) {
                const struct ccs_dsx_agree *g = &got[j];
                if (g->comm != c->id || g->key != key || g->size != c->size || g->crank < 0 ||
                    g->crank >= c->size || (bits[g->crank / 64] >> (g->crank % 64) & 1))
                    continue;
                bits[g->crank / 64] |= 1ull << (g->crank % 64);
                n++;
                mx = g->max > mx ? g->max : mx;
                mn = g->min < mn ? g->min : mn;
            }
        }
        if (n == c->size) {
            *agreed_max = mx;
            *agreed_min = mn;
            rc = 0;
            /* For a member that looks later, when this rank's own value
             * may have made room for newer ones. */
            struct ccs_dsx_agree done = {.comm = c->id, .key = key, .max = mx, .min = mn, .crank = c->rank,
                                         .size = c->size, .n = (uint32_t)c->size};
            if (!ds.client && !ccs_dsx_shm_find_agreed(ds.shm, c->id, key, &res)) /* once */
                ccs_dsx_shm_post_agreed(ds.shm, &done);
            break;
        }
        if (ccs_clock_mono_ms() >= deadline)
            break;
        ccs_sleep_ms(1);
    }
    free(bits);
    return rc;
}

void ccs_desync_nccl_done(struct ccs_comm *c, uint64_t seq_done)
{
    if (c && c->agreed)
        ccs_dsx_collect_nccl_done(c->id, seq_done);
}
