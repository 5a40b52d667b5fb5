/*
 * mpi_loop.c - a tight loop of small MPI_Allreduce calls; rank 0 prints the
 * mean time per call.  Run with and without the preload by bench/overhead.sh.
 * usage: mpi_loop ITERATIONS [BYTES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int bytes = argc > 2 ? atoi(argv[2]) : 8;
    int n = bytes / 8 > 0 ? bytes / 8 : 1, rank;
    double *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long i = 0; i < iters / 10; i++) /* warm up */
        MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    if (rank == 0)
        printf("ns_per_call %.2f\n", (t1 - t0) * 1e9 / (double)iters);
    free(x);
    free(y);
    MPI_Finalize();
    return 0;
}
