/*
 * desync_exit.c - the end of a rank (docs/desync.md, "At exit"): at
 * MPI_Finalize and at the process's exit it says so at once, lingers while
 * a search or the coordinator may still need its answers, hands the host's
 * link to the coordinator over, and still ends the job if an abort is
 * due; and a forked child leaves detection off.
 */
#include "ccs_config.h"
#include "desync.h"
#include "desync_collect.h"
#include "desync_state.h"
#include "log.h"
#include "registry.h"
#include "clock.h"
#include "trace_format.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* How long the coordinator's process waits at exit for the other ranks to
 * finish (the final exchange). */
#define FINAL_MS 5000

/* 1 when every communicator in this rank's status whose members all
 * publish on this host has them all at this rank's last seq, with its
 * hash, as their slots say now: their calls agree through it, and nothing
 * is left to search for this rank to answer (a member's status from
 * before its last calls only makes this 0). */
static int last_seqs_agree(void)
{
    pthread_mutex_lock(&ccs_ds.tick_lock);
    ccs_dsx_read_local_statuses(ccs_clock_mono_ms());
    int ok = 1;
    for (uint32_t q = 0; q < ccs_ds.me.ncomm && q < CCS_DSX_MAXCOMM && ok; q++) {
        const struct ccs_dsx_comm *m = &ccs_ds.me.comm[q];
        if (m->size < 2)
            continue;
        int32_t n = 0, same = 0;
        for (int32_t r = 0; r < ccs_ds.world_size; r++) {
            const struct ccs_dsx_status *o = ccs_ds.view[r];
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
    pthread_mutex_unlock(&ccs_ds.tick_lock);
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
        int settled = ccs_dsx_shm_search(ccs_ds.shm, &pass);
        now = ccs_clock_mono_ms();
        if ((settled && pass > t0) || now >= t0 + CCS_DSX_EXIT_SEARCH_MS ||
            (now > pass + idle && now > t0 + idle) || last_seqs_agree())
            break;
        ccs_sleep_ms(5);
    }
    ccs_dsx_tick(); /* the verdicts of the last pass reported */
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
    if (!ccs_ds.tcp_mode) {
        exit_linger_host();
        return;
    }
    uint64_t t0 = ccs_clock_mono_ms(),
             until = t0 + CCS_DSX_EXIT_SEARCH_MS + 4u * (uint64_t)ccs_cfg.desync_period_ms;
    while (!ccs_dsx_shm_bye(ccs_ds.shm) && ccs_clock_mono_ms() < until)
        ccs_sleep_ms(5);
    /* The verdicts the coordinator sent before its BYE are in shared
     * memory now: reported before the process goes. */
    ccs_dsx_tick();
    uint64_t waited = ccs_clock_mono_ms() - t0;
    if (!ccs_dsx_shm_bye(ccs_ds.shm))
        CCS_LOG(INFO, "desync: no BYE from the coordinator %llu ms after this rank finished; detection ends here",
                (unsigned long long)waited);
    else
        CCS_LOG(DEBUG, "desync: the coordinator said BYE %llu ms after this rank finished",
                (unsigned long long)waited);
}

/* The background thread's CPU, said once at exit. */
static void say_thread_cpu(void)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(ccs_ds.th, &cid) == 0 && clock_gettime(cid, &ts) == 0) {
        double cpu_ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6,
               wall = (double)(ccs_clock_mono_ms() - ccs_ds.started_ms);
        CCS_LOG(
            INFO,
            "desync: background thread used %.1f ms of CPU in %.1f s (%.3f%% of a core), %llu periods of %ld ms",
            cpu_ms, wall / 1e3, wall > 0 ? cpu_ms * 100 / wall : 0.0,
            (unsigned long long)atomic_load_explicit(&ccs_ds.periods, memory_order_relaxed),
            ccs_cfg.desync_period_ms);
    }
}

/* Lingers a few periods while local ranks are blocked: they (and we) can
 * then tell that they wait for a rank that is gone. */
static void linger_while_blocked(void)
{
    for (int i = 0; i < 3; i++) {
        int blocked = 0;
        for (int32_t r = 0; r < ccs_ds.world_size; r++)
            for (uint32_t k = 0; ccs_ds.view[r] && r != ccs_ds.world_rank && k < ccs_ds.view[r]->ncomm; k++)
                blocked |= ccs_ds.view[r]->comm[k].state == CCS_DSX_BLOCKED;
        if (!blocked)
            break;
        ccs_sleep_ms(ccs_cfg.desync_period_ms);
        ccs_dsx_tick();
    }
}

/* The coordinator's process: the final exchange.  The coordinator stays
 * until every rank has said it finishes (a fault in a short job is still
 * judged), then says BYE, so no host is left with a dead connection; this
 * process's thread keeps forwarding its host meanwhile. */
static void final_exchange(void)
{
    if (ccs_ds.coord && ccs_dsx_coord_finish(ccs_ds.coord, FINAL_MS) != 1)
        CCS_LOG(INFO,
                "desync: ranks still running %d ms after the coordinator's rank finished; detection across "
                "hosts ends here",
                FINAL_MS);
}

/* The link's failures while exiting, summed up in one line; then the
 * host's link to the coordinator handed over to a rank still running. */
static void leave_host(void)
{
    pthread_mutex_lock(&ccs_ds.tick_lock);
    if (ccs_ds.exit_link_more)
        CCS_LOG(INFO,
                "desync side channel: the link to the coordinator failed %u more times while this rank was "
                "exiting (the last: %s)",
                ccs_ds.exit_link_more, ccs_ds.exit_link_why);
    ccs_ds.exit_link_more = 0;
    pthread_mutex_unlock(&ccs_ds.tick_lock);
    pthread_mutex_lock(&ccs_ds.tick_lock);
    ccs_ds.leaving = 1;
    ccs_dsx_shm_resign(ccs_ds.shm);
    pthread_mutex_unlock(&ccs_ds.tick_lock);
    ccs_dsx_shm_release(ccs_ds.shm);
}

void ccs_desync_note_exit(int how)
{
    if (atomic_load(&ccs_ds.state) != CCS_DSX_DET_RUNNING ||
        (how != CCS_DESYNC_FINALIZING && how != CCS_DESYNC_EXITED))
        return;
    if (atomic_load(&ccs_ds.life) >= how)
        return;
    atomic_store(&ccs_ds.life, how);
    ccs_dsx_tick(); /* publish now: the others must not wait a period to know */
    if (how != CCS_DESYNC_EXITED)
        return;
    say_thread_cpu();
    linger_while_blocked();
    final_exchange();
    exit_linger();
    leave_host();
    if (atomic_load(&ccs_ds.abort_pending) != 0)
        ccs_dsx_abort_when_due(); /* the job still ends, from here if the timer has not yet ended it, and
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
    atomic_store(&ccs_ds.state, CCS_DSX_DET_OFF);
    ccs_ds.shm = NULL;
    ccs_ds.client = NULL;
    ccs_ds.coord = NULL;
    ccs_ds.relay = NULL;
    ccs_dsx_collect_reset();
    ccs_dsx_reporter_atfork(); /* the reporter is the parent's too */
}

/* When the detector last ended a pass (monotonic ms, 0: never): others
 * read it through the query hook (metrics shows that detection is alive).
 * Relaxed: a time, read alone. */
static _Atomic uint64_t last_pass_ms;

void ccs_dsx_pass_note(void)
{
    atomic_store_explicit(&last_pass_ms, ccs_clock_mono_ms(), memory_order_relaxed);
}

/* The facts this feature answers (registry.h, query): "desync.last_pass_ms". */
static int query_hook(const char *fact, uint64_t *value)
{
    if (strcmp(fact, "desync.last_pass_ms") != 0)
        return -1;
    *value = atomic_load_explicit(&last_pass_ms, memory_order_relaxed);
    return 0;
}

static const struct ccs_feature desync_feature = {
    .name = "desync detection",
    .finish = finish_hook,
    .fork_child = atfork_child,
    .query = query_hook,
};

void ccs_dsx_exit_hooks(void)
{
    if (!ccs_ds.hooks_done) {
        ccs_ds.hooks_done = 1;
        ccs_feature_register(&desync_feature);
    }
}
