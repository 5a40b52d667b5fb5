/* mpi_crash.c - five all-reduces, then (with "segv") rank 1 writes to
 * address 8: Open MPI's crash backtrace must still show under the preload,
 * and the trace must end with the signal and every record (hygiene.sh). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float a[4] = {1, 2, 3, 4}, b[4];
    for (int i = 0; i < 5; i++)
        MPI_Allreduce(a, b, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (argc > 1 && strcmp(argv[1], "segv") == 0 && rank == 1) {
        volatile uintptr_t where = 8; /* opaque to the compiler */
        *(volatile int *)where = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
