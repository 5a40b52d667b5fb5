/*
 * nccl_track.c - NCCL completion tracking with CUDA events (see
 * nccl_track.h and docs/nccl.md): the tracker, on the hot path (the
 * driver's entry points, the stream table, the events it records).
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
 * The poller, which reads what this half records, is nccl_track_poll.c;
 * what the two share is nccl_track_state.h.
 */
#include "nccl_track.h"
#include "nccl_track_state.h"
#include "ccs_config.h"
#include "log.h"
#include "nccl_internal.h"
#include "registry.h"
#include "thread.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "trace_format.h"
#include <cuda.h>
#include <dlfcn.h>

#define GROUP_STREAMS 8

struct ccs_ntrack_cu ccs_ntrack_cu;

atomic_int ccs_ntrack_on;
_Atomic uint64_t ccs_ntrack_period = 1; /* advanced by the poller */

struct ccs_ntrack_stream ccs_ntrack_streams[NSTREAMS];

struct ccs_ntrack_count ccs_ntrack_count;

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
            (unsigned long long)atomic_load(&ccs_ntrack_count.events),
            (unsigned long long)atomic_load(&ccs_ntrack_count.queries),
            (unsigned long long)atomic_load(&ccs_ntrack_count.done_reports),
            (unsigned long long)atomic_load(&ccs_ntrack_count.captured),
            (unsigned long long)atomic_load(&ccs_ntrack_count.async_errors),
            (unsigned long long)atomic_load(&ccs_ntrack_count.polls));
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
    *(void **)&ccs_ntrack_cu.event_create = proc(gpa, "cuEventCreate");
    *(void **)&ccs_ntrack_cu.event_record = proc(gpa, "cuEventRecord");
    *(void **)&ccs_ntrack_cu.event_query = proc(gpa, "cuEventQuery");
    *(void **)&ccs_ntrack_cu.stream_query = proc(gpa, "cuStreamQuery");
    *(void **)&ccs_ntrack_cu.is_capturing = proc(gpa, "cuStreamIsCapturing");
    *(void **)&ccs_ntrack_cu.ctx_get = proc(gpa, "cuCtxGetCurrent");
    *(void **)&ccs_ntrack_cu.ctx_push = proc(gpa, "cuCtxPushCurrent");
    *(void **)&ccs_ntrack_cu.ctx_pop = proc(gpa, "cuCtxPopCurrent");
    *(void **)&ccs_ntrack_cu.exchange_mode = proc(gpa, "cuThreadExchangeStreamCaptureMode");
    if (!ccs_ntrack_cu.event_create || !ccs_ntrack_cu.event_record || !ccs_ntrack_cu.event_query ||
        !ccs_ntrack_cu.stream_query || !ccs_ntrack_cu.is_capturing || !ccs_ntrack_cu.ctx_get ||
        !ccs_ntrack_cu.ctx_push || !ccs_ntrack_cu.ctx_pop || !ccs_ntrack_cu.exchange_mode) {
        CCS_LOG(WARN, "NCCL completion tracking is off: the CUDA driver lacks an entry point it needs");
        return;
    }
    if (ccs_thread_start(ccs_ntrack_own_poller, NULL, 0, NULL) != 0) {
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
    if (ccs_ntrack_cu.is_capturing((CUstream)stream, &st) != CUDA_SUCCESS)
        return 0;
    if (st == CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    atomic_fetch_add_explicit(&ccs_ntrack_count.captured, 1, memory_order_relaxed);
    return 1;
}

/* ----------------------------------------------------------- hot path */

/* The events of S, made once, at its first call (in the caller's context). */
static void make_events(struct ccs_ntrack_stream *s)
{
    int n = 0;
    for (; n < NEV; n++)
        if (ccs_ntrack_cu.event_create(&s->ev[n], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
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
static struct ccs_ntrack_stream *stream_slot(cudaStream_t stream)
{
    uintptr_t h = (uintptr_t)stream;
    size_t i = ccs_slot_hash((uint64_t)h, NSTREAM_BITS);
    for (unsigned n = 0; n < NSTREAMS; n++, i = (i + 1) & (NSTREAMS - 1)) {
        struct ccs_ntrack_stream *s = &ccs_ntrack_streams[i];
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
            if (ccs_ntrack_cu.ctx_get(&ctx) != CUDA_SUCCESS)
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
    struct ccs_ntrack_stream *s = stream_slot(stream);
    if (CCS_UNLIKELY(!s))
        return;
    atomic_store_explicit(&s->last_comm, (uintptr_t)comm, memory_order_relaxed);
    atomic_store_explicit(&s->last_seq, seq, memory_order_release);
    if (CCS_UNLIKELY(atomic_load_explicit(&s->retired, memory_order_relaxed)))
        atomic_store_explicit(&s->retired, 0, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&ccs_ntrack_period, memory_order_relaxed);
    uint64_t sp = atomic_load_explicit(&s->ev_period, memory_order_relaxed);
    if (CCS_LIKELY(sp == p) || atomic_load_explicit(&s->ev_ready, memory_order_acquire) != 1)
        return;
    if (!atomic_compare_exchange_strong(&s->ev_period, &sp, p))
        return; /* another thread records this period's event */
    unsigned i = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed) % NEV;
    int expect = EV_FREE;
    if (!atomic_compare_exchange_strong(&s->ev_state[i], &expect, EV_RECORDING))
        return; /* every event still in flight: the device is that far behind */
    if (ccs_ntrack_cu.event_record(s->ev[i], (CUstream)stream) != CUDA_SUCCESS) {
        atomic_store_explicit(&s->ev_state[i], EV_FREE, memory_order_release);
        return;
    }
    s->tag_comm[i] = (uintptr_t)comm;
    s->tag_seq[i] = seq;
    atomic_store_explicit(&s->ev_state[i], EV_RECORDED, memory_order_release);
    atomic_fetch_add_explicit(&ccs_ntrack_count.events, 1, memory_order_relaxed);
}

int ccs_ntrack_after(ncclComm_t comm, uint64_t seq, cudaStream_t stream, int in_group)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CCS_UNLIKELY(ccs_ntrack_cu.is_capturing((CUstream)stream, &st) == CUDA_SUCCESS &&
                     st != CU_STREAM_CAPTURE_STATUS_NONE)) {
        atomic_fetch_add_explicit(&ccs_ntrack_count.captured, 1, memory_order_relaxed);
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

void ccs_ntrack_stats(struct ccs_ntrack_stats *o)
{
    o->events = atomic_load(&ccs_ntrack_count.events);
    o->queries = atomic_load(&ccs_ntrack_count.queries);
    o->done_reports = atomic_load(&ccs_ntrack_count.done_reports);
    o->captured = atomic_load(&ccs_ntrack_count.captured);
    o->async_errors = atomic_load(&ccs_ntrack_count.async_errors);
}
