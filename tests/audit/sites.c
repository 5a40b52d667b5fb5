/*
 * sites.c - collectives on known lines, for audit-sites.sh: the audit must
 * name each call's own line (the lines are found by the markers in the
 * comments, so editing this file does not break the test), built -O0 and
 * -O2 -g.  What used to go wrong, and why each call is here:
 *  - a return address is the instruction after the call: at -O2 it belongs
 *    to the next statement (the broadcast was named by the all-reduce's
 *    line), or, for the last call of a loop body, to the loop's header;
 *  - a call inside an inlined helper was named by the helper's line, not by
 *    the line in main that calls the helper.
 */
#include <mpi.h>
#include <stdio.h>

/* Always inlined, even at -O0: the call's line is the helper's, the site is
 * main's line that calls it. */
static inline __attribute__((always_inline)) int reduce_checked(double *v, int n)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* @inner */
    if (rc != MPI_SUCCESS)
        fprintf(stderr, "sites: MPI_Allreduce failed\n");
    return rc;
}

int main(int argc, char **argv)
{
    double v[4] = {1, 2, 3, 4}, w[4] = {0, 0, 0, 0};
    MPI_Init(&argc, &argv);
    MPI_Bcast(v, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* @bcast */
    MPI_Allreduce(v, w, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* @first */
    for (int i = 0; i < 3; i++) {
        reduce_checked(v, 4); /* @wrapper */
        v[0] += w[0];
        MPI_Allreduce(MPI_IN_PLACE, w, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* @last */
    }
    MPI_Finalize();
    return v[0] > 0 ? 0 : 1;
}
