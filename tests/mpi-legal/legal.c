/*
 * legal.c - a corpus of correct MPI programs, written from the standard's
 * matching rules (MPI 4.0, chapter 6: type signatures, not (count,
 * datatype), must match; MPI_IN_PLACE and non-root receive arguments are
 * ignored; zero-size contributions match anything), for
 * tests/mpi-legal/mpi-legal.sh: under CCSHIM_ON_DESYNC=abort ccshim must
 * report nothing and change no result.
 *
 *   legal [CASE,...]   runs every case, or only those listed
 *
 * Each rank prints one line per case, "CASE rank R: CHECKSUM" of what it
 * received, so a run under ccshim can be compared with a plain run.  Works
 * on 2 or more ranks.
 */
#include "../mpi_check.h"
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static const char *only;

#define CHECK(call) CHECK_AS(rank, call)

static uint64_t sum_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static void report(const char *name, const void *buf, size_t n)
{
    printf("%s rank %d: %016llx\n", name, rank, (unsigned long long)sum_bytes(buf, n));
}

/* ONLY: a comma-separated list of cases. */
static int want(const char *name)
{
    if (!only)
        return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

/* Derived against basic: 1 x contiguous(4, int) at some ranks, 4 x int at others. */
static void c_bcast_derived(void)
{
    MPI_Datatype c4, v;
    int buf[8] = {0};
    CHECK(MPI_Type_contiguous(4, MPI_INT, &c4));
    CHECK(MPI_Type_commit(&c4));
    CHECK(MPI_Type_vector(2, 2, 3, MPI_INT, &v)); /* 4 ints, strided */
    CHECK(MPI_Type_commit(&v));
    if (rank == 0)
        for (int i = 0; i < 8; i++)
            buf[i] = 10 + i;
    if (rank == 0)
        CHECK(MPI_Bcast(buf, 1, c4, 0, MPI_COMM_WORLD));
    else if (rank % 2)
        CHECK(MPI_Bcast(buf, 4, MPI_INT, 0, MPI_COMM_WORLD));
    else
        CHECK(MPI_Bcast(buf, 1, v, 0, MPI_COMM_WORLD));
    /* Nonblocking, roles swapped. */
    MPI_Request q;
    int b2[4] = {rank, rank, rank, rank};
    int root = size - 1;
    if (rank == root)
        CHECK(MPI_Ibcast(b2, 4, MPI_INT, root, MPI_COMM_WORLD, &q));
    else
        CHECK(MPI_Ibcast(b2, 1, c4, root, MPI_COMM_WORLD, &q));
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    report("bcast_derived", buf, sizeof buf);
    report("ibcast_derived", b2, sizeof b2);
    MPI_Type_free(&c4);
    MPI_Type_free(&v);
}

/* Heterogeneous signatures: struct {int, double} x 2 against a struct of
 * {int, double, int, double} x 1 and contiguous(2, struct) x 1. */
static void c_bcast_struct(void)
{
    struct pair {
        int i;
        double d;
    } p[2] = {{0, 0}, {0, 0}};
    int bl[4] = {1, 1, 1, 1};
    MPI_Aint off[4] = {offsetof(struct pair, i), offsetof(struct pair, d), sizeof(struct pair) + offsetof(struct pair, i),
                       sizeof(struct pair) + offsetof(struct pair, d)};
    MPI_Datatype ty[4] = {MPI_INT, MPI_DOUBLE, MPI_INT, MPI_DOUBLE}, s1, s2, c2;
    CHECK(MPI_Type_create_struct(2, bl, off, ty, &s1));
    CHECK(MPI_Type_commit(&s1));
    CHECK(MPI_Type_create_struct(4, bl, off, ty, &s2));
    CHECK(MPI_Type_commit(&s2));
    MPI_Datatype s1r;
    CHECK(MPI_Type_create_resized(s1, 0, sizeof(struct pair), &s1r));
    CHECK(MPI_Type_commit(&s1r));
    CHECK(MPI_Type_contiguous(2, s1r, &c2));
    CHECK(MPI_Type_commit(&c2));
    if (rank == 0) {
        p[0] = (struct pair){7, 1.5};
        p[1] = (struct pair){9, -2.25};
    }
    if (rank == 0)
        CHECK(MPI_Bcast(p, 2, s1r, 0, MPI_COMM_WORLD));
    else if (rank % 2)
        CHECK(MPI_Bcast(p, 1, s2, 0, MPI_COMM_WORLD));
    else
        CHECK(MPI_Bcast(p, 1, c2, 0, MPI_COMM_WORLD));
    double d[4] = {p[0].i, p[0].d, p[1].i, p[1].d};
    report("bcast_struct", d, sizeof d);
    MPI_Type_free(&s1);
    MPI_Type_free(&s2);
    MPI_Type_free(&s1r);
    MPI_Type_free(&c2);
}

/* A type freed and another made (often at the same handle), used against
 * basic types: a stale cached signature would be a false verdict. */
static void c_type_reuse(void)
{
    for (int round = 0; round < 6; round++) {
        MPI_Datatype t;
        double buf[4] = {0};
        int n = round % 2 ? 2 : 4;
        if (round % 2)
            CHECK(MPI_Type_contiguous(2, MPI_DOUBLE, &t)); /* 2 doubles */
        else
            CHECK(MPI_Type_contiguous(4, MPI_FLOAT, &t)); /* 4 floats */
        CHECK(MPI_Type_commit(&t));
        if (rank == 0)
            for (int i = 0; i < 4; i++)
                buf[i] = round * 10 + i;
        if (rank == 0)
            CHECK(MPI_Bcast(buf, 1, t, 0, MPI_COMM_WORLD));
        else
            CHECK(MPI_Bcast(buf, n, round % 2 ? MPI_DOUBLE : MPI_FLOAT, 0, MPI_COMM_WORLD));
        MPI_Type_free(&t);
        if (round == 5)
            report("type_reuse", buf, sizeof buf);
    }
}

/* Zero counts: empty signatures match whatever the datatype. */
static void c_zero(void)
{
    int x = rank;
    CHECK(MPI_Bcast(&x, 0, rank == 0 ? MPI_INT : MPI_DOUBLE, 0, MPI_COMM_WORLD));
    MPI_Datatype z;
    CHECK(MPI_Type_contiguous(0, MPI_INT, &z));
    CHECK(MPI_Type_commit(&z));
    /* (Open MPI 4.1 leaves a message unmatched when some ranks pass count
     * 0 and others a zero-size type with count > 0: every count > 0 here.) */
    CHECK(MPI_Bcast(&x, rank == 0 ? 3 : 2, z, 0, MPI_COMM_WORLD));
    int in[2] = {rank, 1}, out[2] = {0, 0};
    CHECK(MPI_Allreduce(in, out, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(MPI_Allgather(in, 0, MPI_INT, out, 0, MPI_INT, MPI_COMM_WORLD));
    CHECK(MPI_Alltoall(in, 0, rank % 2 ? MPI_INT : z, out, 0, MPI_DOUBLE, MPI_COMM_WORLD));
    MPI_Type_free(&z);
    report("zero", &x, sizeof x);
}

/* Gather: non-roots send 2 ints, the root receives 1 x contiguous(2, int),
 * once in place (its send arguments are then ignored: garbage here). */
static void c_gather(void)
{
    MPI_Datatype c2;
    CHECK(MPI_Type_contiguous(2, MPI_INT, &c2));
    CHECK(MPI_Type_commit(&c2));
    int mine[2] = {rank * 3, rank * 3 + 1};
    int *all = calloc((size_t)size * 2, sizeof *all);
    if (rank == 0)
        CHECK(MPI_Gather(mine, 1, c2, all, 1, c2, 0, MPI_COMM_WORLD));
    else
        CHECK(MPI_Gather(mine, 2, MPI_INT, NULL, -7, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
    if (rank == 0)
        report("gather", all, (size_t)size * 2 * sizeof *all);
    memset(all, 0, (size_t)size * 2 * sizeof *all);
    int root = size - 1;
    if (rank == root) {
        all[2 * root] = 100;
        all[2 * root + 1] = 101;
        CHECK(MPI_Gather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, 2, MPI_INT, root, MPI_COMM_WORLD));
    } else {
        CHECK(MPI_Gather(mine, 1, c2, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
    }
    MPI_Request q;
    int *all2 = calloc((size_t)size * 2, sizeof *all2);
    if (rank == 0) {
        all2[0] = 5;
        all2[1] = 6;
        CHECK(MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all2, 1, c2, 0, MPI_COMM_WORLD, &q));
    } else {
        CHECK(MPI_Igather(mine, 2, MPI_INT, NULL, 0, MPI_INT, 0, MPI_COMM_WORLD, &q));
    }
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (rank == root)
        report("gather_in_place", all, (size_t)size * 2 * sizeof *all);
    if (rank == 0)
        report("igather_in_place", all2, (size_t)size * 2 * sizeof *all2);
    free(all);
    free(all2);
    MPI_Type_free(&c2);
}

/* Gatherv / Igatherv with MPI_IN_PLACE at the root (send count -1, no
 * datatype: ignored), per-rank counts including zero with another type. */
static void c_gatherv(void)
{
    int *rc = calloc((size_t)size, sizeof *rc), *dis = calloc((size_t)size, sizeof *dis), tot = 0;
    for (int i = 0; i < size; i++) {
        rc[i] = i % 3; /* 0, 1, 2, 0, 1 */
        dis[i] = tot;
        tot += rc[i];
    }
    double *all = calloc((size_t)tot + 1, sizeof *all), mine[2] = {rank + 0.5, rank + 0.25};
    MPI_Request q;
    if (rank == 0) {
        CHECK(MPI_Igatherv(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, all, rc, dis, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q));
    } else if (rc[rank] == 0) {
        CHECK(MPI_Igatherv(mine, 0, MPI_INT, NULL, NULL, NULL, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD, &q));
    } else {
        CHECK(MPI_Igatherv(mine, rc[rank], MPI_DOUBLE, NULL, NULL, NULL, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD,
                           &q));
    }
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (rank == 0)
        report("igatherv_in_place", all, (size_t)tot * sizeof *all);
    /* Blocking, root not in place; the root's own part as 1 x contiguous. */
    MPI_Datatype c2;
    CHECK(MPI_Type_contiguous(2, MPI_DOUBLE, &c2));
    CHECK(MPI_Type_commit(&c2));
    memset(all, 0, ((size_t)tot + 1) * sizeof *all);
    int root = size - 1;
    if (rank == root)
        CHECK(MPI_Gatherv(mine, rc[rank] == 2 ? 1 : rc[rank], rc[rank] == 2 ? c2 : MPI_DOUBLE, all, rc, dis,
                          MPI_DOUBLE, root, MPI_COMM_WORLD));
    else
        CHECK(MPI_Gatherv(mine, rc[rank], MPI_DOUBLE, NULL, NULL, NULL, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        report("gatherv", all, (size_t)tot * sizeof *all);
    MPI_Type_free(&c2);
    free(all), free(rc), free(dis);
}

/* Scatter / scatterv with MPI_IN_PLACE as the root's receive buffer. */
static void c_scatter(void)
{
    int *src = calloc((size_t)size * 3, sizeof *src), got[3] = {-1, -1, -1};
    for (int i = 0; i < size * 3; i++)
        src[i] = 1000 + i;
    MPI_Datatype c3;
    CHECK(MPI_Type_contiguous(3, MPI_INT, &c3));
    CHECK(MPI_Type_commit(&c3));
    if (rank == 0)
        CHECK(MPI_Scatter(src, 1, c3, MPI_IN_PLACE, -3, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
    else
        CHECK(MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, got, 3, MPI_INT, 0, MPI_COMM_WORLD));
    report("scatter_in_place", rank ? (void *)got : (void *)src, sizeof got);
    int *sc = calloc((size_t)size, sizeof *sc), *dis = calloc((size_t)size, sizeof *dis);
    for (int i = 0, t = 0; i < size; i++) {
        sc[i] = (i + 1) % 3;
        dis[i] = t;
        t += sc[i];
    }
    int root = size - 1;
    memset(got, 0, sizeof got);
    MPI_Request q;
    if (rank == root)
        CHECK(MPI_Iscatterv(src, sc, dis, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD, &q));
    else
        CHECK(MPI_Iscatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, got, sc[rank], sc[rank] ? MPI_INT : MPI_BYTE, root,
                            MPI_COMM_WORLD, &q));
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    report("iscatterv_in_place", got, sizeof got);
    MPI_Type_free(&c3);
    free(src), free(sc), free(dis);
}

/* Allgather and allgatherv, derived against basic, in place, zero counts. */
static void c_allgather(void)
{
    MPI_Datatype c2;
    CHECK(MPI_Type_contiguous(2, MPI_FLOAT, &c2));
    CHECK(MPI_Type_commit(&c2));
    float mine[2] = {rank + 0.5f, rank * 2.0f}, *all = calloc((size_t)size * 2, sizeof *all);
    if (rank % 2)
        CHECK(MPI_Allgather(mine, 1, c2, all, 2, MPI_FLOAT, MPI_COMM_WORLD));
    else
        CHECK(MPI_Allgather(mine, 2, MPI_FLOAT, all, 1, c2, MPI_COMM_WORLD));
    report("allgather_derived", all, (size_t)size * 2 * sizeof *all);
    for (int i = 0; i < size; i++)
        all[2 * i] = all[2 * i + 1] = i == rank ? (float)rank * 3 : -1;
    CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, rank % 2 ? 1 : 2, rank % 2 ? c2 : MPI_FLOAT,
                        MPI_COMM_WORLD));
    report("allgather_in_place", all, (size_t)size * 2 * sizeof *all);
    int *rc = calloc((size_t)size, sizeof *rc), *dis = calloc((size_t)size, sizeof *dis), tot = 0;
    for (int i = 0; i < size; i++) {
        rc[i] = i % 2 ? 0 : 2;
        dis[i] = tot;
        tot += rc[i];
    }
    float *v = calloc((size_t)tot + 1, sizeof *v);
    if (rc[rank])
        v[dis[rank]] = (float)rank, v[dis[rank] + 1] = (float)rank + 0.5f;
    MPI_Request q;
    CHECK(MPI_Iallgatherv(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, v, rc, dis, MPI_FLOAT, MPI_COMM_WORLD, &q));
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    report("iallgatherv_in_place", v, (size_t)tot * sizeof *v);
    /* Not in place: zero-count ranks send another type. */
    memset(v, 0, ((size_t)tot + 1) * sizeof *v);
    CHECK(MPI_Allgatherv(mine, rc[rank], rc[rank] ? MPI_FLOAT : MPI_INT, v, rc, dis, MPI_FLOAT, MPI_COMM_WORLD));
    report("allgatherv", v, (size_t)tot * sizeof *v);
    MPI_Type_free(&c2);
    free(all), free(rc), free(dis), free(v);
}

/* Alltoall derived against basic and in place; alltoallv with zero-size
 * types and different types per pair; alltoallw. */
static void c_alltoall(void)
{
    MPI_Datatype c2, z;
    CHECK(MPI_Type_contiguous(2, MPI_INT, &c2));
    CHECK(MPI_Type_commit(&c2));
    CHECK(MPI_Type_contiguous(0, MPI_DOUBLE, &z));
    CHECK(MPI_Type_commit(&z));
    int *s = calloc((size_t)size * 2, sizeof *s), *r = calloc((size_t)size * 2, sizeof *r);
    for (int i = 0; i < size * 2; i++)
        s[i] = rank * 100 + i;
    if (rank % 2)
        CHECK(MPI_Alltoall(s, 1, c2, r, 2, MPI_INT, MPI_COMM_WORLD));
    else
        CHECK(MPI_Alltoall(s, 2, MPI_INT, r, 1, c2, MPI_COMM_WORLD));
    report("alltoall_derived", r, (size_t)size * 2 * sizeof *r);
    MPI_Request q;
    CHECK(MPI_Ialltoall(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, s, 1, c2, MPI_COMM_WORLD, &q));
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    report("ialltoall_in_place", s, (size_t)size * 2 * sizeof *s);
    /* alltoallv: to even peers 2 ints, to odd peers nothing (a zero-size
     * type with count 5). */
    int *sc = calloc((size_t)size, sizeof *sc), *sd = calloc((size_t)size, sizeof *sd);
    int *rc = calloc((size_t)size, sizeof *rc), *rd = calloc((size_t)size, sizeof *rd);
    for (int i = 0; i < size; i++) {
        sc[i] = (i % 2 == 0 && rank % 2 == 0) ? 2 : 0;
        rc[i] = sc[i];
        sd[i] = rd[i] = 2 * i;
    }
    memset(r, 0, (size_t)size * 2 * sizeof *r);
    CHECK(MPI_Alltoallv(s, sc, sd, rank % 2 ? z : MPI_INT, r, rc, rd, rank % 2 ? z : MPI_INT, MPI_COMM_WORLD));
    report("alltoallv_zeros", r, (size_t)size * 2 * sizeof *r);
    /* alltoallw: to each peer 1 x c2 or 2 x MPI_INT, zero-size types where
     * nothing goes. */
    int *wc = calloc((size_t)size, sizeof *wc), *wd = calloc((size_t)size, sizeof *wd);
    MPI_Datatype *wt = calloc((size_t)size, sizeof *wt), *wr = calloc((size_t)size, sizeof *wr);
    int *rwc = calloc((size_t)size, sizeof *rwc);
    for (int i = 0; i < size; i++) {
        wc[i] = (i + rank) % 2 ? 1 : 2;
        wt[i] = (i + rank) % 2 ? c2 : MPI_INT;
        rwc[i] = (i + rank) % 2 ? 2 : 1;
        wr[i] = (i + rank) % 2 ? MPI_INT : c2;
        wd[i] = 2 * i * (int)sizeof(int);
    }
    memset(r, 0, (size_t)size * 2 * sizeof *r);
    CHECK(MPI_Alltoallw(s, wc, wd, wt, r, rwc, wd, wr, MPI_COMM_WORLD));
    report("alltoallw", r, (size_t)size * 2 * sizeof *r);
    for (int i = 0; i < size; i++) {
        wc[i] = 0;
        wt[i] = i % 2 ? z : MPI_DOUBLE;
    }
    CHECK(MPI_Ialltoallw(s, wc, wd, wt, r, wc, wd, wt, MPI_COMM_WORLD, &q));
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    report("ialltoallw_zeros", r, (size_t)size * 2 * sizeof *r);
    MPI_Type_free(&c2);
    MPI_Type_free(&z);
    free(s), free(r), free(sc), free(sd), free(rc), free(rd), free(wc), free(wd), free(wt), free(wr), free(rwc);
}

/* Reductions: MPI_IN_PLACE at the root (the non-roots' receive buffer is
 * ignored), pair types, a user op on a derived type, the v and block forms. */
static void my_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len * 2; i++)
        b[i] += a[i];
}

static void c_reduce(void)
{
    int v[4] = {rank, rank + 1, 2 * rank, 7};
    MPI_Request q;
    if (rank == 0)
        CHECK(MPI_Reduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    else
        CHECK(MPI_Reduce(v, NULL, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0)
        report("reduce_in_place", v, sizeof v);
    double w[2] = {rank * 1.5, 3};
    int root = size - 1;
    if (rank == root)
        CHECK(MPI_Ireduce(MPI_IN_PLACE, w, 2, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD, &q));
    else
        CHECK(MPI_Ireduce(w, NULL, 2, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD, &q));
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    if (rank == root)
        report("ireduce_in_place", w, sizeof w);
    struct {
        int v, i;
    } mi = {(rank * 7) % 5, rank}, mo;
    CHECK(MPI_Allreduce(&mi, &mo, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
    report("allreduce_minloc", &mo, sizeof mo);
    MPI_Datatype c2;
    MPI_Op op;
    CHECK(MPI_Type_contiguous(2, MPI_INT, &c2));
    CHECK(MPI_Type_commit(&c2));
    CHECK(MPI_Op_create(my_sum, 1, &op));
    int a[4] = {rank, 1, rank * rank, 2}, b[4];
    CHECK(MPI_Allreduce(a, b, 2, c2, op, MPI_COMM_WORLD));
    report("allreduce_user_derived", b, sizeof b);
    int *rcv = calloc((size_t)size, sizeof *rcv), *in = calloc((size_t)size * 2, sizeof *in), out[2] = {0, 0};
    for (int i = 0; i < size; i++)
        rcv[i] = i % 2 ? 2 : 1;
    for (int i = 0; i < size * 2; i++)
        in[i] = rank + i;
    CHECK(MPI_Reduce_scatter(in, out, rcv, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    report("reduce_scatter", out, sizeof out);
    CHECK(MPI_Reduce_scatter_block(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    report("reduce_scatter_block", out, sizeof out);
    CHECK(MPI_Scan(a, b, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    report("scan", b, sizeof b);
    memset(b, 0, sizeof b);
    CHECK(MPI_Exscan(a, b, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank)
        report("exscan", b, sizeof b);
    MPI_Op_free(&op);
    MPI_Type_free(&c2);
    free(rcv), free(in);
}

/* MPI_PACKED against typed data (same bytes). */
static void c_packed(void)
{
    int vals[3] = {rank + 1, 2, 3};
    char packed[64];
    int pos = 0;
    if (rank == 0)
        CHECK(MPI_Pack(vals, 3, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(MPI_Bcast(&pos, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK(MPI_Bcast(packed, pos, MPI_PACKED, 0, MPI_COMM_WORLD));
    } else if (pos == 3 * (int)sizeof(int)) {
        /* Packed data received as the ints it holds. */
        CHECK(MPI_Bcast(vals, 3, MPI_INT, 0, MPI_COMM_WORLD));
    } else {
        int at = 0;
        CHECK(MPI_Bcast(packed, pos, MPI_PACKED, 0, MPI_COMM_WORLD));
        CHECK(MPI_Unpack(packed, pos, &at, vals, 3, MPI_INT, MPI_COMM_WORLD));
    }
    report("bcast_packed", vals, sizeof vals);
}

/* Intercommunicator collectives: roots are MPI_ROOT / MPI_PROC_NULL on the
 * root's side and the remote root's rank on the other. */
static void c_intercomm(void)
{
    MPI_Comm half, inter, dup;
    int color = rank < (size + 1) / 2 ? 0 : 1;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half));
    int remote_leader = color == 0 ? (size + 1) / 2 : 0;
    CHECK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, remote_leader, 77, &inter));
    int lr;
    MPI_Comm_rank(half, &lr);
    int x[2] = {0, 0};
    if (color == 0) {
        if (lr == 0)
            x[0] = 42, x[1] = 43;
        CHECK(MPI_Bcast(x, 2, MPI_INT, lr == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    } else {
        CHECK(MPI_Bcast(x, 2, MPI_INT, 0, inter));
    }
    report("inter_bcast", x, sizeof x);
    int s = rank + 1, r = 0;
    CHECK(MPI_Allreduce(&s, &r, 1, MPI_INT, MPI_SUM, inter));
    report("inter_allreduce", &r, sizeof r);
    CHECK(MPI_Comm_dup(inter, &dup));
    int rsize;
    MPI_Comm_remote_size(dup, &rsize);
    int *all = calloc((size_t)rsize, sizeof *all);
    CHECK(MPI_Allgather(&s, 1, MPI_INT, all, 1, MPI_INT, dup));
    report("inter_allgather", all, (size_t)rsize * sizeof *all);
    CHECK(MPI_Barrier(dup));
    free(all);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* MPI_THREAD_MULTIPLE: two threads, each with its own duplicate of the
 * world, issue collectives concurrently. */
struct thr {
    MPI_Comm comm;
    int id;
    long sum;
};

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    long acc = 0;
    for (int i = 0; i < 200; i++) {
        int in[3] = {rank + i, t->id, i}, out[3];
        if (i % 3 == 0)
            MPI_Allreduce(in, out, 3, MPI_INT, MPI_SUM, t->comm);
        else if (i % 3 == 1)
            MPI_Bcast(in, 3, MPI_INT, i % size, t->comm), memcpy(out, in, sizeof out);
        else
            MPI_Reduce(in, out, 3, MPI_INT, MPI_MAX, 0, t->comm), out[0] = rank ? 0 : out[0];
        acc += out[0] + out[1] + out[2];
    }
    t->sum = acc;
    return NULL;
}

static void c_threads(int provided)
{
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("threads rank %d: skipped (provided %d)\n", rank, provided);
        return;
    }
    struct thr t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i].id = i;
        CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &t[i].comm));
    }
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thr_main, &t[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    long s[2] = {t[0].sum, t[1].sum};
    report("threads", s, sizeof s);
    for (int i = 0; i < 2; i++)
        MPI_Comm_free(&t[i].comm);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    only = argc > 1 ? argv[1] : NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (want("bcast_derived"))
        c_bcast_derived();
    if (want("bcast_struct"))
        c_bcast_struct();
    if (want("type_reuse"))
        c_type_reuse();
    if (want("zero"))
        c_zero();
    if (want("gather"))
        c_gather();
    if (want("gatherv"))
        c_gatherv();
    if (want("scatter"))
        c_scatter();
    if (want("allgather"))
        c_allgather();
    if (want("alltoall"))
        c_alltoall();
    if (want("reduce"))
        c_reduce();
    if (want("packed"))
        c_packed();
    if (want("intercomm") && size >= 2)
        c_intercomm();
    if (want("threads"))
        c_threads(provided);
    /* Linger so the detector sees every rank's last operations. */
    MPI_Barrier(MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
