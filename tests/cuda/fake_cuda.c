/*
 * fake_cuda.c - the test-only CUDA driver (see fake_cuda.h): streams as
 * enqueued/completed counters, events as snapshots of them, capture as a
 * flag, and cuGetProcAddress over the functions defined here.
 */
#include "fake_cuda.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_MAGIC 0x5354524dU
#define EVENT_MAGIC 0x4556454eU

struct CUctx_st {
    int dummy;
};

struct CUstream_st {
    unsigned magic;
    _Atomic uint64_t enq, done;
    atomic_int capturing, error;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct CUevent_st {
    unsigned magic;
    struct CUstream_st *stream; /* NULL until recorded */
    uint64_t snap;
};

struct CUgraph_st {
    int dummy;
};

static struct CUctx_st primary;
static struct CUstream_st legacy = {STREAM_MAGIC, 0, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
static struct CUgraph_st graph;
static __thread CUcontext current;
static __thread int current_set;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static _Atomic uint64_t n_created, n_recorded, n_queried, n_rec_capt, n_query_capt, n_squeries, n_lookups;

static struct CUstream_st *S(CUstream s)
{
    /* NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the one default stream. */
    if ((uintptr_t)s <= 2)
        return &legacy;
    return s->magic == STREAM_MAGIC ? s : NULL;
}

static int all_capturing(void)
{
    static atomic_int cached = -1;
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        const char *v = getenv("FAKECUDA_CAPTURING");
        c = v && *v == '1';
        atomic_store(&cached, c);
    }
    return c;
}

static int capturing(struct CUstream_st *s)
{
    return atomic_load(&s->capturing) || all_capturing();
}

uint64_t fakecuda_stream_enqueue(CUstream stream)
{
    struct CUstream_st *s = S(stream);
    return s ? atomic_fetch_add(&s->enq, 1) + 1 : 0;
}

void fakecuda_stream_complete(CUstream stream, uint64_t ticket, int error)
{
    struct CUstream_st *s = S(stream);
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (error)
        atomic_store(&s->error, 1);
    if (atomic_load(&s->done) < ticket)
        atomic_store(&s->done, ticket);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void fakecuda_counts(struct fakecuda_counts *o)
{
    o->events_created = atomic_load(&n_created);
    o->events_recorded = atomic_load(&n_recorded);
    o->events_queried = atomic_load(&n_queried);
    o->recorded_while_capturing = atomic_load(&n_rec_capt);
    o->queried_while_capturing = atomic_load(&n_query_capt);
    o->stream_queries = atomic_load(&n_squeries);
    o->proc_lookups = atomic_load(&n_lookups);
}

/* ------------------------------------------------------------- driver */

CUresult cuInit(unsigned int flags)
{
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}

/* As if the CUDA runtime had made its primary context current. */
CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = current_set ? current : &primary;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    current = ctx;
    current_set = 1;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    if (ctx != &primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    current = ctx;
    current_set = 1;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *ctx)
{
    if (ctx)
        *ctx = current;
    current = NULL;
    current_set = 0;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *out, unsigned int flags)
{
    (void)flags;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!out || !s) {
        free(s);
        return CUDA_ERROR_INVALID_VALUE;
    }
    s->magic = STREAM_MAGIC;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream)
{
    struct CUstream_st *s = S(stream);
    if (!s || s == &legacy)
        return CUDA_ERROR_INVALID_HANDLE;
    s->magic = 0; /* kept allocated: a late query fails cleanly */
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext *ctx)
{
    if (!S(stream) || !ctx)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((uintptr_t)stream <= 2 && !current_set)
        return CUDA_ERROR_INVALID_CONTEXT; /* the legacy stream of which context? */
    *ctx = &primary;
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *st)
{
    struct CUstream_st *s = S(stream);
    if (!s || !st)
        return CUDA_ERROR_INVALID_HANDLE;
    *st = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode)
{
    (void)mode;
    struct CUstream_st *s = S(stream);
    if (!s || s == &legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    atomic_store(&s->capturing, 1);
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph *g)
{
    struct CUstream_st *s = S(stream);
    if (!s || !atomic_load(&s->capturing))
        return CUDA_ERROR_ILLEGAL_STATE;
    atomic_store(&s->capturing, 0);
    if (g)
        *g = &graph;
    return CUDA_SUCCESS;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream stream)
{
    struct CUstream_st *s = S(stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    atomic_fetch_add(&n_squeries, 1);
    if (capturing(s)) {
        atomic_fetch_add(&n_query_capt, 1);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (atomic_load(&s->error))
        return CUDA_ERROR_LAUNCH_FAILED;
    return atomic_load(&s->done) >= atomic_load(&s->enq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamSynchronize(CUstream stream)
{
    struct CUstream_st *s = S(stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capturing(s)) {
        atomic_fetch_add(&n_query_capt, 1);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    uint64_t want = atomic_load(&s->enq);
    pthread_mutex_lock(&s->mu);
    while (atomic_load(&s->done) < want && !atomic_load(&s->error))
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return atomic_load(&s->error) ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *out, unsigned int flags)
{
    (void)flags;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!out || !e) {
        free(e);
        return CUDA_ERROR_INVALID_VALUE;
    }
    e->magic = EVENT_MAGIC;
    *out = e;
    atomic_fetch_add(&n_created, 1);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
    if (!e || e->magic != EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    e->magic = 0;
    free(e);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream stream)
{
    struct CUstream_st *s = S(stream);
    if (!e || e->magic != EVENT_MAGIC || !s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (capturing(s))
        atomic_fetch_add(&n_rec_capt, 1); /* a real driver would add a node to the graph */
    e->snap = atomic_load(&s->enq);
    e->stream = s;
    atomic_fetch_add(&n_recorded, 1);
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e)
{
    if (!e || e->magic != EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    atomic_fetch_add(&n_queried, 1);
    if (!e->stream)
        return CUDA_SUCCESS; /* never recorded: complete, as in CUDA */
    return atomic_load(&e->stream->done) >= e->snap ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuGetErrorString(CUresult rc, const char **s)
{
    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    *s = rc == CUDA_SUCCESS ? "no error" : rc == CUDA_ERROR_NOT_READY ? "device not ready" : "fake CUDA error";
    return CUDA_SUCCESS;
}

/* --------------------------------------------------------- proc address */

static const struct {
    const char *name;
    void *fn;
} procs[] = {
#define P(n, f)                                                                                                    \
    {                                                                                                              \
        n, (void *)f                                                                                               \
    }
    P("cuInit", cuInit),
    P("cuDriverGetVersion", cuDriverGetVersion),
    P("cuCtxGetCurrent", cuCtxGetCurrent),
    P("cuCtxSetCurrent", cuCtxSetCurrent),
    P("cuCtxPushCurrent", cuCtxPushCurrent),
    P("cuCtxPopCurrent", cuCtxPopCurrent),
    P("cuStreamCreate", cuStreamCreate),
    P("cuStreamDestroy", cuStreamDestroy),
    P("cuStreamGetCtx", cuStreamGetCtx),
    P("cuStreamIsCapturing", cuStreamIsCapturing),
    P("cuStreamBeginCapture", cuStreamBeginCapture),
    P("cuStreamEndCapture", cuStreamEndCapture),
    P("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode),
    P("cuStreamQuery", cuStreamQuery),
    P("cuStreamSynchronize", cuStreamSynchronize),
    P("cuEventCreate", cuEventCreate),
    P("cuEventDestroy", cuEventDestroy),
    P("cuEventRecord", cuEventRecord),
    P("cuEventQuery", cuEventQuery),
    P("cuGetErrorString", cuGetErrorString),
#undef P
};

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status)
{
    (void)cudaVersion;
    (void)flags;
    atomic_fetch_add(&n_lookups, 1);
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (strcmp(procs[i].name, symbol) == 0) {
            *pfn = procs[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
