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
 * compares these lines with the rank's trace, record by record.
 * usage: mpi_every_call DIR
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXR 16
static int rank, size;
static FILE *out;
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
    struct vectors v;
    make_vectors(&v);
    call_reductions(MPI_COMM_WORLD, &v);
    call_rooted(MPI_COMM_WORLD, &v);
    call_collective_others(MPI_COMM_WORLD, &v);
    call_point_to_point(MPI_COMM_WORLD);
    fclose(out);
    MPI_Finalize();
    return 0;
}
