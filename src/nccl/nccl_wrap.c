/*
 * nccl_wrap.c - the NCCL collectives, point-to-point calls, groups and
 * PreMulSum operators, interposed inside libccshim.
 *
 * Each wrapper has exactly the signature of nccl.h, is exported, and
 * forwards to the real pncclX with its arguments unchanged, returning the
 * real result unchanged; around the real call it records one struct
 * ccs_record (so the duration is the enqueue time, not the time on the GPU).
 * When the real function cannot be found the wrapper returns
 * ncclInternalError (logged once).  Hot path: no lock, no allocation, no
 * system call.  The regular wrappers are generated from their rows in
 * CCS_NCCL_GENERATED (nccl_internal.h); ncclAllReduce, the groups and the
 * operators are written by hand below; communicator creation and
 * destruction: nccl_comm.c.
 */
#include "coalesce_nccl.h"
#include "log.h"
#include "nccl_internal.h"
#include "nccl_redop.h"
#include "nccl_track.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "record.h"
#include "ring.h"
#include "trace_format.h"
#include <string.h>

/* ncclGroupStart nesting of this thread, as NCCL keeps it (thread-local).
 * initial-exec: a preloaded library has static TLS, and the hot path then
 * reads it without a call. */
static __thread int group_depth __attribute__((tls_model("initial-exec")));

int ccs_nccl_group_depth(void)
{
    return group_depth;
}

/* ncclRedOp_t -> enum ccs_op: NCCL's built-in operators (ncclSum ..
 * ncclAvg, numbered from 0), then the ones made on a communicator. */
static const uint8_t builtin_ops[] = {[ncclSum] = CCS_OP_SUM, [ncclProd] = CCS_OP_PROD, [ncclMax] = CCS_OP_MAX,
                                      [ncclMin] = CCS_OP_MIN, [ncclAvg] = CCS_OP_AVG};
#define BUILTIN_OPS (sizeof builtin_ops / sizeof builtin_ops[0])
_Static_assert(BUILTIN_OPS == ncclNumOps, "builtin_ops names every built-in operator of nccl.h");
static unsigned map_op(ncclRedOp_t op, ncclComm_t comm)
{
    if ((unsigned)op < BUILTIN_OPS)
        return builtin_ops[op];
    return ccs_nccl_redop_find((uintptr_t)comm, (int)op, NULL) ? CCS_OP_PREMULSUM : CCS_OP_USER;
}

/* NCCL's in-place rules (the kinds table's in_place column): the same
 * buffer, or for the gathering and scattering kinds the rank's own block of
 * the large buffer. */
static int in_place(unsigned kind, const void *send, const void *recv, uint64_t block, int rank)
{
    if (send == recv)
        return 1;
    if (rank < 0 || !send || !recv)
        return 0;
    const char *s = send, *r = recv;
    switch (ccs_kind_in_place(kind)) {
    case CCS_IN_PLACE_OWN_IN_RECV:
        return s == r + (uint64_t)rank * block;
    case CCS_IN_PLACE_OWN_IN_SEND:
        return r == s + (uint64_t)rank * block;
    case CCS_IN_PLACE_SAME:
        break;
    }
    return 0;
}

/* How much of its send buffer a rank hands over, in blocks of COUNT
 * elements: the "bytes" of a record (the blocks column of
 * CCS_NCCL_GENERATED): none, one, one per member, or one per member at ROOT
 * and none elsewhere (only the root's send buffer is read). */
enum send_blocks { SEND_NONE, SEND_ONE, SEND_PER_RANK, SEND_AT_ROOT };

/* Starts recording collective or point-to-point KIND on COMM.  COUNT is the
 * count every member passes (see ccs_fingerprint); RA the caller's address. */
CCS_INLINE struct ccs_record *record_begin(unsigned kind, ncclComm_t comm, const void *send, const void *recv,
                                           size_t count, ncclDataType_t dt, unsigned op, int root,
                                           enum send_blocks blocks, void *ra, int captured)
{
    struct ccs_comm *c = ccs_nccl_comm(comm);
    unsigned dtype = ccs_nccl_dtype(dt);
    uint64_t esize = ccs_nccl_dtype_size(dt);
    int size = c && c->size > 0 ? c->size : 1;
    if (blocks == SEND_AT_ROOT)
        blocks = c && c->rank == root ? SEND_PER_RANK : SEND_NONE;
    struct ccs_call call = {
        .kind = (uint16_t)kind,
        .dtype = (uint8_t)dtype,
        .op = (uint8_t)op,
        .backend = CCS_BE_NCCL,
        .root = root,
        .count = count,
        .bytes = (uint64_t)count * esize * (blocks == SEND_PER_RANK ? (uint64_t)size : (uint64_t)blocks),
        .buf = recv,
    };
    if (send && recv && in_place(kind, send, recv, (uint64_t)count * esize, c ? c->rank : -1))
        call.flags |= CCS_F_IN_PLACE;
    if (group_depth > 0) {
        call.flags |= CCS_F_IN_GROUP;
        call.group_depth = (uint8_t)(group_depth > 255 ? 255 : group_depth);
    }
    if (captured)
        call.flags |= CCS_F_CAPTURED;
    return ccs_call_begin_active(c, &call, ra); /* the callers checked ccs_nccl_on() */
}

/* Completion tracking of an enqueued call (nccl_track.c): its sequence
 * number (a point-to-point call completes what the communicator's
 * collectives before it enqueued), noted for the outermost ncclGroupEnd
 * inside a group. */
static void track(struct ccs_record *r, ncclComm_t comm, cudaStream_t stream)
{
    uint64_t seq = r->seq;
    if (r->kind == CCS_KIND_SEND || r->kind == CCS_KIND_RECV) {
        struct ccs_comm *c = ccs_nccl_comm(comm);
        seq = c ? atomic_load_explicit(&c->seq, memory_order_relaxed) : 0;
    }
    if (ccs_ntrack_after(comm, seq, stream, group_depth))
        r->flags |= CCS_F_CAPTURED;
}

/* ncclInProgress is NCCL's "accepted, completing asynchronously": not an
 * error.  Tracking also says whether the stream is being captured into a
 * CUDA graph (the record is flagged: the call enqueued nothing now). */
static inline void record_end_in(struct ccs_ring *ring, struct ccs_record *r, ncclResult_t rc, ncclComm_t comm,
                                 cudaStream_t stream)
{
    int ok = rc == ncclSuccess || rc == ncclInProgress;
    if (atomic_load_explicit(&ccs_ntrack_on, memory_order_relaxed) && !(r->flags & CCS_F_CAPTURED) && ok)
        track(r, comm, stream);
    ccs_call_end_in(ring, r, !ok);
}

static inline void record_end(struct ccs_record *r, ncclResult_t rc, ncclComm_t comm, cudaStream_t stream)
{
    if (r)
        record_end_in(ccs_tls_ring, r, rc, comm, stream); /* the ring R is in */
}

/* ------------------------------------------------------ shapes: describe */

/* One parameter list per shape of CCS_NCCL_GENERATED, with the arguments
 * that name them, and the function that describes a call of that shape.
 * Every shape ends in (comm, stream), which the frame's record_end() reads. */

#define NCCL_SHAPE_coll_PARAMS                                                                                     \
    const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,                  \
        cudaStream_t stream
#define NCCL_SHAPE_coll_ARGS sendbuff, recvbuff, count, datatype, comm, stream
CCS_INLINE struct ccs_record *describe_coll(unsigned kind, enum send_blocks blocks, const void *sendbuff,
                                            void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                                            cudaStream_t stream, void *ra)
{
    (void)stream;
    return record_begin(kind, comm, sendbuff, recvbuff, count, datatype, CCS_OP_NONE, -1, blocks, ra, 0);
}

#define NCCL_SHAPE_coll_op_PARAMS                                                                                  \
    const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,  \
        cudaStream_t stream
#define NCCL_SHAPE_coll_op_ARGS sendbuff, recvbuff, count, datatype, op, comm, stream
CCS_INLINE struct ccs_record *describe_coll_op(unsigned kind, enum send_blocks blocks, const void *sendbuff,
                                               void *recvbuff, size_t count, ncclDataType_t datatype,
                                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, void *ra)
{
    (void)stream;
    return record_begin(kind, comm, sendbuff, recvbuff, count, datatype, map_op(op, comm), -1, blocks, ra, 0);
}

#define NCCL_SHAPE_coll_op_root_PARAMS                                                                             \
    const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,         \
        ncclComm_t comm, cudaStream_t stream
#define NCCL_SHAPE_coll_op_root_ARGS sendbuff, recvbuff, count, datatype, op, root, comm, stream
CCS_INLINE struct ccs_record *describe_coll_op_root(unsigned kind, enum send_blocks blocks, const void *sendbuff,
                                                    void *recvbuff, size_t count, ncclDataType_t datatype,
                                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                                                    void *ra)
{
    (void)stream;
    return record_begin(kind, comm, sendbuff, recvbuff, count, datatype, map_op(op, comm), root, blocks, ra, 0);
}

#define NCCL_SHAPE_coll_root_PARAMS                                                                                \
    const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,        \
        cudaStream_t stream
#define NCCL_SHAPE_coll_root_ARGS sendbuff, recvbuff, count, datatype, root, comm, stream
CCS_INLINE struct ccs_record *describe_coll_root(unsigned kind, enum send_blocks blocks, const void *sendbuff,
                                                 void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                                                 ncclComm_t comm, cudaStream_t stream, void *ra)
{
    (void)stream;
    return record_begin(kind, comm, sendbuff, recvbuff, count, datatype, CCS_OP_NONE, root, blocks, ra, 0);
}

/* ncclBcast: in place by definition, one buffer. */
#define NCCL_SHAPE_bcast_PARAMS                                                                                    \
    void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream
#define NCCL_SHAPE_bcast_ARGS buff, count, datatype, root, comm, stream
CCS_INLINE struct ccs_record *describe_bcast(unsigned kind, enum send_blocks blocks, void *buff, size_t count,
                                             ncclDataType_t datatype, int root, ncclComm_t comm,
                                             cudaStream_t stream, void *ra)
{
    (void)stream;
    return record_begin(kind, comm, buff, buff, count, datatype, CCS_OP_NONE, root, blocks, ra, 0);
}

/* Point-to-point: the peer in the root field, the one buffer as the
 * record's (never in place). */
#define NCCL_SHAPE_send_PARAMS                                                                                     \
    const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream
#define NCCL_SHAPE_send_ARGS sendbuff, count, datatype, peer, comm, stream
CCS_INLINE struct ccs_record *describe_send(unsigned kind, enum send_blocks blocks, const void *buf, size_t count,
                                            ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream,
                                            void *ra)
{
    (void)stream;
    return record_begin(kind, comm, NULL, buf, count, datatype, CCS_OP_NONE, peer, blocks, ra, 0);
}

#define NCCL_SHAPE_recv_PARAMS                                                                                     \
    void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream
#define NCCL_SHAPE_recv_ARGS recvbuff, count, datatype, peer, comm, stream
#define describe_recv describe_send

/* ------------------------------------------------ the generated wrappers */

#define GENERATE(name, shape, kind, blocks)                                                                        \
    CCS_EXPORT ncclResult_t nccl##name(NCCL_SHAPE_##shape##_PARAMS)                                                \
    {                                                                                                              \
        __typeof__(&pnccl##name) real = CCS_NCCL_REAL(name);                                                       \
        if (CCS_UNLIKELY(!real))                                                                                   \
            return ncclInternalError;                                                                              \
        struct ccs_record *r = NULL;                                                                               \
        if (ccs_nccl_on())                                                                                         \
            r = describe_##shape(CCS_KIND_##kind, SEND_##blocks, NCCL_SHAPE_##shape##_ARGS,                        \
                                 __builtin_return_address(0));                                                     \
        ncclResult_t rc = real(NCCL_SHAPE_##shape##_ARGS);                                                         \
        record_end(r, rc, comm, stream);                                                                           \
        return rc;                                                                                                 \
    }
CCS_NCCL_GENERATED(GENERATE)
#undef GENERATE

/* ------------------------------------------------- apart: ncclAllReduce */

/* Written by hand: coalescing (coalesce_nccl.c) may take the call over
 * (defer it, or fold it into a step's single all-reduce); the record and
 * completion tracking of a call it took are its own.  While the stream is
 * captured into a CUDA graph: no coalescing (no deferral, no private
 * communicator made inside the capture), and the record is flagged. */
__attribute__((noinline)) static ncclResult_t allreduce_general(NCCL_SHAPE_coll_op_PARAMS, void *ra)
{
    __typeof__(&pncclAllReduce) real = CCS_NCCL_REAL(AllReduce);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    struct ccs_record *r = NULL;
    if (ccs_nccl_on()) {
        int captured = 0;
        ncclResult_t crc; /* coalescing: one predictable branch while off */
        if (CCS_UNLIKELY(atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed)) &&
            !(captured = ccs_ntrack_capturing(stream)) &&
            ccs_coalesce_nccl_allreduce(sendbuff, recvbuff, count, datatype, op, comm, stream, group_depth,
                                        ra, &crc)) {
            struct ccs_comm *c = (crc == ncclSuccess || crc == ncclInProgress) ? ccs_nccl_comm(comm) : NULL;
            if (c && atomic_load_explicit(&ccs_ntrack_on, memory_order_relaxed)) {
                uint64_t seq = atomic_load_explicit(&c->seq, memory_order_relaxed);
                if (group_depth > 0)
                    ccs_ntrack_group_note(comm, seq, stream);
                else
                    ccs_ntrack_enqueued(comm, seq, stream);
            }
            return crc;
        }
        r = record_begin(CCS_KIND_ALLREDUCE, comm, sendbuff, recvbuff, count, datatype, map_op(op, comm), -1,
                         SEND_ONE, ra, captured);
    }
    ncclResult_t rc = real(NCCL_SHAPE_coll_op_ARGS);
    record_end(r, rc, comm, stream);
    return rc;
}

/* The common case, a built-in operator on a predefined type on the
 * thread's last communicator from its last call site, coalescing off, has
 * no call out of line before the real one (ccs_call_fast), so that the
 * arguments stay in registers up to it; the record is the one
 * record_begin gives.  Anything else takes the general path. */
CCS_EXPORT ncclResult_t ncclAllReduce(NCCL_SHAPE_coll_op_PARAMS)
{
    void *ra = __builtin_return_address(0);
    __typeof__(&pncclAllReduce) real =
        atomic_load_explicit(&ccs_nccl_fns[CCS_NCCL_FN_AllReduce], memory_order_acquire);
    struct ccs_ring *ring = ccs_call_ring(); /* not NULL: interception is on */
    struct ccs_comm *c;
    if (CCS_LIKELY(real != NULL && ring != NULL && !atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed) &&
                   (unsigned)op < BUILTIN_OPS && (unsigned)datatype < ncclNumTypes &&
                   (c = ccs_nccl_comm_cached(ring, comm)) != NULL)) {
        int depth = group_depth;
        struct ccs_call call = {
            .kind = CCS_KIND_ALLREDUCE,
            .dtype = ccs_nccl_dt_table[datatype].norm,
            .op = builtin_ops[op],
            .flags = (uint8_t)((sendbuff && sendbuff == recvbuff ? CCS_F_IN_PLACE : 0) |
                               (depth > 0 ? CCS_F_IN_GROUP : 0)),
            .backend = CCS_BE_NCCL,
            .group_depth = (uint8_t)(depth <= 0 ? 0 : depth > 255 ? 255 : depth),
            .root = -1,
            .count = count,
            .bytes = (uint64_t)count * ccs_nccl_dt_table[datatype].size,
            .buf = recvbuff,
        };
        struct ccs_record *r = ccs_call_fast(ring, c, &call, ra);
        if (CCS_LIKELY(r != NULL)) {
            ncclResult_t rc = real(NCCL_SHAPE_coll_op_ARGS);
            record_end_in(ring, r, rc, comm, stream);
            return rc;
        }
    }
    return allreduce_general(NCCL_SHAPE_coll_op_ARGS, ra);
}

/* ---------------------------------------------------------------- groups */

/* Group calls are not records (there is no kind for them); they only set the
 * depth that the calls inside carry.  The depth follows NCCL's own: up on a
 * successful start, down on every end (NCCL decrements even when the end
 * fails), never below 0. */
CCS_EXPORT ncclResult_t ncclGroupStart(void)
{
    __typeof__(&pncclGroupStart) real = CCS_NCCL_REAL(GroupStart);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    ncclResult_t rc = real();
    if (rc == ncclSuccess)
        group_depth++;
    return rc;
}

CCS_EXPORT ncclResult_t ncclGroupEnd(void)
{
    __typeof__(&pncclGroupEnd) real = CCS_NCCL_REAL(GroupEnd);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    ncclResult_t rc = real();
    if (group_depth > 0 && --group_depth == 0) {
        ccs_ntrack_group_end(rc == ncclSuccess || rc == ncclInProgress); /* the group's work is enqueued now */
        ccs_coalesce_nccl_group_done(); /* outside the group now */
    }
    return rc;
}

/* ------------------------------------------------------ PreMulSum operators */

CCS_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence, ncclComm_t comm)
{
    __typeof__(&pncclRedOpCreatePreMulSum) real = CCS_NCCL_REAL(RedOpCreatePreMulSum);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    ncclResult_t rc = real(op, scalar, datatype, residence, comm);
    if (rc != ncclSuccess || !op || !ccs_nccl_on())
        return rc;
    struct ccs_nccl_premul p = {.comm = (uintptr_t)comm, .op = (int)*op, .nccl_dtype = (int)datatype};
    unsigned size = ccs_dtype_size(ccs_nccl_dtype(datatype));
    if (residence == ncclScalarHostImmediate && scalar && size > 0 && size <= sizeof p.scalar) {
        /* NCCL reads a host scalar before returning; so may we. */
        p.host_scalar = 1;
        memcpy(p.scalar, scalar, size);
    } else {
        p.dev_ptr = scalar;
    }
    ccs_nccl_redop_add(&p);
    return rc;
}

CCS_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    __typeof__(&pncclRedOpDestroy) real = CCS_NCCL_REAL(RedOpDestroy);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    /* Forget it first: once the real call returns, another thread may
     * create a new operator with the same value on this communicator. */
    struct ccs_nccl_premul old;
    int known = ccs_nccl_redop_remove((uintptr_t)comm, (int)op, &old) == 0;
    ncclResult_t rc = real(op, comm);
    if (known && rc != ncclSuccess)
        ccs_nccl_redop_add(&old); /* still alive after all */
    return rc;
}
