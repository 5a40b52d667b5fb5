/*
 * fake_nccl.c - the nccl.h API of the test-only host NCCL (see fake_nccl.h).
 *
 * Exported like the real library: pncclX is the definition, ncclX a weak
 * alias of it.  The CUDA stream arguments are ignored: calls complete before
 * they return, except inside ncclGroupStart/End, where they are queued and
 * run at the outermost ncclGroupEnd (collectives in order, then every
 * send/recv together, so that pairs in one group cannot deadlock).
 *
 * Not implemented (the interposer must cope with their absence):
 * ncclCommInitRankScalable, ncclCommShrink and the rest of nccl.h.
 * Communicators from ncclCommInitAll live in one process: creating,
 * querying and destroying them works; a collective on them works only for a
 * single device (one thread cannot play several ranks).
 */
#include "fake_nccl.h"
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define FN_WEAK_ALIAS(name) extern __typeof__(pnccl##name) nccl##name __attribute__((weak, alias("pnccl" #name)));

enum fn_kind {
    K_ALLREDUCE,
    K_BCAST,
    K_REDUCE,
    K_ALLGATHER,
    K_REDUCESCATTER,
    K_ALLTOALL,
    K_GATHER,
    K_SCATTER,
    K_SEND,
    K_RECV
};

struct fn_op {
    enum fn_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root; /* or peer */
    struct ncclComm *comm;
    size_t done; /* point-to-point bytes moved so far */
    cudaStream_t stream;
    uint64_t ticket; /* asynchronous mode: the stream's ticket */
};

#define FN_MAX_PENDING 512
static __thread int group_depth;
static __thread int npending;
static __thread struct fn_op pending[FN_MAX_PENDING];

static const size_t dt_size[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

/* ------------------------------------------------------------ reductions */

/* Defines NAME(dst, src[], n, count, op): the reduction of N arrays of T in
 * rank order.  U is T's unsigned counterpart for integers, so that sums and
 * products wrap instead of overflowing. */
#define FN_DEFINE_REDUCE(NAME, T, U)                                                                               \
    static void NAME(void *dst, unsigned char *const *src, int n, size_t count, ncclRedOp_t op)                    \
    {                                                                                                              \
        for (size_t i = 0; i < count; i++) {                                                                       \
            T acc, v;                                                                                              \
            memcpy(&acc, src[0] + i * sizeof(T), sizeof(T));                                                       \
            for (int r = 1; r < n; r++) {                                                                          \
                memcpy(&v, src[r] + i * sizeof(T), sizeof(T));                                                     \
                if (op == ncclProd)                                                                                \
                    acc = (T)((U)acc * (U)v);                                                                      \
                else if (op == ncclMax)                                                                            \
                    acc = v > acc ? v : acc;                                                                       \
                else if (op == ncclMin)                                                                            \
                    acc = v < acc ? v : acc;                                                                       \
                else                                                                                               \
                    acc = (T)((U)acc + (U)v);                                                                      \
            }                                                                                                      \
            if (op == ncclAvg)                                                                                     \
                acc = (T)(acc / (T)n);                                                                             \
            memcpy((unsigned char *)dst + i * sizeof(T), &acc, sizeof(T));                                         \
        }                                                                                                          \
    }                                                                                                              \
    static void NAME##_scale(void *dst, const void *src, size_t count, const void *scalar)                         \
    {                                                                                                              \
        T s, v;                                                                                                    \
        memcpy(&s, scalar, sizeof(T));                                                                             \
        for (size_t i = 0; i < count; i++) {                                                                       \
            memcpy(&v, (const unsigned char *)src + i * sizeof(T), sizeof(T));                                     \
            v = (T)((U)v * (U)s);                                                                                  \
            memcpy((unsigned char *)dst + i * sizeof(T), &v, sizeof(T));                                           \
        }                                                                                                          \
    }

FN_DEFINE_REDUCE(red_i8, int8_t, uint8_t)
FN_DEFINE_REDUCE(red_u8, uint8_t, uint8_t)
FN_DEFINE_REDUCE(red_i32, int32_t, uint32_t)
FN_DEFINE_REDUCE(red_u32, uint32_t, uint32_t)
FN_DEFINE_REDUCE(red_i64, int64_t, uint64_t)
FN_DEFINE_REDUCE(red_u64, uint64_t, uint64_t)
FN_DEFINE_REDUCE(red_f32, float, float)
FN_DEFINE_REDUCE(red_f64, double, double)

struct fn_reducer {
    void (*reduce)(void *, unsigned char *const *, int, size_t, ncclRedOp_t);
    void (*scale)(void *, const void *, size_t, const void *);
};

static const struct fn_reducer reducers[ncclNumTypes] = {
    [ncclInt8] = {red_i8, red_i8_scale},      [ncclUint8] = {red_u8, red_u8_scale},
    [ncclInt32] = {red_i32, red_i32_scale},   [ncclUint32] = {red_u32, red_u32_scale},
    [ncclInt64] = {red_i64, red_i64_scale},   [ncclUint64] = {red_u64, red_u64_scale},
    [ncclFloat32] = {red_f32, red_f32_scale}, [ncclFloat64] = {red_f64, red_f64_scale},
};

/* The PreMulSum operator OP of C, or NULL for a built-in one. */
static const struct fn_redop *user_op(struct ncclComm *c, ncclRedOp_t op)
{
    int i = (int)op - (int)ncclNumOps;
    return i >= 0 && i < FN_MAX_OPS && c->ops[i].used ? &c->ops[i] : NULL;
}

/* ----------------------------------------------------------- collectives */

static int is_reduction(enum fn_kind k)
{
    return k == K_ALLREDUCE || k == K_REDUCE || k == K_REDUCESCATTER;
}

/* Bytes a rank puts in its slot for OP (the same formula on every rank). */
static size_t contribution(const struct fn_op *o)
{
    size_t b = o->count * dt_size[o->dt];
    switch (o->kind) {
    case K_REDUCESCATTER:
    case K_ALLTOALL:
    case K_SCATTER:
        return b * (size_t)o->comm->nranks;
    default:
        return b;
    }
}

/* Checks what NCCL checks at enqueue time. */
static ncclResult_t check(const struct fn_op *o)
{
    struct ncclComm *c = o->comm;
    if (!c || !c->base) {
        fn_set_error("fake NCCL: invalid communicator");
        return ncclInvalidArgument;
    }
    if ((unsigned)o->dt >= ncclNumTypes) {
        fn_set_error("fake NCCL: invalid datatype %d", (int)o->dt);
        return ncclInvalidArgument;
    }
    if ((o->kind == K_BCAST || o->kind == K_REDUCE || o->kind == K_GATHER || o->kind == K_SCATTER ||
         o->kind == K_SEND || o->kind == K_RECV) &&
        (o->root < 0 || o->root >= c->nranks)) {
        fn_set_error("fake NCCL: invalid root/peer %d (communicator of %d ranks)", o->root, c->nranks);
        return ncclInvalidArgument;
    }
    if (is_reduction(o->kind)) {
        if (!reducers[o->dt].reduce) {
            fn_set_error("fake NCCL: datatype %d is not reducible in the fake", (int)o->dt);
            return ncclInvalidArgument;
        }
        const struct fn_redop *u = user_op(c, o->op);
        if ((unsigned)o->op >= ncclNumOps && (!u || u->dtype != o->dt)) {
            fn_set_error("fake NCCL: invalid reduction operator %d for datatype %d", (int)o->op, (int)o->dt);
            return ncclInvalidArgument;
        }
    }
    if (o->kind != K_SEND && o->kind != K_RECV && contribution(o) > FN_SLOT_BYTES) {
        fn_set_error("fake NCCL: %zu bytes per rank exceed the fake's %u", contribution(o), FN_SLOT_BYTES);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static ncclResult_t run_coll(const struct fn_op *o)
{
    struct ncclComm *c = o->comm;
    int n = c->nranks, me = c->rank;
    size_t esz = dt_size[o->dt], blk = o->count * esz, need = contribution(o);
    unsigned char *mine = fn_slot(c, me);
    unsigned char *src[FN_MAX_RANKS];
    ncclResult_t rc;

    /* Phase 1: contributions into the slots (so in-place calls are safe). */
    if ((o->kind != K_BCAST && o->kind != K_SCATTER) || me == o->root) {
        const struct fn_redop *u = is_reduction(o->kind) ? user_op(c, o->op) : NULL;
        if (u) /* PreMulSum: multiply by this rank's scalar, then sum */
            reducers[o->dt].scale(mine, o->send, need / esz,
                                  u->residence == ncclScalarHostImmediate ? (const void *)u->scalar : u->ptr);
        else
            memcpy(mine, o->send, need);
    }
    if ((rc = fn_barrier(c)) != ncclSuccess)
        return rc;

    /* Phase 2: results, every rank reading the slots in rank order. */
    ncclRedOp_t op = user_op(c, o->op) ? ncclSum : o->op;
    switch (o->kind) {
    case K_ALLREDUCE:
    case K_REDUCE:
    case K_REDUCESCATTER:
        for (int r = 0; r < n; r++)
            src[r] = fn_slot(c, r) + (o->kind == K_REDUCESCATTER ? (size_t)me * blk : 0);
        if (o->kind != K_REDUCE || me == o->root)
            reducers[o->dt].reduce(o->recv, src, n, o->count, op);
        break;
    case K_BCAST:
        memcpy(o->recv, fn_slot(c, o->root), blk);
        break;
    case K_ALLGATHER:
    case K_GATHER:
        if (o->kind == K_ALLGATHER || me == o->root)
            for (int r = 0; r < n; r++)
                memmove((unsigned char *)o->recv + (size_t)r * blk, fn_slot(c, r), blk);
        break;
    case K_ALLTOALL:
        for (int r = 0; r < n; r++)
            memcpy((unsigned char *)o->recv + (size_t)r * blk, fn_slot(c, r) + (size_t)me * blk, blk);
        break;
    case K_SCATTER:
        memmove(o->recv, fn_slot(c, o->root) + (size_t)me * blk, blk);
        break;
    default:
        break;
    }
    /* Nobody overwrites a slot before everyone has read it. */
    return fn_barrier(c);
}

/* ------------------------------------------------------- point-to-point */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Moves what it can of O through its pair ring; returns bytes moved. */
static size_t p2p_step(struct fn_op *o)
{
    struct ncclComm *c = o->comm;
    size_t total = o->count * dt_size[o->dt];
    int from = o->kind == K_SEND ? c->rank : o->root, to = o->kind == K_SEND ? o->root : c->rank;
    struct fn_ring *ring = &c->rings[from * c->nranks + to];
    unsigned char *data = c->ring_data + (size_t)(from * c->nranks + to) * FN_RING_BYTES;
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    size_t room = o->kind == K_SEND ? FN_RING_BYTES - (size_t)(head - tail) : (size_t)(head - tail);
    size_t k = total - o->done < room ? total - o->done : room;
    uint64_t pos = o->kind == K_SEND ? head : tail;
    for (size_t moved = 0; moved < k;) {
        size_t off = (size_t)((pos + moved) % FN_RING_BYTES), run = FN_RING_BYTES - off;
        if (run > k - moved)
            run = k - moved;
        if (o->kind == K_SEND)
            memcpy(data + off, (const unsigned char *)o->send + o->done + moved, run);
        else
            memcpy((unsigned char *)o->recv + o->done + moved, data + off, run);
        moved += run;
    }
    if (k) {
        atomic_store_explicit(o->kind == K_SEND ? &ring->head : &ring->tail, pos + k, memory_order_release);
        atomic_fetch_add_explicit(&c->hdr->p2p_ev, 1, memory_order_release);
        fn_wake(&c->hdr->p2p_ev);
        o->done += k;
    }
    return k;
}

/* Runs the N point-to-point operations OPS together until all are done.
 * Operations of one direction between one pair go in order. */
static ncclResult_t run_p2p(struct fn_op *ops, int n)
{
    double deadline = now_s() + fn_timeout();
    for (;;) {
        int left = 0;
        size_t moved = 0;
        _Atomic uint32_t *ev = NULL;
        uint32_t ev0 = 0;
        for (int i = 0; i < n; i++) {
            struct fn_op *o = &ops[i];
            if (o->done == o->count * dt_size[o->dt])
                continue;
            left++;
            int blocked = 0;
            for (int j = 0; j < i && !blocked; j++)
                blocked = ops[j].comm == o->comm && ops[j].kind == o->kind && ops[j].root == o->root &&
                          ops[j].done < ops[j].count * dt_size[ops[j].dt];
            if (blocked)
                continue;
            if (!ev) {
                ev = &o->comm->hdr->p2p_ev;
                ev0 = atomic_load_explicit(ev, memory_order_acquire);
            }
            moved += p2p_step(o);
        }
        if (!left)
            return ncclSuccess;
        if (moved)
            continue;
        if (now_s() > deadline) {
            fn_set_error("fake NCCL: send/recv made no progress for %.0f s", fn_timeout());
            return ncclSystemError;
        }
        fn_wait_change(ev, ev0, 1);
    }
}

/* ------------------------------------------------------------- submit */

/* ------------------------------------------------ asynchronous mode */

/* FAKENCCL_ASYNC=1: a call returns once its operation is queued; one worker
 * thread per process runs the queue in order (an operation completes only
 * when every member has enqueued its own, as on a GPU) and then completes
 * the operation's ticket on its stream in the test CUDA driver, which this
 * mode loads (libcuda.so.1, as the real NCCL does).  FAKENCCL_DELAY_MS adds
 * that much time to every operation (a slow device).  A call on a stream
 * that is being captured is not run at all (it would run at the graph's
 * replays, which the fake does not model); fn_captured counts them. */
struct fn_entry {
    struct fn_op *ops; /* one operation, or a whole group */
    int n;
    struct fn_entry *next;
};

static struct {
    pthread_once_t once;
    int on;
    long delay_ms;
    uint64_t (*enqueue)(cudaStream_t);
    void (*complete)(cudaStream_t, uint64_t, int);
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
    pthread_mutex_t mu;
    pthread_cond_t cv, idle_cv;
    struct fn_entry *head, *tail;
    int busy;
} as = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
        .idle_cv = PTHREAD_COND_INITIALIZER};

_Atomic unsigned long fn_captured;

static ncclResult_t run_group(struct fn_op *ops, int n);

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&as.mu);
        while (!as.head)
            pthread_cond_wait(&as.cv, &as.mu);
        struct fn_entry *e = as.head;
        as.head = e->next;
        if (!as.head)
            as.tail = NULL;
        as.busy = 1;
        pthread_mutex_unlock(&as.mu);
        if (as.delay_ms > 0)
            nanosleep(&(struct timespec){as.delay_ms / 1000, (as.delay_ms % 1000) * 1000000L}, NULL);
        ncclResult_t rc = run_group(e->ops, e->n);
        for (int i = 0; i < e->n; i++) {
            if (rc != ncclSuccess)
                atomic_store(&e->ops[i].comm->async_err, rc);
            as.complete(e->ops[i].stream, e->ops[i].ticket, rc != ncclSuccess);
        }
        free(e->ops);
        free(e);
        pthread_mutex_lock(&as.mu);
        as.busy = 0;
        if (!as.head)
            pthread_cond_broadcast(&as.idle_cv);
        pthread_mutex_unlock(&as.mu);
    }
    return NULL;
}

static void async_init(void)
{
    const char *v = getenv("FAKENCCL_ASYNC");
    if (!v || strcmp(v, "1") != 0)
        return;
    const char *d = getenv("FAKENCCL_DELAY_MS");
    as.delay_ms = d ? strtol(d, NULL, 10) : 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        *(void **)&as.enqueue = dlsym(h, "fakecuda_stream_enqueue");
        *(void **)&as.complete = dlsym(h, "fakecuda_stream_complete");
        *(void **)&as.is_capturing = dlsym(h, "cuStreamIsCapturing");
    }
    if (!as.enqueue || !as.complete || !as.is_capturing) {
        fprintf(stderr, "fake NCCL: FAKENCCL_ASYNC=1 needs the test libcuda.so.1 (tests/cuda) on the library path\n");
        abort();
    }
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, worker, NULL) != 0)
        abort();
    pthread_attr_destroy(&a);
    as.on = 1;
}

static int async_on(void)
{
    pthread_once(&as.once, async_init);
    return as.on;
}

/* Queues N operations (copied) as one entry, each with its ticket. */
static ncclResult_t async_queue(const struct fn_op *ops, int n)
{
    struct fn_entry *e = calloc(1, sizeof *e);
    struct fn_op *copy = malloc((size_t)n * sizeof *copy);
    if (!e || !copy) {
        free(e);
        free(copy);
        return ncclSystemError;
    }
    memcpy(copy, ops, (size_t)n * sizeof *copy);
    for (int i = 0; i < n; i++)
        copy[i].ticket = as.enqueue(copy[i].stream);
    e->ops = copy;
    e->n = n;
    pthread_mutex_lock(&as.mu);
    if (as.tail)
        as.tail->next = e;
    else
        as.head = e;
    as.tail = e;
    pthread_cond_signal(&as.cv);
    pthread_mutex_unlock(&as.mu);
    return ncclSuccess;
}

/* Waits until the worker has run everything queued (ncclCommDestroy). */
static void async_drain(void)
{
    if (!as.on)
        return;
    pthread_mutex_lock(&as.mu);
    while (as.head || as.busy)
        pthread_cond_wait(&as.idle_cv, &as.mu);
    pthread_mutex_unlock(&as.mu);
}

static int captured(cudaStream_t stream)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return as.on && as.is_capturing((CUstream)stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ------------------------------------------------------------- submit */

static ncclResult_t submit(struct fn_op o, cudaStream_t stream)
{
    o.stream = stream;
    ncclResult_t rc = check(&o);
    if (rc != ncclSuccess)
        return rc;
    if (async_on() && captured(stream)) {
        atomic_fetch_add(&fn_captured, 1);
        return ncclSuccess;
    }
    if (group_depth > 0) {
        if (npending == FN_MAX_PENDING) {
            fn_set_error("fake NCCL: more than %d calls in one group", FN_MAX_PENDING);
            return ncclInvalidUsage;
        }
        pending[npending++] = o;
        return ncclSuccess;
    }
    if (as.on)
        return async_queue(&o, 1);
    if (o.kind == K_SEND || o.kind == K_RECV)
        return run_p2p(&o, 1);
    return run_coll(&o);
}

/* Collectives in order, then every send/recv together, so that pairs in one
 * group cannot deadlock.  Reorders OPS. */
static ncclResult_t run_group(struct fn_op *ops, int n)
{
    ncclResult_t rc = ncclSuccess;
    int np = 0;
    struct fn_op *p2p = malloc((size_t)n * sizeof *p2p);
    if (!p2p)
        return ncclSystemError;
    for (int i = 0; i < n && rc == ncclSuccess; i++) {
        if (ops[i].kind == K_SEND || ops[i].kind == K_RECV)
            p2p[np++] = ops[i];
        else
            rc = run_coll(&ops[i]);
    }
    if (rc == ncclSuccess && np)
        rc = run_p2p(p2p, np);
    free(p2p);
    return rc;
}

ncclResult_t pncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

ncclResult_t pncclGroupEnd(void)
{
    if (group_depth == 0) {
        fn_set_error("fake NCCL: ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group_depth > 0)
        return ncclSuccess;
    ncclResult_t rc = ncclSuccess;
    if (npending)
        rc = as.on ? async_queue(pending, npending) : run_group(pending, npending);
    npending = 0;
    return rc;
}

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_BCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, -1, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, -1, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream)
{
    return submit((struct fn_op){K_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream)
{
    return submit((struct fn_op){K_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, 0, stream, 0}, stream);
}

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream)
{
    return submit((struct fn_op){K_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, 0, stream, 0}, stream);
}

/* -------------------------------------------------------- communicators */

ncclResult_t pncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId)
        return ncclInvalidArgument;
    memset(uniqueId, 0, sizeof *uniqueId);
    if (getrandom(uniqueId->internal, 16, 0) != 16) {
        fn_set_error("fake NCCL: getrandom failed");
        return ncclSystemError;
    }
    return ncclSuccess;
}

/* "/ccshim-fakenccl-" and 32 hex digits of BYTES. */
static void segment_name(char *name, const unsigned char *bytes)
{
    int o = snprintf(name, FN_NAME_MAX, "/ccshim-fakenccl-");
    for (int i = 0; i < 16; i++)
        o += snprintf(name + o, (size_t)(FN_NAME_MAX - o), "%02x", bytes[i]);
}

/* Communicators made so far in this process (read by tests/nccl/nccl_track). */
unsigned long fakenccl_comms_created;

/* Joins segment NAME as RANK of NRANKS and waits for every member. */
static ncclResult_t join(ncclComm_t *out, const char *name, int nranks, int rank)
{
    async_on(); /* the asynchronous mode loads CUDA at the first communicator, as NCCL does */
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    ncclResult_t rc = fn_attach(c, name, nranks, rank);
    if (rc == ncclSuccess)
        rc = fn_barrier(c);
    /* Everybody has it mapped now (or it failed): the name can go. */
    if (rank == 0 || rc != ncclSuccess)
        shm_unlink(name);
    if (rc != ncclSuccess) {
        fn_detach(c);
        free(c);
        return rc;
    }
    *out = c;
    fakenccl_comms_created++;
    return ncclSuccess;
}

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    char name[FN_NAME_MAX];
    if (!comm || nranks < 1 || nranks > FN_MAX_RANKS || rank < 0 || rank >= nranks) {
        fn_set_error("fake NCCL: invalid arguments (nranks %d, rank %d; at most %d ranks)", nranks, rank,
                     FN_MAX_RANKS);
        return ncclInvalidArgument;
    }
    segment_name(name, (const unsigned char *)commId.internal);
    return join(comm, name, nranks, rank);
}

/* A nonblocking communicator (config.blocking = 0) is set up at once but
 * says ncclInProgress (and refuses rank and size queries) for
 * FAKENCCL_NB_DELAY_MS (default 50) ms, as NCCL's background init does. */
static ncclResult_t nonblocking(ncclResult_t rc, ncclComm_t comm, const ncclConfig_t *config)
{
    if (rc != ncclSuccess || !comm || !config || config->blocking != 0)
        return rc;
    const char *d = getenv("FAKENCCL_NB_DELAY_MS");
    comm->ready_at = now_s() + (d ? strtol(d, NULL, 10) : 50) / 1000.0;
    return ncclInProgress;
}

static int in_progress(const struct ncclComm *c)
{
    return c->ready_at > 0 && now_s() < c->ready_at;
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config)
{
    ncclResult_t rc = pncclCommInitRank(comm, nranks, commId, rank);
    return nonblocking(rc, comm ? *comm : NULL, config);
}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm || !asyncError)
        return ncclInvalidArgument;
    ncclResult_t e = (ncclResult_t)atomic_load(&comm->async_err);
    *asyncError = e != ncclSuccess ? e : in_progress(comm) ? ncclInProgress : ncclSuccess;
    return ncclSuccess;
}

ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    (void)devlist;
    ncclUniqueId id;
    char name[FN_NAME_MAX];
    if (!comm || ndev < 1 || ndev > FN_MAX_RANKS)
        return ncclInvalidArgument;
    /* A real NCCL defers a creation inside a group into the caller's group
     * (and refuses a blocking one beside a nonblocking communicator):
     * refused here, so that a test sees ccshim ever doing it. */
    if (group_depth > 0) {
        fn_set_error("fake NCCL: ncclCommInitAll inside ncclGroupStart/End");
        return ncclInvalidUsage;
    }
    ncclResult_t rc = pncclGetUniqueId(&id);
    if (rc != ncclSuccess)
        return rc;
    segment_name(name, (const unsigned char *)id.internal);
    for (int i = 0; i < ndev && rc == ncclSuccess; i++) {
        comm[i] = calloc(1, sizeof *comm[i]);
        rc = comm[i] ? fn_attach(comm[i], name, ndev, i) : ncclSystemError;
        fakenccl_comms_created += rc == ncclSuccess;
    }
    shm_unlink(name);
    return rc;
}

static ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm);

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc = split(comm, color, key, newcomm);
    return nonblocking(rc, newcomm ? *newcomm : NULL, config);
}

static ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm)
{
    if (!comm || !comm->base || !newcomm)
        return ncclInvalidArgument;
    /* Everybody's (color, key), through the parent. */
    int mine[2] = {color, key}, all[FN_MAX_RANKS][2];
    memcpy(fn_slot(comm, comm->rank), mine, sizeof mine);
    ncclResult_t rc = fn_barrier(comm);
    for (int r = 0; rc == ncclSuccess && r < comm->nranks; r++)
        memcpy(all[r], fn_slot(comm, r), sizeof all[r]);
    if (rc == ncclSuccess)
        rc = fn_barrier(comm);
    if (rc != ncclSuccess)
        return rc;
    unsigned split = comm->splits++;
    *newcomm = NULL;
    if (color == NCCL_SPLIT_NOCOLOR)
        return ncclSuccess;
    int size = 0, rank = 0;
    for (int r = 0; r < comm->nranks; r++) {
        if (all[r][0] != color)
            continue;
        size++;
        if (all[r][1] < key || (all[r][1] == key && r < comm->rank))
            rank++;
    }
    /* The child's name: a hash of the parent's, the split number and color. */
    uint64_t h[2] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
    char text[FN_NAME_MAX + 32];
    snprintf(text, sizeof text, "%s/%u/%d", comm->name, split, color);
    for (int k = 0; k < 2; k++)
        for (const char *p = text; *p; p++)
            h[k] = (h[k] ^ (unsigned char)*p) * 0x100000001b3ULL;
    char name[FN_NAME_MAX];
    segment_name(name, (const unsigned char *)h);
    return join(newcomm, name, size, rank);
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || !count)
        return ncclInvalidArgument;
    if (in_progress(comm))
        return ncclInProgress;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || !rank)
        return ncclInvalidArgument;
    if (in_progress(comm))
        return ncclInProgress;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    return comm ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    async_drain(); /* the worker may still use it */
    fn_detach(comm);
    free(comm);
    return ncclSuccess;
}

/* As in NCCL, an abort may come from another thread while a call on the
 * communicator is still waiting for the other ranks: the waiting call must
 * fail, not crash.  So the segment stays mapped (and the comm allocated) for
 * the rest of the process, and every wait in this process gives up. */
ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    atomic_store(&fn_aborted, 1);
    return ncclSuccess;
}

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm)
{
    if (!op || !scalar || !comm || (unsigned)datatype >= ncclNumTypes || !reducers[datatype].scale)
        return ncclInvalidArgument;
    for (int i = 0; i < FN_MAX_OPS; i++) {
        struct fn_redop *u = &comm->ops[i];
        if (u->used)
            continue;
        *u = (struct fn_redop){.used = 1, .dtype = datatype, .residence = residence, .ptr = scalar};
        if (residence == ncclScalarHostImmediate)
            memcpy(u->scalar, scalar, dt_size[datatype]);
        *op = (ncclRedOp_t)(ncclNumOps + i);
        return ncclSuccess;
    }
    fn_set_error("fake NCCL: more than %d operators on one communicator", FN_MAX_OPS);
    return ncclInvalidUsage;
}

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    if (!comm || !user_op(comm, op))
        return ncclInvalidArgument;
    comm->ops[(int)op - (int)ncclNumOps].used = 0;
    return ncclSuccess;
}

const char *pncclGetErrorString(ncclResult_t result)
{
    static const char *const s[ncclNumResults] = {"no error",
                                                  "unhandled cuda error",
                                                  "unhandled system error",
                                                  "internal error",
                                                  "invalid argument",
                                                  "invalid usage",
                                                  "remote process exited or there was a network error",
                                                  "NCCL operation in progress"};
    return (unsigned)result < ncclNumResults ? s[result] : "unknown result code";
}

const char *pncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return fn_last_error();
}

FN_WEAK_ALIAS(GetVersion)
FN_WEAK_ALIAS(GetUniqueId)
FN_WEAK_ALIAS(CommInitRank)
FN_WEAK_ALIAS(CommInitRankConfig)
FN_WEAK_ALIAS(CommInitAll)
FN_WEAK_ALIAS(CommSplit)
FN_WEAK_ALIAS(CommCount)
FN_WEAK_ALIAS(CommUserRank)
FN_WEAK_ALIAS(CommFinalize)
FN_WEAK_ALIAS(CommDestroy)
FN_WEAK_ALIAS(CommAbort)
FN_WEAK_ALIAS(CommGetAsyncError)
FN_WEAK_ALIAS(GroupStart)
FN_WEAK_ALIAS(GroupEnd)
FN_WEAK_ALIAS(AllReduce)
FN_WEAK_ALIAS(Broadcast)
FN_WEAK_ALIAS(Bcast)
FN_WEAK_ALIAS(Reduce)
FN_WEAK_ALIAS(AllGather)
FN_WEAK_ALIAS(ReduceScatter)
FN_WEAK_ALIAS(AlltoAll)
FN_WEAK_ALIAS(Gather)
FN_WEAK_ALIAS(Scatter)
FN_WEAK_ALIAS(Send)
FN_WEAK_ALIAS(Recv)
FN_WEAK_ALIAS(RedOpCreatePreMulSum)
FN_WEAK_ALIAS(RedOpDestroy)
FN_WEAK_ALIAS(GetErrorString)
FN_WEAK_ALIAS(GetLastError)
