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
 *   split    MPI_COMM_WORLD split in two (ranks below SPLIT_AT, env, default
 *            2, and the rest); the loop runs on both, the culprit skips in its
 *   deadlock every rank dups MPI_COMM_WORLD first; the culprit enters a
 *            barrier on the duplicate that nobody else reaches, while the
 *            others wait in the all-reduce: both sides blocked for good
 *   healthy  random compute of 1.2-2.5 s on one random rank per iteration
 *   compute  the culprit computes COMPUTE_MS (env, default 1500) before
 *            the call while the others wait in it (healthy)
 * Mismatched calls may complete (MPI cannot tell): every rank then sleeps
 * SETTLE_MS (env, default 600) before finalizing so the detector has time.
 * WAIT_VERDICT (env, set): instead, every rank finalizes as soon as its own
 * log (CCSHIM_LOG, "%r" its rank) holds a verdict line, at most 10 s on:
 * the job then ends under abort while its ranks are in or past
 * MPI_Finalize.
 * ITER_MS (env, default 0): every rank sleeps this long before each
 * iteration (a job that lasts, for the network-fault tests).
 * COMMS (env, default 1): each iteration makes its call on each of COMMS
 * duplicates of the communicator in turn (their records interleaved in
 * every rank's ring); the culprit's odd call is on the last of them (the
 * last duplicate made: its seqs count from 1).
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

/* WAIT_VERDICT: until this rank's log (CCSHIM_LOG with %r as RANK) has a
 * "ccshim CLASS " line, at most 10 s. */
static void wait_verdict(int rank)
{
    const char *pat = getenv("CCSHIM_LOG");
    char path[4096] = "", line[1024];
    const char *r = pat ? strstr(pat, "%r") : NULL;
    if (!r)
        return;
    snprintf(path, sizeof path, "%.*s%d%s", (int)(r - pat), pat, rank, r + 2);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        int found = 0;
        while (f && !found && fgets(line, sizeof line, f))
            found = strncmp(line, "ccshim MISMATCH ", 16) == 0 || strncmp(line, "ccshim DESYNC ", 14) == 0;
        if (f)
            fclose(f);
        if (found)
            return;
        sleep_ms(5);
    }
}

static void mark(void)
{
    printf("culprit_call_ms=%.3f\n", mono_ms());
    fflush(stdout);
}

/* healthy: the same pseudo-random choice on every rank of one rank that
 * computes 1.2 to 2.5 s this iteration. */
static void healthy_compute(unsigned *seed, int rank, int size)
{
    *seed = *seed * 1103515245u + 12345u;
    int who = (int)((*seed >> 16) % (unsigned)size);
    long ms = 1200 + (long)((*seed >> 8) % 1300u);
    if (rank == who)
        sleep_ms(ms);
}

/* What the culprit does before the iteration's call (or instead: kill,
 * exit, a barrier that never completes).  Returns 1 when it skips the call. */
static int culprit_departs(const char *scenario, MPI_Comm comm, MPI_Comm dup, float *in, float *out)
{
    if (strcmp(scenario, "skip") == 0 || strcmp(scenario, "split") == 0) {
        mark();
        return 1;
    }
    if (strcmp(scenario, "kill") == 0) {
        sleep_ms(300);
        mark();
        raise(SIGKILL);
    }
    if (strcmp(scenario, "exit") == 0) {
        sleep_ms(300); /* the others are blocked by now */
        mark();
        exit(0);
    }
    if (strcmp(scenario, "deadlock") == 0) {
        mark();
        MPI_Barrier(dup); /* never completes */
    }
    if (strcmp(scenario, "compute") == 0) {
        mark();
        sleep_ms(getenv("COMPUTE_MS") ? atol(getenv("COMPUTE_MS")) : 1500);
    }
    if (strcmp(scenario, "extra") == 0) {
        mark();
        MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_SUM, comm);
    }
    return 0;
}

/* The iteration's call: the all-reduce, or the scenario's odd call (by the
 * CULPRIT, or by everyone where the scenario differs in its arguments) in the
 * iteration it is injected in (INJECT). */
static void iteration_call(const char *scenario, int culprit, int inject, MPI_Comm comm, float *in, float *out)
{
    if (culprit && strcmp(scenario, "count") == 0) {
        mark();
        MPI_Allreduce(in, out, 8, MPI_FLOAT, MPI_SUM, comm);
    } else if (culprit && strcmp(scenario, "dtype") == 0) {
        mark();
        MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comm);
    } else if (culprit && strcmp(scenario, "op") == 0) {
        mark();
        MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_MAX, comm);
    } else if (inject && strcmp(scenario, "root") == 0) {
        if (culprit)
            mark();
        MPI_Bcast(in, 4, MPI_FLOAT, culprit ? 1 : 0, comm);
    } else if (inject && strcmp(scenario, "sigtype") == 0) {
        if (culprit)
            mark();
        MPI_Bcast(in, 4, culprit ? MPI_INT : MPI_FLOAT, 0, comm);
    } else if (inject && strcmp(scenario, "derived") == 0) {
        MPI_Datatype c8;
        MPI_Type_contiguous(8, MPI_FLOAT, &c8);
        MPI_Type_commit(&c8);
        if (culprit)
            mark();
        if (culprit)
            MPI_Bcast(in, 1, c8, 0, comm);
        else
            MPI_Bcast(in, 4, MPI_FLOAT, 0, comm);
        MPI_Type_free(&c8);
    } else if (culprit && strcmp(scenario, "kind") == 0) {
        mark();
        MPI_Bcast(in, 4, MPI_FLOAT, 0, comm);
    } else {
        MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_SUM, comm);
    }
}

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "ok";
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    int inject_at = argc > 3 ? atoi(argv[3]) : 2;
    int culprit = argc > 4 ? atoi(argv[4]) : 1;
    long settle = getenv("SETTLE_MS") ? atol(getenv("SETTLE_MS")) : 600;
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm = MPI_COMM_WORLD;
    if (strcmp(scenario, "split") == 0) {
        MPI_Comm_split(MPI_COMM_WORLD, rank < (getenv("SPLIT_AT") ? atoi(getenv("SPLIT_AT")) : 2) ? 0 : 1, rank, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    }
    MPI_Comm dup = MPI_COMM_NULL;
    if (strcmp(scenario, "deadlock") == 0)
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int ncomms = getenv("COMMS") ? atoi(getenv("COMMS")) : 1;
    if (ncomms < 1 || ncomms > 64) {
        fprintf(stderr, "desync_scenario: COMMS=%d: expected 1 to 64\n", ncomms);
        return 2;
    }
    MPI_Comm many[64];
    many[0] = comm;
    for (int i = 1; i < ncomms; i++)
        MPI_Comm_dup(many[0], &many[i]);
    comm = many[ncomms - 1];
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    unsigned seed = 12345;
    long iter_ms = getenv("ITER_MS") ? atol(getenv("ITER_MS")) : 0;
    for (int it = 0; it < iters; it++) {
        if (iter_ms > 0)
            sleep_ms(iter_ms);
        if (strcmp(scenario, "healthy") == 0)
            healthy_compute(&seed, rank, size);
        int culprit_now = rank == culprit && it == inject_at;
        if (culprit_now && culprit_departs(scenario, comm, dup, in, out))
            continue;
        for (int i = 0; i < ncomms - 1; i++)
            MPI_Allreduce(in, out, 4, MPI_FLOAT, MPI_SUM, many[i]);
        iteration_call(scenario, culprit_now, it == inject_at, comm, in, out);
    }
    if (getenv("WAIT_VERDICT"))
        wait_verdict(rank);
    else if (strcmp(scenario, "ok") != 0 && strcmp(scenario, "healthy") != 0 && strcmp(scenario, "compute") != 0)
        sleep_ms(settle);
    for (int i = 1; i < ncomms; i++)
        MPI_Comm_free(&many[i]);
    if (many[0] != MPI_COMM_WORLD)
        MPI_Comm_free(&many[0]);
    MPI_Finalize();
    return 0;
}
