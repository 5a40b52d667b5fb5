/*
 * coll.c - the collectives beyond MPI-3's plain ones, legal and not, for
 * tests/mpi-coll/mpi-coll.sh:
 *
 *   coll legal   every neighbourhood collective on a periodic Cartesian ring
 *                and on a 2-D grid with edges (MPI_PROC_NULL neighbours),
 *                with counts that differ from rank to rank where the
 *                standard lets them; each communicator constructor, each
 *                new communicator used; where the MPI has them (config.h)
 *                persistent collectives started in turn with blocking ones
 *                and together (MPI_Startall), and large-count calls.  Prints
 *                "rank R: NAME VALUE" lines of results (a plain run's and
 *                one under ccshim must be the same).
 *   coll nkind   ITERS (5) neighbourhood all-gathers on a periodic
 *                Cartesian ring; at iteration 2 rank 1 calls
 *                MPI_Neighbor_alltoall instead (the same bytes move: the
 *                job completes, only ccshim can tell).
 *   coll pcount  (persistent collectives) two persistent all-reduces of 4
 *                floats made (seq 1 and 2 of the world), then started
 *                ITERS times in turn ... but rank 1 made the second with 8.
 * The legal program also starts a persistent broadcast and barrier in
 * opposite orders on even and odd ranks: legal, the members match a
 * persistent collective at its init (MPICH's coll/p_order).
 *
 * Mismatched calls may complete: every rank then sleeps SETTLE_MS (env,
 * default 600) before finalizing, so the detector has time.
 */
#include <config.h> /* HAVE_MPI_*: the MPI-4 functions this MPI has (configure.ac) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXN 64
static int rank, size;

static void say(const char *name, double v)
{
    printf("rank %d: %s %.1f\n", rank, name, v);
}

static double sum(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

static void fill(double *x, int n, int salt)
{
    for (int i = 0; i < n; i++)
        x[i] = 100 * rank + i + salt;
}

/* Neighbourhood collectives on the Cartesian C (2 neighbours a dimension,
 * some perhaps MPI_PROC_NULL: their receive blocks stay as filled). */
static void neighbours(MPI_Comm c, const char *tag)
{
    double a[MAXN], b[MAXN];
    int in = 0;
    char name[64];
    MPI_Request q;
    MPI_Cartdim_get(c, &in);
    in *= 2; /* as many out-neighbours */
    fill(a, MAXN, 1), fill(b, MAXN, 0);
    MPI_Neighbor_allgather(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c);
    snprintf(name, sizeof name, "%s neighbor_allgather", tag), say(name, sum(b, 2 * in));
    fill(b, MAXN, 0);
    MPI_Ineighbor_alltoall(a, 3, MPI_DOUBLE, b, 3, MPI_DOUBLE, c, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    snprintf(name, sizeof name, "%s ineighbor_alltoall", tag), say(name, sum(b, 3 * in));
    /* From rank i to rank j go 1 + (i + j) % 3 doubles (both can tell,
     * and the counts differ from rank to rank); a neighbour's rank from
     * MPI_Cart_shift, in the standard's order (each dimension's source,
     * then its destination).  MPI_PROC_NULL neighbours move nothing. */
    int sc[8], sd[8], rc[8], rd[8], nbr[8], nd = in / 2;
    for (int d = 0; d < nd; d++)
        MPI_Cart_shift(c, d, 1, &nbr[2 * d], &nbr[2 * d + 1]);
    for (int i = 0; i < in; i++) {
        int m = nbr[i] == MPI_PROC_NULL ? 1 : 1 + (rank + nbr[i]) % 3;
        sc[i] = rc[i] = m, sd[i] = 0, rd[i] = 4 * i;
    }
    fill(b, MAXN, 0);
    MPI_Neighbor_alltoallv(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, c);
    snprintf(name, sizeof name, "%s neighbor_alltoallv", tag), say(name, sum(b, 4 * in));
    MPI_Aint wd[8];
    MPI_Datatype t[8];
    int two[8];
    for (int i = 0; i < 8; i++)
        wd[i] = 16 * i, t[i] = MPI_DOUBLE, two[i] = 2;
    fill(b, MAXN, 0);
    MPI_Ineighbor_alltoallw(a, two, wd, t, b, two, wd, t, c, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    snprintf(name, sizeof name, "%s ineighbor_alltoallw", tag), say(name, sum(b, 2 * in));
}

static void legal(void)
{
    int dims[2] = {size, 0}, periods[2] = {1, 0};
    MPI_Comm ring, grid, dup, merged, half, inter, g = MPI_COMM_NULL;
    double x[8], y[8];
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    neighbours(ring, "ring");
    dims[0] = 0, dims[1] = 0, periods[0] = 0;
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    neighbours(grid, "grid");
    /* Constructors. */
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &dup);
    fill(x, 8, 0);
    MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, dup);
    say("dup_with_info allreduce", sum(y, 8));
    MPI_Group world, firsts;
    int n2 = size / 2, r2[MAXN];
    for (int i = 0; i < n2; i++)
        r2[i] = i;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, n2, r2, &firsts);
    if (rank < n2) {
        MPI_Comm_create_group(MPI_COMM_WORLD, firsts, 3, &g);
        MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, g);
        say("create_group allreduce", sum(y, 8));
        MPI_Comm_free(&g);
    }
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 5, &inter);
    MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, inter);
    say("intercomm allreduce", sum(y, 8));
    MPI_Intercomm_merge(inter, rank % 2, &merged);
    MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, merged);
    say("merged allreduce", sum(y, 8));
#ifdef HAVE_MPI_COMM_IDUP_WITH_INFO
    MPI_Comm idup;
    MPI_Request iq;
    MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &idup, &iq);
    MPI_Wait(&iq, MPI_STATUS_IGNORE);
    MPI_Bcast(x, 8, MPI_DOUBLE, size - 1, idup);
    say("idup_with_info bcast", sum(x, 8));
    MPI_Comm_free(&idup);
#endif
#ifdef HAVE_MPI_COMM_FROM_GROUP
    MPI_Comm fg;
    MPI_Comm_create_from_group(world, "org.ccshim.coll", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
    fill(x, 8, 0);
    MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_MAX, fg);
    say("from_group allreduce", sum(y, 8));
    MPI_Comm_free(&fg);
#endif
#ifdef HAVE_MPI_PERSISTENT_COLL
    /* Persistent: an all-reduce and a neighbourhood all-gather started in
     * turn with blocking calls, then both at once. */
    MPI_Request q[2];
    double nb[MAXN];
    MPI_Allreduce_init(x, y, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    MPI_Neighbor_allgather_init(x, 2, MPI_DOUBLE, nb, 2, MPI_DOUBLE, ring, MPI_INFO_NULL, &q[1]);
    for (int it = 0; it < 3; it++) {
        fill(x, 8, it);
        MPI_Start(&q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        say("persistent allreduce", sum(y, 8));
        MPI_Bcast(x, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Start(&q[1]);
        MPI_Wait(&q[1], MPI_STATUS_IGNORE);
        say("persistent neighbor_allgather", sum(nb, 4));
    }
    MPI_Startall(2, q);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE), MPI_Wait(&q[1], MPI_STATUS_IGNORE);
    say("startall allreduce", sum(y, 8));
    MPI_Request_free(&q[0]), MPI_Request_free(&q[1]);
    /* Started in opposite orders on even and odd ranks. */
    int v = rank == 0 ? 42 : -1;
    MPI_Bcast_init(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
    MPI_Start(&q[rank % 2]);
    MPI_Start(&q[1 - rank % 2]);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE), MPI_Wait(&q[1], MPI_STATUS_IGNORE);
    say("persistent bcast started out of order", v);
    MPI_Request_free(&q[0]), MPI_Request_free(&q[1]);
#endif
#ifdef HAVE_MPI_LARGE_COUNT
    /* On the ring, 1 + (i + j) % 3 from i to j as above. */
    MPI_Count lc[2];
    MPI_Aint lr[2] = {0, 0}, ld[2] = {0, 4};
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    lc[0] = 1 + (rank + left) % 3, lc[1] = 1 + (rank + right) % 3;
    fill(x, 8, 0);
    MPI_Allreduce_c(x, y, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    say("allreduce_c", sum(y, 8));
    double big[MAXN];
    fill(big, MAXN, 0);
    MPI_Neighbor_alltoallv_c(x, lc, lr, MPI_DOUBLE, big, lc, ld, MPI_DOUBLE, ring);
    say("neighbor_alltoallv_c", sum(big, 8));
#endif
    MPI_Group_free(&firsts), MPI_Group_free(&world);
    MPI_Comm_free(&merged), MPI_Comm_free(&inter), MPI_Comm_free(&half), MPI_Comm_free(&dup);
    MPI_Comm_free(&grid), MPI_Comm_free(&ring);
}

static void settle(void)
{
    const char *e = getenv("SETTLE_MS");
    long ms = e ? atol(e) : 600;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "";
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    if (size < 2 || size > MAXN / 8) {
        fprintf(stderr, "coll: 2 to %d ranks\n", MAXN / 8);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (strcmp(mode, "legal") == 0) {
        legal();
    } else if (strcmp(mode, "nkind") == 0) {
        int dims[1] = {size}, periods[1] = {1};
        MPI_Comm ring;
        double a[8] = {0}, b[16];
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
        for (int i = 0; i < iters; i++) {
            if (i == 2 && rank == 1)
                MPI_Neighbor_alltoall(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, ring);
            else
                MPI_Neighbor_allgather(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, ring);
        }
        settle();
#ifdef HAVE_MPI_PERSISTENT_COLL
    } else if (strcmp(mode, "pcount") == 0) {
        float x[8] = {0}, y[8];
        MPI_Request good, odd;
        MPI_Allreduce_init(x, y, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &good);
        MPI_Allreduce_init(x, y, rank == 1 ? 8 : 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &odd);
        for (int i = 0; i < iters; i++) {
            MPI_Request *q = i == 2 ? &odd : &good;
            MPI_Start(q);
            MPI_Wait(q, MPI_STATUS_IGNORE);
        }
        settle();
        MPI_Request_free(&good), MPI_Request_free(&odd);
#endif
    } else {
        fprintf(stderr, "usage: coll legal|nkind|pcount [ITERS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
