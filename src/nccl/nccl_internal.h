/*
 * nccl_internal.h - what the NCCL interposer's files share: the real NCCL
 * functions (resolved lazily, once, without loading anything), the
 * communicator lookup, and the mapping of NCCL's enums to ccshim's.
 *
 * Include after <nccl.h>.  Everything here is hidden inside libccshim.
 */
#ifndef CCS_NCCL_INTERNAL_H
#define CCS_NCCL_INTERNAL_H

#include "shim.h"
#include <nccl.h>

/* Every real NCCL function the interposer calls, by its name without the
 * "nccl" prefix.  X(Name) */
#define CCS_NCCL_FN_LIST(X)                                                                                        \
    X(AllReduce)                                                                                                   \
    X(Broadcast)                                                                                                   \
    X(Bcast)                                                                                                       \
    X(Reduce)                                                                                                      \
    X(AllGather)                                                                                                   \
    X(ReduceScatter)                                                                                               \
    X(AlltoAll)                                                                                                    \
    X(Gather)                                                                                                      \
    X(Scatter)                                                                                                     \
    X(Send)                                                                                                        \
    X(Recv)                                                                                                        \
    X(GroupStart)                                                                                                  \
    X(GroupEnd)                                                                                                    \
    X(CommInitRank)                                                                                                \
    X(CommInitRankConfig)                                                                                          \
    X(CommInitAll)                                                                                                 \
    X(CommInitRankScalable)                                                                                        \
    X(CommSplit)                                                                                                   \
    X(CommShrink)                                                                                                  \
    X(CommFinalize)                                                                                                \
    X(CommDestroy)                                                                                                 \
    X(CommAbort)                                                                                                   \
    X(CommGetAsyncError)                                                                                           \
    X(CommUserRank)                                                                                                \
    X(CommCount)                                                                                                   \
    X(RedOpCreatePreMulSum)                                                                                        \
    X(RedOpDestroy)

enum ccs_nccl_fn {
#define CCS_X(name) CCS_NCCL_FN_##name,
    CCS_NCCL_FN_LIST(CCS_X)
#undef CCS_X
        CCS_NCCL_FN_COUNT
};

/* Resolved pointers, NULL until first use (nccl_real.c). */
extern CCS_HIDDEN _Atomic(void *) ccs_nccl_fns[CCS_NCCL_FN_COUNT];

/* Slow path of ccs_nccl_real: looks up "pncclNAME", then "ncclNAME", in the
 * libraries already loaded (never loads one).  Returns the function, or NULL
 * (logged once per function: the wrapper then returns ncclInternalError). */
CCS_HIDDEN void *ccs_nccl_resolve(enum ccs_nccl_fn f);

/* The real function F: one acquire load once resolved. */
static inline void *ccs_nccl_real(enum ccs_nccl_fn f)
{
    void *p = atomic_load_explicit(&ccs_nccl_fns[f], memory_order_acquire);
    return CCS_LIKELY(p != NULL) ? p : ccs_nccl_resolve(f);
}

/* Shorthand for the pointer type of the real function NAME, taken from the
 * declaration of pnccl##NAME in nccl.h so signatures can never drift. */
#define CCS_NCCL_REAL(name) ((__typeof__(&pnccl##name))ccs_nccl_real(CCS_NCCL_FN_##name))

/* Slow path of ccs_nccl_on: initialises the runtime once if no constructor
 * did yet (a call from another library's constructor).  Returns ccs_active. */
CCS_HIDDEN int ccs_nccl_first_call(void);

/* Nonzero when calls are to be recorded. */
static inline int ccs_nccl_on(void)
{
    if (CCS_LIKELY(atomic_load_explicit(&ccs_active, memory_order_relaxed)))
        return 1;
    return ccs_nccl_first_call();
}

/* Slow path of ccs_nccl_comm: registers a communicator created before the
 * shim saw it (local identity; rank and size asked of the real NCCL). */
CCS_HIDDEN struct ccs_comm *ccs_nccl_adopt(ncclComm_t comm);

/* Slow path of ccs_nccl_comm for an entry registered before NCCL could say
 * its rank and size (nonblocking, or created inside a group): asks again
 * once it is ready (nccl_track.c).  Returns 0 when known now. */
CCS_HIDDEN int ccs_ntrack_requery(struct ccs_comm *c);

/* The table entry of COMM, adopting a handle never seen created.  NULL for a
 * NULL handle or a full table. */
static inline struct ccs_comm *ccs_nccl_comm(ncclComm_t comm)
{
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, (uintptr_t)comm);
    if (CCS_LIKELY(c != NULL)) {
        if (CCS_UNLIKELY(c->size <= 0))
            ccs_ntrack_requery(c);
        return c;
    }
    if (comm == NULL)
        return c;
    return ccs_nccl_adopt(comm);
}

/* This thread's ncclGroupStart nesting (nccl_wrap.c). */
CCS_HIDDEN int ccs_nccl_group_depth(void);

/* ncclDataType_t -> enum ccs_dtype (CCS_DT_UNKNOWN outside nccl.h's list). */
CCS_HIDDEN unsigned ccs_nccl_dtype(ncclDataType_t dt);

/* Seed of the identity hashes of NCCL communicators ("nccl"). */
#define CCS_NCCL_ID_SEED 0x6e63636cULL

#endif
