/*
 * mpi_persist.c - MPI-4's persistent collectives (MPI 4.0, 6.13): an init
 * call (MPI_Allreduce_init ..., generated in mpi_wrap.c) prepares the
 * operation and returns a request; each MPI_Start or MPI_Startall of it
 * starts one operation, which the request completes as a nonblocking
 * call's; MPI_Request_free ends it.  The members match the operation at
 * its init: the inits follow the ordering rules of collectives, so they
 * are what ccshim sequences and compares (mpi_wrap.c, GENERATE_INIT); the
 * starts of different requests may come in any order on different members
 * (without the info key mpi_assert_strict_persistent_collective_ordering;
 * MPICH's coll/p_order starts a broadcast and a barrier in opposite orders
 * on its two ranks), so a start is recorded as one call of its kind, as
 * its init described it and with the start's call site, counted and
 * traced but on no communicator's sequence (a record without a
 * communicator).  The description is found from the request handle in O(1)
 * without a lock (ccs_mpi_requests): a start costs one table probe more
 * than a nonblocking call's wrapper, and a request ccshim did not see made
 * (point-to-point persistent requests, or made before MPI_Init) is
 * forwarded untouched.
 */
#include "log.h"
#include "mpi_shim.h"
#include "record.h"
#include "trace_format.h"

#ifdef HAVE_MPI_PERSISTENT_COLL

void ccs_mpi_persist_init(const MPI_Request *q, const struct ccs_mpi_pcoll *p)
{
    if (!q || *q == MPI_REQUEST_NULL)
        return;
    union ccs_mpi_hval v = {.pcoll = *p};
    ccs_mpi_hput(&ccs_mpi_requests, CCS_MPI_HKEY(*q), &v);
}

/* Starts the record of one start of the persistent collective P: its
 * init's description, on no communicator (unsequenced: see above). */
static inline struct ccs_record *start_record(const struct ccs_mpi_pcoll *p, void *ra)
{
    return ccs_call_begin_active(NULL, &p->call, ra);
}

static int w_Start(MPI_Request *q, void *ra)
{
    if (!CCS_REAL(Start))
        return MPI_ERR_INTERN;
    const union ccs_mpi_hval *v;
    if (!ccs_mpi_active() || !q || (v = ccs_mpi_hget(&ccs_mpi_requests, CCS_MPI_HKEY(*q))) == NULL)
        return ccs_real_Start(q);
    struct ccs_record *r = start_record(&v->pcoll, ra);
    int rc = ccs_real_Start(q);
    ccs_call_end(r, rc != MPI_SUCCESS);
    return rc;
}
CCS_MPI_ENTRY(Start, (MPI_Request * q), q)

/* MPI_Startall: one record for each persistent collective it starts, in
 * array order.  The first is in flight across the real call (an MPI_Start
 * the MPI might make inside it is then not counted again); the others
 * follow it, with its result. */
static int w_Startall(int n, MPI_Request qs[], void *ra)
{
    if (!CCS_REAL(Startall))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active() || n <= 0 || !qs)
        return ccs_real_Startall(n, qs);
    int first = 0;
    const union ccs_mpi_hval *v = NULL;
    for (; first < n && !(v = ccs_mpi_hget(&ccs_mpi_requests, CCS_MPI_HKEY(qs[first]))); first++)
        ;
    if (!v)
        return ccs_real_Startall(n, qs);
    struct ccs_record *r = start_record(&v->pcoll, ra);
    int rc = ccs_real_Startall(n, qs);
    ccs_call_end(r, rc != MPI_SUCCESS);
    for (int i = first + 1; i < n; i++)
        if ((v = ccs_mpi_hget(&ccs_mpi_requests, CCS_MPI_HKEY(qs[i]))) != NULL)
            ccs_call_end(start_record(&v->pcoll, ra), rc != MPI_SUCCESS);
    return rc;
}
CCS_MPI_ENTRY(Startall, (int n, MPI_Request qs[]), n, qs)

/* The request's description goes with it (its handle may be reused for
 * another request). */
static int w_Request_free(MPI_Request *q, void *ra)
{
    (void)ra;
    if (!CCS_REAL(Request_free))
        return MPI_ERR_INTERN;
    uintptr_t key = q ? CCS_MPI_HKEY(*q) : 0;
    int rc = ccs_real_Request_free(q);
    if (rc == MPI_SUCCESS && ccs_mpi_hget(&ccs_mpi_requests, key))
        ccs_mpi_hdel(&ccs_mpi_requests, key);
    return rc;
}
CCS_MPI_ENTRY(Request_free, (MPI_Request * q), q)

#endif
