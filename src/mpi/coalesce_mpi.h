/*
 * coalesce_mpi.h - the MPI side of coalescing (libccshim-mpi.so only).
 */
#ifndef CCS_COALESCE_MPI_H
#define CCS_COALESCE_MPI_H

#include "coalesce.h"
#include "attributes.h"
#include <mpi.h>

/* Called by the MPI_Allreduce / MPI_Iallreduce wrappers (Q: NULL for the
 * blocking call) once ccs_coalesce_on was seen set.  Returns 1 when it
 * handled the call (deferred it, or performed it as the coalesced real one)
 * and stored MPI's result in *RC; 0 when the call is to pass through
 * untouched (not eligible, or not coalesced). */
CCS_HIDDEN int ccs_coalesce_mpi_allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op,
                                          MPI_Comm comm, MPI_Request *q, void *ra, int *rc);

/* After MPI_Init: the private communicator coalesce=auto agrees through,
 * and MPI_Abort as the way a failed verification ends the job. */
CCS_HIDDEN void ccs_coalesce_mpi_init(void);

#endif
