/* mpi_check.h - the test programs' MPI call check: a call that fails says
 * which, on which rank and line, and ends the job (exit 2).  RANK_VAR names
 * the program's variable holding its world rank. */
#ifndef CCS_TEST_MPI_CHECK_H
#define CCS_TEST_MPI_CHECK_H
#include <mpi.h>
#include <stdio.h>

#define CHECK_AS(rank_var, call)                                                                                   \
    do {                                                                                                           \
        int rc_ = (call);                                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                                  \
            fprintf(stderr, "rank %d: %s failed (%d) at line %d\n", (rank_var), #call, rc_, __LINE__);             \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                                          \
        }                                                                                                          \
    } while (0)
#endif
