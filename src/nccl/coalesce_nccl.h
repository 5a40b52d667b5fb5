/*
 * coalesce_nccl.h - the NCCL side of coalescing (inside libccshim).
 * Include after <nccl.h>.
 */
#ifndef CCS_COALESCE_NCCL_H
#define CCS_COALESCE_NCCL_H

#include "coalesce.h"
#include "attributes.h"
#include <nccl.h>

/* Called by the ncclAllReduce wrapper once ccs_coalesce_on was seen set;
 * IN_GROUP is the caller's ncclGroupStart nesting.  Returns 1 when it
 * handled the call (deferred it, or performed it as the coalesced real one)
 * and stored NCCL's result in *RC; 0 when the call is to pass through
 * untouched. */
CCS_HIDDEN int ccs_coalesce_nccl_allreduce(const void *send, void *recv, size_t count, ncclDataType_t dt,
                                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, int in_group,
                                           void *ra, ncclResult_t *rc);

/* Called after the caller's outermost ncclGroupEnd returned: makes the
 * private communicators asked for inside the group (one relaxed load when
 * none was). */
CCS_HIDDEN void ccs_coalesce_nccl_group_done(void);

/* COMM was created, blocking, outside a group, and is ready.  Under
 * every:N, which defers from its first call, the private communicator of
 * its device is made now, so that the first calls, made inside a group,
 * are deferred as on every later step (an all-reduce made for real in
 * their place gives the same sum, but not bitwise). */
CCS_HIDDEN void ccs_coalesce_nccl_comm_ready(ncclComm_t comm);

#endif
