/*
 * pysite_hotpath.c - what annotated (Python) call sites add to the hot
 * path: the shim's bookkeeping around an empty "real" call with no current
 * site and with one, and the two calls a language helper makes per
 * wrapped call (ccshim_annotate_id to set, and again to restore), and
 * ccshim_annotate of a text already interned.  One process, trace off.
 */
#include "ccshim.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "record.h"
#include "trace_format.h"
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

typedef void (*loop_fn)(long iters, volatile int *x, uint32_t id);

static void loop_record(long iters, volatile int *x, uint32_t id)
{
    (void)id;
    for (long i = 0; i < iters; i++)
        wrapped(x, 0x1234);
}

/* What a wrapped Python call adds in C: set the site, then restore. */
static void loop_set_restore(long iters, volatile int *x, uint32_t id)
{
    for (long i = 0; i < iters; i++) {
        ccshim_annotate_id(id);
        wrapped(x, 0x1234);
        ccshim_annotate_id(0);
    }
}

static void loop_intern_hit(long iters, volatile int *x, uint32_t id)
{
    (void)id;
    for (long i = 0; i < iters; i++) {
        ccshim_annotate("train.py:318 in train_step");
        wrapped(x, 0x1234);
    }
}

static double best(loop_fn fn, long iters, volatile int *x, uint32_t id)
{
    double b = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now();
        fn(iters, x, id);
        double t = (now() - t0) / (double)iters;
        if (t < b)
            b = t;
    }
    return b;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 10000000;
    volatile int x = 0;
    ccs_comm_register(CCS_BE_MPI, 0x1234, 1, 0, 0, 2, CCS_KIND_COMM_INIT, -1);
    uint32_t id = ccshim_annotate("train.py:318 in train_step");
    ccshim_annotate_id(0);
    double off = best(loop_record, iters, &x, id);
    ccshim_annotate_id(id);
    double on = best(loop_record, iters, &x, id);
    ccshim_annotate_id(0);
    double setrest = best(loop_set_restore, iters, &x, id);
    double intern = best(loop_intern_hit, iters / 10, &x, id);
    printf("record_off_ns %.2f\nrecord_on_ns %.2f\nset_restore_ns %.2f\nintern_hit_ns %.2f\n", off, on, setrest,
           intern);
    return 0;
}
