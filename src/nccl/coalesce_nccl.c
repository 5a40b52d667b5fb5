/*
 * coalesce_nccl.c - coalescing on the NCCL path.
 *
 * A deferred ncclAllReduce must leave FACTOR x input in the caller's
 * receive buffer on the device, in the caller's stream order, and ccshim
 * launches no kernel of its own.  NCCL does it for us: every device gets a
 * private one-rank communicator (ncclCommInitAll over that one device), and
 * the local answer is an ncclAllReduce on it, on the caller's stream, with a
 * PreMulSum operator whose host scalar is the factor (SUM: W, PreMulSum a:
 * a x W) or with ncclSum (AVG: one rank's sum is a copy).  NCCL handles every
 * datatype and both in-place and out-of-place buffers; inside a group the
 * call simply joins the caller's group.
 *
 * The private communicator of a device is made at the first eligible call
 * there outside a group, or, for a call inside one, just after the
 * caller's outermost ncclGroupEnd has returned: never inside the caller's
 * group, where NCCL would defer its set-up into the caller's group (and
 * refuse it beside a nonblocking communicator).  It is blocking; it is never
 * used inside the group of a nonblocking communicator either, where NCCL
 * refuses mixed modes.  Until it exists, and inside such a group, calls
 * that should be deferred are performed for real instead, which is
 * always correct, and the same on every rank (the group structure is).  The private
 * communicators and operators are called through the real NCCL directly, so
 * they are never counted or traced, and live until the process ends.
 */
#include "log.h"
#include "nccl_internal.h"
#include "coalesce_nccl.h"
#include "nccl_redop.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "real.h"
#include "record.h"
#include "trace_format.h"
#include <pthread.h>
#include <string.h>

#define MAX_DEVS 64
#define MAX_OPS 64

static const char *const sonames[] = {"libnccl.so.2", "libnccl.so", NULL};
static _Atomic(ncclComm_t) self_comm[MAX_DEVS];
static atomic_int self_failed[MAX_DEVS];
static atomic_int self_wanted[MAX_DEVS]; /* asked for inside a group: made at its end */
static atomic_int any_wanted;
static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;

/* PreMulSum operators on the private communicators, by (device, datatype,
 * factor).  Appended under slow_lock, read without it. */
static struct {
    atomic_int ready;
    int dev, dt;
    double factor;
    ncclRedOp_t op;
} ops[MAX_OPS];
static atomic_int nops;
static int ops_full_logged;

/* The CUDA device of COMM (0 when this NCCL cannot say, like the host
 * test library). */
static int comm_device(ncclComm_t comm)
{
    static _Atomic(void *) fn;
    void *f = atomic_load(&fn);
    if (!f) {
        f = ccs_real_symbol("pncclCommCuDevice", sonames);
        if (!f)
            f = ccs_real_symbol("ncclCommCuDevice", sonames);
        atomic_store(&fn, f);
    }
    int dev = 0;
    if (f && ((ncclResult_t(*)(const ncclComm_t, int *))f)(comm, &dev) != ncclSuccess)
        dev = 0;
    return dev < 0 || dev >= MAX_DEVS ? 0 : dev;
}

/* The device of COMM, cached on the identity ID. */
static int device_of(struct ccs_coal_id *id, ncclComm_t comm)
{
    int dev = atomic_load_explicit(&id->aux, memory_order_relaxed);
    if (dev >= 0)
        return dev;
    dev = comm_device(comm);
    atomic_store_explicit(&id->aux, dev, memory_order_relaxed);
    return dev;
}

static int nccl_complete(struct ccs_coal_id *id);

/* Slow path, once per device: the private one-rank communicator of DEV. */
static void make_self_comm(int dev)
{
    if (atomic_load(&self_comm[dev]) || atomic_load(&self_failed[dev]))
        return;
    pthread_mutex_lock(&slow_lock);
    if (!atomic_load(&self_comm[dev]) && !atomic_load(&self_failed[dev])) {
        __typeof__(&pncclCommInitAll) init_all = CCS_NCCL_REAL(CommInitAll);
        ncclComm_t c = NULL;
        int devs[1] = {dev};
        if (init_all && init_all(&c, 1, devs) == ncclSuccess && c) {
            atomic_store(&self_comm[dev], c);
            ccs_coalesce_completer[CCS_BE_NCCL] = nccl_complete;
        } else {
            atomic_store(&self_failed[dev], 1);
            CCS_LOG(WARN, "coalescing: no private NCCL communicator for device %d; its all-reduces stay real",
                    dev);
        }
    }
    pthread_mutex_unlock(&slow_lock);
}

/* FACTOR as NCCL datatype DT's bytes, for a PreMulSum scalar. */
static int scalar_bytes(ncclDataType_t dt, double factor, unsigned char out[8])
{
    memset(out, 0, 8);
    switch (dt) {
    case ncclFloat64: {
        memcpy(out, &factor, 8);
        return 0;
    }
    case ncclFloat32: {
        float f = (float)factor;
        memcpy(out, &f, 4);
        return 0;
    }
    case ncclFloat16: {
        uint16_t h = ccs_float_to_half((float)factor);
        memcpy(out, &h, 2);
        return 0;
    }
    case ncclBfloat16: {
        uint16_t h = ccs_float_to_bf16((float)factor);
        memcpy(out, &h, 2);
        return 0;
    }
    default:
        return -1;
    }
}

/* The operator multiplying by FACTOR on DEV's private communicator; ncclSum
 * for 1.  Returns 0, or -1 (the call is then made for real). */
static int factor_op(int dev, ncclDataType_t dt, double factor, ncclRedOp_t *op)
{
    if (factor == 1) {
        *op = ncclSum;
        return 0;
    }
    int n = atomic_load_explicit(&nops, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (atomic_load_explicit(&ops[i].ready, memory_order_acquire) && ops[i].dev == dev && ops[i].dt == (int)dt &&
            ops[i].factor == factor) {
            *op = ops[i].op;
            return 0;
        }
    int rc = -1;
    pthread_mutex_lock(&slow_lock);
    n = atomic_load(&nops);
    for (int i = 0; i < n; i++) /* made by another thread meanwhile */
        if (ops[i].dev == dev && ops[i].dt == (int)dt && ops[i].factor == factor) {
            *op = ops[i].op;
            rc = 0;
        }
    unsigned char scalar[8];
    __typeof__(&pncclRedOpCreatePreMulSum) create = CCS_NCCL_REAL(RedOpCreatePreMulSum);
    if (rc != 0 && n == MAX_OPS)
        ccs_log_once(&ops_full_logged, CCS_LOG_WARN,
                     "coalescing: more than %d distinct scale factors; further ones are reduced for real", MAX_OPS);
    else if (rc != 0 && create && scalar_bytes(dt, factor, scalar) == 0 &&
             create(op, scalar, dt, ncclScalarHostImmediate, atomic_load(&self_comm[dev])) == ncclSuccess) {
        ops[n].dev = dev;
        ops[n].dt = (int)dt;
        ops[n].factor = factor;
        ops[n].op = *op;
        atomic_store_explicit(&ops[n].ready, 1, memory_order_release);
        atomic_store_explicit(&nops, n + 1, memory_order_release);
        rc = 0;
    }
    pthread_mutex_unlock(&slow_lock);
    return rc;
}

/* Completion (coalesce_complete.c), on the stream of ID's last call: the
 * buffer's real SUM over ID's communicator, then a multiplication by 1/W
 * on the private communicator, both queued in the caller's stream order. */
static int nccl_complete(struct ccs_coal_id *id)
{
    ncclDataType_t dt;
    switch (id->dtype) {
    case CCS_DT_FLOAT32: dt = ncclFloat32; break;
    case CCS_DT_FLOAT64: dt = ncclFloat64; break;
    case CCS_DT_FLOAT16: dt = ncclFloat16; break;
    case CCS_DT_BFLOAT16: dt = ncclBfloat16; break;
    default: return -1;
    }
    int dev = atomic_load_explicit(&id->aux, memory_order_relaxed);
    __typeof__(&pncclAllReduce) real = CCS_NCCL_REAL(AllReduce);
    ncclComm_t self = dev >= 0 && dev < MAX_DEVS ? atomic_load_explicit(&self_comm[dev], memory_order_acquire) : NULL;
    ncclRedOp_t mean;
    if (!real || !self || id->size < 1 || factor_op(dev, dt, 1.0 / id->size, &mean) != 0)
        return -1;
    void *buf = (void *)id->recv;
    cudaStream_t stream = (cudaStream_t)atomic_load_explicit(&id->stream, memory_order_relaxed);
    if (real(buf, buf, id->count, dt, ncclSum, (ncclComm_t)id->handle, stream) != ncclSuccess)
        return -1;
    return real(buf, buf, id->count, dt, mean, self, stream) == ncclSuccess ? 0 : -1;
}

int ccs_coalesce_nccl_allreduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                ncclComm_t comm, cudaStream_t stream, int in_group, void *ra, ncclResult_t *rc)
{
    unsigned dtype = ccs_nccl_dtype(dt), o;
    uint64_t scalar = 0;
    struct ccs_nccl_premul pm;
    if (op == ncclSum)
        o = CCS_OP_SUM;
    else if (op == ncclAvg)
        o = CCS_OP_AVG;
    else if (ccs_nccl_redop_find((uintptr_t)comm, (int)op, &pm) && pm.host_scalar) {
        o = CCS_OP_PREMULSUM;
        memcpy(&scalar, pm.scalar, sizeof scalar);
    } else
        return 0;
    uint64_t bytes = (uint64_t)count * ccs_dtype_size(dtype);
    if (!ccs_coalesce_eligible(o, dtype, bytes) || !recv || !send || !ccs_coalesce_site_ok(ra))
        return 0;
    struct ccs_comm *c = ccs_nccl_comm(comm);
    if (!c || c->size < 1)
        return 0;
    struct ccs_coal_id *id = ccs_coalesce_identity(c->id, (uintptr_t)comm, c->size, send, recv, count, dtype, o,
                                                   scalar, CCS_BE_NCCL);
    if (!id)
        return 0;
    int dev = device_of(id, comm);
    /* The private communicator: made now outside a group, at the caller's
     * outermost ncclGroupEnd inside one (ccs_coalesce_nccl_group_done).
     * Until it exists, calls to defer are made for real, the same on every
     * rank. */
    if (CCS_UNLIKELY(!atomic_load_explicit(&self_comm[dev], memory_order_relaxed))) {
        if (in_group) {
            atomic_store(&self_wanted[dev], 1);
            atomic_store(&any_wanted, 1);
        } else
            make_self_comm(dev);
    }
    ccs_coalesce_note_stream(id, stream);
    enum ccs_coalesce_action act = ccs_coalesce_decide(id);
    if (act == CCS_COALESCE_PASS)
        return 0;
    /* The private communicator is blocking: never in a nonblocking
     * communicator's group (NCCL refuses mixed modes there). */
    ncclComm_t self = act == CCS_COALESCE_DEFER && !(in_group && c->nonblocking) ? atomic_load_explicit(&self_comm[dev], memory_order_acquire) : NULL;
    double factor = 1;
    ncclRedOp_t fop = ncclSum;
    int local = act == CCS_COALESCE_DEFER && self && ccs_coalesce_factor(o, dtype, scalar, c->size, &factor) == 0 &&
                factor_op(dev, dt, factor, &fop) == 0;
    struct ccs_call call = {.kind = CCS_KIND_ALLREDUCE,
                            .dtype = (uint8_t)dtype,
                            .op = (uint8_t)o,
                            .flags = (uint8_t)((send == recv ? CCS_F_IN_PLACE : 0) | (in_group ? CCS_F_IN_GROUP : 0) |
                                               (local ? CCS_F_DEFERRED : CCS_F_COALESCED) |
                                               (atomic_load_explicit(&ccs_coalesce_helper_on, memory_order_relaxed)
                                                    ? CCS_F_HELPER
                                                    : 0)),
                            .backend = CCS_BE_NCCL,
                            .group_depth = (uint8_t)(in_group > 255 ? 255 : in_group),
                            .root = -1,
                            .count = count,
                            .bytes = bytes,
                            .buf = recv};
    struct ccs_record *r = ccs_call_begin(c, &call, ra);
    __typeof__(&pncclAllReduce) real = CCS_NCCL_REAL(AllReduce);
    if (!real)
        *rc = ncclInternalError;
    else if (local)
        *rc = real(send, recv, count, dt, fop, self, stream);
    else
        *rc = real(send, recv, count, dt, op, comm, stream);
    ccs_call_end(r, *rc != ncclSuccess && *rc != ncclInProgress);
    return 1;
}

void ccs_coalesce_nccl_group_done(void)
{
    if (CCS_LIKELY(!atomic_load_explicit(&any_wanted, memory_order_relaxed)) || !atomic_exchange(&any_wanted, 0))
        return;
    for (int dev = 0; dev < MAX_DEVS; dev++)
        if (atomic_exchange(&self_wanted[dev], 0))
            make_self_comm(dev);
}

void ccs_coalesce_nccl_comm_ready(ncclComm_t comm)
{
    const struct ccs_coalesce_policy *p = ccs_coalesce_policy();
    if (!atomic_load(&ccs_coalesce_on) || p->mode != CCS_COALESCE_EVERY)
        return;
    make_self_comm(comm_device(comm));
}
