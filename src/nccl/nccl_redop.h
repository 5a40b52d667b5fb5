/*
 * nccl_redop.h - which ncclRedOp_t values are PreMulSum operators.
 *
 * NCCL numbers user-created operators per communicator from ncclNumOps up,
 * so an operator is known by (communicator, value).  A fixed table of
 * CCS_NCCL_REDOPS entries: creation and destruction take a mutex (slow path),
 * lookups are lock-free (a sequence counter per entry), nothing allocates.
 * For a host-immediate scalar the scalar's bytes are kept, which the
 * coalescing feature needs to know what a PreMulSum reduction multiplies by.
 */
#ifndef CCS_NCCL_REDOP_H
#define CCS_NCCL_REDOP_H

#include "attributes.h"
#include <stdint.h>

#define CCS_NCCL_REDOPS 256

struct ccs_nccl_premul {
    uintptr_t comm;      /* ncclComm_t it was created on */
    int op;              /* its ncclRedOp_t value */
    int nccl_dtype;      /* ncclDataType_t it was created for */
    int host_scalar;     /* 1: ncclScalarHostImmediate, scalar[] holds it */
    uint8_t scalar[8];   /* the scalar's bytes (host scalars only) */
    const void *dev_ptr; /* ncclScalarDevice: where the scalar lives */
};

/* Remembers a new operator.  Returns 0, or -1 when the table is full (logged
 * once; the operator is then recorded as CCS_OP_USER). */
CCS_HIDDEN int ccs_nccl_redop_add(const struct ccs_nccl_premul *p);

/* Forgets (COMM, OP).  Returns 0, or -1 when it was not known. */
CCS_HIDDEN int ccs_nccl_redop_remove(uintptr_t comm, int op, struct ccs_nccl_premul *removed);

/* Forgets every operator of COMM (NCCL frees them with the communicator). */
CCS_HIDDEN void ccs_nccl_redop_forget_comm(uintptr_t comm);

/* Hot path: copies the entry for (COMM, OP) into OUT (may be NULL) and
 * returns 1, or returns 0 when (COMM, OP) is not a known PreMulSum. */
CCS_HIDDEN int ccs_nccl_redop_find(uintptr_t comm, int op, struct ccs_nccl_premul *out);

#endif
