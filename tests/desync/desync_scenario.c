/*
 * desync_scenario.c - an MPI program that goes out of step on purpose, for
 * the shell tests in tests/desync and bench/desync-bench.sh.
 *
 *   desync_scenario SCENARIO [ITERS [INJECT_AT [CULPRIT]]]
 *
 * Every rank runs ITERS (default 5) iterations of a 4-float MPI_SUM
 * all-reduce on MPI_COMM_WORLD, then MPI_Finalize.  At iteration INJECT_AT
 * (default 2, 0-based) rank CULPRIT (default 1) does something else:
 *   ok       nothing (healthy)
 *   skip     skips the all-reduce
 *   extra    issues one more all-reduce
 *   count    count 8 instead of 4
 *   dtype    MPI_INT instead of MPI_FLOAT (same bytes)
 *   op       MPI_MAX instead of MPI_SUM
 *   root     a broadcast (everyone) with root 1 on the culprit, 0 elsewhere
 *   kind     a broadcast where the others all-reduce
 *   sigtype  a broadcast (everyone) of 4 MPI_INT on the culprit, 4 MPI_FLOAT
 *            elsewhere: same bytes, other basic types
 *   derived  a broadcast (everyone) of 1 x contiguous(8, MPI_FLOAT) on the
 *            culprit, 4 MPI_FLOAT elsewhere
 *   exit     exits (exit(0), no MPI_Finalize) instead
 *   kill     dies of SIGKILL instead (no exit handler runs)
 *   split    MPI_COMM_WORLD is split in halves (ranks 0-1, 2-...); the
 *            loop runs on the halves and the culprit skips in its half
 *   deadlock every rank dups MPI_COMM_WORLD first; the culprit enters a
 *            barrier on the duplicate that nobody else reaches, while the
 *            others wait in the all-reduce: both sides blocked for good
 *   healthy  random compute of 1.2-2.5 s on one random rank per iteration
 * Mismatched calls may complete (MPI cannot tell): every rank then sleeps
 * SETTLE_MS (env, default 600) before finalizing so the detector has time.
 *
 * Prints "culprit_call_ms=<CLOCK_MONOTONIC ms>" on the culprit just before
 * the odd call, for the latency checks.
 */
#include "../test_clock.h"
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void mark(void)
{
    printf("culprit_call_ms=%.3f\n", mono_ms());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *sc = argc > 1 ? argv[1] : "ok";
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    int at = argc > 3 ? atoi(argv[3]) : 2;
    int culprit = argc > 4 ? atoi(argv[4]) : 1;
    long settle = getenv("SETTLE_MS") ? atol(getenv("SETTLE_MS")) : 600;
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm = MPI_COMM_WORLD;
    if (strcmp(sc, "split") == 0) {
        MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : 1, rank, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    }
    MPI_Comm dup = MPI_COMM_NULL;
    if (strcmp(sc, "deadlock") == 0)
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    unsigned seed = 12345;
    for (int it = 0; it < iters; it++) {
        if (strcmp(sc, "healthy") == 0) {
            /* The same pseudo-random choice on every rank. */
            seed = seed * 1103515245u + 12345u;
            int who = (int)((seed >> 16) % (unsigned)size);
            long ms = 1200 + (long)((seed >> 8) % 1300u);
            if (rank == who)
                sleep_ms(ms);
        }
        int me = rank == culprit && it == at;
        if (me && strcmp(sc, "skip") == 0) {
            mark();
            continue;
        }
        if (me && strcmp(sc, "split") == 0) {
            mark();
            continue;
        }
        if (me && strcmp(sc, "kill") == 0) {
            sleep_ms(300);
            mark();
            raise(SIGKILL);
        }
        if (me && strcmp(sc, "exit") == 0) {
            sleep_ms(300); /* the others are blocked by now */
            mark();
            exit(0);
        }
        if (me && strcmp(sc, "deadlock") == 0) {
            mark();
            MPI_Barrier(dup); /* never completes */
        }
        if (me && strcmp(sc, "extra") == 0) {
            mark();
            MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_SUM, comm);
        }
        if (me && strcmp(sc, "count") == 0) {
            mark();
            MPI_Allreduce(in, out, 8, MPI_FLOAT, MPI_SUM, comm);
        } else if (me && strcmp(sc, "dtype") == 0) {
            mark();
            MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comm);
        } else if (me && strcmp(sc, "op") == 0) {
            mark();
            MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_MAX, comm);
        } else if (it == at && strcmp(sc, "root") == 0) {
            if (me)
                mark();
            MPI_Bcast(in, 4, MPI_FLOAT, me ? 1 : 0, comm);
        } else if (it == at && strcmp(sc, "sigtype") == 0) {
            if (me)
                mark();
            MPI_Bcast(in, 4, me ? MPI_INT : MPI_FLOAT, 0, comm);
        } else if (it == at && strcmp(sc, "derived") == 0) {
            MPI_Datatype c8;
            MPI_Type_contiguous(8, MPI_FLOAT, &c8);
            MPI_Type_commit(&c8);
            if (me)
                mark();
            if (me)
                MPI_Bcast(in, 1, c8, 0, comm);
            else
                MPI_Bcast(in, 4, MPI_FLOAT, 0, comm);
            MPI_Type_free(&c8);
        } else if (me && strcmp(sc, "kind") == 0) {
            mark();
            MPI_Bcast(in, 4, MPI_FLOAT, 0, comm);
        } else {
            MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_SUM, comm);
        }
    }
    if (strcmp(sc, "ok") != 0 && strcmp(sc, "healthy") != 0)
        sleep_ms(settle);
    if (comm != MPI_COMM_WORLD)
        MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
