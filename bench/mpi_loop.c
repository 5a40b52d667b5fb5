/*
 * mpi_loop.c - a tight loop of small MPI_Allreduce calls; rank 0 prints the
 * mean time per call, and the median over chunks of CHUNK calls: a run
 * preempted now and then by other load keeps its median, not its mean.
 * Costs paid every few calls (a page fault every 46 calls, a cache miss)
 * are inside every chunk and so inside the median.  Run with and without
 * the preload by bench/overhead.sh.
 *
 * With "ab" as third argument the loop alternates chunks through MPI_Allreduce
 * (the preload's wrapper when there is one) and chunks straight into the MPI
 * library's PMPI_Allreduce (looked up in libmpi itself, past any preload),
 * in one process, and prints both medians and the median of the differences
 * of neighbouring chunks: what the wrapper adds per call, measured side by
 * side so that load that comes and goes hits both alike.  Without a preload
 * both paths are the same and the difference is noise around 0.
 * usage: mpi_loop ITERATIONS [BYTES [ab]]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1000

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef int allreduce_fn(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

/* PMPI_Allreduce of the MPI library itself; NULL when not found. */
static allreduce_fn *real_allreduce(void)
{
    const char *names[] = {getenv("MPI_LOOP_LIBMPI"), "libmpi.so.40", "libmpi.so.12", "libmpi.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = names[i] ? dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD) : NULL;
        void *f = h ? dlsym(h, "PMPI_Allreduce") : NULL;
        if (f)
            return (allreduce_fn *)f;
    }
    return NULL;
}

static int side_by_side(long iters, double *x, double *y, int n, int rank)
{
    allreduce_fn *real = real_allreduce();
    if (!real) {
        if (rank == 0)
            fprintf(stderr, "mpi_loop: PMPI_Allreduce not found in libmpi (set MPI_LOOP_LIBMPI)\n");
        return 1;
    }
    long pairs = iters / (2 * CHUNK) > 0 ? iters / (2 * CHUNK) : 1;
    double *a = calloc((size_t)pairs, sizeof *a), *b = calloc((size_t)pairs, sizeof *b),
           *d = calloc((size_t)pairs, sizeof *d);
    for (long i = 0; i < iters / 10; i++) { /* warm up both */
        MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        real(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (long k = 0; k < pairs; k++) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < CHUNK; i++)
            real(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double t1 = MPI_Wtime();
        for (long i = 0; i < CHUNK; i++)
            MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double t2 = MPI_Wtime();
        a[k] = (t1 - t0) * 1e9 / CHUNK;
        b[k] = (t2 - t1) * 1e9 / CHUNK;
        d[k] = b[k] - a[k];
    }
    if (rank == 0)
        printf("ab_real_ns %.2f\nab_wrapped_ns %.2f\nab_added_ns %.2f\n", median(a, pairs), median(b, pairs),
               median(d, pairs));
    free(a);
    free(b);
    free(d);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int bytes = argc > 2 ? atoi(argv[2]) : 8;
    int n = bytes / 8 > 0 ? bytes / 8 : 1, rank;
    double *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y);
    long nchunks = iters / CHUNK > 0 ? iters / CHUNK : 1;
    double *chunk = calloc((size_t)nchunks, sizeof *chunk);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 3 && strcmp(argv[3], "ab") == 0) {
        int rc = side_by_side(iters, x, y, n, rank);
        MPI_Finalize();
        return rc;
    }
    for (long i = 0; i < iters / 10; i++) /* warm up */
        MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), tc = t0;
    long done = 0;
    for (long k = 0; k < nchunks; k++) {
        long m = k == nchunks - 1 ? iters - done : CHUNK;
        for (long i = 0; i < m; i++)
            MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double t = MPI_Wtime();
        chunk[k] = (t - tc) * 1e9 / (double)(m > 0 ? m : 1);
        tc = t;
        done += m;
    }
    double t1 = tc;
    double med = median(chunk, nchunks);
    if (rank == 0)
        printf("ns_per_call %.2f\nns_per_call_median %.2f\n", (t1 - t0) * 1e9 / (double)iters, med);
    free(chunk);
    free(x);
    free(y);
    MPI_Finalize();
    return 0;
}
