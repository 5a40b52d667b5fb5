/*
 * nccl_real.c - linked against the REAL libnccl: prints what it answers, so
 * a test can compare runs with and without the shim preloaded.  On a machine
 * without a GPU the communicator cannot be created; the interesting part is
 * then that the real error comes back unchanged and nothing crashes.
 *
 * Output: "CALL rc=N" lines (and the version).
 */
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    int version = -1;
    ncclResult_t rc = ncclGetVersion(&version);
    printf("ncclGetVersion rc=%d version=%d\n", (int)rc, version);

    ncclUniqueId id = {{0}};
    rc = ncclGetUniqueId(&id);
    printf("ncclGetUniqueId rc=%d\n", (int)rc);

    ncclComm_t comm = NULL;
    rc = ncclCommInitRank(&comm, 1, id, 0);
    printf("ncclCommInitRank rc=%d comm=%s\n", (int)rc, comm ? "set" : "null");

    /* With a communicator (a GPU machine) this enqueues on the default
     * stream a reduction of memory NCCL allocated; without one, NCCL must
     * reject the NULL communicator. */
    void *buf = NULL;
    if (comm && ncclMemAlloc(&buf, 4096) != ncclSuccess)
        buf = NULL;
    rc = ncclAllReduce(buf, buf, buf ? 1024 : 1, ncclFloat32, ncclSum, comm, NULL);
    printf("ncclAllReduce rc=%d\n", (int)rc);
    if (comm) {
        printf("ncclCommFinalize rc=%d\n", (int)ncclCommFinalize(comm));
        printf("ncclCommDestroy rc=%d\n", (int)ncclCommDestroy(comm));
    }
    if (buf)
        ncclMemFree(buf);
    return 0;
}
