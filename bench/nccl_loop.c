/*
 * nccl_loop.c - a loop of 8-byte ncclAllReduce calls on a one-rank
 * communicator of the test NCCL (tests/nccl: host memory, no GPU), for
 * counting with callgrind what the preloaded wrapper adds per call
 * (bench/nccl-track-bench.sh).  ITERATIONS/10 untimed calls come first.
 * usage: nccl_loop ITERATIONS
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    ncclComm_t comm;
    int dev = 0;
    static double x[1] = {1}, y[1];
    if (n <= 0 || ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) {
        fprintf(stderr, "usage: nccl_loop ITERATIONS (> 0), with the test NCCL\n");
        return 2;
    }
    for (long i = 0; i < n / 10 + n; i++)
        if (ncclAllReduce(x, y, 1, ncclFloat64, ncclSum, comm, 0) != ncclSuccess) {
            fprintf(stderr, "nccl_loop: ncclAllReduce failed\n");
            return 1;
        }
    ncclCommDestroy(comm);
    printf("nccl_loop %ld calls, result %g\n", n / 10 + n, y[0]);
    return 0;
}
