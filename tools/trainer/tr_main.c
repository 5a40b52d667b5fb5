/*
 * tr_main.c - ccshim-trainer (MPI) and ccshim-trainer-nccl (NCCL, built with
 * TR_NCCL_BINARY): options, backend start, the run in the chosen precision.
 * Exit status: 0, 1 when --check failed, 2 for a bad option, 3 on an
 * internal error.
 */
#include "tr_comm.h"
#include "tr_opts.h"
#include "tr_train.h"

#include <stdio.h>

#ifdef TR_NCCL_BINARY
#define TR_IS_NCCL 1
#else
#define TR_IS_NCCL 0
#endif

int main(int argc, char **argv)
{
    struct tr_opts o;
    int rc = tr_opts_parse(&o, argc, argv, TR_IS_NCCL);
    if (rc)
        return rc > 0 ? 0 : 2;
    struct tr_comm *c = tr_comm_init(&argc, &argv, &o);
    if (!c)
        return 3;
    if (tr_opts_resolve(&o, tr_comm_size(c), tr_comm_rank(c) == 0)) {
        tr_comm_finalize(c);
        return 2;
    }
    int status = o.single ? tr_train_f(&o, c) : tr_train_d(&o, c);
    if (tr_comm_finalize(c) && !status)
        status = 3;
    return status;
}
