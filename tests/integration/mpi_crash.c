/* mpi_crash.c - five all-reduces, then (with "segv") rank 1 writes to
 * address 8: Open MPI's crash backtrace must still show under the preload,
 * and the trace must end with the signal and every record (hygiene.sh).
 * With "own", the program installs its own SIGSEGV handler before MPI_Init
 * (it says so and exits 7): the preload must leave it first and alone. */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
static void own_handler(int signo)
{
    static const char msg[] = "mpi_crash: the application's own handler ran\n";
    (void)signo;
    if (write(2, msg, sizeof msg - 1) < 0) { /* exiting anyway */
    }
    _exit(7);
}

int main(int argc, char **argv)
{
    int own = argc > 1 && strcmp(argv[1], "own") == 0;
    if (own)
        signal(SIGSEGV, own_handler);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float a[4] = {1, 2, 3, 4}, b[4];
    for (int i = 0; i < 5; i++)
        MPI_Allreduce(a, b, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (argc > 1 && (strcmp(argv[1], "segv") == 0 || own) && rank == 1) {
        volatile uintptr_t where = 8; /* opaque to the compiler */
        *(volatile int *)where = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
