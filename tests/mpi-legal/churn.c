/*
 * churn.c - communicator churn at a high rate, a correct program for
 * tests/mpi-legal/churn.sh (and churn-load.sh, under make check-timing):
 * ROUNDS rounds of (MPI_Comm_dup of the world, ITERS x (MPI_Allgather +
 * MPI_Barrier) on the duplicate, MPI_Comm_free), as mpi4py's test suite
 * does with a COMM_WORLD.Dup() per test.  Every rank makes the same calls
 * on every communicator and frees it only after its last call, so ccshim
 * must report nothing: a freed communicator's last records come in bursts
 * (thousands of collectives a second) just before it leaves the table.
 *
 *   churn [ROUNDS [ITERS]]   default 40 600
 *
 * Each rank checks what it gathered (exit 2 on a wrong value) and prints one
 * line, "churn rank R: ROUNDS rounds, N collectives, CHECKSUM", so a run
 * under ccshim can be compared with a plain run.  Works on 1 or more ranks.
 */
#include "../mpi_check.h"
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;

#define CHECK(call) CHECK_AS(rank, call)

/* A count from the command line: a positive integer, or exit 2 naming it. */
static long arg_count(const char *what, const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v <= 0 || v > 1000000) {
        if (rank == 0)
            fprintf(stderr, "churn: %s '%s': expected an integer from 1 to 1000000\n", what, s);
        MPI_Finalize();
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long rounds = argc > 1 ? arg_count("ROUNDS", argv[1]) : 40;
    long iters = argc > 2 ? arg_count("ITERS", argv[2]) : 600;
    int *all = calloc((size_t)size, sizeof *all);
    if (!all) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t h = 1469598103934665603ULL;
    long calls = 0;
    for (long r = 0; r < rounds; r++) {
        MPI_Comm c;
        CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        for (long i = 0; i < iters; i++) {
            int mine = (int)((r * 7919 + i) * 31 + rank);
            CHECK(MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, c));
            for (int k = 0; k < size; k++) {
                if (all[k] != (int)((r * 7919 + i) * 31 + k)) {
                    fprintf(stderr, "rank %d: round %ld call %ld: got %d from rank %d\n", rank, r, i, all[k], k);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
                h = (h ^ (uint32_t)all[k]) * 1099511628211ULL;
            }
            CHECK(MPI_Barrier(c));
            calls += 2;
        }
        CHECK(MPI_Comm_free(&c));
    }
    free(all);
    printf("churn rank %d: %ld rounds, %ld collectives, %016llx\n", rank, rounds, calls, (unsigned long long)h);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
