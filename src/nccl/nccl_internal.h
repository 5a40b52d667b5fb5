/*
 * nccl_internal.h - what the NCCL interposer's files share: the real NCCL
 * functions (resolved lazily, once, without loading anything), the
 * communicator lookup, and the mapping of NCCL's enums to ccshim's.
 *
 * Include after <nccl.h>.  Everything here is hidden inside libccshim.
 */
#ifndef CCS_NCCL_INTERNAL_H
#define CCS_NCCL_INTERNAL_H

#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "nccl_fns.h"
#include "process.h"
#include "ring.h"
#include <nccl.h>

enum ccs_nccl_fn {
#define CCS_X(name, ...) CCS_NCCL_FN_##name,
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
CCS_HIDDEN int ccs_nccl_first_call(void) __attribute__((cold));

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
 * once it is ready (ncclCommGetAsyncError no longer ncclInProgress); also
 * called by the completion poller (nccl_track_poll.c).  Returns 0 when known now. */
CCS_HIDDEN int ccs_nccl_comm_requery(struct ccs_comm *c);

/* The table entry of COMM, adopting a handle never seen created.  NULL for a
 * NULL handle or a full table.  Hot path: the thread's last entry
 * (ccs_ring_last_comm) when it knows its size (a handle of 0 or 1 is a free
 * slot's or a tombstone's, never a communicator's), else the table
 * (nccl_real.c). */
CCS_HIDDEN struct ccs_comm *ccs_nccl_comm_slow(ncclComm_t comm) __attribute__((cold));
static inline struct ccs_comm *ccs_nccl_comm_cached(const struct ccs_ring *r, ncclComm_t comm) /* the hot path's part */
{
    struct ccs_comm *c = ccs_ring_last_comm(r, (uintptr_t)comm, CCS_BE_NCCL);
    if (CCS_LIKELY(c != NULL) && CCS_LIKELY((uintptr_t)comm > 1 && c->size > 0))
        return c;
    return NULL;
}
static inline struct ccs_comm *ccs_nccl_comm(ncclComm_t comm)
{
    const struct ccs_ring *r = ccs_tls_ring;
    struct ccs_comm *c = r != NULL ? ccs_nccl_comm_cached(r, comm) : NULL;
    return CCS_LIKELY(c != NULL) ? c : ccs_nccl_comm_slow(comm);
}

/* This thread's ncclGroupStart nesting (nccl_wrap.c). */
CCS_HIDDEN int ccs_nccl_group_depth(void);

/* ncclDataType_t -> enum ccs_dtype and its size (nccl_real.c); inline, a
 * table read. */
struct ccs_nccl_dt {
    uint8_t norm; /* enum ccs_dtype */
    uint8_t size; /* bytes per element */
};
extern CCS_HIDDEN const struct ccs_nccl_dt ccs_nccl_dt_table[ncclNumTypes];

/* CCS_DT_UNKNOWN outside nccl.h's list. */
static inline unsigned ccs_nccl_dtype(ncclDataType_t dt)
{
    return (unsigned)dt < ncclNumTypes ? ccs_nccl_dt_table[dt].norm : CCS_DT_UNKNOWN;
}

/* Bytes per element of DT, 0 outside nccl.h's list (as
 * ccs_dtype_size(ccs_nccl_dtype(DT))). */
static inline unsigned ccs_nccl_dtype_size(ncclDataType_t dt)
{
    return (unsigned)dt < ncclNumTypes ? ccs_nccl_dt_table[dt].size : 0;
}

/* Seed of the identity hashes of NCCL communicators ("nccl"). */
#define CCS_NCCL_ID_SEED 0x6e63636cULL

#endif
