/* desync_mpi.h - called by mpi_setup.c (libccshim-mpi.so). */
#ifndef CCS_DESYNC_MPI_H
#define CCS_DESYNC_MPI_H

#include "attributes.h"

/* Right after MPI_Init on every rank (a collective, see
 * ccs_desync_start_mpi): registers MPI_Abort and starts detection. */
CCS_HIDDEN void ccs_desync_mpi_init(void);

#endif
