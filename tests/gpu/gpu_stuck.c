/*
 * gpu_stuck.c - an NCCL all-reduce that is enqueued but cannot complete
 * (check 5 of tests/gpu/run-device-checks.sh).  One rank on device 0: the
 * stream is made to wait for a host flag (cuStreamWaitValue32), then an
 * out-of-place ncclAllReduce is enqueued behind the wait.  The program
 * shows the call returned while the work is pending (the stream is not
 * ready and the receive buffer still holds zeros), writes MARKER, holds the
 * state HOLD_MS (the calling script reads the shim's trace meanwhile), then:
 *
 *   --release  sets the flag: the all-reduce completes (receive buffer 1.0);
 *   --abort    calls ncclCommAbort on the stuck communicator (through the
 *              preloaded shim, as CCSHIM_ON_DESYNC=abort does through the
 *              real function) and reports that it returned, then exits.
 *              Should NCCL wait for the user stream inside the abort, a
 *              watchdog thread releases the flag after 5 s and the output
 *              says so, rather than hanging.
 *
 *   gpu_stuck --release|--abort MARKER HOLD_MS
 * Exit status: 0 as described, 1 when an expectation failed, 3 no GPU/NCCL.
 */
#include "../test_clock.h"
#include "gpu_cuda.h"

#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 1024

static volatile uint32_t *flag;
static atomic_int abort_done, released_by_watchdog;

/* Releases the stream if ncclCommAbort has not returned after 5 s. */
static void *watchdog(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500 && !atomic_load(&abort_done); i++)
        usleep(10000);
    if (!atomic_load(&abort_done)) {
        atomic_store(&released_by_watchdog, 1);
        *flag = 1;
        __sync_synchronize();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "--release") && strcmp(argv[1], "--abort"))) {
        fprintf(stderr, "usage: gpu_stuck --release|--abort MARKER HOLD_MS\n");
        return 2;
    }
    int do_abort = !strcmp(argv[1], "--abort");
    long hold_ms = atol(argv[3]);
    struct gc_api cu;
    gc_ptr send, recv, dflag;
    gc_stream stream;
    if (gc_load(&cu) || cu.MemAlloc(&send, N * 4) || cu.MemAlloc(&recv, N * 4) ||
        cu.MemsetD32(send, 0x3f800000u /* 1.0f */, N) || cu.MemsetD32(recv, 0, N) ||
        cu.MemHostAlloc((void **)&flag, 4, GC_HOSTALLOC_DEVICEMAP) ||
        cu.MemHostGetDevicePointer(&dflag, (void *)flag, 0) || cu.StreamCreate(&stream, GC_STREAM_NON_BLOCKING))
        return 3;
    *flag = 0;
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t rc;
    if ((rc = ncclGetUniqueId(&id)) || (rc = ncclCommInitRank(&comm, 1, id, 0))) {
        fprintf(stderr, "gpu_stuck: NCCL set-up failed: %s\n", ncclGetErrorString(rc));
        return 3;
    }
    gc_result cr = cu.StreamWaitValue32(stream, dflag, 1, GC_WAIT_VALUE_GEQ);
    if (cr) {
        fprintf(stderr, "gpu_stuck: cuStreamWaitValue32 not supported here (CUresult %d)\n", cr);
        return 3;
    }
    double t0 = mono_ms();
    rc = ncclAllReduce((void *)(uintptr_t)send, (void *)(uintptr_t)recv, N, ncclFloat32, ncclSum, comm,
                       (cudaStream_t)stream);
    double t_enq = mono_ms() - t0;
    float host[N];
    int fail = 0;
    gc_result q = cu.StreamQuery(stream);
    /* The legacy default stream does not wait for a non-blocking stream. */
    if (rc || cu.MemcpyDtoH(host, recv, sizeof host)) {
        fprintf(stderr, "gpu_stuck: ncclAllReduce: %s\n", ncclGetErrorString(rc));
        return 1;
    }
    printf("enqueued: ncclAllReduce returned %s in %.3f ms; stream %s; recv[0] = %g\n", ncclGetErrorString(rc),
           t_enq, q == GC_NOT_READY ? "not ready" : "ready", host[0]);
    fail |= q != GC_NOT_READY || host[0] != 0.0f;
    FILE *m = fopen(argv[2], "w");
    if (m)
        fclose(m);
    usleep((useconds_t)hold_ms * 1000);
    q = cu.StreamQuery(stream);
    printf("after %ld ms: stream %s\n", hold_ms, q == GC_NOT_READY ? "still not ready (stuck)" : "ready");
    fail |= q != GC_NOT_READY;
    if (do_abort) {
        pthread_t w;
        pthread_create(&w, NULL, watchdog, NULL);
        t0 = mono_ms();
        rc = ncclCommAbort(comm);
        atomic_store(&abort_done, 1);
        printf("abort: ncclCommAbort returned %s after %.1f ms %s\n", ncclGetErrorString(rc), mono_ms() - t0,
               atomic_load(&released_by_watchdog) ? "(stream released by the watchdog after 5 s)"
                                                  : "with the all-reduce still pending");
        fflush(stdout);
        _exit(fail || rc ? 1 : 0); /* the stream stays blocked; the driver reclaims it at exit */
    }
    *flag = 1;
    __sync_synchronize();
    if (cu.StreamSynchronize(stream) || cu.MemcpyDtoH(host, recv, sizeof host))
        return 1;
    printf("released: stream complete; recv[0] = %g (expected 1)\n", host[0]);
    fail |= host[0] != 1.0f;
    ncclCommDestroy(comm);
    return fail;
}
