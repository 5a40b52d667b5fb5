/*
 * comms.c - communicators as audit-comms.sh needs them, on 2 ranks: a
 * duplicate of the world used by two all-reduces and freed (its comm_free
 * must close its call pattern, not open it); a Cartesian communicator
 * (MPI_Cart_create: seen created, "comm_cart"); a duplicate made behind
 * ccshim's back, by the MPI's own PMPI_Comm_dup looked up in the MPI
 * library itself, as by a call ccshim does not intercept (counted under a
 * local id per rank: "not seen created", not a rank that skipped calls);
 * point-to-point calls that differ by rank by design (rank 0 sends, rank 1
 * receives: no finding, so no row marked as differing).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

/* The MPI library's own PMPI_Comm_dup (Open MPI's libmpi, or MPICH's),
 * not the preloaded one. */
static int (*real_dup(void))(MPI_Comm, MPI_Comm *)
{
    const char *libs[] = {"libmpi.so.40", "libmpich.so.12", "libmpi.so.12", "libmpi.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        void *f = h ? dlsym(h, "PMPI_Comm_dup") : NULL;
        if (f)
            return (int (*)(MPI_Comm, MPI_Comm *))f;
    }
    return NULL;
}

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
    int (*dup_behind)(MPI_Comm, MPI_Comm *) = real_dup();
    MPI_Comm hidden;
    if (!dup_behind || dup_behind(MPI_COMM_WORLD, &hidden) != MPI_SUCCESS) {
        fprintf(stderr, "comms: no PMPI_Comm_dup in the MPI library\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, hidden);
    MPI_Barrier(hidden);
    if (rank == 0)
        MPI_Send(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
    else if (rank == 1)
        MPI_Recv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&hidden);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return rank == 1 && got != 1;
}
