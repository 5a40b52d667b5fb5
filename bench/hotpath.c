/*
 * hotpath.c - the shim's bookkeeping alone: communicator lookup, record,
 * sequence number, call-site probe and publish, around an empty "real"
 * call, against the same loop without them.  One process, trace off.
 */
#include "shim.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) static int real_call(volatile int *x) { return *x; }

__attribute__((noinline)) static int wrapped(volatile int *x, uintptr_t handle)
{
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_MPI, handle);
    struct ccs_call call = {.kind = CCS_KIND_ALLREDUCE, .dtype = CCS_DT_FLOAT64, .op = CCS_OP_SUM,
                            .backend = CCS_BE_MPI, .root = -1, .count = 1, .bytes = 8, .buf = (void *)x};
    struct ccs_record *r = ccs_call_begin(c, &call, __builtin_return_address(0));
    int rc = real_call(x);
    ccs_call_end(r, rc != 0);
    return rc;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 20000000;
    volatile int x = 0;
    ccs_comm_register(CCS_BE_MPI, 0x1234, 1, 0, 0, 2, CCS_KIND_COMM_INIT, -1);
    double best_plain = 1e30, best_shim = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now();
        for (long i = 0; i < iters; i++)
            real_call(&x);
        double t1 = now();
        for (long i = 0; i < iters; i++)
            wrapped(&x, 0x1234);
        double t2 = now();
        if ((t1 - t0) / iters < best_plain)
            best_plain = (t1 - t0) / iters;
        if ((t2 - t1) / iters < best_shim)
            best_shim = (t2 - t1) / iters;
    }
    printf("plain_ns %.2f\nshim_ns %.2f\nadded_ns %.2f\n", best_plain, best_shim, best_shim - best_plain);
    return 0;
}
