/*
 * abort.h - a service: ways to end the whole job, registered by the
 * backends (MPI_Abort, ncclCommAbort) and taken by desync
 * (CCSHIM_ON_DESYNC=abort) and coalescing (abort.c).
 */
#ifndef CCS_ABORT_H
#define CCS_ABORT_H

#include "attributes.h"
#include <stdint.h>

/* A way to end the whole job: FN(ARG, COMM) aborts the job (COMM: the
 * communicator concerned, 0 when none) and returns only on failure, with
 * -1, or with 1 when this process can no longer take that way (MPI is
 * finalized here: MPI_Abort is erroneous after MPI_Finalize; the ranks
 * still running see the same verdict and end the job).  Backends register theirs (MPI_Abort, ncclCommAbort); up to 4.
 * JOB_WIDE: one process's call ends every process of the job (MPI_Abort);
 * 0 where each process must end its own part (ncclCommAbort is local). */
CCS_HIDDEN int ccs_abort_register(int (*fn)(void *arg, uint64_t comm), void *arg, int job_wide);
/* 1 when a registered way that ccs_abort_job may take ends every process of
 * the job from one (the first that succeeds for the verdict's communicator
 * is known only by trying: in a process with NCCL and MPI, NCCL's abort
 * fails for an MPI communicator and MPI_Abort ends the job).  The caller
 * then gives the reporting rank its time before any abort. */
CCS_HIDDEN int ccs_abort_job_wide(void);
/* Tries each registered way in turn; returns 0 when one did, 1 when none
 * did and one is no longer open to this process (above), -1 when none ended
 * the job (the caller then ends this process). */
CCS_HIDDEN int ccs_abort_job(uint64_t comm);

#endif
