/*
 * inter.c - every collective MPI defines on an intercommunicator (MPI 4.0,
 * chapter 6: bcast, gather(v), scatter(v), allgather(v), alltoall(v,w),
 * reduce, allreduce, reduce_scatter(_block), barrier), blocking and
 * nonblocking, for tests/mpi-inter/mpi-inter.sh.
 *
 *   inter A DIR    world ranks 0..A-1 form group A, the rest group B
 *
 * The intercommunicator is made by MPI_Comm_split and MPI_Intercomm_create
 * (a call ccshim does not intercept: it adopts the handle) and duplicated
 * with MPI_Comm_dup (which it does); every case runs on both, and on both
 * sides: the rooted ones with the root in group A, then in group B.
 *
 * What makes an over-read show: every per-peer array (counts,
 * displacements, datatypes) is exactly as long as the standard says (the
 * remote group's size; the local one for reduce_scatter's recvcounts) and
 * ends where an inaccessible page begins, and every buffer or array the
 * standard says is ignored (all of them at MPI_PROC_NULL, one side at
 * MPI_ROOT) points into that page: whoever reads one element too many gets
 * SIGSEGV.  An ignored datatype is a decoy (contiguous(3, MPI_DOUBLE),
 * used nowhere else: Open MPI itself looks at every datatype argument, so it
 * cannot be an invalid handle); a record that names a double shows it was
 * looked at.
 *
 * Each rank checks every result against the values it must be, prints one
 * line per case, "CASE rank R: CHECKSUM" (a run under ccshim must print the
 * same lines as a plain run), and exits 1 on a wrong result.  It writes into
 * DIR/expect.RANK, one line per collective on an intercommunicator, the
 * record ccshim must leave (as tests/integration/mpi_every_call.c does):
 *
 *   kind  flags  root  count  dtype  op  bytes
 */
#include "../mpi_check.h"
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAXP 64
static int wrank, wsize, asize;
static int color, lr, nl, nr; /* group (0 = A), local rank, local size, remote size */
static int bad;
static FILE *out;
static char *guard;         /* an inaccessible page */
static MPI_Datatype poison; /* the decoy */
static const char *tag;     /* "inter" or "dup" */

#define CHECK(call) CHECK_AS(wrank, call)

static void expect(const char *kind, const char *flags, int root, long count, const char *dtype, long bytes)
{
    fprintf(out, "%s %s %d %ld %s %s %ld\n", kind, flags, root, count, dtype,
            strncmp(kind, "reduce", 6) == 0 || strcmp(kind, "allreduce") == 0 ? (count ? "sum" : "none") : "none",
            bytes);
}

/* N bytes ending where the inaccessible page begins; from malloc when
 * INTER_MALLOC is set (under valgrind, which then names the over-read). */
static void *allocs[1024];
static int nallocs;
static void *tail(size_t n)
{
    if (n && getenv("INTER_MALLOC")) {
        void *m = malloc(n);
        if (!m || nallocs == (int)(sizeof allocs / sizeof allocs[0]))
            MPI_Abort(MPI_COMM_WORLD, 2);
        return allocs[nallocs++] = m;
    }
    long pg = sysconf(_SC_PAGESIZE);
    size_t span = (n + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    char *p = mmap(NULL, span + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + span, (size_t)pg, PROT_NONE) != 0) {
        perror("mmap");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p + span - n;
}
static int *ints(int n)
{
    return tail((size_t)n * sizeof(int));
}
static MPI_Datatype *types(int n)
{
    return tail((size_t)n * sizeof(MPI_Datatype));
}

/* World rank of the remote group's member J, of the local group's member J. */
static int remote_world(int j)
{
    return color == 0 ? asize + j : j;
}
static int local_world(int j)
{
    return color == 0 ? j : asize + j;
}

/* The value world rank W sends to peer P (a local rank in the other group), element K. */
static int val(int w, int p, int k)
{
    return w * 1000 + p * 100 + k + 1;
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* Compares N ints of GOT with WANT; prints the case's line. */
static void verify(const char *name, const int *got, const int *want, int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "BAD %s.%s rank %d: element %d is %d, expected %d\n", tag, name, wrank, i, got[i],
                    want[i]);
            bad = 1;
            break;
        }
    printf("%s.%s rank %d: %016llx\n", tag, name, wrank, (unsigned long long)fnv(got, (size_t)n * sizeof *got));
}

static void finish(MPI_Request *q, int nb)
{
    if (nb)
        CHECK(MPI_Wait(q, MPI_STATUS_IGNORE));
}

static const char *flag(int nb)
{
    return nb ? "nonblocking" : "-";
}

/* ------------------------------------------------------------ the cases */

/* The root of a rooted case: local rank RL of group RG; what this rank passes. */
static int root_arg(int rg, int rl)
{
    return color == rg ? (lr == rl ? MPI_ROOT : MPI_PROC_NULL) : rl;
}

static void c_bcast(MPI_Comm c, int nb, int rg)
{
    int rl = rg == 0 ? asize - 1 : 0, root = root_arg(rg, rl), x[3] = {0, 0, 0}, want[3];
    int rw = rg == 0 ? rl : asize + rl, n = root == MPI_PROC_NULL ? 0 : 3;
    MPI_Request q;
    for (int k = 0; k < 3; k++)
        want[k] = val(rw, 0, k);
    if (root == MPI_ROOT)
        memcpy(x, want, sizeof x);
    if (root == MPI_PROC_NULL) {
        CHECK(nb ? MPI_Ibcast(guard, 3, poison, root, c, &q) : MPI_Bcast(guard, 3, poison, root, c));
        expect("bcast", flag(nb), root, 0, "none", 0);
    } else {
        CHECK(nb ? MPI_Ibcast(x, 3, MPI_INT, root, c, &q) : MPI_Bcast(x, 3, MPI_INT, root, c));
        expect("bcast", flag(nb), root, 3, "int32", 12);
    }
    finish(&q, nb);
    verify(rg ? "bcast_b" : "bcast_a", x, want, n);
}

static void c_reduce(MPI_Comm c, int nb, int rg)
{
    int root = root_arg(rg, rg == 0 ? 0 : wsize - asize - 1);
    int in[2] = {wrank + 1, 2 * wrank}, r[2] = {0, 0}, want[2] = {0, 0};
    MPI_Request q;
    if (root == MPI_ROOT) {
        for (int j = 0; j < nr; j++)
            want[0] += remote_world(j) + 1, want[1] += 2 * remote_world(j);
        CHECK(nb ? MPI_Ireduce(guard, r, 2, MPI_INT, MPI_SUM, root, c, &q)
                 : MPI_Reduce(guard, r, 2, MPI_INT, MPI_SUM, root, c));
        expect("reduce", flag(nb), root, 2, "int32", 8);
    } else if (root == MPI_PROC_NULL) {
        /* (Open MPI checks the op against the datatype even here: no decoy) */
        CHECK(nb ? MPI_Ireduce(guard, guard, 5, MPI_INT, MPI_SUM, root, c, &q)
                 : MPI_Reduce(guard, guard, 5, MPI_INT, MPI_SUM, root, c));
        expect("reduce", flag(nb), root, 0, "none", 0);
    } else {
        CHECK(nb ? MPI_Ireduce(in, guard, 2, MPI_INT, MPI_SUM, root, c, &q)
                 : MPI_Reduce(in, guard, 2, MPI_INT, MPI_SUM, root, c));
        expect("reduce", flag(nb), root, 2, "int32", 8);
    }
    finish(&q, nb);
    verify(rg ? "reduce_b" : "reduce_a", r, want, 2);
}

static void c_gather(MPI_Comm c, int nb, int rg)
{
    int root = root_arg(rg, 0), mine[2] = {val(wrank, 0, 0), val(wrank, 0, 1)};
    int *all = calloc(2 * (size_t)MAXP, sizeof *all), *want = calloc(2 * (size_t)MAXP, sizeof *want), n = 0;
    MPI_Request q;
    if (root == MPI_ROOT) {
        n = 2 * nr;
        for (int j = 0; j < nr; j++)
            want[2 * j] = val(remote_world(j), 0, 0), want[2 * j + 1] = val(remote_world(j), 0, 1);
        CHECK(nb ? MPI_Igather(guard, 2, poison, all, 2, MPI_INT, root, c, &q)
                 : MPI_Gather(guard, 2, poison, all, 2, MPI_INT, root, c));
        expect("gather", flag(nb), root, 2, "int32", 8L * nr);
    } else if (root == MPI_PROC_NULL) {
        CHECK(nb ? MPI_Igather(guard, 2, poison, guard, 2, poison, root, c, &q)
                 : MPI_Gather(guard, 2, poison, guard, 2, poison, root, c));
        expect("gather", flag(nb), root, 0, "none", 0);
    } else {
        CHECK(nb ? MPI_Igather(mine, 2, MPI_INT, guard, 2, poison, root, c, &q)
                 : MPI_Gather(mine, 2, MPI_INT, guard, 2, poison, root, c));
        expect("gather", flag(nb), root, 2, "int32", 8);
    }
    finish(&q, nb);
    verify(rg ? "gather_b" : "gather_a", all, want, n);
    free(all), free(want);
}

static void c_scatter(MPI_Comm c, int nb, int rg)
{
    int root = root_arg(rg, rg == 0 ? asize - 1 : 0), rw = rg == 0 ? asize - 1 : asize;
    int *src = calloc(2 * (size_t)MAXP, sizeof *src), mine[2] = {0, 0}, want[2] = {0, 0}, n = 0;
    MPI_Request q;
    if (root == MPI_ROOT) {
        for (int j = 0; j < nr; j++)
            src[2 * j] = val(wrank, j, 0), src[2 * j + 1] = val(wrank, j, 1);
        CHECK(nb ? MPI_Iscatter(src, 2, MPI_INT, guard, 2, poison, root, c, &q)
                 : MPI_Scatter(src, 2, MPI_INT, guard, 2, poison, root, c));
        expect("scatter", flag(nb), root, 2, "int32", 8L * nr);
    } else if (root == MPI_PROC_NULL) {
        CHECK(nb ? MPI_Iscatter(guard, 2, poison, guard, 2, poison, root, c, &q)
                 : MPI_Scatter(guard, 2, poison, guard, 2, poison, root, c));
        expect("scatter", flag(nb), root, 0, "none", 0);
    } else {
        n = 2;
        want[0] = val(rw, lr, 0), want[1] = val(rw, lr, 1);
        CHECK(nb ? MPI_Iscatter(guard, 2, poison, mine, 2, MPI_INT, root, c, &q)
                 : MPI_Scatter(guard, 2, poison, mine, 2, MPI_INT, root, c));
        expect("scatter", flag(nb), root, 2, "int32", 8);
    }
    finish(&q, nb);
    verify(rg ? "scatter_b" : "scatter_a", mine, want, n);
    free(src);
}

/* The v cases: member P of a group contributes vcount(P) elements (0 for
 * some), placed in reverse order of rank in the vector. */
static int vcount(int p)
{
    return (p + 2) % 3;
}

static void c_gatherv(MPI_Comm c, int nb, int rg)
{
    int root = root_arg(rg, rg == 0 ? 0 : wsize - asize - 1);
    int mine[3], *all = calloc(3 * (size_t)MAXP, sizeof *all), *want = calloc(3 * (size_t)MAXP, sizeof *want);
    int n = 0;
    MPI_Request q;
    for (int k = 0; k < 3; k++)
        mine[k] = val(wrank, 0, k);
    if (root == MPI_ROOT) {
        int *rc = ints(nr), *dis = ints(nr), total = 0;
        for (int j = nr - 1; j >= 0; j--) {
            rc[j] = vcount(j), dis[j] = total;
            for (int k = 0; k < rc[j]; k++)
                want[total + k] = val(remote_world(j), 0, k);
            total += rc[j];
        }
        n = total;
        CHECK(nb ? MPI_Igatherv(guard, 3, poison, all, rc, dis, MPI_INT, root, c, &q)
                 : MPI_Gatherv(guard, 3, poison, all, rc, dis, MPI_INT, root, c));
        expect("gatherv", flag(nb), root, total, total ? "int32" : "none", 4L * total);
    } else if (root == MPI_PROC_NULL) {
        CHECK(nb ? MPI_Igatherv(guard, 3, poison, guard, (int *)guard, (int *)guard, poison, root, c, &q)
                 : MPI_Gatherv(guard, 3, poison, guard, (int *)guard, (int *)guard, poison, root, c));
        expect("gatherv", flag(nb), root, 0, "none", 0);
    } else {
        int k = vcount(lr);
        CHECK(nb ? MPI_Igatherv(mine, k, MPI_INT, guard, (int *)guard, (int *)guard, poison, root, c, &q)
                 : MPI_Gatherv(mine, k, MPI_INT, guard, (int *)guard, (int *)guard, poison, root, c));
        expect("gatherv", flag(nb), root, k, k ? "int32" : "none", 4L * k);
    }
    finish(&q, nb);
    verify(rg ? "gatherv_b" : "gatherv_a", all, want, n);
    free(all), free(want);
}

static void c_scatterv(MPI_Comm c, int nb, int rg)
{
    int rl = rg == 0 ? asize - 1 : 0, rw = rg == 0 ? asize - 1 : asize, root = root_arg(rg, rl);
    int *src = calloc(3 * (size_t)MAXP, sizeof *src), mine[3] = {0, 0, 0}, want[3] = {0, 0, 0}, n = 0;
    MPI_Request q;
    if (root == MPI_ROOT) {
        int *sc = ints(nr), *dis = ints(nr), total = 0;
        for (int j = nr - 1; j >= 0; j--) {
            sc[j] = vcount(j), dis[j] = total;
            for (int k = 0; k < sc[j]; k++)
                src[total + k] = val(wrank, j, k);
            total += sc[j];
        }
        CHECK(nb ? MPI_Iscatterv(src, sc, dis, MPI_INT, guard, 3, poison, root, c, &q)
                 : MPI_Scatterv(src, sc, dis, MPI_INT, guard, 3, poison, root, c));
        expect("scatterv", flag(nb), root, total, total ? "int32" : "none", 4L * total);
    } else if (root == MPI_PROC_NULL) {
        CHECK(nb ? MPI_Iscatterv(guard, (int *)guard, (int *)guard, poison, guard, 3, poison, root, c, &q)
                 : MPI_Scatterv(guard, (int *)guard, (int *)guard, poison, guard, 3, poison, root, c));
        expect("scatterv", flag(nb), root, 0, "none", 0);
    } else {
        n = vcount(lr);
        for (int k = 0; k < n; k++)
            want[k] = val(rw, lr, k);
        CHECK(nb ? MPI_Iscatterv(guard, (int *)guard, (int *)guard, poison, mine, n, MPI_INT, root, c, &q)
                 : MPI_Scatterv(guard, (int *)guard, (int *)guard, poison, mine, n, MPI_INT, root, c));
        expect("scatterv", flag(nb), root, n, n ? "int32" : "none", 4L * n);
    }
    finish(&q, nb);
    verify(rg ? "scatterv_b" : "scatterv_a", mine, want, n);
    free(src);
}

static void c_allgather(MPI_Comm c, int nb)
{
    int mine[2] = {val(wrank, 0, 0), val(wrank, 0, 1)}, all[2 * MAXP], want[2 * MAXP];
    MPI_Request q;
    for (int j = 0; j < nr; j++)
        want[2 * j] = val(remote_world(j), 0, 0), want[2 * j + 1] = val(remote_world(j), 0, 1);
    CHECK(nb ? MPI_Iallgather(mine, 2, MPI_INT, all, 2, MPI_INT, c, &q)
             : MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, c));
    expect("allgather", flag(nb), -1, 2, "int32", 8);
    finish(&q, nb);
    verify("allgather", all, want, 2 * nr);
}

static void c_allgatherv(MPI_Comm c, int nb)
{
    int mine[3], all[3 * MAXP], want[3 * MAXP], *rc = ints(nr), *dis = ints(nr), total = 0;
    MPI_Request q;
    for (int k = 0; k < 3; k++)
        mine[k] = val(wrank, 0, k);
    for (int j = nr - 1; j >= 0; j--) {
        rc[j] = vcount(j), dis[j] = total;
        for (int k = 0; k < rc[j]; k++)
            want[total + k] = val(remote_world(j), 0, k);
        total += rc[j];
    }
    int k = vcount(lr);
    CHECK(nb ? MPI_Iallgatherv(mine, k, MPI_INT, all, rc, dis, MPI_INT, c, &q)
             : MPI_Allgatherv(mine, k, MPI_INT, all, rc, dis, MPI_INT, c));
    expect("allgatherv", flag(nb), -1, total, total ? "int32" : "none", 4L * k);
    finish(&q, nb);
    verify("allgatherv", all, want, total);
}

static void c_alltoall(MPI_Comm c, int nb)
{
    int snd[2 * MAXP], rcv[2 * MAXP], want[2 * MAXP];
    MPI_Request q;
    for (int j = 0; j < nr; j++) {
        snd[2 * j] = val(wrank, j, 0), snd[2 * j + 1] = val(wrank, j, 1);
        want[2 * j] = val(remote_world(j), lr, 0), want[2 * j + 1] = val(remote_world(j), lr, 1);
    }
    CHECK(nb ? MPI_Ialltoall(snd, 2, MPI_INT, rcv, 2, MPI_INT, c, &q)
             : MPI_Alltoall(snd, 2, MPI_INT, rcv, 2, MPI_INT, c));
    expect("alltoall", flag(nb), -1, 2, "int32", 8L * nr);
    finish(&q, nb);
    verify("alltoall", rcv, want, 2 * nr);
}

/* Alltoallv/w: sender S (local rank in its group) sends pcount(S, R) to
 * receiver R (local rank in the other group). */
static int pcount(int s, int r)
{
    return (s + 2 * r) % 4;
}

static void c_alltoallv(MPI_Comm c, int nb)
{
    int snd[4 * MAXP], rcv[4 * MAXP], want[4 * MAXP], st = 0, rt = 0;
    int *sc = ints(nr), *sd = ints(nr), *rc = ints(nr), *rd = ints(nr);
    MPI_Request q;
    for (int j = nr - 1; j >= 0; j--) { /* reversed placement */
        sc[j] = pcount(lr, j), sd[j] = st;
        for (int k = 0; k < sc[j]; k++)
            snd[st + k] = val(wrank, j, k);
        st += sc[j];
        rc[j] = pcount(j, lr), rd[j] = rt;
        for (int k = 0; k < rc[j]; k++)
            want[rt + k] = val(remote_world(j), lr, k);
        rt += rc[j];
    }
    CHECK(nb ? MPI_Ialltoallv(snd, sc, sd, MPI_INT, rcv, rc, rd, MPI_INT, c, &q)
             : MPI_Alltoallv(snd, sc, sd, MPI_INT, rcv, rc, rd, MPI_INT, c));
    expect("alltoallv", flag(nb), -1, rt, "int32", 4L * rt);
    finish(&q, nb);
    verify("alltoallv", rcv, want, rt);
}

/* As alltoallv, but where a pair's count is even and not 0 the receiver
 * takes pairs (contiguous(2, int)) while the sender sends ints: one type
 * per peer, the signatures matching. */
static void c_alltoallw(MPI_Comm c, int nb, MPI_Datatype pair)
{
    int snd[4 * MAXP], rcv[4 * MAXP], want[4 * MAXP], st = 0, rt = 0;
    int *sc = ints(nr), *sd = ints(nr), *rc = ints(nr), *rd = ints(nr);
    MPI_Datatype *sty = types(nr), *rty = types(nr);
    MPI_Request q;
    for (int j = nr - 1; j >= 0; j--) {
        sc[j] = pcount(lr, j), sd[j] = st * (int)sizeof(int), sty[j] = MPI_INT;
        for (int k = 0; k < sc[j]; k++)
            snd[st + k] = val(wrank, j, k);
        st += sc[j];
        int n = pcount(j, lr);
        rd[j] = rt * (int)sizeof(int);
        if (n % 2 == 0 && n > 0)
            rc[j] = n / 2, rty[j] = pair;
        else
            rc[j] = n, rty[j] = MPI_INT;
        for (int k = 0; k < n; k++)
            want[rt + k] = val(remote_world(j), lr, k);
        rt += n;
    }
    CHECK(nb ? MPI_Ialltoallw(snd, sc, sd, sty, rcv, rc, rd, rty, c, &q)
             : MPI_Alltoallw(snd, sc, sd, sty, rcv, rc, rd, rty, c));
    expect("alltoallw", flag(nb), -1, 4L * rt, "byte", 4L * rt);
    finish(&q, nb);
    verify("alltoallw", rcv, want, rt);
}

static void c_allreduce(MPI_Comm c, int nb)
{
    int in[2] = {wrank + 1, 3 * wrank}, r[2], want[2] = {0, 0};
    MPI_Request q;
    for (int j = 0; j < nr; j++)
        want[0] += remote_world(j) + 1, want[1] += 3 * remote_world(j);
    CHECK(nb ? MPI_Iallreduce(in, r, 2, MPI_INT, MPI_SUM, c, &q) : MPI_Allreduce(in, r, 2, MPI_INT, MPI_SUM, c));
    expect("allreduce", flag(nb), -1, 2, "int32", 8);
    finish(&q, nb);
    verify("allreduce", r, want, 2);
}

/* Reduce_scatter: the same total (TOTAL elements) in both groups; each
 * group's recvcounts (as long as the local group) split it among its own
 * members, who receive the remote group's sum of their block. */
#define TOTAL 12
static void c_reduce_scatter(MPI_Comm c, int nb)
{
    int in[TOTAL], r[TOTAL], want[TOTAL], *rc = ints(nl), at = 0;
    MPI_Request q;
    for (int i = 0; i < nl; i++)
        rc[i] = TOTAL / nl + (i < TOTAL % nl);
    for (int i = 0; i < lr; i++)
        at += rc[i];
    for (int k = 0; k < TOTAL; k++)
        in[k] = val(wrank, 0, k);
    for (int k = 0; k < rc[lr]; k++) {
        want[k] = 0;
        for (int j = 0; j < nr; j++)
            want[k] += val(remote_world(j), 0, at + k);
    }
    CHECK(nb ? MPI_Ireduce_scatter(in, r, rc, MPI_INT, MPI_SUM, c, &q)
             : MPI_Reduce_scatter(in, r, rc, MPI_INT, MPI_SUM, c));
    expect("reduce_scatter", flag(nb), -1, TOTAL, "int32", 4L * TOTAL);
    finish(&q, nb);
    verify("reduce_scatter", r, want, rc[lr]);
}

/* Reduce_scatter_block: recvcount x local size is the same in both groups. */
static void c_reduce_scatter_block(MPI_Comm c, int nb)
{
    int in[TOTAL], r[TOTAL], want[TOTAL], n = TOTAL / nl;
    MPI_Request q;
    for (int k = 0; k < TOTAL; k++)
        in[k] = val(wrank, 1, k);
    for (int k = 0; k < n; k++) {
        want[k] = 0;
        for (int j = 0; j < nr; j++)
            want[k] += val(remote_world(j), 1, lr * n + k);
    }
    CHECK(nb ? MPI_Ireduce_scatter_block(in, r, n, MPI_INT, MPI_SUM, c, &q)
             : MPI_Reduce_scatter_block(in, r, n, MPI_INT, MPI_SUM, c));
    expect("reduce_scatter_block", flag(nb), -1, n, "int32", 4L * n);
    finish(&q, nb);
    verify("reduce_scatter_block", r, want, n);
}

static void c_barrier(MPI_Comm c, int nb)
{
    MPI_Request q;
    CHECK(nb ? MPI_Ibarrier(c, &q) : MPI_Barrier(c));
    expect("barrier", flag(nb), -1, 0, "none", 0);
    finish(&q, nb);
}

static void run_all(MPI_Comm c, const char *name, MPI_Datatype pair)
{
    char t[32];
    for (int nb = 0; nb < 2; nb++) {
        snprintf(t, sizeof t, "%s%s", name, nb ? ".nb" : "");
        tag = t;
        for (int rg = 0; rg < 2; rg++) {
            c_bcast(c, nb, rg);
            c_reduce(c, nb, rg);
            c_gather(c, nb, rg);
            c_scatter(c, nb, rg);
            c_gatherv(c, nb, rg);
            c_scatterv(c, nb, rg);
        }
        c_allgather(c, nb);
        c_allgatherv(c, nb);
        c_alltoall(c, nb);
        c_alltoallv(c, nb);
        c_alltoallw(c, nb, pair);
        c_allreduce(c, nb);
        c_reduce_scatter(c, nb);
        c_reduce_scatter_block(c, nb);
        c_barrier(c, nb);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    asize = argc > 1 ? atoi(argv[1]) : 0;
    if (argc < 3 || asize < 1 || asize >= wsize || wsize > MAXP || TOTAL % asize || TOTAL % (wsize - asize)) {
        if (wrank == 0)
            fprintf(stderr, "usage: inter A DIR (1 <= A < ranks <= %d, A and ranks - A dividing %d)\n", MAXP,
                    TOTAL);
        MPI_Finalize();
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/expect.%d", argv[2], wrank);
    out = fopen(path, "w");
    if (!out) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    guard = (char *)tail(0);
    CHECK(MPI_Type_contiguous(3, MPI_DOUBLE, &poison));
    CHECK(MPI_Type_commit(&poison));
    color = wrank < asize ? 0 : 1;
    MPI_Comm half, inter, dup;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &half));
    CHECK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color == 0 ? asize : 0, 7, &inter));
    int flag = 0;
    MPI_Comm_test_inter(inter, &flag);
    MPI_Comm_rank(inter, &lr);
    MPI_Comm_size(inter, &nl);
    MPI_Comm_remote_size(inter, &nr);
    if (!flag || nl != (color ? wsize - asize : asize) || nr != wsize - nl || local_world(lr) != wrank) {
        fprintf(stderr, "rank %d: not the intercommunicator asked for\n", wrank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Datatype pair;
    CHECK(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK(MPI_Type_commit(&pair));
    run_all(inter, "inter", pair);
    CHECK(MPI_Comm_dup(inter, &dup));
    run_all(dup, "dup", pair);
    MPI_Type_free(&pair);
    MPI_Type_free(&poison);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    fclose(out);
    while (nallocs > 0)
        free(allocs[--nallocs]);
    MPI_Barrier(MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
