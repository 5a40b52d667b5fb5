/*
 * nccl_track.c - NCCL completion tracking with CUDA events (see
 * nccl_track.h and docs/nccl.md).
 *
 * Streams: a fixed table of NSTREAMS slots, claimed lock-free at a stream's
 * first NCCL call (that first call also asks the driver for the current
 * context, once, and creates the slot's NEV events in that context: a
 * first sighting, so not per call).  The first call on a stream records an
 * event at once; later ones at most one per period.
 *
 * Hot path, per NCCL call outside a group (or per stream at the outermost
 * ncclGroupEnd): the slot lookup (one multiplication, one probe mostly), two
 * relaxed stores (the stream's latest communicator and sequence number) and
 * a counter; when the background thread has started a new period since the
 * stream's last event (one relaxed load), one compare-and-swap claims the
 * period and a free event is recorded on the stream, tagged (communicator,
 * seq).  No lock, no allocation, no system call.
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
#include "ccs_config.h"
#include "desync.h"
#include "desync_collect.h"
#include "log.h"
#include "nccl_internal.h"
#include "registry.h"
#include "thread.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "real.h"
#include "trace_format.h"
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSTREAM_BITS 6
#define NSTREAMS (1u << NSTREAM_BITS)
#define NEV 4
#define NDONE 64
#define GROUP_STREAMS 8

static struct {
    CUresult (*event_create)(CUevent *, unsigned int);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_query)(CUevent);
    CUresult (*stream_query)(CUstream);
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*ctx_get)(CUcontext *);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
    CUresult (*exchange_mode)(CUstreamCaptureMode *);
} cu;

atomic_int ccs_ntrack_on;
static _Atomic uint64_t period = 1; /* advanced by the poller */

enum { SLOT_FREE, SLOT_CLAIMED, SLOT_READY };
enum { EV_FREE, EV_RECORDING, EV_RECORDED };

struct strm {
    atomic_int state;
    uintptr_t handle;
    CUcontext ctx;
    _Atomic uint64_t ev_period; /* period of the last event (rate limit) */
    _Atomic uintptr_t last_comm;
    _Atomic uint64_t last_seq;
    atomic_int ev_ready; /* 1 events created, -1 could not */
    atomic_int retired;  /* its last communicator was destroyed: not queried */
    atomic_uint next;
    CUevent ev[NEV];
    atomic_int ev_state[NEV];
    uintptr_t tag_comm[NEV];
    uint64_t tag_seq[NEV];
    /* Background thread only: the (comm, seq) last seen, since when, and
     * the last one a stream query found complete. */
    uintptr_t seen_comm, tail_comm;
    uint64_t seen_seq, quiet_since, tail_seq;
};

static struct strm streams[NSTREAMS];

static struct {
    _Atomic uint64_t events, queries, done_reports, captured, async_errors, polls;
} stats;

/* Per communicator: the highest seq reported complete (background only). */
static struct {
    uint64_t id, done;
    int err_logged, stuck_logged, stuck_times;
    uint64_t stuck_since, stuck_at;
} dn[NDONE];

static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;
static void *own_poller(void *arg);

/* The handle the background thread is calling NCCL with (0: none), and the
 * stream slot it is querying (NULL: none). */
static _Atomic uintptr_t bg_using;
static _Atomic(struct strm *) bg_stream;

/* ------------------------------------------------------------ the driver */

static void *proc(CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *),
                  const char *name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

/* At exit: what tracking did (INFO; the GPU checks read it). */
static void finish_hook(int reason)
{
    if (reason != CCS_END_EXIT)
        return;
    CCS_LOG(INFO,
            "NCCL completion tracking: %llu events recorded, %llu stream queries, %llu completions reported, %llu "
            "calls on captured streams, %llu asynchronous errors, %llu polls",
            (unsigned long long)atomic_load(&stats.events), (unsigned long long)atomic_load(&stats.queries),
            (unsigned long long)atomic_load(&stats.done_reports), (unsigned long long)atomic_load(&stats.captured),
            (unsigned long long)atomic_load(&stats.async_errors), (unsigned long long)atomic_load(&stats.polls));
}

/* A forked child cannot use its parent's CUDA context (CUDA does not
 * survive fork), and the poller thread is the parent's: tracking stops. */
static void atfork_child(void)
{
    atomic_store(&ccs_ntrack_on, 0);
}

static const struct ccs_feature ntrack_feature = {
    .name = "NCCL completion tracking",
    .finish = finish_hook,
    .fork_child = atfork_child,
};

void ccs_ntrack_init(void)
{
    static atomic_int done;
    if (atomic_load(&done))
        return;
    /* Only a driver the process already has: never load CUDA ourselves. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        return;
    if (atomic_exchange(&done, 1)) {
        dlclose(h);
        return;
    }
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) {
        CCS_LOG(WARN, "NCCL completion tracking is off: the loaded libcuda.so.1 has no cuGetProcAddress_v2 "
                      "(a CUDA 12 or later driver is needed)");
        return; /* the handle stays: the driver is the job's anyway */
    }
    *(void **)&cu.event_create = proc(gpa, "cuEventCreate");
    *(void **)&cu.event_record = proc(gpa, "cuEventRecord");
    *(void **)&cu.event_query = proc(gpa, "cuEventQuery");
    *(void **)&cu.stream_query = proc(gpa, "cuStreamQuery");
    *(void **)&cu.is_capturing = proc(gpa, "cuStreamIsCapturing");
    *(void **)&cu.ctx_get = proc(gpa, "cuCtxGetCurrent");
    *(void **)&cu.ctx_push = proc(gpa, "cuCtxPushCurrent");
    *(void **)&cu.ctx_pop = proc(gpa, "cuCtxPopCurrent");
    *(void **)&cu.exchange_mode = proc(gpa, "cuThreadExchangeStreamCaptureMode");
    if (!cu.event_create || !cu.event_record || !cu.event_query || !cu.stream_query || !cu.is_capturing ||
        !cu.ctx_get || !cu.ctx_push || !cu.ctx_pop || !cu.exchange_mode) {
        CCS_LOG(WARN, "NCCL completion tracking is off: the CUDA driver lacks an entry point it needs");
        return;
    }
    if (ccs_thread_start(own_poller, NULL, 0, NULL) != 0) {
        CCS_LOG(WARN, "NCCL completion tracking is off: no thread for its poller");
        return;
    }
    ccs_feature_register(&ntrack_feature);
    if (ccs_cfg.nccl_completion)
        CCS_LOG(INFO, "NCCL completion tracking on (CUDA events, at most one per stream every %ld ms)",
                (long)ccs_cfg.desync_period_ms);
    else
        CCS_LOG(INFO, "NCCL completion tracking off (CCSHIM_NCCL_COMPLETION=0); graph capture still checked");
    atomic_store(&ccs_ntrack_on, 1);
}

int ccs_ntrack_capturing_slow(cudaStream_t stream)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.is_capturing((CUstream)stream, &st) != CUDA_SUCCESS)
        return 0;
    if (st == CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    atomic_fetch_add_explicit(&stats.captured, 1, memory_order_relaxed);
    return 1;
}

/* ----------------------------------------------------------- hot path */

/* The events of S, made once, at its first call (in the caller's context). */
static void make_events(struct strm *s)
{
    int n = 0;
    for (; n < NEV; n++)
        if (cu.event_create(&s->ev[n], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
            break;
    if (n < NEV) {
        static int logged;
        ccs_log_once(&logged, CCS_LOG_WARN,
                     "NCCL completion tracking: cannot create CUDA events for stream %#lx; its completion is "
                     "only asked with cuStreamQuery",
                     (unsigned long)s->handle);
        atomic_store(&s->ev_ready, -1);
        return;
    }
    atomic_store_explicit(&s->ev_ready, 1, memory_order_release);
}

/* The slot of STREAM, claimed at its first call; NULL when the table is full. */
static struct strm *stream_slot(cudaStream_t stream)
{
    uintptr_t h = (uintptr_t)stream;
    size_t i = ccs_slot_hash((uint64_t)h, NSTREAM_BITS);
    for (unsigned n = 0; n < NSTREAMS; n++, i = (i + 1) & (NSTREAMS - 1)) {
        struct strm *s = &streams[i];
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if (st == SLOT_READY && s->handle == h)
            return s;
        if (st != SLOT_FREE)
            continue;
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&s->state, &expect, SLOT_CLAIMED)) {
            /* First call on this stream: once, its context (for the NULL
             * stream, the calling thread's). */
            CUcontext ctx = NULL;
            if (cu.ctx_get(&ctx) != CUDA_SUCCESS)
                ctx = NULL;
            s->handle = h;
            s->ctx = ctx;
            /* Its events too, here rather than in the poller: a rank that
             * enqueues all its work before the poller's next period (a
             * short job, a starved background thread) must still have the
             * event of its first call, else nothing ever reports
             * completion on it and its hang is never seen (#13). */
            make_events(s);
            atomic_store_explicit(&s->state, SLOT_READY, memory_order_release);
            return s;
        }
        if (expect == SLOT_READY && s->handle == h)
            return s;
    }
    return NULL;
}

void ccs_ntrack_enqueued_slow(ncclComm_t comm, uint64_t seq, cudaStream_t stream)
{
    struct strm *s = stream_slot(stream);
    if (CCS_UNLIKELY(!s))
        return;
    atomic_store_explicit(&s->last_comm, (uintptr_t)comm, memory_order_relaxed);
    atomic_store_explicit(&s->last_seq, seq, memory_order_release);
    if (CCS_UNLIKELY(atomic_load_explicit(&s->retired, memory_order_relaxed)))
        atomic_store_explicit(&s->retired, 0, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&period, memory_order_relaxed);
    uint64_t sp = atomic_load_explicit(&s->ev_period, memory_order_relaxed);
    if (CCS_LIKELY(sp == p) || atomic_load_explicit(&s->ev_ready, memory_order_acquire) != 1)
        return;
    if (!atomic_compare_exchange_strong(&s->ev_period, &sp, p))
        return; /* another thread records this period's event */
    unsigned i = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed) % NEV;
    int expect = EV_FREE;
    if (!atomic_compare_exchange_strong(&s->ev_state[i], &expect, EV_RECORDING))
        return; /* every event still in flight: the device is that far behind */
    if (cu.event_record(s->ev[i], (CUstream)stream) != CUDA_SUCCESS) {
        atomic_store_explicit(&s->ev_state[i], EV_FREE, memory_order_release);
        return;
    }
    s->tag_comm[i] = (uintptr_t)comm;
    s->tag_seq[i] = seq;
    atomic_store_explicit(&s->ev_state[i], EV_RECORDED, memory_order_release);
    atomic_fetch_add_explicit(&stats.events, 1, memory_order_relaxed);
}

int ccs_ntrack_after(ncclComm_t comm, uint64_t seq, cudaStream_t stream, int in_group)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CCS_UNLIKELY(cu.is_capturing((CUstream)stream, &st) == CUDA_SUCCESS &&
                     st != CU_STREAM_CAPTURE_STATUS_NONE)) {
        atomic_fetch_add_explicit(&stats.captured, 1, memory_order_relaxed);
        return 1;
    }
    if (!seq || !ccs_cfg.nccl_completion)
        return 0;
    if (in_group)
        ccs_ntrack_group_note(comm, seq, stream);
    else
        ccs_ntrack_enqueued_slow(comm, seq, stream);
    return 0;
}

/* Calls inside this thread's group: the latest per stream. */
static __thread struct {
    ncclComm_t comm;
    uint64_t seq;
    cudaStream_t stream;
} gpend[GROUP_STREAMS];
static __thread int ngpend;

void ccs_ntrack_group_note(ncclComm_t comm, uint64_t seq, cudaStream_t stream)
{
    if (!seq)
        return;
    for (int i = 0; i < ngpend; i++)
        if (gpend[i].stream == stream) {
            gpend[i].comm = comm;
            gpend[i].seq = seq;
            return;
        }
    if (ngpend < GROUP_STREAMS) {
        gpend[ngpend].comm = comm;
        gpend[ngpend].seq = seq;
        gpend[ngpend++].stream = stream;
    }
    /* More streams in one group: the calls on the others are not tracked
     * (their communicators' completion shows through their next calls). */
}

void ccs_ntrack_group_end(int ok)
{
    for (int i = 0; ok && i < ngpend; i++)
        ccs_ntrack_enqueued_slow(gpend[i].comm, gpend[i].seq, gpend[i].stream);
    ngpend = 0;
}

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
        struct strm *s = &streams[k];
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
    atomic_fetch_add_explicit(&stats.done_reports, 1, memory_order_relaxed);
}

/* An asynchronous NCCL error on C: once, with its last operations. */
static void async_error(struct ccs_comm *c, ncclResult_t err)
{
    int i = dn_slot(c->id);
    if (dn[i].err_logged)
        return;
    dn[i].err_logged = 1;
    atomic_fetch_add_explicit(&stats.async_errors, 1, memory_order_relaxed);
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
static uint64_t query_tail(struct strm *s, uintptr_t comm, uint64_t seq)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.is_capturing((CUstream)s->handle, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, comm);
    uint64_t issued = c ? atomic_load_explicit(&c->seq, memory_order_relaxed) : 0;
    atomic_fetch_add_explicit(&stats.queries, 1, memory_order_relaxed);
    if (cu.stream_query((CUstream)s->handle) != CUDA_SUCCESS)
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
static void tail(struct strm *s, uint64_t now)
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
        cu.exchange_mode(&m);
        relaxed = 1;
    }
    atomic_fetch_add_explicit(&period, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&stats.polls, 1, memory_order_relaxed);
    for (unsigned k = 0; k < NSTREAMS && ccs_cfg.nccl_completion; k++) {
        struct strm *s = &streams[k];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_READY)
            continue;
        int pushed = s->ctx && cu.ctx_push(s->ctx) == CUDA_SUCCESS;
        for (int i = 0; i < NEV; i++) {
            if (atomic_load_explicit(&s->ev_state[i], memory_order_acquire) != EV_RECORDED)
                continue;
            CUresult r = cu.event_query(s->ev[i]);
            if (r == CUDA_ERROR_NOT_READY)
                continue;
            if (r == CUDA_SUCCESS)
                report(s->tag_comm[i], s->tag_seq[i]);
            atomic_store_explicit(&s->ev_state[i], EV_FREE, memory_order_release);
        }
        tail(s, now);
        if (pushed) {
            CUcontext old;
            cu.ctx_pop(&old);
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
static void *own_poller(void *arg)
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

void ccs_ntrack_stats(struct ccs_ntrack_stats *o)
{
    o->events = atomic_load(&stats.events);
    o->queries = atomic_load(&stats.queries);
    o->done_reports = atomic_load(&stats.done_reports);
    o->captured = atomic_load(&stats.captured);
    o->async_errors = atomic_load(&stats.async_errors);
}
