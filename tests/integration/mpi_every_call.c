/*
 * mpi_every_call.c - every MPI function ccshim records (each row of
 * CCS_MPI_GENERATED and MPI_(I)allreduce), blocking and nonblocking, with
 * and without MPI_IN_PLACE, on MPI_COMM_WORLD (3 ranks or more).  Before
 * each call a rank prints the record the rules of docs/desync.md ("What
 * must agree") say it must leave, worked out from the call's own arguments,
 * into DIR/expect.RANK (one file per rank: lines of ranks sharing stdout
 * could interleave):
 *
 *   kind  flags  root  count  dtype  op  bytes
 *
 * (flags as ccs_trace_dump names them, "-" for none).  mpi-every-call.sh
 * compares these lines with the rank's trace, record by record.  Beside
 * them, DIR/comms.RANK: each communicator the rank makes, as the trace's
 * communicator table must name it ("how size", sorted by the test).
 * Then the neighbourhood collectives on each kind of topology, the
 * communicator constructors, and where the MPI has them (config.h) MPI-4's
 * persistent collectives (a record at the init, on the collective
 * sequence, and one at each start, off it) and the large-count _c variants
 * (the same records as their int twins).
 * usage: mpi_every_call DIR
 */
#include <config.h> /* HAVE_MPI_*: the MPI-4 functions this MPI has (configure.ac) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXR 16
static int rank, size;
static FILE *out, *comms;
static double a[64 * MAXR], b[64 * MAXR];

static void expect(const char *kind, const char *flags, int root, long count, const char *dtype, const char *op,
                   long bytes)
{
    fprintf(out, "%s %s %d %ld %s %s %ld\n", kind, flags, root, count, dtype, op, bytes);
}

static void wait(MPI_Request *q)
{
    MPI_Wait(q, MPI_STATUS_IGNORE);
}

/* The per-member vectors the v and w variants take. */
struct vectors {
    int cnt[MAXR], dis[MAXR], two[MAXR], disp2[MAXR], bdisp[MAXR], total;
    MPI_Datatype dbl[MAXR];
};

static void make_vectors(struct vectors *v)
{
    v->total = 0;
    for (int i = 0; i < size; i++) {
        v->cnt[i] = 1 + i; /* v-variants: a different count per rank */
        v->dis[i] = v->total;
        v->total += v->cnt[i];
        v->two[i] = 2;
        v->disp2[i] = 2 * i;
        v->bdisp[i] = 16 * i;
        v->dbl[i] = MPI_DOUBLE;
    }
}

static const char *const ip = "in_place", *const nb = "nonblocking", *const ipnb = "in_place,nonblocking";
static const char *const nb_ = "nonblocking";

static void call_reductions(MPI_Comm c, const struct vectors *v)
{
    MPI_Request q;
    /* Reductions: (count, datatype) and the op agree; the receive buffer. */
    expect("allreduce", "-", -1, 3, "float64", "sum", 24);
    MPI_Allreduce(a, b, 3, MPI_DOUBLE, MPI_SUM, c);
    expect("allreduce", ipnb, -1, 3, "float64", "max", 24);
    MPI_Iallreduce(MPI_IN_PLACE, b, 3, MPI_DOUBLE, MPI_MAX, c, &q), wait(&q);
    expect("reduce", rank == 0 ? ip : "-", 0, 4, "int32", "sum", 16);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : (void *)a, b, 4, MPI_INT, MPI_SUM, 0, c);
    expect("reduce", nb, 1, 4, "float32", "min", 16);
    MPI_Ireduce(a, b, 4, MPI_FLOAT, MPI_MIN, 1, c, &q), wait(&q);
    /* Reduce_scatter: the whole recvcounts vector agrees. */
    expect("reduce_scatter", "-", -1, v->total, "float64", "sum", 8L * v->total);
    MPI_Reduce_scatter(a, b, v->cnt, MPI_DOUBLE, MPI_SUM, c);
    expect("reduce_scatter", ipnb, -1, v->total, "float64", "sum", 8L * v->total);
    MPI_Ireduce_scatter(MPI_IN_PLACE, b, v->cnt, MPI_DOUBLE, MPI_SUM, c, &q), wait(&q);
    expect("reduce_scatter_block", "-", -1, 2, "float64", "sum", 16);
    MPI_Reduce_scatter_block(a, b, 2, MPI_DOUBLE, MPI_SUM, c);
    expect("reduce_scatter_block", nb, -1, 2, "int32", "prod", 8);
    MPI_Ireduce_scatter_block(a, b, 2, MPI_INT, MPI_PROD, c, &q), wait(&q);
    expect("scan", ip, -1, 2, "float64", "sum", 16);
    MPI_Scan(MPI_IN_PLACE, b, 2, MPI_DOUBLE, MPI_SUM, c);
    expect("scan", nb, -1, 5, "int64", "max", 40);
    MPI_Iscan(a, b, 5, MPI_INT64_T, MPI_MAX, c, &q), wait(&q);
    expect("exscan", "-", -1, 2, "float64", "sum", 16);
    MPI_Exscan(a, b, 2, MPI_DOUBLE, MPI_SUM, c);
    expect("exscan", nb, -1, 2, "float64", "sum", 16);
    MPI_Iexscan(a, b, 2, MPI_DOUBLE, MPI_SUM, c, &q), wait(&q);

}

static void call_rooted(MPI_Comm c, const struct vectors *v)
{
    MPI_Request q;
    /* Rooted data movement. */
    expect("bcast", "-", 1, 5, "float64", "none", 40);
    MPI_Bcast(b, 5, MPI_DOUBLE, 1, c);
    expect("bcast", nb, 0, 5, "int32", "none", 20);
    MPI_Ibcast(b, 5, MPI_INT, 0, c, &q), wait(&q);
    /* Gather: this rank's contribution; at the root in place the receive side. */
    expect("gather", rank == 0 ? ip : "-", 0, 2, "float64", "none", 16);
    MPI_Gather(rank == 0 ? MPI_IN_PLACE : (void *)a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, 0, c);
    expect("gather", nb, 2, 3, "int32", "none", 12);
    MPI_Igather(a, 3, MPI_INT, b, 3, MPI_INT, 2, c, &q), wait(&q);
    /* Scatter: what this rank receives; at the root in place the send side. */
    expect("scatter", rank == 0 ? ip : "-", 0, 2, "float64", "none", 16);
    MPI_Scatter(b, 2, MPI_DOUBLE, rank == 0 ? MPI_IN_PLACE : (void *)a, 2, MPI_DOUBLE, 0, c);
    expect("scatter", nb, 1, 2, "float64", "none", 16);
    MPI_Iscatter(b, 2, MPI_DOUBLE, a, 2, MPI_DOUBLE, 1, c, &q), wait(&q);
    /* Gatherv, Scatterv: this rank's part; at the root in place the vector
     * names the types and no bytes move. */
    expect("gatherv", rank == 0 ? ip : "-", 0, rank == 0 ? v->total : v->cnt[rank], "float64", "none",
           rank == 0 ? 0 : 8L * v->cnt[rank]);
    MPI_Gatherv(rank == 0 ? MPI_IN_PLACE : (void *)a, v->cnt[rank], MPI_DOUBLE, b, v->cnt, v->dis, MPI_DOUBLE, 0, c);
    expect("gatherv", nb, 1, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Igatherv(a, v->cnt[rank], MPI_DOUBLE, b, v->cnt, v->dis, MPI_DOUBLE, 1, c, &q), wait(&q);
    expect("scatterv", rank == 0 ? ip : "-", 0, rank == 0 ? v->total : v->cnt[rank], "float64", "none",
           rank == 0 ? 0 : 8L * v->cnt[rank]);
    MPI_Scatterv(b, v->cnt, v->dis, MPI_DOUBLE, rank == 0 ? MPI_IN_PLACE : (void *)a, v->cnt[rank], MPI_DOUBLE, 0, c);
    expect("scatterv", nb, 2, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Iscatterv(b, v->cnt, v->dis, MPI_DOUBLE, a, v->cnt[rank], MPI_DOUBLE, 2, c, &q), wait(&q);
}

static void call_collective_others(MPI_Comm c, const struct vectors *v)
{
    MPI_Request q;
    /* Every member gets the same whole. */
    expect("allgather", "-", -1, 2, "float64", "none", 16);
    MPI_Allgather(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c);
    expect("allgather", ipnb, -1, 2, "float64", "none", 16);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_DOUBLE, c, &q), wait(&q);
    expect("allgatherv", "-", -1, v->total, "float64", "none", 8L * v->cnt[rank]);
    MPI_Allgatherv(a, v->cnt[rank], MPI_DOUBLE, b, v->cnt, v->dis, MPI_DOUBLE, c);
    expect("allgatherv", ipnb, -1, v->total, "float64", "none", 8L * v->cnt[rank]);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, v->cnt, v->dis, MPI_DOUBLE, c, &q), wait(&q);
    /* Alltoall: what goes to each peer; the bytes to all of them. */
    expect("alltoall", "-", -1, 2, "float64", "none", 16L * size);
    MPI_Alltoall(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c);
    expect("alltoall", ipnb, -1, 2, "float64", "none", 16L * size);
    MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_DOUBLE, c, &q), wait(&q);
    /* Alltoallv: what this rank receives; alltoallw: its bytes, as bytes. */
    expect("alltoallv", "-", -1, 2L * size, "float64", "none", 16L * size);
    MPI_Alltoallv(a, v->two, v->disp2, MPI_DOUBLE, b, v->two, v->disp2, MPI_DOUBLE, c);
    expect("alltoallv", nb, -1, 2L * size, "float64", "none", 16L * size);
    MPI_Ialltoallv(a, v->two, v->disp2, MPI_DOUBLE, b, v->two, v->disp2, MPI_DOUBLE, c, &q), wait(&q);
    expect("alltoallw", "-", -1, 16L * size, "byte", "none", 16L * size);
    MPI_Alltoallw(a, v->two, v->bdisp, v->dbl, b, v->two, v->bdisp, v->dbl, c);
    expect("alltoallw", nb, -1, 16L * size, "byte", "none", 16L * size);
    MPI_Ialltoallw(a, v->two, v->bdisp, v->dbl, b, v->two, v->bdisp, v->dbl, c, &q), wait(&q);
    expect("barrier", "-", -1, 0, "none", "none", 0);
    MPI_Barrier(c);
    expect("barrier", nb, -1, 0, "none", "none", 0);
    MPI_Ibarrier(c, &q), wait(&q);
}

static void call_point_to_point(MPI_Comm c)
{
    MPI_Request q;
    /* Point-to-point: the peer as root, this side's bytes. */
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    expect("sendrecv", "-", to, 3, "float64", "none", 24);
    MPI_Sendrecv(a, 3, MPI_DOUBLE, to, 1, b, 3, MPI_DOUBLE, from, 1, c, MPI_STATUS_IGNORE);
    if (rank == 0) {
        expect("send", "-", 1, 4, "int32", "none", 16);
        MPI_Send(a, 4, MPI_INT, 1, 2, c);
        expect("send", nb, 1, 5, "float64", "none", 40);
        MPI_Isend(a, 5, MPI_DOUBLE, 1, 3, c, &q), wait(&q);
    } else if (rank == 1) {
        expect("recv", "-", 0, 4, "int32", "none", 16);
        MPI_Recv(b, 4, MPI_INT, 0, 2, c, MPI_STATUS_IGNORE);
        expect("recv", nb, 0, 5, "float64", "none", 40);
        MPI_Irecv(b, 5, MPI_DOUBLE, 0, 3, c, &q), wait(&q);
    }
}

/* A communicator the rank made: how the trace must name it. */
static void made(const char *how, MPI_Comm c)
{
    int n = 0;
    if (c == MPI_COMM_NULL)
        return;
    MPI_Comm_size(c, &n);
    fprintf(comms, "%s %d\n", how, n);
}

/* The neighbourhood collectives on each kind of topology, all rings of the
 * world (neighbours left and right): each rank's own side (ccshim_kinds.h:
 * only the kind agrees, and counts differ from rank to rank here). */
static void call_neighbours(const struct vectors *v)
{
    MPI_Request q;
    MPI_Comm cart, graph, adj, dist;
    int dims[1] = {size}, periods[1] = {1}, index[MAXR], edges[2 * MAXR];
    int left = (rank + size - 1) % size, right = (rank + 1) % size, nb[2] = {left, right};
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + size - 1) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    made("comm_cart", cart);
    MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &graph);
    made("comm_graph", graph);
    int w[2] = {1, 1}; /* not MPI_UNWEIGHTED: a pointer constant GCC's array-bounds checks reject */
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, nb, w, 2, nb, w, MPI_INFO_NULL, 0, &adj);
    made("comm_dist_graph_adj", adj);
    int src[1] = {rank}, deg[1] = {2};
    MPI_Dist_graph_create(MPI_COMM_WORLD, 1, src, deg, nb, w, MPI_INFO_NULL, 0, &dist);
    made("comm_dist_graph", dist);
    /* Allgather: what goes to each neighbour; alltoall: the bytes to both. */
    expect("neighbor_allgather", "-", -1, 2, "float64", "none", 16);
    MPI_Neighbor_allgather(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart);
    expect("neighbor_allgather", nb_, -1, 2, "float64", "none", 16);
    MPI_Ineighbor_allgather(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, graph, &q), wait(&q);
    expect("neighbor_alltoall", "-", -1, 2, "float64", "none", 32);
    MPI_Neighbor_alltoall(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, adj);
    expect("neighbor_alltoall", nb_, -1, 3, "int32", "none", 24);
    MPI_Ineighbor_alltoall(a, 3, MPI_INT, b, 3, MPI_INT, dist, &q), wait(&q);
    /* Allgatherv: this rank's part (1 + rank: another on every rank). */
    int rc[2] = {v->cnt[left], v->cnt[right]}, rd[2] = {0, v->cnt[left]};
    expect("neighbor_allgatherv", "-", -1, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Neighbor_allgatherv(a, v->cnt[rank], MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart);
    expect("neighbor_allgatherv", nb_, -1, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Ineighbor_allgatherv(a, v->cnt[rank], MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, graph, &q), wait(&q);
    /* Alltoallv: what this rank receives from its two neighbours. */
    int sc[2] = {v->cnt[rank], v->cnt[rank]}, sd[2] = {0, 0};
    long in = v->cnt[left] + v->cnt[right];
    expect("neighbor_alltoallv", "-", -1, in, "float64", "none", 8L * in);
    MPI_Neighbor_alltoallv(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, adj);
    expect("neighbor_alltoallv", nb_, -1, in, "float64", "none", 8L * in);
    MPI_Ineighbor_alltoallv(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, &q), wait(&q);
    /* Alltoallw: the bytes this rank receives, as bytes. */
    MPI_Aint wd[2] = {0, 16};
    expect("neighbor_alltoallw", "-", -1, 32, "byte", "none", 32);
    MPI_Neighbor_alltoallw(a, v->two, wd, v->dbl, b, v->two, wd, v->dbl, dist);
    expect("neighbor_alltoallw", nb_, -1, 32, "byte", "none", 32);
    MPI_Ineighbor_alltoallw(a, v->two, wd, v->dbl, b, v->two, wd, v->dbl, graph, &q), wait(&q);
    MPI_Comm_free(&cart), MPI_Comm_free(&graph), MPI_Comm_free(&adj), MPI_Comm_free(&dist);
}

/* Every other constructor, each new communicator used once (a barrier:
 * its record is on the new communicator). */
static void call_constructors(void)
{
    MPI_Comm d, g = MPI_COMM_NULL, half, inter, merged;
    MPI_Group world, pair;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &d);
    made("comm_dup", d);
    expect("barrier", "-", -1, 0, "none", "none", 0);
    MPI_Barrier(d);
    /* Only the group's members call it: ranks 0 and 1. */
    int two[2] = {0, 1};
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 2, two, &pair);
    if (rank < 2) {
        MPI_Comm_create_group(MPI_COMM_WORLD, pair, 7, &g);
        made("comm_create_group", g);
        expect("barrier", "-", -1, 0, "none", "none", 0);
        MPI_Barrier(g);
    }
    /* Evens and odds, joined by an intercommunicator, then merged. */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    made("comm_split", half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 9, &inter);
    made("comm_intercomm", inter);
    MPI_Intercomm_merge(inter, rank % 2, &merged);
    made("comm_merge", merged);
    expect("barrier", "-", -1, 0, "none", "none", 0);
    MPI_Barrier(merged);
#ifdef HAVE_MPI_COMM_IDUP_WITH_INFO
    MPI_Comm id;
    MPI_Request q;
    MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &id, &q), wait(&q);
    made("comm_dup", id);
    expect("barrier", "-", -1, 0, "none", "none", 0);
    MPI_Barrier(id);
    MPI_Comm_free(&id);
#endif
#ifdef HAVE_MPI_COMM_FROM_GROUP
    MPI_Comm fg, fi;
    MPI_Group hg, other;
    MPI_Comm_create_from_group(world, "org.ccshim.every-call", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
    made("comm_from_group", fg);
    expect("barrier", "-", -1, 0, "none", "none", 0);
    MPI_Barrier(fg);
    MPI_Comm_group(half, &hg);
    MPI_Comm_remote_group(inter, &other);
    MPI_Intercomm_create_from_groups(hg, 0, other, 0, "org.ccshim.every-call.inter", MPI_INFO_NULL,
                                     MPI_ERRORS_RETURN, &fi);
    made("comm_from_group", fi);
    expect("barrier", "-", -1, 0, "none", "none", 0);
    MPI_Barrier(fi);
    MPI_Group_free(&hg), MPI_Group_free(&other);
    MPI_Comm_free(&fg), MPI_Comm_free(&fi);
#endif
    MPI_Group_free(&pair), MPI_Group_free(&world);
    if (g != MPI_COMM_NULL)
        MPI_Comm_free(&g);
    MPI_Comm_free(&merged), MPI_Comm_free(&inter), MPI_Comm_free(&half), MPI_Comm_free(&d);
}

#ifdef HAVE_MPI_PERSISTENT_COLL
/* Starts Q N times (the second start through MPI_Startall), completing
 * each, then frees it: one record a start. */
static void starts(MPI_Request *q, int n)
{
    for (int i = 0; i < n; i++) {
        if (i % 2)
            MPI_Startall(1, q);
        else
            MPI_Start(q);
        wait(q);
    }
    MPI_Request_free(q);
}

/* Each persistent collective: the record of its nonblocking twin at its
 * init (on the collective sequence) and at each of its N starts (off it);
 * the same for the _c inits. */
#define PSTART(n, kind, flags, root, count, dtype, op, bytes)                                                      \
    for (int i_ = 0; i_ <= (n); i_++)                                                                              \
    expect(kind, flags, root, count, dtype, op, bytes)
static void call_persistent(const struct vectors *v)
{
    MPI_Request q, qs[2];
    MPI_Comm c = MPI_COMM_WORLD;
    PSTART(2, "allreduce", ipnb, -1, 3, "float64", "max", 24);
    MPI_Allreduce_init(MPI_IN_PLACE, b, 3, MPI_DOUBLE, MPI_MAX, c, MPI_INFO_NULL, &q), starts(&q, 2);
    PSTART(1, "reduce", nb, 1, 4, "float32", "min", 16);
    MPI_Reduce_init(a, b, 4, MPI_FLOAT, MPI_MIN, 1, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "reduce_scatter", nb, -1, v->total, "float64", "sum", 8L * v->total);
    MPI_Reduce_scatter_init(a, b, v->cnt, MPI_DOUBLE, MPI_SUM, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "reduce_scatter_block", nb, -1, 2, "int32", "prod", 8);
    MPI_Reduce_scatter_block_init(a, b, 2, MPI_INT, MPI_PROD, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "scan", nb, -1, 5, "int64", "max", 40);
    MPI_Scan_init(a, b, 5, MPI_INT64_T, MPI_MAX, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "exscan", nb, -1, 2, "float64", "sum", 16);
    MPI_Exscan_init(a, b, 2, MPI_DOUBLE, MPI_SUM, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(2, "bcast", nb, 0, 5, "int32", "none", 20);
    MPI_Bcast_init(b, 5, MPI_INT, 0, c, MPI_INFO_NULL, &q), starts(&q, 2);
    PSTART(1, "allgather", ipnb, -1, 2, "float64", "none", 16);
    MPI_Allgather_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_DOUBLE, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "alltoall", nb, -1, 2, "float64", "none", 16L * size);
    MPI_Alltoall_init(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "gather", nb, 2, 3, "int32", "none", 12);
    MPI_Gather_init(a, 3, MPI_INT, b, 3, MPI_INT, 2, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "scatter", nb, 1, 2, "float64", "none", 16);
    MPI_Scatter_init(b, 2, MPI_DOUBLE, a, 2, MPI_DOUBLE, 1, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "allgatherv", nb, -1, v->total, "float64", "none", 8L * v->cnt[rank]);
    MPI_Allgatherv_init(a, v->cnt[rank], MPI_DOUBLE, b, v->cnt, v->dis, MPI_DOUBLE, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "gatherv", nb, 1, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Gatherv_init(a, v->cnt[rank], MPI_DOUBLE, b, v->cnt, v->dis, MPI_DOUBLE, 1, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "scatterv", nb, 2, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Scatterv_init(b, v->cnt, v->dis, MPI_DOUBLE, a, v->cnt[rank], MPI_DOUBLE, 2, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "alltoallv", nb, -1, 2L * size, "float64", "none", 16L * size);
    MPI_Alltoallv_init(a, v->two, v->disp2, MPI_DOUBLE, b, v->two, v->disp2, MPI_DOUBLE, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "alltoallw", nb, -1, 16L * size, "byte", "none", 16L * size);
    MPI_Alltoallw_init(a, v->two, v->bdisp, v->dbl, b, v->two, v->bdisp, v->dbl, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(2, "barrier", nb, -1, 0, "none", "none", 0);
    MPI_Barrier_init(c, MPI_INFO_NULL, &q), starts(&q, 2);
    /* MPI_Startall of two: recorded in array order (the barrier, then the
     * broadcast), whatever order they were made in. */
    expect("bcast", nb, 2, 1, "float64", "none", 8);
    MPI_Bcast_init(b, 1, MPI_DOUBLE, 2, c, MPI_INFO_NULL, &qs[1]);
    expect("barrier", nb, -1, 0, "none", "none", 0);
    MPI_Barrier_init(c, MPI_INFO_NULL, &qs[0]);
    expect("barrier", nb, -1, 0, "none", "none", 0);
    expect("bcast", nb, 2, 1, "float64", "none", 8);
    MPI_Startall(2, qs);
    wait(&qs[0]), wait(&qs[1]);
    MPI_Request_free(&qs[0]), MPI_Request_free(&qs[1]);
}

/* The neighbourhood inits on a Cartesian ring. */
static void call_persistent_neighbours(const struct vectors *v)
{
    MPI_Request q;
    MPI_Comm cart;
    int dims[1] = {size}, periods[1] = {1}, left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    made("comm_cart", cart);
    int rc[2] = {v->cnt[left], v->cnt[right]}, rd[2] = {0, v->cnt[left]}, sc[2] = {v->cnt[rank], v->cnt[rank]},
        sd[2] = {0, 0};
    long in = v->cnt[left] + v->cnt[right];
    MPI_Aint wd[2] = {0, 16};
    PSTART(2, "neighbor_allgather", nb, -1, 2, "float64", "none", 16);
    MPI_Neighbor_allgather_init(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart, MPI_INFO_NULL, &q), starts(&q, 2);
    PSTART(1, "neighbor_alltoall", nb, -1, 2, "float64", "none", 32);
    MPI_Neighbor_alltoall_init(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "neighbor_allgatherv", nb, -1, v->cnt[rank], "float64", "none", 8L * v->cnt[rank]);
    MPI_Neighbor_allgatherv_init(a, v->cnt[rank], MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "neighbor_alltoallv", nb, -1, in, "float64", "none", 8L * in);
    MPI_Neighbor_alltoallv_init(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "neighbor_alltoallw", nb, -1, 32, "byte", "none", 32);
    MPI_Neighbor_alltoallw_init(a, v->two, wd, v->dbl, b, v->two, wd, v->dbl, cart, MPI_INFO_NULL, &q),
        starts(&q, 1);
    MPI_Comm_free(&cart);
}
#endif

#ifdef HAVE_MPI_LARGE_COUNT
/* The per-member vectors as MPI_Count and MPI_Aint. */
struct cvectors {
    MPI_Count cnt[MAXR], two[MAXR], total;
    MPI_Aint dis[MAXR], disp2[MAXR], bdisp[MAXR];
};

/* Every _c variant, blocking, nonblocking and (MPI-4 persistent) init: the
 * records of their int twins. */
static void call_large_count(const struct vectors *iv)
{
    struct cvectors v = {.total = iv->total};
    MPI_Request q;
    MPI_Comm c = MPI_COMM_WORLD, cart;
    for (int i = 0; i < size; i++) {
        v.cnt[i] = iv->cnt[i], v.two[i] = iv->two[i];
        v.dis[i] = iv->dis[i], v.disp2[i] = iv->disp2[i], v.bdisp[i] = iv->bdisp[i];
    }
    int dims[1] = {size}, periods[1] = {1}, left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Cart_create(c, 1, dims, periods, 0, &cart);
    made("comm_cart", cart);
    MPI_Count rc[2] = {v.cnt[left], v.cnt[right]}, sc[2] = {v.cnt[rank], v.cnt[rank]};
    MPI_Aint rd[2] = {0, v.cnt[left]}, sd[2] = {0, 0}, wd[2] = {0, 16};
    long in = v.cnt[left] + v.cnt[right];
    expect("allreduce", "-", -1, 3, "float64", "sum", 24);
    MPI_Allreduce_c(a, b, 3, MPI_DOUBLE, MPI_SUM, c);
    expect("allreduce", ipnb, -1, 3, "float64", "max", 24);
    MPI_Iallreduce_c(MPI_IN_PLACE, b, 3, MPI_DOUBLE, MPI_MAX, c, &q), wait(&q);
    expect("reduce", rank == 0 ? ip : "-", 0, 4, "int32", "sum", 16);
    MPI_Reduce_c(rank == 0 ? MPI_IN_PLACE : (void *)a, b, 4, MPI_INT, MPI_SUM, 0, c);
    expect("reduce", nb, 1, 4, "float32", "min", 16);
    MPI_Ireduce_c(a, b, 4, MPI_FLOAT, MPI_MIN, 1, c, &q), wait(&q);
    expect("reduce_scatter", "-", -1, v.total, "float64", "sum", 8L * v.total);
    MPI_Reduce_scatter_c(a, b, v.cnt, MPI_DOUBLE, MPI_SUM, c);
    expect("reduce_scatter", ipnb, -1, v.total, "float64", "sum", 8L * v.total);
    MPI_Ireduce_scatter_c(MPI_IN_PLACE, b, v.cnt, MPI_DOUBLE, MPI_SUM, c, &q), wait(&q);
    expect("reduce_scatter_block", "-", -1, 2, "float64", "sum", 16);
    MPI_Reduce_scatter_block_c(a, b, 2, MPI_DOUBLE, MPI_SUM, c);
    expect("reduce_scatter_block", nb, -1, 2, "int32", "prod", 8);
    MPI_Ireduce_scatter_block_c(a, b, 2, MPI_INT, MPI_PROD, c, &q), wait(&q);
    expect("scan", ip, -1, 2, "float64", "sum", 16);
    MPI_Scan_c(MPI_IN_PLACE, b, 2, MPI_DOUBLE, MPI_SUM, c);
    expect("scan", nb, -1, 5, "int64", "max", 40);
    MPI_Iscan_c(a, b, 5, MPI_INT64_T, MPI_MAX, c, &q), wait(&q);
    expect("exscan", "-", -1, 2, "float64", "sum", 16);
    MPI_Exscan_c(a, b, 2, MPI_DOUBLE, MPI_SUM, c);
    expect("exscan", nb, -1, 2, "float64", "sum", 16);
    MPI_Iexscan_c(a, b, 2, MPI_DOUBLE, MPI_SUM, c, &q), wait(&q);
    expect("bcast", "-", 1, 5, "float64", "none", 40);
    MPI_Bcast_c(b, 5, MPI_DOUBLE, 1, c);
    expect("bcast", nb, 0, 5, "int32", "none", 20);
    MPI_Ibcast_c(b, 5, MPI_INT, 0, c, &q), wait(&q);
    expect("gather", rank == 0 ? ip : "-", 0, 2, "float64", "none", 16);
    MPI_Gather_c(rank == 0 ? MPI_IN_PLACE : (void *)a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, 0, c);
    expect("gather", nb, 2, 3, "int32", "none", 12);
    MPI_Igather_c(a, 3, MPI_INT, b, 3, MPI_INT, 2, c, &q), wait(&q);
    expect("scatter", rank == 0 ? ip : "-", 0, 2, "float64", "none", 16);
    MPI_Scatter_c(b, 2, MPI_DOUBLE, rank == 0 ? MPI_IN_PLACE : (void *)a, 2, MPI_DOUBLE, 0, c);
    expect("scatter", nb, 1, 2, "float64", "none", 16);
    MPI_Iscatter_c(b, 2, MPI_DOUBLE, a, 2, MPI_DOUBLE, 1, c, &q), wait(&q);
    expect("gatherv", rank == 0 ? ip : "-", 0, rank == 0 ? v.total : v.cnt[rank], "float64", "none",
           rank == 0 ? 0 : 8L * v.cnt[rank]);
    MPI_Gatherv_c(rank == 0 ? MPI_IN_PLACE : (void *)a, v.cnt[rank], MPI_DOUBLE, b, v.cnt, v.dis, MPI_DOUBLE, 0, c);
    expect("gatherv", nb, 1, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Igatherv_c(a, v.cnt[rank], MPI_DOUBLE, b, v.cnt, v.dis, MPI_DOUBLE, 1, c, &q), wait(&q);
    expect("scatterv", rank == 0 ? ip : "-", 0, rank == 0 ? v.total : v.cnt[rank], "float64", "none",
           rank == 0 ? 0 : 8L * v.cnt[rank]);
    MPI_Scatterv_c(b, v.cnt, v.dis, MPI_DOUBLE, rank == 0 ? MPI_IN_PLACE : (void *)a, v.cnt[rank], MPI_DOUBLE, 0,
                   c);
    expect("scatterv", nb, 2, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Iscatterv_c(b, v.cnt, v.dis, MPI_DOUBLE, a, v.cnt[rank], MPI_DOUBLE, 2, c, &q), wait(&q);
    expect("allgather", "-", -1, 2, "float64", "none", 16);
    MPI_Allgather_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c);
    expect("allgather", ipnb, -1, 2, "float64", "none", 16);
    MPI_Iallgather_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_DOUBLE, c, &q), wait(&q);
    expect("allgatherv", "-", -1, v.total, "float64", "none", 8L * v.cnt[rank]);
    MPI_Allgatherv_c(a, v.cnt[rank], MPI_DOUBLE, b, v.cnt, v.dis, MPI_DOUBLE, c);
    expect("allgatherv", ipnb, -1, v.total, "float64", "none", 8L * v.cnt[rank]);
    MPI_Iallgatherv_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, v.cnt, v.dis, MPI_DOUBLE, c, &q), wait(&q);
    expect("alltoall", "-", -1, 2, "float64", "none", 16L * size);
    MPI_Alltoall_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c);
    expect("alltoall", ipnb, -1, 2, "float64", "none", 16L * size);
    MPI_Ialltoall_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_DOUBLE, c, &q), wait(&q);
    expect("alltoallv", "-", -1, 2L * size, "float64", "none", 16L * size);
    MPI_Alltoallv_c(a, v.two, v.disp2, MPI_DOUBLE, b, v.two, v.disp2, MPI_DOUBLE, c);
    expect("alltoallv", nb, -1, 2L * size, "float64", "none", 16L * size);
    MPI_Ialltoallv_c(a, v.two, v.disp2, MPI_DOUBLE, b, v.two, v.disp2, MPI_DOUBLE, c, &q), wait(&q);
    expect("alltoallw", "-", -1, 16L * size, "byte", "none", 16L * size);
    MPI_Alltoallw_c(a, v.two, v.bdisp, iv->dbl, b, v.two, v.bdisp, iv->dbl, c);
    expect("alltoallw", nb, -1, 16L * size, "byte", "none", 16L * size);
    MPI_Ialltoallw_c(a, v.two, v.bdisp, iv->dbl, b, v.two, v.bdisp, iv->dbl, c, &q), wait(&q);
    expect("neighbor_allgather", "-", -1, 2, "float64", "none", 16);
    MPI_Neighbor_allgather_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart);
    expect("neighbor_allgather", nb, -1, 2, "float64", "none", 16);
    MPI_Ineighbor_allgather_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart, &q), wait(&q);
    expect("neighbor_alltoall", "-", -1, 2, "float64", "none", 32);
    MPI_Neighbor_alltoall_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart);
    expect("neighbor_alltoall", nb, -1, 2, "float64", "none", 32);
    MPI_Ineighbor_alltoall_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart, &q), wait(&q);
    expect("neighbor_allgatherv", "-", -1, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Neighbor_allgatherv_c(a, v.cnt[rank], MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart);
    expect("neighbor_allgatherv", nb, -1, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Ineighbor_allgatherv_c(a, v.cnt[rank], MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, &q), wait(&q);
    expect("neighbor_alltoallv", "-", -1, in, "float64", "none", 8L * in);
    MPI_Neighbor_alltoallv_c(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart);
    expect("neighbor_alltoallv", nb, -1, in, "float64", "none", 8L * in);
    MPI_Ineighbor_alltoallv_c(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, &q), wait(&q);
    expect("neighbor_alltoallw", "-", -1, 32, "byte", "none", 32);
    MPI_Neighbor_alltoallw_c(a, v.two, wd, iv->dbl, b, v.two, wd, iv->dbl, cart);
    expect("neighbor_alltoallw", nb, -1, 32, "byte", "none", 32);
    MPI_Ineighbor_alltoallw_c(a, v.two, wd, iv->dbl, b, v.two, wd, iv->dbl, cart, &q), wait(&q);
#ifdef HAVE_MPI_PERSISTENT_COLL
    PSTART(1, "allreduce", nb, -1, 3, "float64", "sum", 24);
    MPI_Allreduce_init_c(a, b, 3, MPI_DOUBLE, MPI_SUM, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "reduce", nb, 1, 4, "float32", "min", 16);
    MPI_Reduce_init_c(a, b, 4, MPI_FLOAT, MPI_MIN, 1, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "reduce_scatter", nb, -1, v.total, "float64", "sum", 8L * v.total);
    MPI_Reduce_scatter_init_c(a, b, v.cnt, MPI_DOUBLE, MPI_SUM, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "reduce_scatter_block", nb, -1, 2, "int32", "prod", 8);
    MPI_Reduce_scatter_block_init_c(a, b, 2, MPI_INT, MPI_PROD, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "scan", nb, -1, 5, "int64", "max", 40);
    MPI_Scan_init_c(a, b, 5, MPI_INT64_T, MPI_MAX, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "exscan", nb, -1, 2, "float64", "sum", 16);
    MPI_Exscan_init_c(a, b, 2, MPI_DOUBLE, MPI_SUM, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "bcast", nb, 0, 5, "int32", "none", 20);
    MPI_Bcast_init_c(b, 5, MPI_INT, 0, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "allgather", nb, -1, 2, "float64", "none", 16);
    MPI_Allgather_init_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "alltoall", nb, -1, 2, "float64", "none", 16L * size);
    MPI_Alltoall_init_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "gather", nb, 2, 3, "int32", "none", 12);
    MPI_Gather_init_c(a, 3, MPI_INT, b, 3, MPI_INT, 2, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "scatter", nb, 1, 2, "float64", "none", 16);
    MPI_Scatter_init_c(b, 2, MPI_DOUBLE, a, 2, MPI_DOUBLE, 1, c, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "allgatherv", nb, -1, v.total, "float64", "none", 8L * v.cnt[rank]);
    MPI_Allgatherv_init_c(a, v.cnt[rank], MPI_DOUBLE, b, v.cnt, v.dis, MPI_DOUBLE, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "gatherv", nb, 1, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Gatherv_init_c(a, v.cnt[rank], MPI_DOUBLE, b, v.cnt, v.dis, MPI_DOUBLE, 1, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "scatterv", nb, 2, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Scatterv_init_c(b, v.cnt, v.dis, MPI_DOUBLE, a, v.cnt[rank], MPI_DOUBLE, 2, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "alltoallv", nb, -1, 2L * size, "float64", "none", 16L * size);
    MPI_Alltoallv_init_c(a, v.two, v.disp2, MPI_DOUBLE, b, v.two, v.disp2, MPI_DOUBLE, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "alltoallw", nb, -1, 16L * size, "byte", "none", 16L * size);
    MPI_Alltoallw_init_c(a, v.two, v.bdisp, iv->dbl, b, v.two, v.bdisp, iv->dbl, c, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "neighbor_allgather", nb, -1, 2, "float64", "none", 16);
    MPI_Neighbor_allgather_init_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "neighbor_alltoall", nb, -1, 2, "float64", "none", 32);
    MPI_Neighbor_alltoall_init_c(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, cart, MPI_INFO_NULL, &q), starts(&q, 1);
    PSTART(1, "neighbor_allgatherv", nb, -1, v.cnt[rank], "float64", "none", 8L * v.cnt[rank]);
    MPI_Neighbor_allgatherv_init_c(a, v.cnt[rank], MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "neighbor_alltoallv", nb, -1, in, "float64", "none", 8L * in);
    MPI_Neighbor_alltoallv_init_c(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, cart, MPI_INFO_NULL, &q),
        starts(&q, 1);
    PSTART(1, "neighbor_alltoallw", nb, -1, 32, "byte", "none", 32);
    MPI_Neighbor_alltoallw_init_c(a, v.two, wd, iv->dbl, b, v.two, wd, iv->dbl, cart, MPI_INFO_NULL, &q),
        starts(&q, 1);
#endif
    MPI_Comm_free(&cart);
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2 || size < 3 || size > MAXR) {
        fprintf(stderr, "usage: mpi_every_call DIR, on 3 to %d ranks\n", MAXR);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/expect.%d", argv[1], rank);
    if (!(out = fopen(path, "w"))) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(path, sizeof path, "%s/comms.%d", argv[1], rank);
    if (!(comms = fopen(path, "w"))) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fprintf(comms, "comm_init %d\ncomm_init 1\n", size); /* MPI_COMM_WORLD, MPI_COMM_SELF */
    struct vectors v;
    make_vectors(&v);
    call_reductions(MPI_COMM_WORLD, &v);
    call_rooted(MPI_COMM_WORLD, &v);
    call_collective_others(MPI_COMM_WORLD, &v);
    call_point_to_point(MPI_COMM_WORLD);
    call_neighbours(&v);
    call_constructors();
#ifdef HAVE_MPI_PERSISTENT_COLL
    call_persistent(&v);
    call_persistent_neighbours(&v);
#endif
#ifdef HAVE_MPI_LARGE_COUNT
    call_large_count(&v);
#endif
    fclose(comms);
    fclose(out);
    MPI_Finalize();
    return 0;
}
