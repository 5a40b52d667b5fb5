/*
 * nccl_track_poll.c - NCCL completion tracking's poller (nccl_track.h,
 * docs/nccl.md): what the tracker (nccl_track.c) recorded, read off the
 * hot path, by the desync thread or a thread of its own.
 *
 * Background (desync thread, every period): advances the period, polls the
 * recorded events (cuEventQuery) and reports each completed tag; a stream
 * quiet for a period whose latest call no event covers is asked once with
 * cuStreamQuery (never while capturing).  Every ~100 ms it also asks
 * ncclCommGetAsyncError of each NCCL communicator: an asynchronous error is
 * logged once with the communicator's last operations, and a communicator
 * registered before it was ready (nonblocking) gets its rank and size.  The
 * thread sets its capture mode to relaxed first, so that its queries never
 * disturb a capture made by the job in global mode.
 */
#include "nccl_track.h"
#include "nccl_track_state.h"
#include "ccs_config.h"
#include "desync.h"
#include "desync_collect.h"
#include "log.h"
#include "nccl_internal.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "real.h"
#include "trace_format.h"
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define NDONE 64

/* Per communicator: the highest seq reported complete (background only). */
static struct {
    uint64_t id, done;
    int err_logged, stuck_logged, stuck_times;
    uint64_t stuck_since, stuck_at;
} dn[NDONE];

static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;

/* The handle the background thread is calling NCCL with (0: none), and the
 * stream slot it is querying (NULL: none). */
static _Atomic uintptr_t bg_using;
static _Atomic(struct ccs_ntrack_stream *) bg_stream;

/* ------------------------------------------------------- communicators */

void ccs_ntrack_forget(ncclComm_t comm)
{
    /* The entry is retired (a store before this fence); the poller marks
     * the handle it uses before it checks the entry (Dekker): either it saw
     * the retirement, or we see its mark and wait for it to finish. */
    atomic_thread_fence(memory_order_seq_cst);
    while (comm && atomic_load(&bg_using) == (uintptr_t)comm)
        nanosleep(&(struct timespec){0, 50000}, NULL);
    /* Its streams may be destroyed next (the usual order): the poller stops
     * asking about streams whose last call was on COMM (until a new call). */
    for (unsigned k = 0; comm && k < NSTREAMS; k++) {
        struct ccs_ntrack_stream *s = &ccs_ntrack_streams[k];
        if (atomic_load(&s->state) != SLOT_READY || atomic_load(&s->last_comm) != (uintptr_t)comm)
            continue;
        atomic_store(&s->retired, 1);
        while (atomic_load(&bg_stream) == s)
            nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static int dn_slot(uint64_t id)
{
    int free_i = -1;
    for (int i = 0; i < NDONE; i++) {
        if (dn[i].id == id)
            return i;
        if (!dn[i].id && free_i < 0)
            free_i = i;
    }
    if (free_i < 0)
        free_i = (int)(id % NDONE); /* full: reuse one */
    dn[free_i].id = id;
    dn[free_i].done = 0;
    dn[free_i].err_logged = 0;
    dn[free_i].stuck_logged = 0;
    dn[free_i].stuck_times = 0;
    dn[free_i].stuck_since = 0;
    return free_i;
}

/* Work on HANDLE through SEQ has completed on the device. */
static void report(uintptr_t handle, uint64_t seq)
{
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, handle);
    if (!c || !seq)
        return;
    int i = dn_slot(c->id);
    if (seq <= dn[i].done)
        return;
    dn[i].done = seq;
    ccs_desync_nccl_done(c, seq);
    atomic_fetch_add_explicit(&ccs_ntrack_count.done_reports, 1, memory_order_relaxed);
}

/* An asynchronous NCCL error on C: once, with its last operations. */
static void async_error(struct ccs_comm *c, ncclResult_t err)
{
    int i = dn_slot(c->id);
    if (dn[i].err_logged)
        return;
    dn[i].err_logged = 1;
    atomic_fetch_add_explicit(&ccs_ntrack_count.async_errors, 1, memory_order_relaxed);
    __typeof__(&pncclGetErrorString) str = (__typeof__(&pncclGetErrorString))ccs_real_symbol(
        "pncclGetErrorString", (const char *const[]){"libnccl.so.2", "libnccl.so", NULL});
    uint64_t issued = atomic_load_explicit(&c->seq, memory_order_relaxed);
    char ops[512];
    size_t o = 0;
    ops[0] = 0;
    for (uint64_t s = issued > 3 ? issued - 3 : 1; s <= issued && o < sizeof ops; s++) {
        struct ccs_dsx_op op;
        char one[160];
        if (!ccs_dsx_collect_find(c->id, s, &op) || op.seq != s)
            continue;
        ccs_call_str(op.kind, op.count, op.dtype, op.op, op.root, op.flags, one, sizeof one);
        o += (size_t)snprintf(ops + o, sizeof ops - o, "%sseq %llu %s", o ? ", " : "", (unsigned long long)s, one);
    }
    CCS_LOG(ERROR,
            "NCCL asynchronous error on comm %#llx (rank %d of %d): %s (%d); enqueued %llu, completed %llu; "
            "last operations: %s",
            (unsigned long long)c->id, c->rank, c->size, str ? str(err) : "?", (int)err, (unsigned long long)issued,
            (unsigned long long)dn[i].done, o ? ops : "(none recorded)");
}

/* Work enqueued on C that has not completed for CCSHIM_DESYNC_BLOCK_MS:
 * said once (the desync rules judge it across ranks; this line also serves
 * a job of one rank), and again when it completes after all. */
static void stuck(struct ccs_comm *c, uint64_t now)
{
    if (!c->agreed || !atomic_load(&ccs_ntrack_on) || !ccs_cfg.nccl_completion)
        return;
    int i = dn_slot(c->id);
    uint64_t issued = atomic_load_explicit(&c->seq, memory_order_relaxed);
    if (issued <= dn[i].done || dn[i].done != dn[i].stuck_at) {
        if (dn[i].stuck_logged == 1)
            CCS_LOG(WARN,
                    "NCCL comm %#llx: progress on the device again after %.1f s (enqueued %llu, completed %llu)",
                    (unsigned long long)c->id, (double)(now - dn[i].stuck_since) / 1e3, (unsigned long long)issued,
                    (unsigned long long)dn[i].done);
        dn[i].stuck_logged = 0;
        dn[i].stuck_since = issued > dn[i].done ? now : 0;
        dn[i].stuck_at = dn[i].done;
        return;
    }
    if (!dn[i].stuck_since)
        dn[i].stuck_since = now;
    if (!dn[i].stuck_logged && now - dn[i].stuck_since >= (uint64_t)ccs_cfg.desync_block_ms) {
        /* A slow device would say it at every operation: three times per
         * communicator, then once that it goes quiet. */
        dn[i].stuck_logged = ++dn[i].stuck_times <= 3;
        if (dn[i].stuck_logged)
            CCS_LOG(WARN,
                    "NCCL comm %#llx (rank %d of %d): enqueued %llu, completed %llu on the device; no progress "
                    "for %.1f s%s",
                    (unsigned long long)c->id, c->rank, c->size, (unsigned long long)issued,
                    (unsigned long long)dn[i].done, (double)(now - dn[i].stuck_since) / 1e3,
                    dn[i].stuck_times == 3 ? " (said 3 times: no more for this communicator)" : "");
        else
            dn[i].stuck_logged = 2; /* silent, but counted as said */
    }
}

static void check_comm(struct ccs_comm *c, void *arg)
{
    if (c->backend != CCS_BE_NCCL)
        return;
    uintptr_t h = atomic_load(&c->handle);
    atomic_store(&bg_using, h);
    if (atomic_load(&c->handle) == h) {
        __typeof__(&pncclCommGetAsyncError) async = CCS_NCCL_REAL(CommGetAsyncError);
        ncclResult_t st = ncclSuccess;
        if (async && async((ncclComm_t)h, &st) == ncclSuccess) {
            if (st == ncclSuccess && (c->rank < 0 || c->size <= 0))
                ccs_nccl_comm_requery(c);
            else if (st != ncclSuccess && st != ncclInProgress)
                async_error(c, st);
        }
    }
    atomic_store(&bg_using, 0);
    stuck(c, *(uint64_t *)arg);
}

/* --------------------------------------------------------------- poller */

/* Asks STREAM whether everything it holds is done: the seq to report for
 * COMM then (SEQ, or the communicator's later sequenced calls that need no
 * device, ncclCommSplit), else 0. */
static uint64_t query_tail(struct ccs_ntrack_stream *s, uintptr_t comm, uint64_t seq)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (ccs_ntrack_cu.is_capturing((CUstream)s->handle, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, comm);
    uint64_t issued = c ? atomic_load_explicit(&c->seq, memory_order_relaxed) : 0;
    atomic_fetch_add_explicit(&ccs_ntrack_count.queries, 1, memory_order_relaxed);
    if (ccs_ntrack_cu.stream_query((CUstream)s->handle) != CUDA_SUCCESS)
        return 0; /* not yet (or an error the job will see): ask again next period */
    if (atomic_load_explicit(&s->last_seq, memory_order_acquire) != seq ||
        atomic_load_explicit(&s->last_comm, memory_order_relaxed) != comm)
        return 0; /* a call came meanwhile: its own event or the next query */
    s->tail_seq = seq;
    s->tail_comm = comm;
    if (c && atomic_load_explicit(&c->seq, memory_order_relaxed) == issued && issued > seq)
        return issued;
    return seq;
}

/* The latest calls of S, if no event covers them, once S is quiet. */
static void tail(struct ccs_ntrack_stream *s, uint64_t now)
{
    uint64_t seq = atomic_load_explicit(&s->last_seq, memory_order_acquire);
    uintptr_t comm = atomic_load_explicit(&s->last_comm, memory_order_relaxed);
    if (seq != s->seen_seq || comm != s->seen_comm) {
        s->seen_seq = seq;
        s->seen_comm = comm;
        s->quiet_since = now;
        return;
    }
    if ((seq == s->tail_seq && comm == s->tail_comm) || now - s->quiet_since < (uint64_t)ccs_cfg.desync_period_ms)
        return;
    /* Announce the stream before looking at retired (ccs_ntrack_forget). */
    atomic_store(&bg_stream, s);
    uint64_t done = atomic_load(&s->retired) ? 0 : query_tail(s, comm, seq);
    atomic_store(&bg_stream, NULL);
    if (done)
        report(comm, done);
}

static void poll_locked(uint64_t now)
{
    static unsigned tries;
    static __thread int relaxed; /* the capture mode is per thread: each poller sets its own */
    static uint64_t last_check;
    if (!atomic_load(&ccs_ntrack_on)) {
        if (tries++ % 10 == 0)
            ccs_ntrack_init();
        if (!atomic_load(&ccs_ntrack_on))
            return;
    }
    if (!relaxed) {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        ccs_ntrack_cu.exchange_mode(&m);
        relaxed = 1;
    }
    atomic_fetch_add_explicit(&ccs_ntrack_period, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ccs_ntrack_count.polls, 1, memory_order_relaxed);
    for (unsigned k = 0; k < NSTREAMS && ccs_cfg.nccl_completion; k++) {
        struct ccs_ntrack_stream *s = &ccs_ntrack_streams[k];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_READY)
            continue;
        int pushed = s->ctx && ccs_ntrack_cu.ctx_push(s->ctx) == CUDA_SUCCESS;
        for (int i = 0; i < NEV; i++) {
            if (atomic_load_explicit(&s->ev_state[i], memory_order_acquire) != EV_RECORDED)
                continue;
            CUresult r = ccs_ntrack_cu.event_query(s->ev[i]);
            if (r == CUDA_ERROR_NOT_READY)
                continue;
            if (r == CUDA_SUCCESS)
                report(s->tag_comm[i], s->tag_seq[i]);
            atomic_store_explicit(&s->ev_state[i], EV_FREE, memory_order_release);
        }
        tail(s, now);
        if (pushed) {
            CUcontext old;
            ccs_ntrack_cu.ctx_pop(&old);
        }
    }
    if (now - last_check >= 100) {
        last_check = now;
        ccs_comm_foreach(check_comm, &now);
    }
}

void ccs_ntrack_poll(uint64_t now)
{
    if (pthread_mutex_trylock(&poll_lock) != 0)
        return;
    poll_locked(now);
    pthread_mutex_unlock(&poll_lock);
}

/* The poller's own thread, for a job where desync detection does not run
 * (one rank, or CCSHIM_DESYNC=0): it polls while the desync thread does not. */
void *ccs_ntrack_own_poller(void *arg)
{
    (void)arg;
    for (;;) {
        long ms = ccs_cfg.desync_period_ms > 0 ? ccs_cfg.desync_period_ms : 20;
        nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
        if (!ccs_desync_active()) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ccs_ntrack_poll((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
        }
    }
    return NULL;
}
