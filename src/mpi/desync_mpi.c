/*
 * desync_mpi.c - the MPI glue of desync detection (libccshim-mpi.so only):
 * the rendezvous right after MPI_Init through the real PMPI functions (never
 * counted), and MPI_Abort for CCSHIM_ON_DESYNC=abort.
 */
#include "desync_mpi.h"
#include "desync.h"
#include "abort.h"
#include "mpi_shim.h"

static int allgather(const void *mine, void *all, int n, void *arg)
{
    (void)arg;
    if (!CCS_REAL(Allgather))
        return -1;
    return ccs_real_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static int bcast(void *buf, int n, void *arg)
{
    (void)arg;
    if (!CCS_REAL(Bcast))
        return -1;
    return ccs_real_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

/* MPI_Abort on the whole job: the verdict is about the job's progress, and
 * a communicator-scoped abort ends the job in every MPI we know anyway.
 * Not after MPI_Finalize, where MPI_Abort is erroneous (Open MPI then
 * prints "MPI_Abort() was called after MPI_FINALIZE" and exits 1): 1, and
 * the caller ends this process alone. */
static int abort_world(void *arg, uint64_t comm_id)
{
    (void)arg, (void)comm_id;
    int fin = 0;
    if (PMPI_Finalized(&fin) == MPI_SUCCESS && fin)
        return 1;
    return PMPI_Abort(MPI_COMM_WORLD, 3) == MPI_SUCCESS ? 0 : -1;
}

void ccs_desync_mpi_init(void)
{
    struct ccs_dsx_mpi_ops ops = {.allgather = allgather, .bcast = bcast, .arg = NULL};
    ccs_abort_register(abort_world, NULL, 1);
    ccs_desync_start_mpi(&ops);
}
