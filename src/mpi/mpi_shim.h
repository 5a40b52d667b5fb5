/*
 * mpi_shim.h - shared by the MPI interposer's files (libccshim-mpi.so only).
 *
 * Every intercepted function F is defined twice, as MPI_F and PMPI_F (so a
 * job or library that enters through the profiling name is seen too, as
 * Darshan does), and both forward to one static w_F.  The real function is
 * PMPI_F of the next library (the MPI), found once with dlsym(RTLD_NEXT);
 * ccshim's own MPI calls go straight to those pointers and are never counted.
 */
#ifndef CCS_MPI_SHIM_H
#define CCS_MPI_SHIM_H

#include "shim.h"
#include <mpi.h>

/* X(name): every function this library defines as MPI_name and PMPI_name. */
#define CCS_MPI_FUNCS(X)                                                                                   \
    X(Init) X(Init_thread) X(Finalize)                                                                     \
    X(Allreduce) X(Iallreduce) X(Reduce) X(Ireduce) X(Bcast) X(Ibcast)                                     \
    X(Allgather) X(Iallgather) X(Allgatherv) X(Iallgatherv)                                                \
    X(Reduce_scatter) X(Ireduce_scatter) X(Reduce_scatter_block) X(Ireduce_scatter_block)                  \
    X(Alltoall) X(Ialltoall) X(Alltoallv) X(Ialltoallv) X(Alltoallw) X(Ialltoallw)                          \
    X(Gather) X(Igather) X(Gatherv) X(Igatherv) X(Scatter) X(Iscatter) X(Scatterv) X(Iscatterv)            \
    X(Barrier) X(Ibarrier) X(Scan) X(Iscan) X(Exscan) X(Iexscan)                                           \
    X(Send) X(Recv) X(Isend) X(Irecv) X(Sendrecv)                                                          \
    X(Comm_dup) X(Comm_idup) X(Comm_split) X(Comm_split_type) X(Comm_create) X(Comm_free)                 \
    X(Type_free)

/* Pointers to the real PMPI functions. */
#define CCS_X(name) extern CCS_HIDDEN __typeof__(PMPI_##name) *ccs_real_##name;
CCS_MPI_FUNCS(CCS_X)
#undef CCS_X

/* Resolves every ccs_real_* pointer (idempotent).  0, or -1 when one is
 * missing (logged; its wrapper then fails with MPI_ERR_INTERN). */
CCS_HIDDEN int ccs_mpi_resolve(void);

/* The real function NAME, resolved on first need. */
#define CCS_REAL(name) (ccs_real_##name ? ccs_real_##name : (ccs_mpi_resolve(), ccs_real_##name))

/* Defines MPI_name and PMPI_name with PARAMS, both forwarding ARGS and the
 * caller's return address to w_name. */
#define CCS_MPI_ENTRY(name, params, ...)                                                                   \
    CCS_EXPORT int MPI_##name params { return w_##name(__VA_ARGS__, __builtin_return_address(0)); }       \
    CCS_EXPORT int PMPI_##name params { return w_##name(__VA_ARGS__, __builtin_return_address(0)); }

/* Normalised datatype and op, and the byte size of COUNT elements of DT.
 * Hot path: a datatype is one probe of a table of the predefined types
 * (filled once, in the library's constructor; read-only after), the common
 * ops and sizes inline; the rest goes to the *_slow functions. */
#define CCS_MPI_DT_BITS 7
struct ccs_mpi_dt_slot {
    MPI_Datatype dt; /* the handle; an empty slot holds MPI_DATATYPE_NULL with
                        norm CCS_DT_NONE and size 0, the right answer for it */
    uint8_t norm;    /* enum ccs_dtype */
    uint8_t size;    /* bytes per element, 0 when not fixed */
};
extern CCS_HIDDEN struct ccs_mpi_dt_slot ccs_mpi_dt_table[1u << CCS_MPI_DT_BITS];
CCS_HIDDEN uint8_t ccs_mpi_dtype_slow(MPI_Datatype dt);
CCS_HIDDEN uint8_t ccs_mpi_op_slow(MPI_Op op);
CCS_HIDDEN uint64_t ccs_mpi_bytes_slow(int64_t count, MPI_Datatype dt);

static inline const struct ccs_mpi_dt_slot *ccs_mpi_dt_probe(MPI_Datatype dt)
{
    const struct ccs_mpi_dt_slot *s = &ccs_mpi_dt_table[ccs_slot_hash((uint64_t)(uintptr_t)dt, CCS_MPI_DT_BITS)];
    return CCS_LIKELY(s->dt == dt) ? s : NULL;
}

static inline uint8_t ccs_mpi_dtype(MPI_Datatype dt)
{
    const struct ccs_mpi_dt_slot *s = ccs_mpi_dt_probe(dt);
    return s ? s->norm : ccs_mpi_dtype_slow(dt);
}

static inline uint8_t ccs_mpi_op(MPI_Op op)
{
    return op == MPI_SUM ? CCS_OP_SUM : ccs_mpi_op_slow(op);
}

/* NORM is ccs_mpi_dtype(DT) (kept for the callers that have it). */
static inline uint64_t ccs_mpi_bytes(int64_t count, MPI_Datatype dt, uint8_t norm)
{
    (void)norm;
    const struct ccs_mpi_dt_slot *s = ccs_mpi_dt_probe(dt);
    if (CCS_LIKELY(s && s->size))
        return count > 0 ? (uint64_t)count * s->size : 0;
    return ccs_mpi_bytes_slow(count, dt);
}

/* The table entry of COMM, adopting a communicator never seen created.
 * Hot path: the thread's last entry when it still holds COMM (the test the
 * table's own probe makes: a retired entry no longer holds the handle, a
 * re-registered one is the live entry for it), else the table. */
CCS_HIDDEN struct ccs_comm *ccs_mpi_comm_slow(MPI_Comm comm);
extern CCS_HIDDEN __thread struct ccs_comm *ccs_mpi_last_comm __attribute__((tls_model("initial-exec")));
static inline struct ccs_comm *ccs_mpi_comm(MPI_Comm comm)
{
    struct ccs_comm *c = ccs_mpi_last_comm;
    if (CCS_LIKELY(c != NULL) && atomic_load_explicit(&c->handle, memory_order_acquire) == (uintptr_t)comm &&
        CCS_LIKELY(c->backend == CCS_BE_MPI))
        return c;
    return ccs_mpi_comm_slow(comm);
}

/* The type signature of COUNT elements of DT, in the form the fingerprints
 * compare (docs/desync.md, "What must agree"):
 *   - one basic type: DTYPE is it, COUNT the number of elements, SIG 0;
 *   - several basic types: DTYPE is CCS_DT_DERIVED, COUNT the bytes, SIG the
 *     hash of the repeating unit (0 when not known: MPI_PACKED, or a type
 *     too irregular to work out, which is then left out of comparisons);
 *   - empty (count 0, zero-size type, MPI_DATATYPE_NULL): CCS_DT_NONE, 0.
 * Derived datatypes are worked out once per handle (mpi_sig.c); predefined
 * basic types cost the ccs_mpi_dtype scan only. */
struct ccs_mpi_sig {
    uint8_t dtype;
    uint32_t sig;
    uint64_t count;
    uint64_t bytes;
};
CCS_HIDDEN void ccs_mpi_sig_slow(int64_t count, MPI_Datatype dt, struct ccs_mpi_sig *o);
static inline void ccs_mpi_sig(int64_t count, MPI_Datatype dt, struct ccs_mpi_sig *o)
{
    uint8_t d = ccs_mpi_dtype(dt);
    unsigned sz = ccs_dtype_size(d);
    if (CCS_LIKELY(sz != 0 && d != CCS_DT_DERIVED && d != CCS_DT_PAIR)) {
        uint64_t n = count > 0 ? (uint64_t)count : 0;
        o->dtype = n ? d : (uint8_t)CCS_DT_NONE;
        o->sig = 0;
        o->count = n;
        o->bytes = n * sz;
        return;
    }
    ccs_mpi_sig_slow(count, dt, o);
}

/* Drops DT's cached signature (MPI_Type_free). */
CCS_HIDDEN void ccs_mpi_sig_forget(MPI_Datatype dt);


static inline int ccs_mpi_active(void) { return atomic_load_explicit(&ccs_active, memory_order_relaxed); }

#endif
