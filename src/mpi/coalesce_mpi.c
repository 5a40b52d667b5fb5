/*
 * coalesce_mpi.c - coalescing on the MPI path.
 *
 * A deferred MPI_Allreduce writes its local answer into the receive buffer
 * on the host before returning (so it is there in program order, as the
 * real one would be), takes its sequence number and is recorded with
 * CCS_F_DEFERRED; a deferred MPI_Iallreduce does the same and returns a
 * generalized request that is already complete, so MPI_Wait/Test/Waitall
 * work on it unchanged.  The real call of a group is recorded with
 * CCS_F_COALESCED.
 *
 * auto agrees through a private duplicate of MPI_COMM_WORLD made at
 * MPI_Init with the real PMPI functions: nothing on it is counted, and it
 * can never match a message of the job.
 */
#include "coalesce_mpi.h"
#include "log.h"
#include "mpi_shim.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "record.h"
#include "trace_format.h"
#include <stdlib.h>
#include <string.h>

static MPI_Comm agree_comm = MPI_COMM_NULL;

/* ------------------------------------------------- already complete request */

static int gq_query(void *extra, MPI_Status *st)
{
    (void)extra;
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int gq_free(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}

static int gq_cancel(void *extra, int complete)
{
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

static int completed_request(MPI_Request *q)
{
    int rc = PMPI_Grequest_start(gq_query, gq_free, gq_cancel, NULL, q);
    return rc == MPI_SUCCESS ? PMPI_Grequest_complete(*q) : rc;
}

/* ------------------------------------------------------------------ calls */

int ccs_coalesce_mpi_allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                               MPI_Request *q, void *ra, int *rc)
{
    uint8_t dtype = ccs_mpi_dtype(dt), o = ccs_mpi_op(op);
    uint64_t bytes = ccs_mpi_bytes(n, dt, dtype);
    if (!ccs_coalesce_eligible(o, dtype, bytes) || !rb || !ccs_coalesce_site_ok(ra))
        return 0;
    struct ccs_comm *c = ccs_mpi_comm(comm);
    /* Not on an intercommunicator: each group receives the other group's
     * reduction, which no local arithmetic stands in for. */
    if (!c || c->size < 1 || c->remote_size > 0)
        return 0;
    const void *in = sb == MPI_IN_PLACE ? rb : sb;
    struct ccs_coal_id *id = ccs_coalesce_identity(c->id, (uintptr_t)comm, c->size, in, rb, (uint64_t)n, dtype, o,
                                                   0, CCS_BE_MPI);
    if (!id)
        return 0;
    enum ccs_coalesce_action act = ccs_coalesce_decide(id);
    if (act == CCS_COALESCE_PASS)
        return 0;
    struct ccs_call call = {.kind = CCS_KIND_ALLREDUCE,
                            .dtype = dtype,
                            .op = o,
                            .flags = (uint8_t)((sb == MPI_IN_PLACE ? CCS_F_IN_PLACE : 0) |
                                               (q ? CCS_F_NONBLOCKING : 0) |
                                               (act == CCS_COALESCE_DEFER ? CCS_F_DEFERRED : CCS_F_COALESCED) |
                                               (atomic_load_explicit(&ccs_coalesce_helper_on, memory_order_relaxed)
                                                    ? CCS_F_HELPER
                                                    : 0)),
                            .backend = CCS_BE_MPI,
                            .root = -1,
                            .count = (uint64_t)n,
                            .bytes = bytes,
                            .buf = rb};
    struct ccs_record *r = ccs_call_begin(c, &call, ra);
    if (act == CCS_COALESCE_DEFER) {
        double f = 1;
        ccs_coalesce_factor(o, dtype, 0, c->size, &f);
        ccs_coalesce_scale_host(rb, in, (uint64_t)n, dtype, f);
        *rc = q ? completed_request(q) : MPI_SUCCESS;
    } else if (q) {
        *rc = CCS_REAL(Iallreduce) ? ccs_real_Iallreduce(sb, rb, n, dt, op, comm, q) : MPI_ERR_INTERN;
    } else {
        *rc = CCS_REAL(Allreduce) ? ccs_real_Allreduce(sb, rb, n, dt, op, comm) : MPI_ERR_INTERN;
    }
    ccs_call_end(r, *rc != MPI_SUCCESS);
    return 1;
}

/* -------------------------------------------------------------- agreement */

/* Every rank contributes up to N (communicator, digest) pairs; a pair is
 * agreed when as many ranks as the communicator has members report it
 * identically.  One all-gather on the private communicator, at one marker. */
static int mpi_agree(size_t n, const uint64_t *comms, const int32_t *sizes, const uint64_t *digests,
                     uint8_t *agreed)
{
    enum { MAXN = 64 };
    int w = 0;
    if (agree_comm == MPI_COMM_NULL || n > MAXN || PMPI_Comm_size(agree_comm, &w) != MPI_SUCCESS || w < 1)
        return -1;
    uint64_t mine[1 + 2 * MAXN] = {0};
    uint64_t *all = calloc((size_t)w, sizeof mine); /* once, at the agreement marker */
    if (!all)
        return -1;
    mine[0] = n;
    for (size_t i = 0; i < n; i++) {
        mine[1 + 2 * i] = comms[i];
        mine[2 + 2 * i] = digests[i];
    }
    int rc = CCS_REAL(Allgather) ? ccs_real_Allgather(mine, 1 + 2 * MAXN, MPI_UINT64_T, all, 1 + 2 * MAXN,
                                                      MPI_UINT64_T, agree_comm)
                                 : MPI_ERR_INTERN;
    if (rc != MPI_SUCCESS) {
        free(all);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t same = 0;
        for (int r = 0; r < w; r++) {
            const uint64_t *e = all + (size_t)r * (1 + 2 * MAXN);
            for (uint64_t j = 0; j < e[0] && j < MAXN; j++)
                if (e[1 + 2 * j] == comms[i] && e[2 + 2 * j] == digests[i])
                    same++;
        }
        agreed[i] = same == sizes[i];
    }
    free(all);
    return 0;
}

/* Completion (coalesce_complete.c): the buffer's real SUM over the
 * communicator, divided by its size.  Only float32 and float64 reach here:
 * MPI has no 16-bit floating-point type that ccshim coalesces. */
static int mpi_complete(struct ccs_coal_id *id)
{
    MPI_Datatype dt = id->dtype == CCS_DT_FLOAT32 ? MPI_FLOAT : id->dtype == CCS_DT_FLOAT64 ? MPI_DOUBLE
                                                                                         : MPI_DATATYPE_NULL;
    if (dt == MPI_DATATYPE_NULL || id->count > (uint64_t)INT32_MAX || id->size < 1 || !CCS_REAL(Allreduce))
        return -1;
    void *buf = (void *)id->recv;
    MPI_Comm comm = (MPI_Comm)id->handle;
    if (ccs_real_Allreduce(MPI_IN_PLACE, buf, (int)id->count, dt, MPI_SUM, comm) != MPI_SUCCESS)
        return -1;
    return ccs_coalesce_scale_host(buf, buf, id->count, id->dtype, 1.0 / id->size);
}

void ccs_coalesce_mpi_init(void)
{
    const struct ccs_coalesce_policy *p = ccs_coalesce_policy();
    if (p->mode == CCS_COALESCE_OFF)
        return;
    ccs_coalesce_completer[CCS_BE_MPI] = mpi_complete;
    if (p->mode != CCS_COALESCE_AUTO || agree_comm != MPI_COMM_NULL)
        return;
    if (!CCS_REAL(Comm_dup) || ccs_real_Comm_dup(MPI_COMM_WORLD, &agree_comm) != MPI_SUCCESS) {
        agree_comm = MPI_COMM_NULL;
        CCS_LOG(WARN, "coalescing auto: could not duplicate MPI_COMM_WORLD to agree on; nothing is coalesced");
        return;
    }
    if (!ccs_coalesce_agree)
        ccs_coalesce_agree = mpi_agree;
}
