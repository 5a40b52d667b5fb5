/*
 * mpi_pattern.c - an MPI program with a known pattern of collectives, for
 * the integration tests.  Per step s in 0..STEPS-1 (marked with
 * CCSHIM_STEP_MARK), on MPI_COMM_WORLD:
 *   3 x MPI_Allreduce (SUM, double, 1000 elements; the 2nd in place)
 *   1 x MPI_Bcast (int, 16, root s % size)
 *   1 x MPI_Iallreduce (MAX, int64, 8) + MPI_Wait
 *   1 x MPI_Allgather (int, 4)
 *   1 x MPI_Reduce (SUM, float, 64, root 0)
 *   1 x MPI_Barrier
 *   ring: MPI_Sendrecv to rank+1 from rank-1 (point-to-point)
 * then once, after the steps: MPI_Comm_split by rank % 2, on the half:
 *   2 x MPI_Allreduce (SUM, double, 10), 1 x MPI_Alltoall (int, 1),
 *   1 x MPI_Scan (SUM, int, 1), 1 x PMPI_Allreduce (entered through the
 *   profiling name), then MPI_Comm_free.
 * Prints one line per rank: "rank R checksum X" over every result, so a
 * run with and without the shim can be compared exactly.
 */
#include <ccshim.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000
#define STEPS 3

static double checksum;
static void acc(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        checksum = checksum * 1.0000001 + b[i];
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static double x[N], y[N];
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < N; i++)
            x[i] = rank + i * 0.5 + step;
        MPI_Allreduce(x, y, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        acc(y, sizeof y);
        MPI_Allreduce(MPI_IN_PLACE, y, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        acc(y, sizeof y);
        MPI_Allreduce(x, y, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        acc(y, sizeof y);
        int b[16];
        for (int i = 0; i < 16; i++)
            b[i] = rank * 100 + i;
        MPI_Bcast(b, 16, MPI_INT, step % size, MPI_COMM_WORLD);
        acc(b, sizeof b);
        int64_t m[8], mo[8];
        for (int i = 0; i < 8; i++)
            m[i] = rank * i;
        MPI_Request q;
        MPI_Iallreduce(m, mo, 8, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        acc(mo, sizeof mo);
        int g[4] = {rank, rank + 1, rank + 2, rank + 3}, *ga = calloc((size_t)size * 4, sizeof(int));
        MPI_Allgather(g, 4, MPI_INT, ga, 4, MPI_INT, MPI_COMM_WORLD);
        acc(ga, (size_t)size * 4 * sizeof(int));
        free(ga);
        float f[64], fo[64];
        for (int i = 0; i < 64; i++)
            f[i] = (float)(rank + i);
        memset(fo, 0, sizeof fo);
        MPI_Reduce(f, fo, 64, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        acc(fo, sizeof fo);
        MPI_Barrier(MPI_COMM_WORLD);
        int out = rank, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 7, &in, 1, MPI_INT, (rank + size - 1) % size, 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        acc(&in, sizeof in);
        CCSHIM_STEP_MARK();
    }
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hsize;
    MPI_Comm_size(half, &hsize);
    double h[10];
    for (int i = 0; i < 10; i++)
        h[i] = rank * 10 + i;
    MPI_Allreduce(MPI_IN_PLACE, h, 10, MPI_DOUBLE, MPI_SUM, half);
    MPI_Allreduce(MPI_IN_PLACE, h, 10, MPI_DOUBLE, MPI_SUM, half);
    acc(h, sizeof h);
    int *a2a = malloc((size_t)hsize * sizeof(int)), *a2b = malloc((size_t)hsize * sizeof(int));
    for (int i = 0; i < hsize; i++)
        a2a[i] = rank * 1000 + i;
    MPI_Alltoall(a2a, 1, MPI_INT, a2b, 1, MPI_INT, half);
    acc(a2b, (size_t)hsize * sizeof(int));
    int sc = rank + 1, so = 0;
    MPI_Scan(&sc, &so, 1, MPI_INT, MPI_SUM, half);
    acc(&so, sizeof so);
    PMPI_Allreduce(MPI_IN_PLACE, h, 10, MPI_DOUBLE, MPI_SUM, half);
    acc(h, sizeof h);
    free(a2a);
    free(a2b);
    MPI_Comm_free(&half);
    printf("rank %d checksum %.17g\n", rank, checksum);
    MPI_Finalize();
    return 0;
}
