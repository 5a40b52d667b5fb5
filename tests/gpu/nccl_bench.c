/*
 * nccl_bench.c - enqueue time of small ncclAllReduce calls (check 4 of
 * tests/gpu/run-device-checks.sh).  One rank, one communicator; times only
 * the loop of enqueues (batches of --batch calls, then a synchronisation
 * outside the timing, so the launch queue never fills) and prints the median
 * over --reps batches of the time per call.  The shim's overhead is this
 * figure with the preload divided by the figure without, measured side by
 * side by the calling script.
 *
 *   nccl_bench [--host] [--count N] [--batch N] [--reps N]
 *
 * --host: host buffers and no CUDA call (test-only host NCCLs).
 * Output: one line "enqueue_ns_per_call X count N batch N reps N mode cuda|host".
 */
#include "gpu_cuda.h"

#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long arg_long(const char *opt, const char *s, long lo)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || v < lo) {
        fprintf(stderr, "nccl_bench: invalid %s '%s' (expected an integer >= %ld)\n", opt, s ? s : "", lo);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    int host = 0;
    long count = 256, batch = 200, reps = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--host"))
            host = 1;
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = arg_long("--count", argv[++i], 1);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = arg_long("--batch", argv[++i], 1);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = arg_long("--reps", argv[++i], 1);
        else {
            fprintf(stderr, "nccl_bench: unknown option '%s' (expected --host, --count, --batch, --reps)\n", argv[i]);
            return 2;
        }
    }
    struct gc_api cu;
    void *buf = NULL;
    gc_stream stream = NULL;
    if (host) {
        buf = calloc((size_t)count, sizeof(float));
    } else {
        gc_ptr d;
        if (gc_load(&cu) || cu.MemAlloc(&d, (size_t)count * sizeof(float)) ||
            cu.MemsetD32(d, 0x3f800000u /* 1.0f */, (size_t)count) ||
            cu.StreamCreate(&stream, GC_STREAM_NON_BLOCKING))
            return 3;
        buf = (void *)(uintptr_t)d;
    }
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t rc;
    if ((rc = ncclGetUniqueId(&id)) || (rc = ncclCommInitRank(&comm, 1, id, 0))) {
        fprintf(stderr, "nccl_bench: NCCL set-up failed: %s\n", ncclGetErrorString(rc));
        return 3;
    }
    double *per = calloc((size_t)reps, sizeof *per);
    for (long r = -2; r < reps; r++) { /* two warm-up batches */
        double t0 = now_ns();
        for (long i = 0; i < batch; i++)
            if ((rc = ncclAllReduce(buf, buf, (size_t)count, ncclFloat32, ncclSum, comm, (cudaStream_t)stream))) {
                fprintf(stderr, "nccl_bench: ncclAllReduce failed: %s\n", ncclGetErrorString(rc));
                return 3;
            }
        double t1 = now_ns();
        if (!host && cu.StreamSynchronize(stream)) {
            fprintf(stderr, "nccl_bench: cuStreamSynchronize failed\n");
            return 3;
        }
        if (r >= 0)
            per[r] = (t1 - t0) / (double)batch;
    }
    qsort(per, (size_t)reps, sizeof *per, cmp_double);
    printf("enqueue_ns_per_call %.1f count %ld batch %ld reps %ld mode %s\n", per[reps / 2], count, batch, reps,
           host ? "host" : "cuda");
    ncclCommDestroy(comm);
    return 0;
}
