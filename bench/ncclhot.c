/*
 * ncclhot.c - what NCCL completion tracking adds to an intercepted NCCL call
 * (bench/nccl-track-bench.sh): the wrapper's bookkeeping (lookup, record,
 * sequence number, site probe, publish) around an empty "real" call, once
 * with tracking off and once on (the capture query, the stream slot, the
 * rate-limited event record on the test CUDA driver, tests/cuda), against
 * the bare call.  One process, trace off; the poller thread advances the
 * rate limit every 20 ms as in a job.  Needs the test libcuda.so.1 on the
 * library path.
 */
#include "ccs_config.h"
#include "nccl_track.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "record.h"
#include "trace_format.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) static int real_call(volatile int *x)
{
    return *x;
}

/* As nccl_wrap.c does around ncclAllReduce outside a group. */
__attribute__((noinline)) static int wrapped(volatile int *x, uintptr_t handle, cudaStream_t stream)
{
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, handle);
    struct ccs_call call = {.kind = CCS_KIND_ALLREDUCE,
                            .dtype = CCS_DT_FLOAT32,
                            .op = CCS_OP_SUM,
                            .backend = CCS_BE_NCCL,
                            .root = -1,
                            .count = 1,
                            .bytes = 4,
                            .buf = (void *)x};
    struct ccs_record *r = ccs_call_begin(c, &call, __builtin_return_address(0));
    int rc = real_call(x);
    if (r && atomic_load_explicit(&ccs_ntrack_on, memory_order_relaxed) && rc == 0 &&
        ccs_ntrack_after((ncclComm_t)handle, r->seq, stream, 0))
        r->flags |= CCS_F_CAPTURED;
    ccs_call_end(r, rc != 0);
    return rc;
}

static double loop(long iters, int which, volatile int *x, cudaStream_t s)
{
    double t0 = now();
    for (long i = 0; i < iters; i++)
        which ? wrapped(x, 0x1234, s) : real_call(x);
    return (now() - t0) / iters;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 20000000;
    volatile int x = 0;
    if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "ncclhot: the test libcuda.so.1 (tests/cuda) is not on the library path\n");
        return 77;
    }
    ccs_cfg.nccl_completion = 1;
    ccs_cfg.desync_period_ms = 20;
    ccs_cfg.desync_block_ms = 1000;
    ccs_comm_register(CCS_BE_NCCL, 0x1234, 1, 0, 0, 2, CCS_KIND_COMM_INIT, -1);
    cudaStream_t s = (cudaStream_t)0; /* the legacy stream of the test driver */
    double plain = 1e30, off = 1e30, on = 1e30;
    struct ccs_ntrack_stats st0, st1;
    ccs_ntrack_init(); /* finds the driver, starts the poller */
    if (!atomic_load(&ccs_ntrack_on)) {
        fprintf(stderr, "ncclhot: completion tracking did not start\n");
        return 1;
    }
    ccs_ntrack_stats(&st0);
    double secs = 0;
    /* Alternated trials (bare, off, on, ...), the best of each: a shared
     * machine's noise hits all three alike. */
    for (int trial = 0; trial < 7; trial++) {
        double p = loop(iters, 0, &x, s);
        atomic_store(&ccs_ntrack_on, 0);
        double a = loop(iters, 1, &x, s);
        atomic_store(&ccs_ntrack_on, 1);
        double t0 = now();
        double b = loop(iters, 1, &x, s);
        secs += (now() - t0) / 1e9;
        plain = p < plain ? p : plain;
        off = a < off ? a : off;
        on = b < on ? b : on;
    }
    ccs_ntrack_stats(&st1);
    printf("plain_ns %.2f\noff_ns %.2f\non_ns %.2f\ntracking_added_ns %.2f\nevents %llu\ncalls %ld\nseconds %.2f\n",
           plain, off, on, on - off, (unsigned long long)(st1.events - st0.events), 7 * iters, secs);
    return 0;
}
