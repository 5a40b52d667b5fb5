/*
 * nccl_pattern.c - one rank of a known pattern of NCCL calls, for the NCCL
 * interception tests.  Run WORLD_SIZE copies with RANK=0..WORLD_SIZE-1 and
 * the same ID_FILE (rank 0 writes the ncclUniqueId there, the others read it).
 *
 *   nccl_pattern ID_FILE [STEPS]
 *
 * Each step, on the world communicator: allreduce x6 (sum, in-place sum,
 * max, min, prod, avg), ncclBroadcast, in-place ncclBcast, reduce, allgather
 * (plain and in-place), reduce-scatter, all-to-all, gather, scatter, a
 * PreMulSum allreduce, and a group holding a send, a recv and a nested group
 * with one allreduce; then one allreduce on a split communicator (color
 * rank % 2, key -rank) and CCSHIM_STEP_MARK().  Before the steps a second
 * split (rank 0 NCCL_SPLIT_NOCOLOR, the others color 7) does one allreduce;
 * after them rank 0 creates and destroys WORLD_SIZE+1 communicators with
 * ncclCommInitAll.
 *
 * Every result is compared with the value computed locally from every rank's
 * known inputs (exit 1 on a mismatch) and printed as "rRANK sSTEP NAME
 * CHECKSUM", so runs with and without the shim can be compared line by line.
 */
#include <ccshim.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define C1 96 /* elements of the full-buffer collectives */
#define C2 24 /* elements per rank block */
#define MAXR 16

static int me, n, failures;

/* Small integer-valued inputs: sums and products stay exact in any type. */
static double val(int r, int s, int i, int salt)
{
    return (double)((r * 7 + i * 3 + s * 5 + salt * 11) % 11) - 3.0;
}
static double pos(int r, int s, int i, int salt)
{
    return (double)(1 + (r + i + s + salt) % 3);
}

static uint64_t fnv(const void *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
    return h;
}

/* Compares a result with its expected value and prints its checksum. */
static void report(int step, const char *name, const void *got, const void *want, size_t len)
{
    if (memcmp(got, want, len) != 0) {
        fprintf(stderr, "r%d s%d %s: result differs from the expected value\n", me, step, name);
        failures++;
    }
    printf("r%d s%d %s %016llx\n", me, step, name, (unsigned long long)fnv(got, len));
}

static void ok(ncclResult_t rc, const char *what)
{
    if (rc != ncclSuccess) {
        fprintf(stderr, "r%d: %s failed: %s (%s)\n", me, what, ncclGetErrorString(rc), ncclGetLastError(NULL));
        exit(2);
    }
}

static void share_id(const char *path, ncclUniqueId *id)
{
    if (me == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
        ok(ncclGetUniqueId(id), "ncclGetUniqueId");
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            perror(path);
            exit(2);
        }
        return;
    }
    for (int tries = 0; tries < 3000; tries++) { /* 30 s */
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1)
                return;
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    fprintf(stderr, "r%d: no id in %s after 30 s\n", me, path);
    exit(2);
}

/* Allreduce sum, float, separate buffers. */
static void allreduce_sum_f32(ncclComm_t w, int s)
{
    float f_send[C1], f_recv[C1], f_want[C1];
    for (int i = 0; i < C1; i++) {
        f_send[i] = (float)val(me, s, i, 1);
        f_want[i] = 0;
        for (int r = 0; r < n; r++)
            f_want[i] = r ? f_want[i] + (float)val(r, s, i, 1) : (float)val(r, s, i, 1);
    }
    ok(ncclAllReduce(f_send, f_recv, C1, ncclFloat32, ncclSum, w, NULL), "allreduce sum");
    report(s, "allreduce_sum_f32", f_recv, f_want, sizeof f_want);
}

/* Allreduce sum, double, in place. */
static void allreduce_inplace_f64(ncclComm_t w, int s)
{
    double d_buf[C1], d_want[C1];
    for (int i = 0; i < C1; i++) {
        d_buf[i] = val(me, s, i, 2);
        d_want[i] = val(0, s, i, 2);
        for (int r = 1; r < n; r++)
            d_want[i] += val(r, s, i, 2);
    }
    ok(ncclAllReduce(d_buf, d_buf, C1, ncclFloat64, ncclSum, w, NULL), "allreduce in place");
    report(s, "allreduce_inplace_f64", d_buf, d_want, sizeof d_want);
}

/* Allreduce max (int32), then min (int64). */
static void allreduce_max_min(ncclComm_t w, int s)
{
    int32_t i_send[C1], i_recv[C1], i_want[C1];
    int64_t l_send[C1], l_recv[C1], l_want[C1];
    for (int i = 0; i < C1; i++) {
        i_send[i] = (int32_t)val(me, s, i, 3);
        l_send[i] = (int64_t)val(me, s, i, 4) * 1000000000LL;
        i_want[i] = (int32_t)val(0, s, i, 3);
        l_want[i] = (int64_t)val(0, s, i, 4) * 1000000000LL;
        for (int r = 1; r < n; r++) {
            int32_t a = (int32_t)val(r, s, i, 3);
            int64_t b = (int64_t)val(r, s, i, 4) * 1000000000LL;
            i_want[i] = a > i_want[i] ? a : i_want[i];
            l_want[i] = b < l_want[i] ? b : l_want[i];
        }
    }
    ok(ncclAllReduce(i_send, i_recv, C1, ncclInt32, ncclMax, w, NULL), "allreduce max");
    report(s, "allreduce_max_i32", i_recv, i_want, sizeof i_want);
    ok(ncclAllReduce(l_send, l_recv, C1, ncclInt64, ncclMin, w, NULL), "allreduce min");
    report(s, "allreduce_min_i64", l_recv, l_want, sizeof l_want);
}

/* Allreduce prod (float), then avg (double). */
static void allreduce_prod_avg(ncclComm_t w, int s)
{
    float f_send[C1], f_recv[C1], f_want[C1];
    double d_buf[C1], d_want[C1], d_out[C1];
    for (int i = 0; i < C1; i++) {
        f_send[i] = (float)pos(me, s, i, 5);
        f_want[i] = (float)pos(0, s, i, 5);
        d_buf[i] = val(me, s, i, 6);
        d_want[i] = val(0, s, i, 6);
        for (int r = 1; r < n; r++) {
            f_want[i] *= (float)pos(r, s, i, 5);
            d_want[i] += val(r, s, i, 6);
        }
        d_want[i] /= (double)n;
    }
    ok(ncclAllReduce(f_send, f_recv, C1, ncclFloat32, ncclProd, w, NULL), "allreduce prod");
    report(s, "allreduce_prod_f32", f_recv, f_want, sizeof f_want);
    ok(ncclAllReduce(d_buf, d_out, C1, ncclFloat64, ncclAvg, w, NULL), "allreduce avg");
    report(s, "allreduce_avg_f64", d_out, d_want, sizeof d_want);
}

/* ncclBroadcast from ROOT; in-place ncclBcast from ROOT2. */
static void broadcasts(ncclComm_t w, int s, int root, int root2)
{
    int32_t i_send[C1], i_recv[C1], i_want[C1];
    int64_t l_send[C1], l_want[C1];
    for (int i = 0; i < C1; i++) {
        i_send[i] = (int32_t)val(me, s, i, 7);
        i_want[i] = (int32_t)val(root, s, i, 7);
        l_send[i] = (int64_t)val(me, s, i, 8);
        l_want[i] = (int64_t)val(root2, s, i, 8);
    }
    ok(ncclBroadcast(i_send, i_recv, C1, ncclInt32, root, w, NULL), "broadcast");
    report(s, "broadcast_i32", i_recv, i_want, sizeof i_want);
    ok(ncclBcast(l_send, C1, ncclInt64, root2, w, NULL), "bcast");
    report(s, "bcast_inplace_i64", l_send, l_want, sizeof l_want);
}

/* Reduce sum (int64) to the last rank. */
static void reduce_to_last(ncclComm_t w, int s)
{
    int64_t l_send[C1], l_recv[C1], l_want[C1];
    for (int i = 0; i < C1; i++) {
        l_send[i] = (int64_t)val(me, s, i, 9);
        l_want[i] = 0;
        for (int r = 0; r < n; r++)
            l_want[i] += (int64_t)val(r, s, i, 9);
    }
    ok(ncclReduce(l_send, l_recv, C1, ncclInt64, ncclSum, n - 1, w, NULL), "reduce");
    if (me == n - 1)
        report(s, "reduce_sum_i64", l_recv, l_want, sizeof l_want);
}

/* Allgather (float): plain, then in place. */
static void allgathers(ncclComm_t w, int s)
{
    float g_send[C2], g_recv[MAXR * C2], g_want[MAXR * C2];
    for (int i = 0; i < C2; i++)
        g_send[i] = (float)val(me, s, i, 10);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < C2; i++)
            g_want[r * C2 + i] = (float)val(r, s, i, 10);
    ok(ncclAllGather(g_send, g_recv, C2, ncclFloat32, w, NULL), "allgather");
    report(s, "allgather_f32", g_recv, g_want, (size_t)n * C2 * sizeof(float));
    for (int i = 0; i < n * C2; i++)
        g_recv[i] = -99.0f;
    memcpy(g_recv + me * C2, g_send, sizeof g_send);
    ok(ncclAllGather(g_recv + me * C2, g_recv, C2, ncclFloat32, w, NULL), "allgather in place");
    report(s, "allgather_inplace_f32", g_recv, g_want, (size_t)n * C2 * sizeof(float));
}

/* Reduce-scatter sum (double). */
static void reduce_scatter(ncclComm_t w, int s)
{
    double rs_send[MAXR * C2], rs_recv[C2], rs_want[C2];
    for (int i = 0; i < n * C2; i++)
        rs_send[i] = val(me, s, i, 11);
    for (int i = 0; i < C2; i++) {
        rs_want[i] = val(0, s, me * C2 + i, 11);
        for (int r = 1; r < n; r++)
            rs_want[i] += val(r, s, me * C2 + i, 11);
    }
    ok(ncclReduceScatter(rs_send, rs_recv, C2, ncclFloat64, ncclSum, w, NULL), "reducescatter");
    report(s, "reducescatter_f64", rs_recv, rs_want, sizeof rs_want);
}

/* All-to-all (int32). */
static void all_to_all(ncclComm_t w, int s)
{
    int32_t a_send[MAXR * C2], a_recv[MAXR * C2], a_want[MAXR * C2];
    for (int i = 0; i < n * C2; i++)
        a_send[i] = (int32_t)val(me, s, i, 12);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < C2; i++)
            a_want[r * C2 + i] = (int32_t)val(r, s, me * C2 + i, 12);
    ok(ncclAlltoAll(a_send, a_recv, C2, ncclInt32, w, NULL), "alltoall");
    report(s, "alltoall_i32", a_recv, a_want, (size_t)n * C2 * sizeof(int32_t));
}

/* Gather (uint8) to ROOT, scatter (int64) from ROOT2. */
static void gather_scatter(ncclComm_t w, int s, int root, int root2)
{
    uint8_t u_send[C2], u_recv[MAXR * C2], u_want[MAXR * C2];
    for (int i = 0; i < C2; i++)
        u_send[i] = (uint8_t)(me * 40 + i);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < C2; i++)
            u_want[r * C2 + i] = (uint8_t)(r * 40 + i);
    ok(ncclGather(u_send, u_recv, C2, ncclUint8, root, w, NULL), "gather");
    if (me == root)
        report(s, "gather_u8", u_recv, u_want, (size_t)n * C2);
    int64_t sc_send[MAXR * C2], sc_recv[C2], sc_want[C2];
    for (int i = 0; i < n * C2; i++)
        sc_send[i] = (int64_t)val(me, s, i, 13);
    for (int i = 0; i < C2; i++)
        sc_want[i] = (int64_t)val(root2, s, me * C2 + i, 13);
    ok(ncclScatter(sc_send, sc_recv, C2, ncclInt64, root2, w, NULL), "scatter");
    report(s, "scatter_i64", sc_recv, sc_want, sizeof sc_want);
}

/* PreMulSum with a host scalar: sum over r of (r + 1) * x_r. */
static void allreduce_premulsum(ncclComm_t w, int s)
{
    double d_buf[C1], d_want[C1], d_out[C1];
    double scalar = me + 1.0;
    ncclRedOp_t pms;
    ok(ncclRedOpCreatePreMulSum(&pms, &scalar, ncclFloat64, ncclScalarHostImmediate, w), "premulsum create");
    for (int i = 0; i < C1; i++) {
        d_buf[i] = val(me, s, i, 14);
        d_want[i] = 1.0 * val(0, s, i, 14);
        for (int r = 1; r < n; r++)
            d_want[i] += (r + 1.0) * val(r, s, i, 14);
    }
    ok(ncclAllReduce(d_buf, d_out, C1, ncclFloat64, pms, w, NULL), "allreduce premulsum");
    report(s, "allreduce_premulsum_f64", d_out, d_want, sizeof d_want);
    ok(ncclRedOpDestroy(pms, w), "premulsum destroy");
}

/* A group: ring send/recv and a nested group with an allreduce. */
static void group_ring(ncclComm_t w, int s)
{
    int32_t i_send[C1], i_recv[C1], i_want[C1];
    int right = (me + 1) % n, left = (me + n - 1) % n;
    float p_send[C2], p_recv[C2], p_want[C2];
    for (int i = 0; i < C2; i++) {
        p_send[i] = (float)val(me, s, i, 15);
        p_want[i] = (float)val(left, s, i, 15);
        i_send[i] = (int32_t)val(me, s, i, 16);
        i_want[i] = 0;
        for (int r = 0; r < n; r++)
            i_want[i] += (int32_t)val(r, s, i, 16);
    }
    ok(ncclGroupStart(), "group start");
    ok(ncclSend(p_send, C2, ncclFloat32, right, w, NULL), "send");
    ok(ncclRecv(p_recv, C2, ncclFloat32, left, w, NULL), "recv");
    ok(ncclGroupStart(), "nested group start");
    ok(ncclAllReduce(i_send, i_recv, C2, ncclInt32, ncclSum, w, NULL), "allreduce in group");
    ok(ncclGroupEnd(), "nested group end");
    ok(ncclGroupEnd(), "group end");
    report(s, "group_recv_f32", p_recv, p_want, sizeof p_want);
    report(s, "group_allreduce_i32", i_recv, i_want, C2 * sizeof(int32_t));
}

/* Step S on the world communicator: every collective, in the order the header lists. */
static void step_world(ncclComm_t w, int s)
{
    int root = s % n, root2 = (s + 1) % n;
    allreduce_sum_f32(w, s);
    allreduce_inplace_f64(w, s);
    allreduce_max_min(w, s);
    allreduce_prod_avg(w, s);
    broadcasts(w, s, root, root2);
    reduce_to_last(w, s);
    allgathers(w, s);
    reduce_scatter(w, s);
    all_to_all(w, s);
    gather_scatter(w, s, root, root2);
    allreduce_premulsum(w, s);
    group_ring(w, s);
}

/* Allreduce sum (float) over the members of a split, in their rank order. */
static void step_split(ncclComm_t c, int color, int s, const char *name)
{
    int members[MAXR], m = 0;
    for (int k = n - 1; k >= 0; k--) /* key -rank: highest parent rank first */
        if (k % 2 == color)
            members[m++] = k;
    float send[C1], recv[C1], want[C1];
    for (int i = 0; i < C1; i++) {
        send[i] = (float)val(me, s, i, 17);
        want[i] = (float)val(members[0], s, i, 17);
        for (int k = 1; k < m; k++)
            want[i] += (float)val(members[k], s, i, 17);
    }
    ok(ncclAllReduce(send, recv, C1, ncclFloat32, ncclSum, c, NULL), "split allreduce");
    report(s, name, recv, want, sizeof want);
}

int main(int argc, char **argv)
{
    const char *rs = getenv("RANK"), *ws = getenv("WORLD_SIZE");
    if (argc < 2 || !rs || !ws) {
        fprintf(stderr, "usage: RANK=r WORLD_SIZE=n %s ID_FILE [STEPS]\n", argv[0]);
        return 2;
    }
    me = atoi(rs);
    n = atoi(ws);
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 2 || n > MAXR || me < 0 || me >= n || steps < 1) {
        fprintf(stderr, "RANK %s / WORLD_SIZE %s / STEPS %d out of range (2..%d ranks)\n", rs, ws, steps, MAXR);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int version = 0;
    ok(ncclGetVersion(&version), "ncclGetVersion");
    printf("r%d version %d\n", me, version);

    ncclUniqueId id;
    share_id(argv[1], &id);
    ncclComm_t w;
    ok(ncclCommInitRank(&w, n, id, me), "ncclCommInitRank");

    /* Split 1: color rank % 2, key -rank.  Split 2: rank 0 opts out. */
    ncclComm_t half, rest;
    int got_rank, got_size;
    ok(ncclCommSplit(w, me % 2, -me, &half, NULL), "split");
    ok(ncclCommUserRank(half, &got_rank), "user rank");
    ok(ncclCommCount(half, &got_size), "count");
    int want_size = (n - me % 2 + 1) / 2, want_rank = (n - 1 - me) / 2;
    if (got_size != want_size || got_rank != want_rank) {
        fprintf(stderr, "r%d: split gave rank %d of %d, expected %d of %d\n", me, got_rank, got_size, want_rank,
                want_size);
        failures++;
    }
    ok(ncclCommSplit(w, me == 0 ? NCCL_SPLIT_NOCOLOR : 7, me, &rest, NULL), "split nocolor");
    if ((rest == NULL) != (me == 0)) {
        fprintf(stderr, "r%d: NCCL_SPLIT_NOCOLOR split returned %p\n", me, (void *)rest);
        failures++;
    }
    if (rest) {
        float one = 1.0f, sum = 0, want = (float)(n - 1);
        ok(ncclAllReduce(&one, &sum, 1, ncclFloat32, ncclSum, rest, NULL), "allreduce on split 2");
        report(0, "split7_allreduce_f32", &sum, &want, sizeof want);
    }

    for (int s = 0; s < steps; s++) {
        step_world(w, s);
        step_split(half, me % 2, s, "split_allreduce_f32");
        CCSHIM_STEP_MARK();
    }

    if (rest) {
        ok(ncclCommFinalize(rest), "finalize split 2");
        ok(ncclCommDestroy(rest), "destroy split 2");
    }
    ok(ncclCommFinalize(half), "finalize split");
    ok(ncclCommDestroy(half), "destroy split");
    ok(ncclCommFinalize(w), "finalize");
    ok(ncclCommDestroy(w), "destroy");

    if (me == 0) { /* single-process communicators */
        ncclComm_t all[MAXR + 1];
        ok(ncclCommInitAll(all, n + 1, NULL), "ncclCommInitAll");
        for (int d = 0; d <= n; d++) {
            ok(ncclCommUserRank(all[d], &got_rank), "user rank (InitAll)");
            ok(ncclCommCount(all[d], &got_size), "count (InitAll)");
            if (got_rank != d || got_size != n + 1) {
                fprintf(stderr, "r0: InitAll member %d says rank %d of %d\n", d, got_rank, got_size);
                failures++;
            }
            ok(ncclCommDestroy(all[d]), "destroy (InitAll)");
        }
    }
    printf("r%d done failures=%d\n", me, failures);
    return failures ? 1 : 0;
}
