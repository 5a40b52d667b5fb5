/*
 * nccl_track.c - one-rank scenarios of NCCL completion tracking on the test
 * NCCL and the test CUDA driver (tests/nccl/nccl-completion.sh):
 *
 *   nccl_track plain      no CUDA use: 8 all-reduces on the synchronous test
 *                         NCCL; prints whether libcuda is mapped afterwards
 *   nccl_track capture    (FAKENCCL_ASYNC=1) 3 all-reduces on a stream, then
 *                         4 while the stream is captured, then 3 more; prints
 *                         the test driver's counters and the communicators
 *                         the test NCCL created
 *   nccl_track slow       (FAKENCCL_ASYNC=1, FAKENCCL_DELAY_MS) one all-reduce
 *                         on a stream, waited for: a device that takes long
 *   nccl_track nonblocking  (FAKENCCL_ASYNC=1) a nonblocking ncclCommSplit,
 *                         waited for with ncclCommGetAsyncError as NCCL's
 *                         documentation says, then 6 all-reduces on it
 *
 * The program loads the driver itself (dlopen, like a CUDA program), after
 * the first communicator: it never links CUDA.
 */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cuda/fake_cuda.h"
#include "../test_clock.h"

#define N 512 /* doubles: 4 KiB, above the coalescing floor */

static double buf[N];

static int mapped(const char *name)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

static int check(const char *what, ncclResult_t rc)
{
    if (rc == ncclSuccess)
        return 0;
    fprintf(stderr, "nccl_track: %s failed: %d\n", what, (int)rc);
    exit(1);
}

static ncclComm_t world(void)
{
    ncclUniqueId id;
    ncclComm_t c;
    check("ncclGetUniqueId", ncclGetUniqueId(&id));
    check("ncclCommInitRank", ncclCommInitRank(&c, 1, id, 0));
    return c;
}

static struct {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*begin)(CUstream, CUstreamCaptureMode);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*sync)(CUstream);
    void (*counts)(struct fakecuda_counts *);
} cu;

static void load_cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "nccl_track: no libcuda.so.1: %s\n", dlerror());
        exit(1);
    }
    *(void **)&cu.stream_create = dlsym(h, "cuStreamCreate");
    *(void **)&cu.begin = dlsym(h, "cuStreamBeginCapture_v2");
    *(void **)&cu.end = dlsym(h, "cuStreamEndCapture");
    *(void **)&cu.sync = dlsym(h, "cuStreamSynchronize");
    *(void **)&cu.counts = dlsym(h, "fakecuda_counts");
    if (!cu.stream_create || !cu.begin || !cu.end || !cu.sync || !cu.counts) {
        fprintf(stderr, "nccl_track: libcuda.so.1 is not the test driver (tests/cuda)\n");
        exit(1);
    }
}

static void allreduces(ncclComm_t c, CUstream s, int n)
{
    for (int i = 0; i < n; i++)
        check("ncclAllReduce", ncclAllReduce(buf, buf, N, ncclFloat64, ncclSum, c, (cudaStream_t)s));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    for (int i = 0; i < N; i++)
        buf[i] = 1.0;
    if (strcmp(mode, "plain") == 0) {
        ncclComm_t c = world();
        allreduces(c, NULL, 8);
        sleep_ms(400); /* several periods of the background thread */
        check("ncclCommDestroy", ncclCommDestroy(c));
        printf("libcuda=%d\n", mapped("libcuda.so"));
        return 0;
    }
    ncclComm_t c = world();
    load_cuda();
    CUstream s;
    if (cu.stream_create(&s, 0) != CUDA_SUCCESS)
        return 1;
    if (strcmp(mode, "capture") == 0) {
        unsigned long *created = dlsym(RTLD_DEFAULT, "fakenccl_comms_created");
        allreduces(c, s, 3);
        cu.sync(s);
        sleep_ms(100);
        struct fakecuda_counts k0, k1;
        cu.counts(&k0);
        unsigned long before = created ? *created : 999;
        if (cu.begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS)
            return 1;
        allreduces(c, s, 4);
        sleep_ms(200); /* the background thread runs while the stream is captured */
        CUgraph g;
        if (cu.end(s, &g) != CUDA_SUCCESS)
            return 1;
        cu.counts(&k1);
        allreduces(c, s, 3);
        cu.sync(s);
        sleep_ms(200);
        printf("recorded_during_capture=%llu\n", (unsigned long long)(k1.events_recorded - k0.events_recorded));
        printf("recorded_while_capturing=%llu\n", (unsigned long long)k1.recorded_while_capturing);
        printf("queried_while_capturing=%llu\n", (unsigned long long)k1.queried_while_capturing);
        printf("comms_created_during=%lu\n", created ? *created - before : 999);
        struct fakecuda_counts k2;
        cu.counts(&k2);
        printf("events_created=%llu\n", (unsigned long long)k2.events_created);
        printf("events_recorded_total=%s\n", k2.events_recorded > 0 ? "some" : "none");
    } else if (strcmp(mode, "slow") == 0) {
        allreduces(c, s, 1);
        cu.sync(s);
        sleep_ms(300);
        printf("slow sum=%g\n", buf[0]);
    } else if (strcmp(mode, "nonblocking") == 0) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclComm_t sub = NULL;
        ncclResult_t rc = ncclCommSplit(c, 0, 0, &sub, &cfg);
        if (rc != ncclInProgress && rc != ncclSuccess)
            check("ncclCommSplit", rc);
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress)
            check("ncclCommGetAsyncError", ncclCommGetAsyncError(sub, &st));
        check("the split communicator", st);
        int rank = -1, size = -1;
        check("ncclCommUserRank", ncclCommUserRank(sub, &rank));
        check("ncclCommCount", ncclCommCount(sub, &size));
        allreduces(sub, s, 6);
        cu.sync(s);
        printf("split rank=%d size=%d sum=%g\n", rank, size, buf[0]);
        check("ncclCommDestroy", ncclCommDestroy(sub));
    } else {
        fprintf(stderr, "usage: nccl_track plain|capture|slow|nonblocking\n");
        return 2;
    }
    check("ncclCommDestroy", ncclCommDestroy(c));
    return 0;
}
