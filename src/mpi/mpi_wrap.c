/*
 * mpi_wrap.c - the MPI collectives and point-to-point calls that ccshim
 * counts and sequences.  Each wrapper describes the call (what every member
 * must agree on, the bytes, the buffer), brackets the real call with
 * ccs_call_begin/end, and returns the real result unchanged.
 *
 * What a wrapper records is what MPI's matching rules say must agree
 * (docs/desync.md, "What must agree"): the type signature (ccs_mpi_sig,
 * not the (count, datatype) pair, which may legally differ) of this rank's
 * contribution per peer, or of the whole where every member must pass the
 * same, and nothing from an argument the standard says is ignored
 * (MPI_IN_PLACE at the root, receive arguments on non-roots).
 */
#include "mpi_shim.h"
#include "coalesce_mpi.h"

#define CALL_REAL(name, ...) (CCS_REAL(name) ? ccs_real_##name(__VA_ARGS__) : MPI_ERR_INTERN)
#define INPLACE(sb) ((sb) == MPI_IN_PLACE ? CCS_F_IN_PLACE : 0)
#define NB CCS_F_NONBLOCKING

/* BEGIN on a communicator entry the wrapper already looked up (the kinds
 * that also need its rank or size), BEGIN on a handle otherwise. */
CCS_INLINE struct ccs_record *begin_on(struct ccs_comm *cm, unsigned kind, unsigned flags, int64_t count,
                                          MPI_Datatype dt, MPI_Op op, int root, const void *buf, uint64_t bytes,
                                          void *ra)
{
    struct ccs_call c = {.kind = (uint16_t)kind,
                         .dtype = ccs_mpi_dtype(dt),
                         .op = op == MPI_OP_NULL ? CCS_OP_NONE : ccs_mpi_op(op),
                         .flags = (uint8_t)flags,
                         .backend = CCS_BE_MPI,
                         .root = root,
                         .count = (uint64_t)count,
                         .bytes = bytes,
                         .buf = buf};
    return ccs_call_begin(cm, &c, ra);
}

/* BEGIN with a type signature (ccs_mpi_sig) as what must agree. */
CCS_INLINE struct ccs_record *begin_sig(struct ccs_comm *cm, unsigned kind, unsigned flags,
                                           const struct ccs_mpi_sig *s, MPI_Op op, int root, const void *buf,
                                           uint64_t bytes, void *ra)
{
    struct ccs_call c = {.kind = (uint16_t)kind,
                         .dtype = s->dtype,
                         .op = op == MPI_OP_NULL ? CCS_OP_NONE : ccs_mpi_op(op),
                         .flags = (uint8_t)flags,
                         .backend = CCS_BE_MPI,
                         .root = root,
                         .sig = s->sig,
                         .count = s->count,
                         .bytes = bytes,
                         .buf = buf};
    return ccs_call_begin(cm, &c, ra);
}

/* The common case: what must agree is (N, DT) on every member. */
CCS_INLINE struct ccs_record *begin_n(MPI_Comm comm, unsigned kind, unsigned flags, int64_t n, MPI_Datatype dt,
                                         MPI_Op op, int root, const void *buf, void *ra)
{
    struct ccs_mpi_sig s;
    ccs_mpi_sig(n, dt, &s);
    return begin_sig(ccs_mpi_comm(comm), kind, flags, &s, op, root, buf, s.bytes, ra);
}

CCS_INLINE struct ccs_record *begin(MPI_Comm comm, unsigned kind, unsigned flags, int64_t count,
                                       MPI_Datatype dt, MPI_Op op, int root, const void *buf, uint64_t bytes,
                                       void *ra)
{
    return begin_on(ccs_mpi_comm(comm), kind, flags, count, dt, op, root, buf, bytes, ra);
}

static inline int end(struct ccs_record *r, int rc)
{
    ccs_call_end(r, rc != MPI_SUCCESS);
    return rc;
}

static inline uint64_t nbytes(int64_t count, MPI_Datatype dt) { return ccs_mpi_bytes(count, dt, ccs_mpi_dtype(dt)); }

/* Sum of COUNTS over the members of C (v-variants). */
static uint64_t sum_counts(const struct ccs_comm *c, const int *counts)
{
    uint64_t s = 0;
    if (!c || !counts || c->size <= 0)
        return 0;
    for (int i = 0; i < c->size; i++)
        s += counts[i] > 0 ? (uint64_t)counts[i] : 0;
    return s;
}

static inline int my_rank(const struct ccs_comm *c) { return c ? c->rank : 0; }
static inline int comm_size(const struct ccs_comm *c) { return c ? c->size : 1; }

/* ------------------------------------------------------------ reductions */

static int w_Allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Allreduce, sb, rb, n, dt, op, comm);
    int crc; /* coalescing (coalesce_mpi.c): one predictable branch while off */
    if (CCS_UNLIKELY(atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed)) &&
        ccs_coalesce_mpi_allreduce(sb, rb, n, dt, op, comm, NULL, ra, &crc))
        return crc;
    struct ccs_record *r = begin_n(comm, CCS_KIND_ALLREDUCE, INPLACE(sb), n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Allreduce, sb, rb, n, dt, op, comm));
}
CCS_MPI_ENTRY(Allreduce, (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm), sb, rb, n,
              dt, op, comm)

static int w_Iallreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iallreduce, sb, rb, n, dt, op, comm, q);
    int crc;
    if (CCS_UNLIKELY(atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed)) &&
        ccs_coalesce_mpi_allreduce(sb, rb, n, dt, op, comm, q, ra, &crc))
        return crc;
    struct ccs_record *r = begin_n(comm, CCS_KIND_ALLREDUCE, INPLACE(sb) | NB, n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Iallreduce, sb, rb, n, dt, op, comm, q));
}
CCS_MPI_ENTRY(Iallreduce,
              (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q), sb,
              rb, n, dt, op, comm, q)

static int w_Reduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Reduce, sb, rb, n, dt, op, root, comm);
    struct ccs_record *r = begin_n(comm, CCS_KIND_REDUCE, INPLACE(sb), n, dt, op, root, rb, ra);
    return end(r, CALL_REAL(Reduce, sb, rb, n, dt, op, root, comm));
}
CCS_MPI_ENTRY(Reduce, (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm), sb,
              rb, n, dt, op, root, comm)

static int w_Ireduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                     MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ireduce, sb, rb, n, dt, op, root, comm, q);
    struct ccs_record *r = begin_n(comm, CCS_KIND_REDUCE, INPLACE(sb) | NB, n, dt, op, root, rb, ra);
    return end(r, CALL_REAL(Ireduce, sb, rb, n, dt, op, root, comm, q));
}
CCS_MPI_ENTRY(Ireduce,
              (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
               MPI_Request *q),
              sb, rb, n, dt, op, root, comm, q)

static int w_Reduce_scatter(const void *sb, void *rb, const int rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                            void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Reduce_scatter, sb, rb, rc, dt, op, comm);
    /* recvcounts are the same on every member: the whole vector agrees. */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    ccs_mpi_sig((int64_t)sum_counts(cm, rc), dt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_REDUCE_SCATTER, INPLACE(sb), &s, op, -1, rb, s.bytes, ra);
    return end(r, CALL_REAL(Reduce_scatter, sb, rb, rc, dt, op, comm));
}
CCS_MPI_ENTRY(Reduce_scatter,
              (const void *sb, void *rb, const int rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm), sb, rb, rc,
              dt, op, comm)

static int w_Ireduce_scatter(const void *sb, void *rb, const int rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                             MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ireduce_scatter, sb, rb, rc, dt, op, comm, q);
    /* recvcounts are the same on every member: the whole vector agrees. */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    ccs_mpi_sig((int64_t)sum_counts(cm, rc), dt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_REDUCE_SCATTER, INPLACE(sb) | NB, &s, op, -1, rb, s.bytes, ra);
    return end(r, CALL_REAL(Ireduce_scatter, sb, rb, rc, dt, op, comm, q));
}
CCS_MPI_ENTRY(Ireduce_scatter,
              (const void *sb, void *rb, const int rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
               MPI_Request *q),
              sb, rb, rc, dt, op, comm, q)

static int w_Reduce_scatter_block(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                  void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Reduce_scatter_block, sb, rb, n, dt, op, comm);
    struct ccs_record *r = begin_n(comm, CCS_KIND_REDUCE_SCATTER_BLOCK, INPLACE(sb), n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Reduce_scatter_block, sb, rb, n, dt, op, comm));
}
CCS_MPI_ENTRY(Reduce_scatter_block,
              (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm), sb, rb, n, dt, op,
              comm)

static int w_Ireduce_scatter_block(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                   MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ireduce_scatter_block, sb, rb, n, dt, op, comm, q);
    struct ccs_record *r = begin_n(comm, CCS_KIND_REDUCE_SCATTER_BLOCK, INPLACE(sb) | NB, n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Ireduce_scatter_block, sb, rb, n, dt, op, comm, q));
}
CCS_MPI_ENTRY(Ireduce_scatter_block,
              (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q), sb, rb,
              n, dt, op, comm, q)

static int w_Scan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Scan, sb, rb, n, dt, op, comm);
    struct ccs_record *r = begin_n(comm, CCS_KIND_SCAN, INPLACE(sb), n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Scan, sb, rb, n, dt, op, comm));
}
CCS_MPI_ENTRY(Scan, (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm), sb, rb, n, dt, op,
              comm)

static int w_Iscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q,
                   void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iscan, sb, rb, n, dt, op, comm, q);
    struct ccs_record *r = begin_n(comm, CCS_KIND_SCAN, INPLACE(sb) | NB, n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Iscan, sb, rb, n, dt, op, comm, q));
}
CCS_MPI_ENTRY(Iscan, (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q),
              sb, rb, n, dt, op, comm, q)

static int w_Exscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Exscan, sb, rb, n, dt, op, comm);
    struct ccs_record *r = begin_n(comm, CCS_KIND_EXSCAN, INPLACE(sb), n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Exscan, sb, rb, n, dt, op, comm));
}
CCS_MPI_ENTRY(Exscan, (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm), sb, rb, n, dt,
              op, comm)

static int w_Iexscan(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q,
                     void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iexscan, sb, rb, n, dt, op, comm, q);
    struct ccs_record *r = begin_n(comm, CCS_KIND_EXSCAN, INPLACE(sb) | NB, n, dt, op, -1, rb, ra);
    return end(r, CALL_REAL(Iexscan, sb, rb, n, dt, op, comm, q));
}
CCS_MPI_ENTRY(Iexscan,
              (const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q), sb, rb,
              n, dt, op, comm, q)

/* -------------------------------------------------------- data movement */

static int w_Bcast(void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Bcast, buf, n, dt, root, comm);
    struct ccs_record *r = begin_n(comm, CCS_KIND_BCAST, 0, n, dt, MPI_OP_NULL, root, buf, ra);
    return end(r, CALL_REAL(Bcast, buf, n, dt, root, comm));
}
CCS_MPI_ENTRY(Bcast, (void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm), buf, n, dt, root, comm)

static int w_Ibcast(void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ibcast, buf, n, dt, root, comm, q);
    struct ccs_record *r = begin_n(comm, CCS_KIND_BCAST, NB, n, dt, MPI_OP_NULL, root, buf, ra);
    return end(r, CALL_REAL(Ibcast, buf, n, dt, root, comm, q));
}
CCS_MPI_ENTRY(Ibcast, (void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *q), buf, n, dt,
              root, comm, q)

static int w_Allgather(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm,
                       void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Allgather, sb, sc, sdt, rb, rc, rdt, comm);
    /* This rank's contribution; with MPI_IN_PLACE the send arguments are ignored. */
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(ccs_mpi_comm(comm), CCS_KIND_ALLGATHER, INPLACE(sb), &s, MPI_OP_NULL, -1, rb,
                                     s.bytes, ra);
    return end(r, CALL_REAL(Allgather, sb, sc, sdt, rb, rc, rdt, comm));
}
CCS_MPI_ENTRY(Allgather,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm), sb, sc,
              sdt, rb, rc, rdt, comm)

static int w_Iallgather(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt,
                        MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iallgather, sb, sc, sdt, rb, rc, rdt, comm, q);
    /* This rank's contribution; with MPI_IN_PLACE the send arguments are ignored. */
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(ccs_mpi_comm(comm), CCS_KIND_ALLGATHER, INPLACE(sb) | NB, &s, MPI_OP_NULL, -1, rb,
                                     s.bytes, ra);
    return end(r, CALL_REAL(Iallgather, sb, sc, sdt, rb, rc, rdt, comm, q));
}
CCS_MPI_ENTRY(Iallgather,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm,
               MPI_Request *q),
              sb, sc, sdt, rb, rc, rdt, comm, q)

static int w_Allgatherv(const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
                        MPI_Datatype rdt, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Allgatherv, sb, sc, sdt, rb, rc, dis, rdt, comm);
    /* Every member receives the same whole (its own part included, in place
     * or not); the send arguments are ignored with MPI_IN_PLACE. */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    int n = sb == MPI_IN_PLACE ? (rc ? rc[my_rank(cm)] : 0) : sc;
    MPI_Datatype t = sb == MPI_IN_PLACE ? rdt : sdt;
    struct ccs_mpi_sig s;
    ccs_mpi_sig((int64_t)sum_counts(cm, rc), rdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_ALLGATHERV, INPLACE(sb), &s, MPI_OP_NULL, -1, rb, nbytes(n, t),
                                     ra);
    return end(r, CALL_REAL(Allgatherv, sb, sc, sdt, rb, rc, dis, rdt, comm));
}
CCS_MPI_ENTRY(Allgatherv,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
               MPI_Datatype rdt, MPI_Comm comm),
              sb, sc, sdt, rb, rc, dis, rdt, comm)

static int w_Iallgatherv(const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
                         MPI_Datatype rdt, MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iallgatherv, sb, sc, sdt, rb, rc, dis, rdt, comm, q);
    /* Every member receives the same whole (its own part included, in place
     * or not); the send arguments are ignored with MPI_IN_PLACE. */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    int n = sb == MPI_IN_PLACE ? (rc ? rc[my_rank(cm)] : 0) : sc;
    MPI_Datatype t = sb == MPI_IN_PLACE ? rdt : sdt;
    struct ccs_mpi_sig s;
    ccs_mpi_sig((int64_t)sum_counts(cm, rc), rdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_ALLGATHERV, INPLACE(sb) | NB, &s, MPI_OP_NULL, -1, rb,
                                     nbytes(n, t), ra);
    return end(r, CALL_REAL(Iallgatherv, sb, sc, sdt, rb, rc, dis, rdt, comm, q));
}
CCS_MPI_ENTRY(Iallgatherv,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
               MPI_Datatype rdt, MPI_Comm comm, MPI_Request *q),
              sb, sc, sdt, rb, rc, dis, rdt, comm, q)

static int w_Alltoall(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm,
                      void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Alltoall, sb, sc, sdt, rb, rc, rdt, comm);
    /* What goes to each peer; with MPI_IN_PLACE the send arguments are ignored. */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_ALLTOALL, INPLACE(sb), &s, MPI_OP_NULL, -1, rb,
                                     s.bytes * (uint64_t)comm_size(cm), ra);
    return end(r, CALL_REAL(Alltoall, sb, sc, sdt, rb, rc, rdt, comm));
}
CCS_MPI_ENTRY(Alltoall,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm), sb, sc,
              sdt, rb, rc, rdt, comm)

static int w_Ialltoall(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm,
                       MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ialltoall, sb, sc, sdt, rb, rc, rdt, comm, q);
    /* What goes to each peer; with MPI_IN_PLACE the send arguments are ignored. */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_ALLTOALL, INPLACE(sb) | NB, &s, MPI_OP_NULL, -1, rb,
                                     s.bytes * (uint64_t)comm_size(cm), ra);
    return end(r, CALL_REAL(Ialltoall, sb, sc, sdt, rb, rc, rdt, comm, q));
}
CCS_MPI_ENTRY(Ialltoall,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm,
               MPI_Request *q),
              sb, sc, sdt, rb, rc, rdt, comm, q)

static int w_Alltoallv(const void *sb, const int sc[], const int sd[], MPI_Datatype sdt, void *rb, const int rc[],
                       const int rd[], MPI_Datatype rdt, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Alltoallv, sb, sc, sd, sdt, rb, rc, rd, rdt, comm);
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    /* Per-peer counts and types may differ on every pair: only the kind
     * agrees; the record shows what this rank receives. */
    uint64_t total = sum_counts(cm, rc);
    struct ccs_record *r = begin_on(cm, CCS_KIND_ALLTOALLV, INPLACE(sb), (int64_t)total, rdt, MPI_OP_NULL, -1, rb,
                                 nbytes((int64_t)total, rdt), ra);
    return end(r, CALL_REAL(Alltoallv, sb, sc, sd, sdt, rb, rc, rd, rdt, comm));
}
CCS_MPI_ENTRY(Alltoallv,
              (const void *sb, const int sc[], const int sd[], MPI_Datatype sdt, void *rb, const int rc[],
               const int rd[], MPI_Datatype rdt, MPI_Comm comm),
              sb, sc, sd, sdt, rb, rc, rd, rdt, comm)

static int w_Ialltoallv(const void *sb, const int sc[], const int sd[], MPI_Datatype sdt, void *rb, const int rc[],
                        const int rd[], MPI_Datatype rdt, MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ialltoallv, sb, sc, sd, sdt, rb, rc, rd, rdt, comm, q);
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    /* Per-peer counts and types may differ on every pair: only the kind
     * agrees; the record shows what this rank receives. */
    uint64_t total = sum_counts(cm, rc);
    struct ccs_record *r = begin_on(cm, CCS_KIND_ALLTOALLV, INPLACE(sb) | NB, (int64_t)total, rdt, MPI_OP_NULL, -1,
                                 rb, nbytes((int64_t)total, rdt), ra);
    return end(r, CALL_REAL(Ialltoallv, sb, sc, sd, sdt, rb, rc, rd, rdt, comm, q));
}
CCS_MPI_ENTRY(Ialltoallv,
              (const void *sb, const int sc[], const int sd[], MPI_Datatype sdt, void *rb, const int rc[],
               const int rd[], MPI_Datatype rdt, MPI_Comm comm, MPI_Request *q),
              sb, sc, sd, sdt, rb, rc, rd, rdt, comm, q)

/* Bytes this rank receives in an alltoallw (one datatype per peer). */
static uint64_t recv_bytes_w(const struct ccs_comm *c, const int *counts, const MPI_Datatype *types)
{
    uint64_t b = 0;
    if (!c || !counts || !types || c->size <= 0)
        return 0;
    for (int i = 0; i < c->size; i++)
        b += nbytes(counts[i], types[i]);
    return b;
}

/* Alltoallw: per-peer counts and datatypes may differ on every pair, so only
 * the kind agrees; the record shows the bytes this rank receives. */
static int w_Alltoallw(const void *sb, const int sc[], const int sd[], const MPI_Datatype st[], void *rb,
                       const int rc[], const int rd[], const MPI_Datatype rt[], MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Alltoallw, sb, sc, sd, st, rb, rc, rd, rt, comm);
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    uint64_t b = recv_bytes_w(cm, rc, rt);
    struct ccs_record *r = begin_on(cm, CCS_KIND_ALLTOALLW, INPLACE(sb), (int64_t)b, MPI_BYTE, MPI_OP_NULL, -1, rb,
                                    b, ra);
    return end(r, CALL_REAL(Alltoallw, sb, sc, sd, st, rb, rc, rd, rt, comm));
}
CCS_MPI_ENTRY(Alltoallw,
              (const void *sb, const int sc[], const int sd[], const MPI_Datatype st[], void *rb, const int rc[],
               const int rd[], const MPI_Datatype rt[], MPI_Comm comm),
              sb, sc, sd, st, rb, rc, rd, rt, comm)

static int w_Ialltoallw(const void *sb, const int sc[], const int sd[], const MPI_Datatype st[], void *rb,
                        const int rc[], const int rd[], const MPI_Datatype rt[], MPI_Comm comm, MPI_Request *q,
                        void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ialltoallw, sb, sc, sd, st, rb, rc, rd, rt, comm, q);
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    uint64_t b = recv_bytes_w(cm, rc, rt);
    struct ccs_record *r = begin_on(cm, CCS_KIND_ALLTOALLW, INPLACE(sb) | NB, (int64_t)b, MPI_BYTE, MPI_OP_NULL, -1,
                                    rb, b, ra);
    return end(r, CALL_REAL(Ialltoallw, sb, sc, sd, st, rb, rc, rd, rt, comm, q));
}
CCS_MPI_ENTRY(Ialltoallw,
              (const void *sb, const int sc[], const int sd[], const MPI_Datatype st[], void *rb, const int rc[],
               const int rd[], const MPI_Datatype rt[], MPI_Comm comm, MPI_Request *q),
              sb, sc, sd, st, rb, rc, rd, rt, comm, q)

/* Gather and scatter: this rank's contribution, from the arguments that
 * are significant where it is called. */
static int w_Gather(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
                    MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Gather, sb, sc, sdt, rb, rc, rdt, root, comm);
    /* This rank's contribution: at the root with MPI_IN_PLACE the receive
     * side describes it (the send arguments are ignored); elsewhere the
     * send side (the receive arguments are ignored on non-roots). */
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(ccs_mpi_comm(comm), CCS_KIND_GATHER, INPLACE(sb), &s, MPI_OP_NULL, root, rb,
                                     s.bytes, ra);
    return end(r, CALL_REAL(Gather, sb, sc, sdt, rb, rc, rdt, root, comm));
}
CCS_MPI_ENTRY(Gather,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
               MPI_Comm comm),
              sb, sc, sdt, rb, rc, rdt, root, comm)

static int w_Igather(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
                     MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Igather, sb, sc, sdt, rb, rc, rdt, root, comm, q);
    /* This rank's contribution: at the root with MPI_IN_PLACE the receive
     * side describes it (the send arguments are ignored); elsewhere the
     * send side (the receive arguments are ignored on non-roots). */
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(ccs_mpi_comm(comm), CCS_KIND_GATHER, INPLACE(sb) | NB, &s, MPI_OP_NULL, root, rb,
                                     s.bytes, ra);
    return end(r, CALL_REAL(Igather, sb, sc, sdt, rb, rc, rdt, root, comm, q));
}
CCS_MPI_ENTRY(Igather,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
               MPI_Comm comm, MPI_Request *q),
              sb, sc, sdt, rb, rc, rdt, root, comm, q)

static int w_Gatherv(const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
                     MPI_Datatype rdt, int root, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Gatherv, sb, sc, sdt, rb, rc, dis, rdt, root, comm);
    /* Only the root agrees; the basic types of each contribution are
     * compared where both sides name them: at the root with MPI_IN_PLACE
     * the receive side (the send arguments are ignored). */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig((int64_t)sum_counts(cm, rc), rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_GATHERV, INPLACE(sb), &s, MPI_OP_NULL, root, rb,
                                     sb == MPI_IN_PLACE ? 0 : s.bytes, ra);
    return end(r, CALL_REAL(Gatherv, sb, sc, sdt, rb, rc, dis, rdt, root, comm));
}
CCS_MPI_ENTRY(Gatherv,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
               MPI_Datatype rdt, int root, MPI_Comm comm),
              sb, sc, sdt, rb, rc, dis, rdt, root, comm)

static int w_Igatherv(const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
                      MPI_Datatype rdt, int root, MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Igatherv, sb, sc, sdt, rb, rc, dis, rdt, root, comm, q);
    /* Only the root agrees; the basic types of each contribution are
     * compared where both sides name them: at the root with MPI_IN_PLACE
     * the receive side (the send arguments are ignored). */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig((int64_t)sum_counts(cm, rc), rdt, &s);
    else
        ccs_mpi_sig(sc, sdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_GATHERV, INPLACE(sb) | NB, &s, MPI_OP_NULL, root, rb,
                                     sb == MPI_IN_PLACE ? 0 : s.bytes, ra);
    return end(r, CALL_REAL(Igatherv, sb, sc, sdt, rb, rc, dis, rdt, root, comm, q));
}
CCS_MPI_ENTRY(Igatherv,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[],
               MPI_Datatype rdt, int root, MPI_Comm comm, MPI_Request *q),
              sb, sc, sdt, rb, rc, dis, rdt, root, comm, q)

static int w_Scatter(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
                     MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Scatter, sb, sc, sdt, rb, rc, rdt, root, comm);
    /* What this rank receives: at the root with MPI_IN_PLACE the send side
     * describes it (the receive arguments are ignored). */
    struct ccs_mpi_sig s;
    if (rb == MPI_IN_PLACE)
        ccs_mpi_sig(sc, sdt, &s);
    else
        ccs_mpi_sig(rc, rdt, &s);
    struct ccs_record *r = begin_sig(ccs_mpi_comm(comm), CCS_KIND_SCATTER, INPLACE(rb), &s, MPI_OP_NULL, root, rb,
                                     s.bytes, ra);
    return end(r, CALL_REAL(Scatter, sb, sc, sdt, rb, rc, rdt, root, comm));
}
CCS_MPI_ENTRY(Scatter,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
               MPI_Comm comm),
              sb, sc, sdt, rb, rc, rdt, root, comm)

static int w_Iscatter(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
                      MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iscatter, sb, sc, sdt, rb, rc, rdt, root, comm, q);
    /* What this rank receives: at the root with MPI_IN_PLACE the send side
     * describes it (the receive arguments are ignored). */
    struct ccs_mpi_sig s;
    if (rb == MPI_IN_PLACE)
        ccs_mpi_sig(sc, sdt, &s);
    else
        ccs_mpi_sig(rc, rdt, &s);
    struct ccs_record *r = begin_sig(ccs_mpi_comm(comm), CCS_KIND_SCATTER, INPLACE(rb) | NB, &s, MPI_OP_NULL, root, rb,
                                     s.bytes, ra);
    return end(r, CALL_REAL(Iscatter, sb, sc, sdt, rb, rc, rdt, root, comm, q));
}
CCS_MPI_ENTRY(Iscatter,
              (const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root,
               MPI_Comm comm, MPI_Request *q),
              sb, sc, sdt, rb, rc, rdt, root, comm, q)

static int w_Scatterv(const void *sb, const int sc[], const int dis[], MPI_Datatype sdt, void *rb, int rc,
                      MPI_Datatype rdt, int root, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Scatterv, sb, sc, dis, sdt, rb, rc, rdt, root, comm);
    /* Only the root agrees; at the root with MPI_IN_PLACE the send side
     * names the basic types (the receive arguments are ignored). */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (rb == MPI_IN_PLACE)
        ccs_mpi_sig((int64_t)sum_counts(cm, sc), sdt, &s);
    else
        ccs_mpi_sig(rc, rdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_SCATTERV, INPLACE(rb), &s, MPI_OP_NULL, root, rb,
                                     rb == MPI_IN_PLACE ? 0 : s.bytes, ra);
    return end(r, CALL_REAL(Scatterv, sb, sc, dis, sdt, rb, rc, rdt, root, comm));
}
CCS_MPI_ENTRY(Scatterv,
              (const void *sb, const int sc[], const int dis[], MPI_Datatype sdt, void *rb, int rc,
               MPI_Datatype rdt, int root, MPI_Comm comm),
              sb, sc, dis, sdt, rb, rc, rdt, root, comm)

static int w_Iscatterv(const void *sb, const int sc[], const int dis[], MPI_Datatype sdt, void *rb, int rc,
                       MPI_Datatype rdt, int root, MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Iscatterv, sb, sc, dis, sdt, rb, rc, rdt, root, comm, q);
    /* Only the root agrees; at the root with MPI_IN_PLACE the send side
     * names the basic types (the receive arguments are ignored). */
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (rb == MPI_IN_PLACE)
        ccs_mpi_sig((int64_t)sum_counts(cm, sc), sdt, &s);
    else
        ccs_mpi_sig(rc, rdt, &s);
    struct ccs_record *r = begin_sig(cm, CCS_KIND_SCATTERV, INPLACE(rb) | NB, &s, MPI_OP_NULL, root, rb,
                                     rb == MPI_IN_PLACE ? 0 : s.bytes, ra);
    return end(r, CALL_REAL(Iscatterv, sb, sc, dis, sdt, rb, rc, rdt, root, comm, q));
}
CCS_MPI_ENTRY(Iscatterv,
              (const void *sb, const int sc[], const int dis[], MPI_Datatype sdt, void *rb, int rc,
               MPI_Datatype rdt, int root, MPI_Comm comm, MPI_Request *q),
              sb, sc, dis, sdt, rb, rc, rdt, root, comm, q)

static int w_Barrier(MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Barrier, comm);
    struct ccs_record *r = begin(comm, CCS_KIND_BARRIER, 0, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, -1, NULL, 0, ra);
    return end(r, CALL_REAL(Barrier, comm));
}
CCS_MPI_ENTRY(Barrier, (MPI_Comm comm), comm)

static int w_Ibarrier(MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Ibarrier, comm, q);
    struct ccs_record *r = begin(comm, CCS_KIND_BARRIER, NB, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, -1, NULL, 0, ra);
    return end(r, CALL_REAL(Ibarrier, comm, q));
}
CCS_MPI_ENTRY(Ibarrier, (MPI_Comm comm, MPI_Request *q), comm, q)

/* -------------------------------------------------------- point-to-point */

static int w_Send(const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Send, buf, n, dt, dest, tag, comm);
    struct ccs_record *r = begin(comm, CCS_KIND_SEND, 0, n, dt, MPI_OP_NULL, dest, buf, nbytes(n, dt), ra);
    return end(r, CALL_REAL(Send, buf, n, dt, dest, tag, comm));
}
CCS_MPI_ENTRY(Send, (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm), buf, n, dt, dest,
              tag, comm)

static int w_Isend(const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *q,
                   void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Isend, buf, n, dt, dest, tag, comm, q);
    struct ccs_record *r = begin(comm, CCS_KIND_SEND, NB, n, dt, MPI_OP_NULL, dest, buf, nbytes(n, dt), ra);
    return end(r, CALL_REAL(Isend, buf, n, dt, dest, tag, comm, q));
}
CCS_MPI_ENTRY(Isend, (const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *q),
              buf, n, dt, dest, tag, comm, q)

static int w_Recv(void *buf, int n, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Recv, buf, n, dt, src, tag, comm, st);
    struct ccs_record *r = begin(comm, CCS_KIND_RECV, 0, n, dt, MPI_OP_NULL, src, buf, nbytes(n, dt), ra);
    return end(r, CALL_REAL(Recv, buf, n, dt, src, tag, comm, st));
}
CCS_MPI_ENTRY(Recv, (void *buf, int n, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st), buf, n,
              dt, src, tag, comm, st)

static int w_Irecv(void *buf, int n, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *q, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Irecv, buf, n, dt, src, tag, comm, q);
    struct ccs_record *r = begin(comm, CCS_KIND_RECV, NB, n, dt, MPI_OP_NULL, src, buf, nbytes(n, dt), ra);
    return end(r, CALL_REAL(Irecv, buf, n, dt, src, tag, comm, q));
}
CCS_MPI_ENTRY(Irecv, (void *buf, int n, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *q), buf, n,
              dt, src, tag, comm, q)

static int w_Sendrecv(const void *sb, int sc, MPI_Datatype sdt, int dest, int stag, void *rb, int rc,
                      MPI_Datatype rdt, int src, int rtag, MPI_Comm comm, MPI_Status *st, void *ra)
{
    if (!ccs_mpi_active())
        return CALL_REAL(Sendrecv, sb, sc, sdt, dest, stag, rb, rc, rdt, src, rtag, comm, st);
    struct ccs_record *r = begin(comm, CCS_KIND_SENDRECV, 0, sc, sdt, MPI_OP_NULL, dest, rb, nbytes(sc, sdt), ra);
    return end(r, CALL_REAL(Sendrecv, sb, sc, sdt, dest, stag, rb, rc, rdt, src, rtag, comm, st));
}
CCS_MPI_ENTRY(Sendrecv,
              (const void *sb, int sc, MPI_Datatype sdt, int dest, int stag, void *rb, int rc, MPI_Datatype rdt,
               int src, int rtag, MPI_Comm comm, MPI_Status *st),
              sb, sc, sdt, dest, stag, rb, rc, rdt, src, rtag, comm, st)
