/*
 * comms.c - communicators as audit-comms.sh needs them, on 2 ranks: a
 * duplicate of the world used by two all-reduces and freed (its comm_free
 * must close its call pattern, not open it); a Cartesian communicator, made
 * by a call ccshim does not intercept (counted under a local id per rank:
 * "not seen created", not a rank that skipped calls); point-to-point calls
 * that differ by rank by design (rank 0 sends, rank 1 receives: no finding,
 * so no row marked as differing).
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, x = 1, y = 0, got = 0, dims[1] = {0}, periods[1] = {0};
    double v[8] = {0};
    MPI_Comm dup, cart;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, dup);
    MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, dup);
    MPI_Comm_free(&dup);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dims[0] = size;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, cart);
    MPI_Barrier(cart);
    if (rank == 0)
        MPI_Send(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
    else if (rank == 1)
        MPI_Recv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return rank == 1 && got != 1;
}
