/*
 * lifecycle.c - process life events under the preload (no MPI, no NCCL):
 *   lifecycle fork   marks 3 steps, forks; the child marks 2 steps and exits,
 *                    the parent waits and marks 1 more.
 *   lifecycle crash  marks 4 steps, then dies of SIGSEGV.
 *   lifecycle term   marks 2 steps, then is killed by SIGTERM (as mpirun does).
 *   lifecycle many   marks 10000 steps (a trace bigger than a small disk).
 * Each step mark is a record in the trace, so the traces show who wrote what.
 */
#include <ccshim.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void marks(int n)
{
    for (int i = 0; i < n; i++)
        CCSHIM_STEP_MARK();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!CCSHIM_LOADED())
        fprintf(stderr, "lifecycle: ccshim is not preloaded\n");
    if (strcmp(mode, "fork") == 0) {
        marks(3);
        pid_t pid = fork();
        if (pid == 0) {
            marks(2);
            return 0;
        }
        int st = 0;
        waitpid(pid, &st, 0);
        marks(1);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
    }
    if (strcmp(mode, "crash") == 0) {
        marks(4);
        raise(SIGSEGV);
        return 3;
    }
    if (strcmp(mode, "term") == 0) {
        marks(2);
        kill(getpid(), SIGTERM);
        return 3;
    }
    if (strcmp(mode, "many") == 0) {
        marks(10000);
        return 0;
    }
    fprintf(stderr, "usage: lifecycle fork|crash|term|many\n");
    return 2;
}
