/*
 * desync_nccl.c - the NCCL glue of desync detection: starts it once an NCCL
 * job knows its rank (the launcher's environment or its first communicator)
 * and registers ncclCommAbort, through the real function, for
 * CCSHIM_ON_DESYNC=abort.  Called by the NCCL layer (nccl_comm.c).
 */
#include "desync_nccl.h"
#include "desync.h"
#include "abort.h"
#include "nccl_internal.h"
#include "nccl_track.h"
#include "ccs_kinds.h"
#include "comm.h"

struct abort_ctx {
    uint64_t id;
    int done;
};

static void abort_one(struct ccs_comm *c, void *arg)
{
    struct abort_ctx *a = arg;
    if (c->backend != CCS_BE_NCCL || (a->id && c->id != a->id))
        return;
    __typeof__(&pncclCommAbort) real = CCS_NCCL_REAL(CommAbort);
    if (real && real((ncclComm_t)atomic_load(&c->handle)) == ncclSuccess)
        a->done = 1;
}

/* Aborts the communicator of the verdict (COMM_ID), or every NCCL one (0):
 * the job's blocked operations then fail and it ends with an error. */
static int abort_comms(void *arg, uint64_t comm_id)
{
    (void)arg;
    struct abort_ctx a = {comm_id, 0};
    ccs_comm_foreach(abort_one, &a);
    if (!a.done && comm_id) {
        a.id = 0;
        ccs_comm_foreach(abort_one, &a);
    }
    return a.done ? 0 : -1;
}

void ccs_desync_nccl_init(void)
{
    static atomic_int registered;
    if (!atomic_exchange(&registered, 1)) {
        ccs_abort_register(abort_comms, NULL, 0);
        ccs_desync_set_poll(ccs_ntrack_poll); /* completion on the device (nccl_track_poll.c) */
    }
    ccs_ntrack_init(); /* NCCL has loaded CUDA by now, if it ever will */
    ccs_desync_start(); /* idempotent; waits for the rank to be known */
}
