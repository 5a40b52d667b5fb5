/*
 * desync_verdict.c - what a verdict leads to, once the rules or the
 * coordinator reached it: its class's policy (ccs_kinds.h's
 * CCS_VERDICT_LIST: STOP or WARN, judged once per communicator or per seq),
 * the features told (metrics), who reports it in full, and under
 * CCSHIM_ON_DESYNC=abort the end of the job, when due.  Reports and the
 * abort timer run on a thread at the job's priority.
 */
#include "ccs_config.h"
#include "ccs_kinds.h"
#include "clock.h"
#include "desync.h"
#include "desync_claim.h"
#include "desync_report.h"
#include "desync_state.h"
#include "log.h"
#include "verdicts.h"
#include "abort.h"
#include "registry.h"
#include "thread.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

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
    if (!rw.up || pthread_equal(pthread_self(), ccs_ds.reporter)) {
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
    while ((now = ccs_clock_mono_ms()) < ccs_ds.abort_due_ms)
        ccs_sleep_ms((long)(ccs_ds.abort_due_ms - now));
    while (atomic_load(&ccs_ds.report_busy) && ccs_clock_mono_ms() < ccs_ds.abort_cap_ms)
        ccs_sleep_ms(10);
    int one = 1;
    if (!atomic_compare_exchange_strong(&ccs_ds.abort_pending, &one, 2)) {
        /* Another thread is inside the abort function (2).  When this one
         * is the process's exit, going on would end the process with status
         * 0 in the middle of it (an MPI_Abort not yet sent): it waits until
         * the function returns (3) or its watchdog (5 s) ends the process;
         * bounded, in case the watchdog could not start. */
        for (int i = 0; i < 70 && atomic_load(&ccs_ds.abort_pending) == 2; i++)
            ccs_sleep_ms(100);
        return;
    }
    if (atomic_load(&ccs_ds.report_busy))
        ccs_log(CCS_LOG_WARN,
                "CCSHIM_ON_DESYNC=abort: this rank's report was still being written %d ms after the verdict "
                "(naming frames, or a trace directory that does not answer); the job ends without the rest of it",
                (int)(ccs_clock_mono_ms() - ccs_ds.abort_armed_ms));
    ccs_log(CCS_LOG_ERROR, "CCSHIM_ON_DESYNC=abort: aborting the job after the verdict on comm %#llx",
            (unsigned long long)ccs_ds.abort_comm);
    ccs_thread_start(abort_watchdog, NULL, 0, NULL);
    int rc = ccs_abort_job(ccs_ds.abort_comm); /* what MPI or NCCL registered (abort.h) */
    if (rc == 0) {
        atomic_store(&ccs_ds.abort_pending, 3);
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
    const struct ccs_dsx_say *say;
};

static void report_fn(void *arg)
{
    struct report_args *r = arg;
    ccs_dsx_report(r->v, r->say);
}

/* A verdict of this host's rules, posted into the host's shared memory by
 * the rank that claimed it first (claim_line): every rank here reports
 * what the first to judge found, and the rank the claim names to log it
 * reads it there even when its own rules did not judge it alike.  Each
 * rank's rules judge the host's statuses as read in its own period, and a
 * MISMATCH found in one view (the odd seq's records of every member in it
 * at once) could be missed in the others, or named there later from the
 * hashes alone.  One post per verdict and host, so the ring's 16 places
 * are not crowded by ranks judging it in the same period. */
static void share_with_host(const struct ccs_dsx_verdict *v)
{
    struct ccs_dsx_verdict *shared = malloc(sizeof *shared);
    if (shared) {
        *shared = *v;
        shared->local = 1;
        ccs_dsx_shm_post_verdict(ccs_ds.shm, shared);
        free(shared);
    }
}

/* Who of this host logs V's line (issue 45: one line a host per verdict):
 * the rank claimed first in the host's shared segment by whichever local
 * rank saw V first, the one it proposed (ccs_dsx_claim_propose: rank 0 on
 * its host for the coordinator's verdicts, whose full report it writes;
 * else the lowest rank here still running).  *WON: 1 this rank made the
 * claim, 0 another had, -1 none can be made (the table full, no segment):
 * then this rank's own view decides, as before the claims, and a race
 * can give two lines. */
static int32_t claim_line(const struct ccs_dsx_verdict *v, int coord, int *won, unsigned *slot)
{
    int32_t lowest = ccs_ds.local_reporter >= 0 ? ccs_ds.local_reporter : ccs_ds.world_rank;
    int rank0_here = ccs_ds.world_rank == 0 || (ccs_ds.view && ccs_ds.view[0]);
    int32_t proposed = ccs_dsx_claim_propose(coord, rank0_here, lowest);
    int32_t owner = ccs_ds.shm ? ccs_dsx_shm_claim_verdict(ccs_ds.shm, v, proposed, won, slot) : -1;
    if (owner >= 0)
        return owner;
    if (ccs_ds.shm)
        ccs_log_once(&ccs_ds.claims_full_logged, CCS_LOG_INFO,
                     "desync: this host's table of who logs each verdict is full (%d verdicts): each rank now "
                     "decides from its own view, and a verdict may be logged twice here",
                     CCS_DSX_NCLAIM);
    *won = -1;
    return proposed;
}

/* A verdict of this host's rules that this rank claimed for another local
 * rank (the lowest still running), which judges the same statuses and
 * normally finds it in a period or two, with its own view's words.  Kept
 * here until that rank marks the claim seen; posted into the segment for
 * it if it has not HOLD_PERIODS later, or when this rank exits first, so
 * that the host never goes without the line.  (Posting at once made the
 * named rank log the claimer's view: "rank 0 issued at least 4" in rank
 * 0's own log, where its own rules say "issued 4".)  Under TICK_LOCK. */
#define HOLD_PERIODS 50
#define NHELD 8
static struct {
    struct ccs_dsx_verdict *v;
    unsigned slot;
    uint64_t due_ms;
} held[NHELD];

static void hold_for_owner(const struct ccs_dsx_verdict *v, unsigned slot)
{
    for (int i = 0; i < NHELD; i++)
        if (!held[i].v) {
            held[i].v = malloc(sizeof *held[i].v);
            if (!held[i].v)
                break;
            *held[i].v = *v;
            held[i].slot = slot;
            held[i].due_ms = ccs_clock_mono_ms() + (uint64_t)HOLD_PERIODS * (uint64_t)ccs_cfg.desync_period_ms;
            return;
        }
    share_with_host(v); /* no room to hold it: posted now */
}

void ccs_dsx_verdict_held(uint64_t now)
{
    int exiting = atomic_load(&ccs_ds.life) >= CCS_DESYNC_EXITED;
    for (int i = 0; i < NHELD; i++) {
        if (!held[i].v)
            continue;
        int seen = ccs_dsx_shm_claim_was_seen(ccs_ds.shm, held[i].slot);
        if (!seen && now < held[i].due_ms && !exiting)
            continue;
        if (!seen) {
            CCS_LOG(DEBUG, "desync: the rank named to log %s at seq %llu on comm %#llx has not judged it; posted for it",
                    ccs_dsx_class_name(held[i].v->cls), (unsigned long long)held[i].v->seq,
                    (unsigned long long)held[i].v->comm);
            share_with_host(held[i].v);
        }
        free(held[i].v);
        held[i].v = NULL;
    }
}

/* The host of rank 0, the coordinator's, as this rank knows it: its own,
 * a party's of V, or NULL. */
static const char *rank0_host(const struct ccs_dsx_verdict *v)
{
    if (ccs_ds.world_rank == 0 || (ccs_ds.view && ccs_ds.view[0]))
        return ccs_ds.hostkey;
    for (uint32_t i = 0; i < v->nparty && i < CCS_DSX_PARTIES; i++)
        if (v->party[i].wrank == 0 && v->party[i].host[0])
            return v->party[i].host;
    return NULL;
}

/* 1 when V is left unreported because the job ends on an earlier verdict
 * on its communicator.  Under abort the first verdict of policy STOP on a
 * communicator ends the job; what the ranks see on it while the job ends
 * (the others now blocked behind the departed rank, a rank in
 * MPI_Finalize) follows from it.  Reporting that would also race: the rank
 * that writes the full report may be gone before it sees it, leaving a
 * verdict without its diagnosis.  Said once, at info level.  (Verdicts on
 * other communicators, as the two sides of a cross-communicator deadlock,
 * are reported.) */
static int job_ending_on_another(const struct ccs_dsx_verdict *v)
{
    if (ccs_cfg.on_desync != CCS_ON_DESYNC_ABORT || ccs_verdict_policy(v->cls) != CCS_VERDICT_STOP)
        return 0;
    uint64_t none = 0;
    if (atomic_compare_exchange_strong(&ccs_ds.ending_comm, &none, v->comm) || none != v->comm)
        return 0;
    ccs_log_once(&ccs_ds.later_logged, CCS_LOG_INFO,
                 "desync: a later verdict (%s at seq %llu on comm %#llx) not reported: the job is "
                 "ending on the first",
                 ccs_dsx_class_name(v->cls), (unsigned long long)v->seq, (unsigned long long)v->comm);
    return 1;
}

/* Under abort, a verdict of policy STOP arms the end of the job (FULL: this
 * rank reports it in full).  A rank in MPI_Finalize or exiting leaves the
 * abort to the ranks still running (they see the same verdict): MPI is
 * being torn down under it.  Decided before the report, which may take a
 * while (libdw). */
static void arm_abort(const struct ccs_dsx_verdict *v, int full)
{
    if (ccs_cfg.on_desync != CCS_ON_DESYNC_ABORT || ccs_verdict_policy(v->cls) != CCS_VERDICT_STOP ||
        atomic_load(&ccs_ds.life) != CCS_DSX_ALIVE || atomic_load(&ccs_ds.abort_pending))
        return;
    ccs_ds.abort_comm = v->comm;
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
    ccs_ds.abort_armed_ms = ccs_clock_mono_ms();
    ccs_ds.abort_due_ms = ccs_ds.abort_armed_ms + (uint64_t)(full   ? (period3 < 100 ? 100 : period3)
                                                             : wide ? period3 + REPORT_BUDGET_MS + 1000
                                                                    : 1000);
    ccs_ds.abort_cap_ms = full || !wide ? ccs_ds.abort_due_ms + REPORT_BUDGET_MS : ccs_ds.abort_due_ms;
    atomic_store(&ccs_ds.abort_pending, 1);
    at_job_priority(start_abort_timer, NULL);
}

/* A verdict, from this host's rules (LOCAL) or from the coordinator: to the
 * features, then reported: its line by the rank of this host that the
 * claim names, in full by that rank for a verdict of this host's rules and
 * by rank 0 for the coordinator's. */
static void on_verdict(const struct ccs_dsx_verdict *v, int local)
{
    int once = ccs_verdict_once(v->cls);
    if (!ccs_dsx_seen_add(ccs_ds.reported, v->cls, v->comm, once ? 0 : v->seq))
        return;
    int judged_here = local;
    if (v->local)
        local = 1; /* reported as this host's own (its claimed rank in full) */
    int won = 0;
    unsigned slot = 0;
    int32_t owner = claim_line(v, !local, &won, &slot);
    if (owner == ccs_ds.world_rank && won >= 0)
        ccs_dsx_shm_claim_seen(ccs_ds.shm, slot); /* (its maker need not post it for this rank) */
    /* A MISMATCH is posted by the rank that claimed it (without a claim, by
     * each rank that judged it, as before the claims); another class, held
     * for the rank named, which judges it too (hold_for_owner). */
    if (judged_here && once && won != 0)
        share_with_host(v);
    else if (judged_here && won == 1 && owner != ccs_ds.world_rank)
        hold_for_owner(v, slot);
    if (once)
        ccs_dsx_seen_add(ccs_ds.seen, v->cls, v->comm, 0); /* judged: this rank's rules and search stop there */
    ccs_features_verdict(ccs_dsx_class_name(v->cls), v->comm, v->seq, v->line); /* e.g. metrics (registry.h) */
    if (ccs_verdict_policy(v->cls) == CCS_VERDICT_STOP)
        ccs_verdict_note(); /* a rank waiting at its step boundary stops waiting (verdicts.h) */
    if (job_ending_on_another(v))
        return;
    struct ccs_dsx_say say = {.line = owner == ccs_ds.world_rank, .host = ccs_ds.hostkey};
    say.full_rank = local ? owner : 0;
    say.full = say.full_rank == ccs_ds.world_rank;
    say.full_host = local ? ccs_ds.hostkey : rank0_host(v);
    atomic_store(&ccs_ds.report_busy, 1);
    arm_abort(v, say.full);
    struct report_args ra = {v, &say};
    at_job_priority(report_fn, &ra);
    atomic_store(&ccs_ds.report_busy, 0);
}

void ccs_dsx_verdict_local(const struct ccs_dsx_verdict *v, void *arg)
{
    (void)arg;
    on_verdict(v, 1);
}

void ccs_dsx_verdict_posted(const struct ccs_dsx_verdict *v)
{
    on_verdict(v, 0);
}

void ccs_dsx_abort_when_due(void)
{
    abort_when_due();
}

void ccs_dsx_reporter_start(void)
{
    if (!rw.up) /* (once per process: it outlives a restart of detection) */
        rw.up = ccs_thread_start(reporter_main, NULL, 1024 * 1024, &ccs_ds.reporter) == 0;
}

/* In a forked child: the reporter is the parent's (its lock may have been
 * held). */
void ccs_dsx_reporter_atfork(void)
{
    rw.up = 0;
    pthread_mutex_init(&rw.lock, NULL);
    pthread_cond_init(&rw.cv, NULL);
    rw.state = RW_IDLE;
}
