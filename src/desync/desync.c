/*
 * desync.c - early desync detection (docs/desync.md) while it runs: the
 * detector's state and its period, on a background thread.  The other jobs
 * are files of their own (desync_state.h lists them): what a verdict leads
 * to (desync_verdict.c), the host's own search (desync_host.c), a rank's
 * end (desync_exit.c), the hand-over from start-up (desync_begin.c; the
 * launcher's environment, the secret, the interfaces and the coordinator's
 * address are desync_start.c's) and the agreement service (desync_agree.c).
 *
 * Every period the thread folds this rank's new records into its status
 * (desync_collect.c), publishes it in the host's shared memory
 * (desync_shm.c), reads the other local ranks' statuses, applies the rules
 * (desync_rules.c) and reports new verdicts (desync_report.c).  When the
 * job spans hosts, the host's leader also forwards the host's statuses to
 * the coordinator in rank 0 (desync_coord.c) and posts its verdicts into
 * shared memory (desync_client.c, over desync_conn.c).  The hot path is
 * untouched: the thread only reads the rings, their in-flight records and
 * the comm table.  Everything the detector holds is in one struct, CCS_DS.
 */
#include "desync.h"
#include "ccs_config.h"
#include "desync_collect.h"
#include "desync_device.h"
#include "desync_state.h"
#include "log.h"
#include "step.h"
#include "thread.h"
#include "clock.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "trace_format.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long a MISMATCH waits for the records of every member at its seq
 * (asked from other hosts through the coordinator) before it names the
 * majority of the records in view: the answer takes two or three periods
 * of the hosts and the coordinator, well inside the 1 s target. */
#define RECORD_WAIT_MS 700

struct ccs_dsx_ds ccs_ds = {
    .world_size = -1,
    .world_rank = -1,
    .tick_lock = PTHREAD_MUTEX_INITIALIZER,
    .agree_lock = PTHREAD_MUTEX_INITIALIZER,
    .local_reporter = -1,
};

int ccs_desync_active(void)
{
    return atomic_load(&ccs_ds.state) == CCS_DSX_DET_RUNNING;
}

/* Records differ here at (COMM, SEQ) (or a member's record of it is not in
 * view): the local ranks publish what they kept around SEQ, and the leader
 * sends those records to the coordinator. */
static void local_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)arg;
    ccs_dsx_shm_want(ccs_ds.shm, comm, seq, ccs_clock_mono_ms());
    if (ccs_ds.client)
        ccs_dsx_client_detail(ccs_ds.client, comm);
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
int ccs_dsx_peer_gone(int32_t r, uint64_t now)
{
    const struct ccs_dsx_status *o = ccs_ds.view[r];
    if (!o)
        return 0;
    if (ccs_ds.presumed_dead[r] || o->life == CCS_DSX_DIED)
        return 1;
    if (o->life == CCS_DSX_ALIVE)
        return 0;
    int alive = ccs_dsx_status_pid_alive(o);
    if (alive >= 0)
        return !alive;
    return now - ccs_ds.peer_beat_ms[r] > GONE_SILENT_MS;
}

/* ------------------------------------------------------------ the period */

static void forward_tcp(size_t nlocal, uint64_t now)
{
    (void)now;
    size_t nag = ccs_dsx_agree_gather(nlocal);
    char why[256] = "";
    long to = ccs_cfg.desync_period_ms / 2;
    /* A relay folds its group's statuses, its own host's among them. */
    const struct ccs_dsx_status *const *st = ccs_ds.local;
    size_t n = nlocal;
    if (ccs_ds.relay) {
        n = ccs_dsx_relay_pump(nlocal);
        st = ccs_ds.relay_buf;
    }
    if (ccs_dsx_client_tick(ccs_ds.client, st, n, ccs_ds.agree_buf, nag, to < 1 ? 1 : (int)to, why, sizeof why) == 0)
        return;
    /* This rank is exiting (it may have taken the host's link over from a
     * leader that left first): the coordinator's rank may have finished
     * and gone too, which is the job's normal end, and whatever ranks of
     * this host still run take the link over and say so if it is down. */
    if (atomic_load(&ccs_ds.life) >= CCS_DESYNC_EXITED && !ccs_ds.exit_link_said) {
        ccs_ds.exit_link_said = 1;
        CCS_LOG(INFO, "desync side channel: the link to the coordinator ended while this rank was exiting (%s)",
                why);
    } else if (atomic_load(&ccs_ds.life) >= CCS_DESYNC_EXITED) {
        ccs_ds.exit_link_more++;
        snprintf(ccs_ds.exit_link_why, sizeof ccs_ds.exit_link_why, "%s", why);
    } else
        ccs_log_once(&ccs_ds.tcp_logged, CCS_LOG_WARN,
                     "desync side channel: %s; detection across hosts is off until the coordinator answers", why);
}

struct ccs_dsx_thresholds ccs_dsx_thresholds_now(void)
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
    ccs_dsx_collect(&ccs_ds.me, now);
    ccs_ds.me.magic = CCS_DSX_MAGIC;
    ccs_ds.me.version = CCS_DSX_VERSION;
    ccs_ds.me.wrank = ccs_ds.world_rank;
    ccs_ds.me.wsize = ccs_ds.world_size;
    ccs_ds.me.pid = (uint32_t)getpid();
    ccs_dsx_pidns_self(&ccs_ds.me.pidns_dev, &ccs_ds.me.pidns_ino); /* (read once, by ccs_dsx_shm_open) */
    ccs_ds.me.life = (uint32_t)atomic_load(&ccs_ds.life);
    ccs_ds.me.flags = ccs_step_marking() ? CCS_DSX_ST_MARKS : 0;
    struct ccs_foreign_id fid = {0};
    memset(ccs_ds.me.foreign, 0, sizeof ccs_ds.me.foreign);
    ccs_ds.me.foreign_ms = ccs_ds.me.foreign_size = 0;
    if (!ccs_foreign_now(now, ccs_ds.me.foreign, sizeof ccs_ds.me.foreign, &ccs_ds.me.foreign_ms,
                         &ccs_ds.me.foreign_size, &fid)) {
        memset(ccs_ds.me.foreign, 0, sizeof ccs_ds.me.foreign), ccs_ds.me.foreign_ms = ccs_ds.me.foreign_size = 0;
        memset(&fid, 0, sizeof fid);
    }
    ccs_ds.me.foreign_group = fid.group;
    ccs_ds.me.foreign_gseq = fid.seq;
    ccs_ds.me.foreign_kind = fid.kind;
    ccs_ds.me.foreign_prev = fid.prev;
    memcpy(ccs_ds.me.host, ccs_ds.hostkey, sizeof ccs_ds.me.host);
    uint64_t beat = ccs_ds.me.beat;
    ccs_ds.me.beat = 0;
    uint64_t h = ccs_hash_bytes(
        &ccs_ds.me, offsetof(struct ccs_dsx_status, comm) + ccs_ds.me.ncomm * sizeof(struct ccs_dsx_comm), 0);
    ccs_ds.me.beat = beat;
    if (h != ccs_ds.last_hash || now - ccs_ds.last_pub >= 500) {
        ccs_ds.me.beat++;
        ccs_dsx_shm_publish(ccs_ds.shm, &ccs_ds.me);
        ccs_ds.last_hash = h;
        ccs_ds.last_pub = now;
    }
}

/* Local rank world_rank's status from its slot (our copy, read again only when the
 * slot changed), or NULL when there is none valid.  A rank whose process is
 * gone is marked dead in our copy, so the leader tells the coordinator at
 * once; one whose heartbeat stopped is presumed dead. */
static const struct ccs_dsx_status *read_peer(int32_t r, uint64_t now)
{
    char why[200];
    uint64_t g = ccs_ds.peer_status[r] ? ccs_ds.peer_gen[r] : 0;
    int rc = ccs_dsx_shm_read(ccs_ds.shm, r, &ccs_ds.scratch, &g, why, sizeof why);
    if (rc < 0)
        ccs_log_once(&ccs_ds.invalid_logged, CCS_LOG_WARN, "desync: ignoring rank %d's shared status: %s", r, why);
    if (rc == 1) {
        if (!ccs_ds.peer_status[r] && !(ccs_ds.peer_status[r] = malloc(sizeof *ccs_ds.peer_status[r])))
            return NULL;
        memcpy(ccs_ds.peer_status[r], &ccs_ds.scratch,
               offsetof(struct ccs_dsx_status, comm) + ccs_ds.scratch.ncomm * sizeof(struct ccs_dsx_comm));
        ccs_ds.peer_gen[r] = g;
    } else if (rc < 0 || !ccs_ds.peer_status[r]) {
        return NULL;
    }
    /* rc 0 with a copy: the slot is being written, or was when its process
     * was killed (its generation then stays odd for good): the last copy
     * stands, so a rank killed while publishing is still seen to die. */
    const struct ccs_dsx_status *o = ccs_ds.peer_status[r];
    if (o->beat != ccs_ds.peer_beat[r] || !ccs_ds.peer_beat_ms[r]) {
        ccs_ds.peer_beat[r] = o->beat;
        ccs_ds.peer_beat_ms[r] = now;
    }
    /* (Its pid is looked up only in this process's own PID namespace: in
     * another one, one container per rank, the same number names another
     * process or none, and the heartbeat below decides alone.) */
    if (o->life == CCS_DSX_ALIVE && ccs_dsx_status_pid_alive(o) == 0)
        ccs_ds.peer_status[r]->life = CCS_DSX_DIED;
    else if (o->life == CCS_DSX_ALIVE && now - ccs_ds.peer_beat_ms[r] > (uint64_t)ccs_cfg.desync_heartbeat_ms)
        ccs_ds.presumed_dead[r] = 1;
    return o;
}

/* The statuses of this host's ranks into VIEW (by world rank) and LOCAL
 * (packed); returns how many. */
size_t ccs_dsx_read_local_statuses(uint64_t now)
{
    size_t nlocal = 0;
    for (int32_t r = 0; r < ccs_ds.world_size; r++) {
        ccs_ds.presumed_dead[r] = 0;
        ccs_ds.view[r] = r == ccs_ds.world_rank ? &ccs_ds.me : read_peer(r, now);
        if (ccs_ds.view[r])
            ccs_ds.local[nlocal++] = ccs_ds.view[r];
    }
    return nlocal;
}

/* The host's leader is gone (it exited first): take over its link to the
 * coordinator. */
static void lead_if_leader_gone(uint64_t now)
{
    if (!ccs_ds.tcp_mode || ccs_ds.client || ccs_ds.leaving || ccs_dsx_shm_bye(ccs_ds.shm))
        return;
    /* The leader (a rank) is gone as read_peer and peer_gone see it; one
     * whose status this rank never saw is not. */
    int32_t cur = ccs_dsx_shm_leader(ccs_ds.shm);
    if (cur >= ccs_ds.world_size || (cur >= 0 && cur != ccs_ds.world_rank && !ccs_dsx_peer_gone(cur, now)) ||
        !ccs_dsx_shm_claim_leader(ccs_ds.shm, cur))
        return;
    ccs_ds.client = ccs_dsx_host_client(ccs_ds.coord_host_s, ccs_ds.coord_port_s);
    CCS_LOG(INFO, "desync: rank %d now leads host '%s' (the leader is gone)", ccs_ds.world_rank, ccs_ds.hostkey);
}

/* Ranks the launcher puts on this host identity that never come into its
 * shared memory do not share /dev/shm with this one (one container per
 * rank, each with a /dev/shm of its own, given one CCSHIM_DESYNC_HOST):
 * nothing compares them, and ccshim says so once per rank, a heartbeat
 * period after its start, rather than stay silent.  (With host identities
 * of their own they would talk over TCP: docs/desync.md, "Containers".) */
static void check_local_ranks(uint64_t now)
{
    if (ccs_ds.local_checked || ccs_ds.local_size <= 0)
        return;
    int32_t seen = ccs_dsx_shm_attached(ccs_ds.shm);
    if (seen >= ccs_ds.local_size) {
        ccs_ds.local_checked = 1;
        return;
    }
    if (now - ccs_ds.started_ms < (uint64_t)ccs_cfg.desync_heartbeat_ms)
        return;
    ccs_ds.local_checked = 1;
    CCS_LOG(WARN,
            "desync: %d of the %d ranks the launcher puts on host '%s' came into its shared memory (%.0f s after "
            "this one started): the others do not share /dev/shm with this rank (a container per rank with a "
            "/dev/shm of its own?), so they are not compared with it; share /dev/shm between them, or give each "
            "its own CCSHIM_DESYNC_HOST (then they talk over TCP)",
            (int)seen, ccs_ds.local_size, ccs_ds.hostkey, (double)(now - ccs_ds.started_ms) / 1000.0);
}

/* One period: publish, read the host's statuses, apply the rules to them,
 * forward them to the coordinator (the host's leader), and report the
 * verdicts posted into shared memory. */
void ccs_dsx_tick(void)
{
    pthread_mutex_lock(&ccs_ds.tick_lock);
    uint64_t now = ccs_clock_mono_ms();
    publish_own_status(now);
    size_t nlocal = ccs_dsx_read_local_statuses(now);
    ccs_dsx_device_align(ccs_ds.view,
                         ccs_ds.world_size); /* NCCL completion on the device: agree on the first uncompleted seq */
    struct ccs_dsx_view v = {
        .wsize = ccs_ds.world_size, .st = ccs_ds.view, .dead = ccs_ds.presumed_dead, .now_ms = now};
    struct ccs_dsx_thresholds t = ccs_dsx_thresholds_now();
    t.partial = ccs_ds.tcp_mode || ccs_ds.spans_hosts; /* members elsewhere: only the coordinator can judge */
    /* The lowest rank here still running reports in full (any rank if none is). */
    ccs_ds.local_reporter = -1;
    for (int32_t r = 0; r < ccs_ds.world_size && ccs_ds.local_reporter < 0; r++)
        if (ccs_ds.view[r] && ccs_ds.view[r]->life == CCS_DSX_ALIVE && !ccs_ds.presumed_dead[r])
            ccs_ds.local_reporter = r;
    struct ccs_dsx_sink sink = {.verdict = ccs_dsx_verdict_local, .arg = NULL, .want = local_want};
    int nv = ccs_dsx_rules_run(&v, &t, ccs_ds.seen, &sink);
    if (ccs_cfg.log_level >= CCS_LOG_DEBUG && now - ccs_ds.last_dbg >= 1000) {
        ccs_ds.last_dbg = now;
        CCS_LOG(DEBUG, "desync: %zu local statuses, %u comms here, %d new verdicts", nlocal, ccs_ds.me.ncomm, nv);
    }
    if (!ccs_ds.tcp_mode)
        ccs_dsx_host_search(now);
    ccs_dsx_coord_retry(now);
    lead_if_leader_gone(now);
    check_local_ranks(now);
    if (ccs_ds.client)
        forward_tcp(nlocal, now);
    struct ccs_dsx_verdict *vd = malloc(sizeof *vd);
    while (vd && ccs_dsx_shm_next_verdict(ccs_ds.shm, &ccs_ds.vcursor, vd))
        ccs_dsx_verdict_posted(vd);
    free(vd);
    ccs_dsx_verdict_held(now);
    ccs_dsx_pass_note();
    pthread_mutex_unlock(&ccs_ds.tick_lock);
}

void ccs_desync_set_poll(void (*fn)(uint64_t now_ms))
{
    atomic_store(&ccs_ds.poll_fn, fn);
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
    while (atomic_load(&ccs_ds.state) == CCS_DSX_DET_RUNNING) {
        ccs_sleep_ms(ccs_cfg.desync_period_ms);
        if (atomic_load(&ccs_ds.state) != CCS_DSX_DET_RUNNING)
            break;
        void (*poll)(uint64_t) = atomic_load(&ccs_ds.poll_fn);
        if (poll)
            poll(ccs_clock_mono_ms());
        ccs_dsx_tick();
        atomic_fetch_add_explicit(&ccs_ds.periods, 1, memory_order_relaxed);
        if (atomic_load(&ccs_ds.abort_pending) == 1)
            ccs_dsx_abort_when_due();
    }
    return NULL;
}

int ccs_dsx_period_start(void)
{
    return ccs_thread_start(thread_main, NULL, 512 * 1024, &ccs_ds.th) == 0 ? 0 : -1;
}

void ccs_desync_nccl_done(struct ccs_comm *c, uint64_t seq_done)
{
    if (c && c->agreed)
        ccs_dsx_collect_nccl_done(c->id, seq_done);
}
