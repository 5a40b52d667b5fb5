/*
 * coal_ddp.c - a small MPI job that synchronises gradient buckets the way
 * PyTorch DDP does without no_sync(): after each of K mini-batch backward
 * passes, every bucket is filled with grad / W and all-reduced with SUM,
 * and the result is copied back into grad.  --per-step reduces once per
 * step instead (the reference).  The parameters feed back into the next
 * step's gradients non-linearly, so any difference grows visible.
 *
 * Output (rank 0): "checksum <hex of the sum of the parameters>" and
 * "digest <hash of every parameter's bits>", equal between runs exactly
 * when the final parameters are bitwise equal.
 *
 *   coal_ddp [--steps S] [--minibatches K] [--buckets NB] [--count N]
 *            [--float] [--out-of-place] [--nonblocking] [--per-step]
 *            [--short-last] [--extra KIND] [--no-mark] [--complete]
 *            [--rebuild-rank R [--rebuild-mid]]
 *   --rebuild-rank R: after step 0, rank R alone moves its buckets to new
 *            buffers (DDP rebuilds its buckets after the first iteration,
 *            and the allocator may give one rank the old addresses back and
 *            another new ones): the ranks then see different identities.
 *            R = -2: every rank moves them.  --rebuild-mid: the move comes
 *            after the first mini-batch of step 0 instead, where DDP makes
 *            it in a job with several backward passes per step.
 *   --complete: before each optimizer step, when coalescing left deferred
 *            reductions pending, complete them (ccshim_coalesce_complete)
 *            and take the gradient from the completed buckets again.
 *   --extra max|int|small|avg-like: one more reduction per mini-batch that
 *            coalescing must pass through untouched (MPI_MAX on a bucket,
 *            MPI_INT counts, an 8-byte scalar); its result is checked.
 */
#include <ccshim.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int steps = 4, kmb = 8, nb = 2, count = 1000, use_float, oop, nonblocking, per_step, short_last, no_mark, complete;
static int rebuild_rank = -1, rebuild_mid;
static const char *extra = "";
static int rank, W;

#define CHECK(call)                                                                                            \
    do {                                                                                                       \
        int rc_ = (call);                                                                                      \
        if (rc_ != MPI_SUCCESS) {                                                                              \
            fprintf(stderr, "coal_ddp: %s failed (%d)\n", #call, rc_);                                         \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                                      \
        }                                                                                                      \
    } while (0)

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(a, "--minibatches") && i + 1 < argc) kmb = atoi(argv[++i]);
        else if (!strcmp(a, "--buckets") && i + 1 < argc) nb = atoi(argv[++i]);
        else if (!strcmp(a, "--count") && i + 1 < argc) count = atoi(argv[++i]);
        else if (!strcmp(a, "--extra") && i + 1 < argc) extra = argv[++i];
        else if (!strcmp(a, "--rebuild-rank") && i + 1 < argc) rebuild_rank = atoi(argv[++i]);
        else if (!strcmp(a, "--rebuild-mid")) rebuild_mid = 1;
        else if (!strcmp(a, "--float")) use_float = 1;
        else if (!strcmp(a, "--out-of-place")) oop = 1;
        else if (!strcmp(a, "--nonblocking")) nonblocking = 1;
        else if (!strcmp(a, "--per-step")) per_step = 1;
        else if (!strcmp(a, "--short-last")) short_last = 1;
        else if (!strcmp(a, "--no-mark")) no_mark = 1;
        else if (!strcmp(a, "--complete")) complete = 1;
        else {
            fprintf(stderr, "coal_ddp: unknown argument '%s'\n", a);
            exit(2);
        }
    }
}

/* One bucket: a fixed buffer (and a fixed receive buffer out of place). */
struct bucket {
    void *buf, *recv;
    int off, len;
};

static double get(const void *b, int i) { return use_float ? ((const float *)b)[i] : ((const double *)b)[i]; }
static void put(void *b, int i, double v)
{
    if (use_float)
        ((float *)b)[i] = (float)v;
    else
        ((double *)b)[i] = v;
}

static void reduce(struct bucket *k)
{
    MPI_Datatype dt = use_float ? MPI_FLOAT : MPI_DOUBLE;
    const void *sb = oop ? k->buf : MPI_IN_PLACE;
    void *rb = oop ? k->recv : k->buf;
    if (nonblocking) {
        MPI_Request q;
        CHECK(MPI_Iallreduce(sb, rb, k->len, dt, MPI_SUM, MPI_COMM_WORLD, &q));
        CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    } else {
        CHECK(MPI_Allreduce(sb, rb, k->len, dt, MPI_SUM, MPI_COMM_WORLD));
    }
}

/* grad -> buckets (scaled by 1/W) -> all-reduce -> grad, as DDP does. */
static void sync(struct bucket *bk, void *g)
{
    const double inv = 1.0 / W;
    for (int j = 0; j < nb; j++) {
        struct bucket *k = &bk[j];
        for (int i = 0; i < k->len; i++)
            put(k->buf, i, get(g, k->off + i) * inv);
        reduce(k);
        const void *res = oop ? k->recv : k->buf;
        for (int i = 0; i < k->len; i++)
            put(g, k->off + i, get(res, i));
    }
}

/* Reductions that must pass through untouched; checked against the known
 * answer.  Returns the number of wrong results. */
static int extra_reductions(int step, int mb)
{
    int bad = 0;
    if (!strcmp(extra, "max")) {
        static double *v;
        if (!v)
            v = malloc(sizeof(double) * (size_t)count);
        for (int i = 0; i < count; i++)
            v[i] = rank + i + step + mb;
        CHECK(MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        for (int i = 0; i < count; i++)
            bad += v[i] != (double)(W - 1 + i + step + mb);
    } else if (!strcmp(extra, "int")) {
        static int *v;
        if (!v)
            v = malloc(sizeof(int) * (size_t)count);
        for (int i = 0; i < count; i++)
            v[i] = rank + i;
        CHECK(MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < count; i++)
            bad += v[i] != W * i + W * (W - 1) / 2;
    } else if (!strcmp(extra, "small")) {
        static double tokens;
        tokens = 10.0 * (rank + 1) + mb;
        CHECK(MPI_Allreduce(MPI_IN_PLACE, &tokens, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        bad += tokens != 10.0 * W * (W + 1) / 2 + (double)W * mb;
    }
    return bad;
}

/* --rebuild-rank: on the rank(s) named, the buckets move to new buffers
 * (the old ones stay allocated, so the addresses are new). */
static void move_buckets(struct bucket *bk, size_t es)
{
    if (rank != rebuild_rank && rebuild_rank != -2)
        return;
    for (int j = 0; j < nb; j++) {
        bk[j].buf = calloc((size_t)count, es);
        bk[j].recv = calloc((size_t)count, es);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &W);
    parse(argc, argv);
    const size_t es = use_float ? sizeof(float) : sizeof(double);
    const int np = nb * count;
    void *p = calloc((size_t)np, es), *g = calloc((size_t)np, es);
    struct bucket *bk = calloc((size_t)nb, sizeof *bk);
    for (int j = 0; j < nb; j++) {
        bk[j].off = j * count;
        bk[j].len = count;
        bk[j].buf = calloc((size_t)count, es);
        bk[j].recv = calloc((size_t)count, es);
    }
    for (int i = 0; i < np; i++)
        put(p, i, sin(0.1 * i));
    int bad = 0;
    for (int s = 0; s < steps; s++) {
        int k_this = short_last && s == steps - 1 ? kmb - 1 : kmb;
        memset(g, 0, es * (size_t)np); /* zero_grad */
        for (int mb = 0; mb < k_this; mb++) {
            /* "backward" of mini-batch mb: a rank-dependent, non-linear
             * function of the parameters, accumulated into grad. */
            for (int i = 0; i < np; i++)
                put(g, i, get(g, i) + sin(get(p, i) * (1 + 0.01 * mb) + 0.3 * rank + 0.01 * i) / (1 + mb));
            if (!per_step)
                sync(bk, g);
            bad += extra_reductions(s, mb);
            if (rebuild_mid && s == 0 && mb == 0)
                move_buckets(bk, es);
        }
        if (per_step)
            sync(bk, g);
        if (complete && CCSHIM_COALESCE_PENDING() && CCSHIM_COALESCE_COMPLETE() >= 0)
            for (int j = 0; j < nb; j++) /* the buckets hold the reduction now */
                for (int i = 0; i < bk[j].len; i++)
                    put(g, bk[j].off + i, get(oop ? bk[j].recv : bk[j].buf, i));
        for (int i = 0; i < np; i++) /* optimizer step */
            put(p, i, get(p, i) - 0.05 * get(g, i));
        if (!no_mark)
            CCSHIM_STEP_MARK();
        if (s == 0 && !rebuild_mid)
            move_buckets(bk, es);
    }
    double sum = 0;
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < np; i++) {
        double v = get(p, i);
        uint64_t bits;
        memcpy(&bits, &v, 8);
        h = (h ^ bits) * 1099511628211ULL;
        sum += v;
    }
    int total_bad = 0;
    MPI_Allreduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("checksum %a\n", sum);
        printf("sum %.17g\n", sum);
        printf("digest %016llx\n", (unsigned long long)h);
        printf("extra_wrong %d\n", total_bad);
    }
    MPI_Finalize();
    return 0;
}
