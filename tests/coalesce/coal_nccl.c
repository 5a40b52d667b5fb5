/*
 * coal_nccl.c - coal_ddp's DDP-style job over NCCL, for the test-only host
 * NCCL (tests/nccl/libnccl.so.2: host buffers, no GPU).  Ranks come from
 * RANK / WORLD_SIZE; rank 0 publishes the ncclUniqueId in --id-file.
 *
 *   coal_nccl --id-file PATH [--steps S] [--minibatches K] [--count N]
 *             [--op sum|avg|premul|premul-dev] [--float] [--out-of-place]
 *             [--group] [--per-step] [--extra max|int|small]
 *
 * --op: how a bucket is reduced, each the way a DDP communication hook does:
 *   sum      bucket = grad / W, ncclSum        (DDP's default)
 *   avg      bucket = grad, ncclAvg
 *   premul   bucket = grad, PreMulSum with the host scalar 1/W
 *   premul-dev  the same with the scalar in (host test) "device" memory:
 *            coalescing must leave it alone
 * Output (rank 0): "digest <hash of the final parameters' bits>" and
 * "extra_wrong <wrong pass-through results>".
 */
#include <ccshim.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int steps = 3, kmb = 6, count = 1000, use_float, oop, group, per_step;
static const char *opname = "sum", *extra = "", *id_file;
static int rank, W;
static ncclComm_t comm;
static ncclRedOp_t bucket_op;
static double premul_scalar_d;
static float premul_scalar_f;

#define CHECK(call)                                                                                            \
    do {                                                                                                       \
        ncclResult_t rc_ = (call);                                                                             \
        if (rc_ != ncclSuccess) {                                                                              \
            fprintf(stderr, "coal_nccl: rank %d: %s failed: %s\n", rank, #call, ncclGetErrorString(rc_));      \
            exit(2);                                                                                           \
        }                                                                                                      \
    } while (0)

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(a, "--minibatches") && i + 1 < argc) kmb = atoi(argv[++i]);
        else if (!strcmp(a, "--count") && i + 1 < argc) count = atoi(argv[++i]);
        else if (!strcmp(a, "--op") && i + 1 < argc) opname = argv[++i];
        else if (!strcmp(a, "--extra") && i + 1 < argc) extra = argv[++i];
        else if (!strcmp(a, "--id-file") && i + 1 < argc) id_file = argv[++i];
        else if (!strcmp(a, "--float")) use_float = 1;
        else if (!strcmp(a, "--out-of-place")) oop = 1;
        else if (!strcmp(a, "--group")) group = 1;
        else if (!strcmp(a, "--per-step")) per_step = 1;
        else {
            fprintf(stderr, "coal_nccl: unknown argument '%s'\n", a);
            exit(2);
        }
    }
    if (!id_file) {
        fprintf(stderr, "coal_nccl: --id-file PATH is required\n");
        exit(2);
    }
}

/* Rank 0 writes the id to PATH.tmp and renames it; the others wait for it. */
static void init_comm(void)
{
    ncclUniqueId id;
    if (rank == 0) {
        CHECK(ncclGetUniqueId(&id));
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", id_file);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) || rename(tmp, id_file)) {
            perror("coal_nccl: id file");
            exit(2);
        }
    } else {
        FILE *f = NULL;
        for (int t = 0; t < 6000 && !(f = fopen(id_file, "rb")); t++)
            usleep(10000);
        if (!f || fread(&id, sizeof id, 1, f) != 1) {
            fprintf(stderr, "coal_nccl: rank %d: no id in %s\n", rank, id_file);
            exit(2);
        }
        fclose(f);
    }
    CHECK(ncclCommInitRank(&comm, W, id, rank));
}

static double get(const void *b, int i) { return use_float ? ((const float *)b)[i] : ((const double *)b)[i]; }
static void put(void *b, int i, double v)
{
    if (use_float)
        ((float *)b)[i] = (float)v;
    else
        ((double *)b)[i] = v;
}

static void allreduce(const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op)
{
    if (group)
        CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(s, r, n, dt, op, comm, NULL));
    if (group)
        CHECK(ncclGroupEnd());
}

static void sync_buckets(void *buf, void *recv, void *g)
{
    const double scale = !strcmp(opname, "sum") ? 1.0 / W : 1.0;
    for (int i = 0; i < count; i++)
        put(buf, i, get(g, i) * scale);
    allreduce(buf, oop ? recv : buf, (size_t)count, use_float ? ncclFloat32 : ncclFloat64, bucket_op);
    const void *res = oop ? recv : buf;
    for (int i = 0; i < count; i++)
        put(g, i, get(res, i));
}

static int extra_reductions(int step, int mb)
{
    int bad = 0;
    if (!strcmp(extra, "max")) {
        static double *v;
        if (!v)
            v = malloc(sizeof(double) * (size_t)count);
        for (int i = 0; i < count; i++)
            v[i] = rank + i + step + mb;
        allreduce(v, v, (size_t)count, ncclFloat64, ncclMax);
        for (int i = 0; i < count; i++)
            bad += v[i] != (double)(W - 1 + i + step + mb);
    } else if (!strcmp(extra, "int")) {
        static int32_t *v;
        if (!v)
            v = malloc(sizeof(int32_t) * (size_t)count);
        for (int i = 0; i < count; i++)
            v[i] = rank + i;
        allreduce(v, v, (size_t)count, ncclInt32, ncclSum);
        for (int i = 0; i < count; i++)
            bad += v[i] != W * i + W * (W - 1) / 2;
    } else if (!strcmp(extra, "small")) {
        static double tokens;
        tokens = 10.0 * (rank + 1) + mb;
        allreduce(&tokens, &tokens, 1, ncclFloat64, ncclSum);
        bad += tokens != 10.0 * W * (W + 1) / 2 + (double)W * mb;
    }
    return bad;
}

int main(int argc, char **argv)
{
    rank = env_int("RANK", 0);
    W = env_int("WORLD_SIZE", 1);
    parse(argc, argv);
    init_comm();
    ncclDataType_t dt = use_float ? ncclFloat32 : ncclFloat64;
    premul_scalar_d = 1.0 / W;
    premul_scalar_f = (float)(1.0 / W);
    void *scalar = use_float ? (void *)&premul_scalar_f : (void *)&premul_scalar_d;
    if (!strcmp(opname, "sum"))
        bucket_op = ncclSum;
    else if (!strcmp(opname, "avg"))
        bucket_op = ncclAvg;
    else if (!strcmp(opname, "premul"))
        CHECK(ncclRedOpCreatePreMulSum(&bucket_op, scalar, dt, ncclScalarHostImmediate, comm));
    else if (!strcmp(opname, "premul-dev"))
        CHECK(ncclRedOpCreatePreMulSum(&bucket_op, scalar, dt, ncclScalarDevice, comm));
    else {
        fprintf(stderr, "coal_nccl: unknown --op %s\n", opname);
        return 2;
    }
    const size_t es = use_float ? sizeof(float) : sizeof(double);
    void *p = calloc((size_t)count, es), *g = calloc((size_t)count, es);
    void *buf = calloc((size_t)count, es), *recv = calloc((size_t)count, es);
    for (int i = 0; i < count; i++)
        put(p, i, sin(0.1 * i));
    int bad = 0;
    for (int s = 0; s < steps; s++) {
        memset(g, 0, es * (size_t)count);
        for (int mb = 0; mb < kmb; mb++) {
            for (int i = 0; i < count; i++)
                put(g, i, get(g, i) + sin(get(p, i) * (1 + 0.01 * mb) + 0.3 * rank + 0.01 * i) / (1 + mb));
            if (!per_step)
                sync_buckets(buf, recv, g);
            bad += extra_reductions(s, mb);
        }
        if (per_step)
            sync_buckets(buf, recv, g);
        for (int i = 0; i < count; i++)
            put(p, i, get(p, i) - 0.05 * get(g, i));
        CCSHIM_STEP_MARK();
    }
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < count; i++) {
        double v = get(p, i);
        uint64_t bits;
        memcpy(&bits, &v, 8);
        h = (h ^ bits) * 1099511628211ULL;
    }
    int32_t total_bad = bad;
    CHECK(ncclAllReduce(&total_bad, &total_bad, 1, ncclInt32, ncclSum, comm, NULL));
    if (rank == 0) {
        printf("digest %016llx\n", (unsigned long long)h);
        printf("extra_wrong %d\n", (int)total_bad);
    }
    ncclCommDestroy(comm);
    return 0;
}
