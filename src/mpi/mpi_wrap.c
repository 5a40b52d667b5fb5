/*
 * mpi_wrap.c - the MPI collectives and point-to-point calls that ccshim
 * counts and sequences.  The regular wrappers are generated from their rows
 * in CCS_MPI_GENERATED (mpi_shim.h): each forwards when ccshim is off,
 * describes the call (what every member must agree on, the bytes, the
 * buffer) with the describe function of its shape, brackets the real call
 * with ccs_call_begin/end, and returns the real result unchanged.  The
 * unusual ones are written by hand: MPI_(I)allreduce at the end of this
 * file (coalescing), the rest where CCS_MPI_APART says.
 *
 * What a wrapper records is what MPI's matching rules say must agree
 * (docs/desync.md, "What must agree"): the type signature (ccs_mpi_sig,
 * not the (count, datatype) pair, which may legally differ) of this rank's
 * contribution per peer, or of the whole where every member must pass the
 * same, and nothing from an argument the standard says is ignored
 * (MPI_IN_PLACE at the root, receive arguments on non-roots).
 */
#include "coalesce_mpi.h"
#include "mpi_shim.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "record.h"
#include "ring.h"
#include "trace_format.h"

#define CALL_REAL(name, ...) (CCS_REAL(name) ? ccs_real_##name(__VA_ARGS__) : MPI_ERR_INTERN)
#define INPLACE(sb) ((sb) == MPI_IN_PLACE ? CCS_F_IN_PLACE : 0)

/* A flag beyond the record's eight (FLAGS is an unsigned, the record's a
 * byte): the call is a persistent collective's init, to be described into
 * the struct ccs_mpi_pcoll that RA then points to, and nothing recorded
 * (mpi_persist.c records the description at each start).  A constant of
 * the generated init wrappers only, so the test folds away in the rest. */
#define CAPTURE 0x100u
#define CAPTURED(flags) (((flags)&CAPTURE) != 0)

CCS_INLINE struct ccs_record *capture(struct ccs_comm *cm, const struct ccs_call *c, void *ra)
{
    struct ccs_mpi_pcoll *p = ra;
    p->call = *c;
    p->cm = cm;
    return NULL;
}

/* Starts the record of a call (ccs_call_begin_active: every caller is a
 * wrapper that found ccshim active): on a communicator entry the
 * wrapper already looked up (the kinds that also need its rank or size), or
 * on a handle (record_begin).  OP is
 * ccshim's: ccs_mpi_op for the reductions (MPI_OP_NULL gives CCS_OP_NONE),
 * CCS_OP_NONE for the kinds without one. */
CCS_INLINE struct ccs_record *record_begin_on(struct ccs_comm *cm, unsigned kind, unsigned flags, int64_t count,
                                              MPI_Datatype dt, unsigned op, int root, const void *buf,
                                              uint64_t bytes, void *ra)
{
    struct ccs_call c = {.kind = (uint16_t)kind,
                         .dtype = ccs_mpi_dtype(dt),
                         .op = (uint8_t)op,
                         .flags = (uint8_t)flags,
                         .backend = CCS_BE_MPI,
                         .root = root,
                         .count = (uint64_t)count,
                         .bytes = bytes,
                         .buf = buf};
    return CAPTURED(flags) ? capture(cm, &c, ra) : ccs_call_begin_active(cm, &c, ra);
}

/* The same with a type signature (ccs_mpi_sig) as what must agree. */
CCS_INLINE struct ccs_record *record_begin_sig(struct ccs_comm *cm, unsigned kind, unsigned flags,
                                               const struct ccs_mpi_sig *s, unsigned op, int root, const void *buf,
                                               uint64_t bytes, void *ra)
{
    struct ccs_call c = {.kind = (uint16_t)kind,
                         .dtype = s->dtype,
                         .op = (uint8_t)op,
                         .flags = (uint8_t)flags,
                         .backend = CCS_BE_MPI,
                         .root = root,
                         .sig = s->sig,
                         .count = s->count,
                         .bytes = bytes,
                         .buf = buf};
    return CAPTURED(flags) ? capture(cm, &c, ra) : ccs_call_begin_active(cm, &c, ra);
}

/* The common case of the reductions: what must agree is (N, DT) and the op
 * on every member. */
CCS_INLINE struct ccs_record *record_begin_n(MPI_Comm comm, unsigned kind, unsigned flags, int64_t n,
                                             MPI_Datatype dt, unsigned op, int root, const void *buf, void *ra)
{
    struct ccs_mpi_sig s;
    ccs_mpi_sig(n, dt, &s);
    return record_begin_sig(ccs_mpi_comm(comm), kind, flags, &s, op, root, buf, s.bytes, ra);
}

CCS_INLINE struct ccs_record *record_begin(MPI_Comm comm, unsigned kind, unsigned flags, int64_t count,
                                           MPI_Datatype dt, int root, const void *buf, uint64_t bytes, void *ra)
{
    return record_begin_on(ccs_mpi_comm(comm), kind, flags, count, dt, CCS_OP_NONE, root, buf, bytes, ra);
}

static inline int record_end(struct ccs_record *r, int rc)
{
    ccs_call_end(r, rc != MPI_SUCCESS);
    return rc;
}

static inline uint64_t nbytes(int64_t count, MPI_Datatype dt)
{
    return ccs_mpi_bytes(count, dt, ccs_mpi_dtype(dt));
}

/* Entry I of the count array COUNTS: int, or MPI_Count when WIDE (the
 * large-count _c variants); a negative one as 0.  WIDE is a constant of
 * each describe function's caller, so the choice folds. */
CCS_INLINE uint64_t count_at(const void *counts, int wide, int i)
{
    int64_t v = wide ? (int64_t)((const MPI_Count *)counts)[i] : (int64_t)((const int *)counts)[i];
    return v > 0 ? (uint64_t)v : 0;
}

/* Sum of the N entries of COUNTS (v-variants; N from ccs_mpi_peers, or the
 * size for reduce_scatter). */
CCS_INLINE uint64_t sum_counts(int n, const void *counts, int wide)
{
    uint64_t s = 0;
    if (!counts || n <= 0)
        return 0;
    for (int i = 0; i < n; i++)
        s += count_at(counts, wide, i);
    return s;
}

/* Bytes this rank receives in an alltoallw (one datatype per peer, N peers). */
CCS_INLINE uint64_t recv_bytes_w(int n, const void *counts, int wide, const MPI_Datatype *types)
{
    uint64_t b = 0;
    if (!counts || !types || n <= 0)
        return 0;
    for (int i = 0; i < n; i++) {
        uint64_t c = count_at(counts, wide, i);
        if (c)
            b += nbytes((int64_t)c, types[i]);
    }
    return b;
}

/* The roots of an intercommunicator's rooted collectives (MPI 4.0, 6.2.2):
 * in the root's group the root passes MPI_ROOT and the others MPI_PROC_NULL;
 * the other group passes the root's rank.  Both values are erroneous on an
 * intracommunicator, so the test needs no look at the communicator.  At
 * MPI_PROC_NULL every argument but the communicator is ignored (no datatype
 * of it is looked at: it may be any value); at MPI_ROOT the arguments of the
 * side that does not move data are. */
#define ROOT_IGNORED(root) CCS_UNLIKELY((root) == MPI_PROC_NULL)
#define ROOT_INTER(root) CCS_UNLIKELY((root) == MPI_ROOT)

static inline int my_rank(const struct ccs_comm *c)
{
    return c ? c->rank : 0;
}

/* ------------------------------------------------------ shapes: describe */

/* One parameter list per shape of CCS_MPI_GENERATED (mpi_shim.h), with the
 * arguments that name them, and the function that describes a call of that
 * shape: what every member must agree on under MPI's matching rules, the
 * bytes, the buffer.  KIND and FLAGS are constants of the row, so a test
 * on KIND inside a describe function folds away. */

#define MPI_SHAPE_red_PARAMS const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm
#define MPI_SHAPE_red_ARGS sb, rb, n, dt, op, comm
/* Allreduce, Reduce_scatter_block, Scan, Exscan: (N, DT) and the op agree
 * on every member. */
CCS_INLINE struct ccs_record *describe_red(unsigned kind, unsigned flags, const void *sb, void *rb, int64_t n,
                                           MPI_Datatype dt, MPI_Op op, MPI_Comm comm, void *ra)
{
    return record_begin_n(comm, kind, INPLACE(sb) | flags, n, dt, ccs_mpi_op(op), -1, rb, ra);
}

#define MPI_SHAPE_red_root_PARAMS                                                                                  \
    const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm
#define MPI_SHAPE_red_root_ARGS sb, rb, n, dt, op, root, comm
CCS_INLINE struct ccs_record *describe_red_root(unsigned kind, unsigned flags, const void *sb, void *rb, int64_t n,
                                                MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm, void *ra)
{
    if (ROOT_IGNORED(root))
        return record_begin_n(comm, kind, flags, 0, MPI_DATATYPE_NULL, CCS_OP_NONE, root, NULL, ra);
    if (ROOT_INTER(root)) /* the send buffer is ignored */
        return record_begin_n(comm, kind, flags, n, dt, ccs_mpi_op(op), root, rb, ra);
    return record_begin_n(comm, kind, INPLACE(sb) | flags, n, dt, ccs_mpi_op(op), root, rb, ra);
}

#define MPI_SHAPE_red_v_PARAMS const void *sb, void *rb, const int rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm
#define MPI_SHAPE_red_v_ARGS sb, rb, rc, dt, op, comm
/* Reduce_scatter: recvcounts are the same on every member, so the whole
 * vector agrees.  Its length is the local group's size, on an
 * intercommunicator too (each group scatters the other's result among its
 * own members: MPI 4.0, 6.10). */
CCS_INLINE struct ccs_record *red_v_of(int wide, unsigned kind, unsigned flags, const void *sb, void *rb,
                                       const void *rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, void *ra)
{
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    ccs_mpi_sig((int64_t)sum_counts(cm ? cm->size : 0, rc, wide), dt, &s);
    return record_begin_sig(cm, kind, INPLACE(sb) | flags, &s, ccs_mpi_op(op), -1, rb, s.bytes, ra);
}
CCS_INLINE struct ccs_record *describe_red_v(unsigned kind, unsigned flags, MPI_SHAPE_red_v_PARAMS, void *ra)
{
    return red_v_of(0, kind, flags, MPI_SHAPE_red_v_ARGS, ra);
}

#define MPI_SHAPE_bcast_PARAMS void *buf, int n, MPI_Datatype dt, int root, MPI_Comm comm
#define MPI_SHAPE_bcast_ARGS buf, n, dt, root, comm
CCS_INLINE struct ccs_record *describe_bcast(unsigned kind, unsigned flags, void *buf, int64_t n, MPI_Datatype dt,
                                             int root, MPI_Comm comm, void *ra)
{
    if (ROOT_IGNORED(root))
        return record_begin_n(comm, kind, flags, 0, MPI_DATATYPE_NULL, CCS_OP_NONE, root, NULL, ra);
    return record_begin_n(comm, kind, flags, n, dt, CCS_OP_NONE, root, buf, ra);
}

/* What this rank contributes to a gathering kind: with MPI_IN_PLACE the
 * receive side describes it (the send arguments are ignored), else the send
 * side (a non-root's receive arguments are ignored). */
CCS_INLINE void contribution(const void *sb, int64_t sc, MPI_Datatype sdt, int64_t rc, MPI_Datatype rdt,
                             struct ccs_mpi_sig *s)
{
    if (sb == MPI_IN_PLACE)
        ccs_mpi_sig(rc, rdt, s);
    else
        ccs_mpi_sig(sc, sdt, s);
}

#define MPI_SHAPE_coll_PARAMS                                                                                      \
    const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm
#define MPI_SHAPE_coll_ARGS sb, sc, sdt, rb, rc, rdt, comm
/* Allgather: this rank's contribution; Alltoall: what goes to each peer,
 * the bytes to all of them (the remote group on an intercommunicator). */
CCS_INLINE struct ccs_record *describe_coll(unsigned kind, unsigned flags, const void *sb, int64_t sc,
                                            MPI_Datatype sdt, void *rb, int64_t rc, MPI_Datatype rdt, MPI_Comm comm,
                                            void *ra)
{
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    contribution(sb, sc, sdt, rc, rdt, &s);
    uint64_t bytes = kind == CCS_KIND_ALLTOALL ? s.bytes * (uint64_t)ccs_mpi_peers(cm) : s.bytes;
    return record_begin_sig(cm, kind, INPLACE(sb) | flags, &s, CCS_OP_NONE, -1, rb, bytes, ra);
}

#define MPI_SHAPE_coll_root_PARAMS                                                                                 \
    const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, int root, MPI_Comm comm
#define MPI_SHAPE_coll_root_ARGS sb, sc, sdt, rb, rc, rdt, root, comm
/* Gather: this rank's contribution.  Scatter: what this rank receives; at
 * the root with MPI_IN_PLACE the send side describes it (the receive
 * arguments are ignored), so the in-place buffer is the receive one.  On an
 * intercommunicator the root (MPI_ROOT) contributes nothing: it records one
 * member's part as its side names it (a gather's receive side, a scatter's
 * send side) and the bytes of all of them; MPI_PROC_NULL records nothing. */
CCS_INLINE struct ccs_record *describe_coll_root(unsigned kind, unsigned flags, const void *sb, int64_t sc,
                                                 MPI_Datatype sdt, void *rb, int64_t rc, MPI_Datatype rdt, int root,
                                                 MPI_Comm comm, void *ra)
{
    struct ccs_mpi_sig s;
    if (ROOT_IGNORED(root))
        return record_begin_on(ccs_mpi_comm(comm), kind, flags, 0, MPI_DATATYPE_NULL, CCS_OP_NONE, root, NULL, 0,
                               ra);
    if (ROOT_INTER(root)) {
        struct ccs_comm *cm = ccs_mpi_comm(comm);
        if (kind == CCS_KIND_SCATTER)
            ccs_mpi_sig(sc, sdt, &s);
        else
            ccs_mpi_sig(rc, rdt, &s);
        return record_begin_sig(cm, kind, flags, &s, CCS_OP_NONE, root, rb,
                                s.bytes * (uint64_t)ccs_mpi_peers(cm), ra);
    }
    const void *in_place_side = sb;
    if (kind == CCS_KIND_SCATTER) {
        in_place_side = rb;
        if (rb == MPI_IN_PLACE)
            ccs_mpi_sig(sc, sdt, &s);
        else
            ccs_mpi_sig(rc, rdt, &s);
    } else {
        contribution(sb, sc, sdt, rc, rdt, &s);
    }
    return record_begin_sig(ccs_mpi_comm(comm), kind, INPLACE(in_place_side) | flags, &s, CCS_OP_NONE, root, rb,
                            s.bytes, ra);
}

#define MPI_SHAPE_allgatherv_PARAMS                                                                                \
    const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[], MPI_Datatype rdt,         \
        MPI_Comm comm
#define MPI_SHAPE_allgatherv_ARGS sb, sc, sdt, rb, rc, dis, rdt, comm
/* Every member receives the same whole (its own part included, in place or
 * not; on an intercommunicator, the whole of the remote group: recvcounts
 * has its size); the send arguments are ignored with MPI_IN_PLACE (not
 * allowed on an intercommunicator: its own count is not looked for there). */
CCS_INLINE struct ccs_record *allgatherv_of(int wide, unsigned kind, unsigned flags, const void *sb, int64_t sc,
                                            MPI_Datatype sdt, void *rb, const void *rc, MPI_Datatype rdt,
                                            MPI_Comm comm, void *ra)
{
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    int peers = ccs_mpi_peers(cm), me = my_rank(cm);
    int64_t n = sb == MPI_IN_PLACE ? (rc && me >= 0 && me < peers ? (int64_t)count_at(rc, wide, me) : 0) : sc;
    MPI_Datatype t = sb == MPI_IN_PLACE ? rdt : sdt;
    struct ccs_mpi_sig s;
    ccs_mpi_sig((int64_t)sum_counts(peers, rc, wide), rdt, &s);
    return record_begin_sig(cm, kind, INPLACE(sb) | flags, &s, CCS_OP_NONE, -1, rb, nbytes(n, t), ra);
}
CCS_INLINE struct ccs_record *describe_allgatherv(unsigned kind, unsigned flags, MPI_SHAPE_allgatherv_PARAMS,
                                                  void *ra)
{
    (void)dis;
    return allgatherv_of(0, kind, flags, sb, sc, sdt, rb, rc, rdt, comm, ra);
}

/* Gatherv and Scatterv, mirror images of each other: only the root agrees.
 * This rank's part is N elements of DT, except at the root with
 * MPI_IN_PLACE in IN_PLACE_SIDE (a gather's send buffer, a scatter's
 * receive buffer), where the vector side (COUNTS of VDT) names the basic
 * types, since the other side's arguments are ignored, and no bytes move.
 * On an intercommunicator the root (MPI_ROOT) moves the whole vector (COUNTS
 * has the remote group's size; the other side is ignored) and
 * MPI_PROC_NULL nothing (every argument ignored). */
CCS_INLINE struct ccs_record *describe_rooted_v(int wide, unsigned kind, unsigned flags, const void *in_place_side,
                                                const void *counts, MPI_Datatype vdt, int64_t n, MPI_Datatype dt,
                                                int root, void *rb, MPI_Comm comm, void *ra)
{
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    if (ROOT_IGNORED(root))
        return record_begin_on(cm, kind, flags, 0, MPI_DATATYPE_NULL, CCS_OP_NONE, root, NULL, 0, ra);
    if (ROOT_INTER(root)) {
        ccs_mpi_sig((int64_t)sum_counts(ccs_mpi_peers(cm), counts, wide), vdt, &s);
        return record_begin_sig(cm, kind, flags, &s, CCS_OP_NONE, root, rb, s.bytes, ra);
    }
    int in_place = in_place_side == MPI_IN_PLACE;
    if (in_place)
        ccs_mpi_sig((int64_t)sum_counts(ccs_mpi_peers(cm), counts, wide), vdt, &s);
    else
        ccs_mpi_sig(n, dt, &s);
    return record_begin_sig(cm, kind, INPLACE(in_place_side) | flags, &s, CCS_OP_NONE, root, rb,
                            in_place ? 0 : s.bytes, ra);
}

#define MPI_SHAPE_gatherv_PARAMS                                                                                   \
    const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int dis[], MPI_Datatype rdt,         \
        int root, MPI_Comm comm
#define MPI_SHAPE_gatherv_ARGS sb, sc, sdt, rb, rc, dis, rdt, root, comm
CCS_INLINE struct ccs_record *describe_gatherv(unsigned kind, unsigned flags, MPI_SHAPE_gatherv_PARAMS, void *ra)
{
    (void)dis;
    return describe_rooted_v(0, kind, flags, sb, rc, rdt, sc, sdt, root, rb, comm, ra);
}

#define MPI_SHAPE_scatterv_PARAMS                                                                                  \
    const void *sb, const int sc[], const int dis[], MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt,         \
        int root, MPI_Comm comm
#define MPI_SHAPE_scatterv_ARGS sb, sc, dis, sdt, rb, rc, rdt, root, comm
CCS_INLINE struct ccs_record *describe_scatterv(unsigned kind, unsigned flags, MPI_SHAPE_scatterv_PARAMS, void *ra)
{
    (void)sb, (void)dis;
    return describe_rooted_v(0, kind, flags, rb, sc, sdt, rc, rdt, root, rb, comm, ra);
}

#define MPI_SHAPE_alltoallv_PARAMS                                                                                 \
    const void *sb, const int sc[], const int sd[], MPI_Datatype sdt, void *rb, const int rc[], const int rd[],    \
        MPI_Datatype rdt, MPI_Comm comm
#define MPI_SHAPE_alltoallv_ARGS sb, sc, sd, sdt, rb, rc, rd, rdt, comm
/* Per-peer counts and types may differ on every pair: only the kind
 * agrees; the record shows what this rank receives (from each member of the
 * remote group on an intercommunicator). */
CCS_INLINE struct ccs_record *alltoallv_of(int wide, unsigned kind, unsigned flags, const void *sb, void *rb,
                                           const void *rc, MPI_Datatype rdt, MPI_Comm comm, void *ra)
{
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    uint64_t total = sum_counts(ccs_mpi_peers(cm), rc, wide);
    return record_begin_on(cm, kind, INPLACE(sb) | flags, (int64_t)total, rdt, CCS_OP_NONE, -1, rb,
                           nbytes((int64_t)total, rdt), ra);
}
CCS_INLINE struct ccs_record *describe_alltoallv(unsigned kind, unsigned flags, MPI_SHAPE_alltoallv_PARAMS,
                                                 void *ra)
{
    (void)sc, (void)sd, (void)sdt, (void)rd;
    return alltoallv_of(0, kind, flags, sb, rb, rc, rdt, comm, ra);
}

#define MPI_SHAPE_alltoallw_PARAMS                                                                                 \
    const void *sb, const int sc[], const int sd[], const MPI_Datatype st[], void *rb, const int rc[],             \
        const int rd[], const MPI_Datatype rt[], MPI_Comm comm
#define MPI_SHAPE_alltoallw_ARGS sb, sc, sd, st, rb, rc, rd, rt, comm
/* Alltoallw: per-peer counts and datatypes may differ on every pair, so
 * only the kind agrees; the record shows the bytes this rank receives, as
 * a count of MPI_BYTE. */
CCS_INLINE struct ccs_record *alltoallw_of(int wide, unsigned kind, unsigned flags, const void *sb, void *rb,
                                           const void *rc, const MPI_Datatype rt[], MPI_Comm comm, void *ra)
{
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    uint64_t b = recv_bytes_w(ccs_mpi_peers(cm), rc, wide, rt);
    return record_begin_on(cm, kind, INPLACE(sb) | flags, (int64_t)b, MPI_BYTE, CCS_OP_NONE, -1, rb, b, ra);
}
CCS_INLINE struct ccs_record *describe_alltoallw(unsigned kind, unsigned flags, MPI_SHAPE_alltoallw_PARAMS,
                                                 void *ra)
{
    (void)sc, (void)sd, (void)st, (void)rd;
    return alltoallw_of(0, kind, flags, sb, rb, rc, rt, comm, ra);
}

#define MPI_SHAPE_barrier_PARAMS MPI_Comm comm
#define MPI_SHAPE_barrier_ARGS comm
CCS_INLINE struct ccs_record *describe_barrier(unsigned kind, unsigned flags, MPI_Comm comm, void *ra)
{
    return record_begin(comm, kind, flags, 0, MPI_DATATYPE_NULL, -1, NULL, 0, ra);
}

/* Neighbourhood collectives (MPI 4.0, 8.6): a rank exchanges with its
 * neighbours in the communicator's topology only, and what it passes has
 * to match its neighbours' alone, which may differ from one neighbourhood
 * to the next; so their fingerprint holds the kind alone (ccs_kinds.h) and
 * what is recorded here is this rank's own side, for the audit: what it
 * sends each out-neighbour (allgather, alltoall: the bytes to all of them)
 * or gives (allgatherv), what it receives from its in-neighbours (alltoallv;
 * alltoallw as bytes).  The degrees come from ccs_mpi_topo (asked of the
 * MPI once per communicator).  MPI_IN_PLACE is not allowed here. */
#define MPI_SHAPE_nbr_PARAMS MPI_SHAPE_coll_PARAMS
#define MPI_SHAPE_nbr_ARGS MPI_SHAPE_coll_ARGS
CCS_INLINE struct ccs_record *describe_nbr(unsigned kind, unsigned flags, const void *sb, int64_t sc,
                                           MPI_Datatype sdt, void *rb, int64_t rc, MPI_Datatype rdt, MPI_Comm comm,
                                           void *ra)
{
    (void)sb, (void)rc, (void)rdt;
    struct ccs_comm *cm = ccs_mpi_comm(comm);
    struct ccs_mpi_sig s;
    ccs_mpi_sig(sc, sdt, &s);
    uint64_t bytes = kind == CCS_KIND_NEIGHBOR_ALLTOALL ? s.bytes * (uint64_t)ccs_mpi_topo(comm).out : s.bytes;
    return record_begin_sig(cm, kind, flags, &s, CCS_OP_NONE, -1, rb, bytes, ra);
}

/* Neighbor_allgatherv: this rank's part (int or MPI_Count arrays alike:
 * only the scalars are read). */
#define MPI_SHAPE_nbr_v_PARAMS MPI_SHAPE_allgatherv_PARAMS
#define MPI_SHAPE_nbr_v_ARGS MPI_SHAPE_allgatherv_ARGS
CCS_INLINE struct ccs_record *describe_nbr_v(unsigned kind, unsigned flags, const void *sb, int64_t sc,
                                             MPI_Datatype sdt, void *rb, const void *rc, const void *dis,
                                             MPI_Datatype rdt, MPI_Comm comm, void *ra)
{
    (void)sb, (void)rc, (void)dis, (void)rdt;
    struct ccs_mpi_sig s;
    ccs_mpi_sig(sc, sdt, &s);
    return record_begin_sig(ccs_mpi_comm(comm), kind, flags, &s, CCS_OP_NONE, -1, rb, s.bytes, ra);
}

CCS_INLINE struct ccs_record *nbr_vv_of(int wide, unsigned kind, unsigned flags, void *rb, const void *rc,
                                        MPI_Datatype rdt, MPI_Comm comm, void *ra)
{
    uint64_t total = sum_counts(ccs_mpi_topo(comm).in, rc, wide);
    return record_begin_on(ccs_mpi_comm(comm), kind, flags, (int64_t)total, rdt, CCS_OP_NONE, -1, rb,
                           nbytes((int64_t)total, rdt), ra);
}
#define MPI_SHAPE_nbr_vv_PARAMS MPI_SHAPE_alltoallv_PARAMS
#define MPI_SHAPE_nbr_vv_ARGS MPI_SHAPE_alltoallv_ARGS
CCS_INLINE struct ccs_record *describe_nbr_vv(unsigned kind, unsigned flags, MPI_SHAPE_nbr_vv_PARAMS, void *ra)
{
    (void)sb, (void)sc, (void)sd, (void)sdt, (void)rd;
    return nbr_vv_of(0, kind, flags, rb, rc, rdt, comm, ra);
}

CCS_INLINE struct ccs_record *nbr_w_of(int wide, unsigned kind, unsigned flags, void *rb, const void *rc,
                                       const MPI_Datatype rt[], MPI_Comm comm, void *ra)
{
    uint64_t b = recv_bytes_w(ccs_mpi_topo(comm).in, rc, wide, rt);
    return record_begin_on(ccs_mpi_comm(comm), kind, flags, (int64_t)b, MPI_BYTE, CCS_OP_NONE, -1, rb, b, ra);
}
#define MPI_SHAPE_nbr_w_PARAMS                                                                                     \
    const void *sb, const int sc[], const MPI_Aint sd[], const MPI_Datatype st[], void *rb, const int rc[],        \
        const MPI_Aint rd[], const MPI_Datatype rt[], MPI_Comm comm
#define MPI_SHAPE_nbr_w_ARGS sb, sc, sd, st, rb, rc, rd, rt, comm
CCS_INLINE struct ccs_record *describe_nbr_w(unsigned kind, unsigned flags, MPI_SHAPE_nbr_w_PARAMS, void *ra)
{
    (void)sb, (void)sc, (void)sd, (void)st, (void)rd;
    return nbr_w_of(0, kind, flags, rb, rc, rt, comm, ra);
}

/* ------------------------------------------- shapes: large-count (_c) */

/* MPI-4's _c variants take MPI_Count counts and MPI_Aint displacements:
 * the same descriptions, with the arrays read as MPI_Count (the *_of
 * functions' WIDE). */
#ifdef HAVE_MPI_LARGE_COUNT
#define MPI_SHAPE_red_c_PARAMS const void *sb, void *rb, MPI_Count n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm
#define MPI_SHAPE_red_c_ARGS MPI_SHAPE_red_ARGS
#define describe_red_c describe_red
#define MPI_SHAPE_red_root_c_PARAMS                                                                                \
    const void *sb, void *rb, MPI_Count n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm
#define MPI_SHAPE_red_root_c_ARGS MPI_SHAPE_red_root_ARGS
#define describe_red_root_c describe_red_root
#define MPI_SHAPE_bcast_c_PARAMS void *buf, MPI_Count n, MPI_Datatype dt, int root, MPI_Comm comm
#define MPI_SHAPE_bcast_c_ARGS MPI_SHAPE_bcast_ARGS
#define describe_bcast_c describe_bcast
#define MPI_SHAPE_coll_c_PARAMS                                                                                    \
    const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, MPI_Count rc, MPI_Datatype rdt, MPI_Comm comm
#define MPI_SHAPE_coll_c_ARGS MPI_SHAPE_coll_ARGS
#define describe_coll_c describe_coll
#define MPI_SHAPE_nbr_c_PARAMS MPI_SHAPE_coll_c_PARAMS
#define MPI_SHAPE_nbr_c_ARGS MPI_SHAPE_coll_ARGS
#define describe_nbr_c describe_nbr
#define MPI_SHAPE_coll_root_c_PARAMS                                                                               \
    const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, MPI_Count rc, MPI_Datatype rdt, int root,            \
        MPI_Comm comm
#define MPI_SHAPE_coll_root_c_ARGS MPI_SHAPE_coll_root_ARGS
#define describe_coll_root_c describe_coll_root

#define MPI_SHAPE_red_v_c_PARAMS                                                                                   \
    const void *sb, void *rb, const MPI_Count rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm
#define MPI_SHAPE_red_v_c_ARGS MPI_SHAPE_red_v_ARGS
CCS_INLINE struct ccs_record *describe_red_v_c(unsigned kind, unsigned flags, MPI_SHAPE_red_v_c_PARAMS, void *ra)
{
    return red_v_of(1, kind, flags, MPI_SHAPE_red_v_ARGS, ra);
}
#define MPI_SHAPE_allgatherv_c_PARAMS                                                                              \
    const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, const MPI_Count rc[], const MPI_Aint dis[],          \
        MPI_Datatype rdt, MPI_Comm comm
#define MPI_SHAPE_allgatherv_c_ARGS MPI_SHAPE_allgatherv_ARGS
CCS_INLINE struct ccs_record *describe_allgatherv_c(unsigned kind, unsigned flags, MPI_SHAPE_allgatherv_c_PARAMS,
                                                    void *ra)
{
    (void)dis;
    return allgatherv_of(1, kind, flags, sb, sc, sdt, rb, rc, rdt, comm, ra);
}
#define MPI_SHAPE_nbr_v_c_PARAMS MPI_SHAPE_allgatherv_c_PARAMS
#define MPI_SHAPE_nbr_v_c_ARGS MPI_SHAPE_allgatherv_ARGS
#define describe_nbr_v_c describe_nbr_v
#define MPI_SHAPE_gatherv_c_PARAMS                                                                                 \
    const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, const MPI_Count rc[], const MPI_Aint dis[],          \
        MPI_Datatype rdt, int root, MPI_Comm comm
#define MPI_SHAPE_gatherv_c_ARGS MPI_SHAPE_gatherv_ARGS
CCS_INLINE struct ccs_record *describe_gatherv_c(unsigned kind, unsigned flags, MPI_SHAPE_gatherv_c_PARAMS,
                                                 void *ra)
{
    (void)dis;
    return describe_rooted_v(1, kind, flags, sb, rc, rdt, sc, sdt, root, rb, comm, ra);
}
#define MPI_SHAPE_scatterv_c_PARAMS                                                                                \
    const void *sb, const MPI_Count sc[], const MPI_Aint dis[], MPI_Datatype sdt, void *rb, MPI_Count rc,          \
        MPI_Datatype rdt, int root, MPI_Comm comm
#define MPI_SHAPE_scatterv_c_ARGS MPI_SHAPE_scatterv_ARGS
CCS_INLINE struct ccs_record *describe_scatterv_c(unsigned kind, unsigned flags, MPI_SHAPE_scatterv_c_PARAMS,
                                                  void *ra)
{
    (void)sb, (void)dis;
    return describe_rooted_v(1, kind, flags, rb, sc, sdt, rc, rdt, root, rb, comm, ra);
}
#define MPI_SHAPE_alltoallv_c_PARAMS                                                                               \
    const void *sb, const MPI_Count sc[], const MPI_Aint sd[], MPI_Datatype sdt, void *rb, const MPI_Count rc[],   \
        const MPI_Aint rd[], MPI_Datatype rdt, MPI_Comm comm
#define MPI_SHAPE_alltoallv_c_ARGS MPI_SHAPE_alltoallv_ARGS
CCS_INLINE struct ccs_record *describe_alltoallv_c(unsigned kind, unsigned flags, MPI_SHAPE_alltoallv_c_PARAMS,
                                                   void *ra)
{
    (void)sc, (void)sd, (void)sdt, (void)rd;
    return alltoallv_of(1, kind, flags, sb, rb, rc, rdt, comm, ra);
}
#define MPI_SHAPE_nbr_vv_c_PARAMS MPI_SHAPE_alltoallv_c_PARAMS
#define MPI_SHAPE_nbr_vv_c_ARGS MPI_SHAPE_alltoallv_ARGS
CCS_INLINE struct ccs_record *describe_nbr_vv_c(unsigned kind, unsigned flags, MPI_SHAPE_nbr_vv_c_PARAMS, void *ra)
{
    (void)sb, (void)sc, (void)sd, (void)sdt, (void)rd;
    return nbr_vv_of(1, kind, flags, rb, rc, rdt, comm, ra);
}
#define MPI_SHAPE_alltoallw_c_PARAMS                                                                               \
    const void *sb, const MPI_Count sc[], const MPI_Aint sd[], const MPI_Datatype st[], void *rb,                  \
        const MPI_Count rc[], const MPI_Aint rd[], const MPI_Datatype rt[], MPI_Comm comm
#define MPI_SHAPE_alltoallw_c_ARGS MPI_SHAPE_alltoallw_ARGS
CCS_INLINE struct ccs_record *describe_alltoallw_c(unsigned kind, unsigned flags, MPI_SHAPE_alltoallw_c_PARAMS,
                                                   void *ra)
{
    (void)sc, (void)sd, (void)st, (void)rd;
    return alltoallw_of(1, kind, flags, sb, rb, rc, rt, comm, ra);
}
#define MPI_SHAPE_nbr_w_c_PARAMS MPI_SHAPE_alltoallw_c_PARAMS
#define MPI_SHAPE_nbr_w_c_ARGS MPI_SHAPE_alltoallw_ARGS
CCS_INLINE struct ccs_record *describe_nbr_w_c(unsigned kind, unsigned flags, MPI_SHAPE_nbr_w_c_PARAMS, void *ra)
{
    (void)sb, (void)sc, (void)sd, (void)st, (void)rd;
    return nbr_w_of(1, kind, flags, rb, rc, rt, comm, ra);
}
#endif

/* Point-to-point: the peer in the root field, the bytes of this side. */
#define MPI_SHAPE_send_PARAMS const void *buf, int n, MPI_Datatype dt, int peer, int tag, MPI_Comm comm
#define MPI_SHAPE_send_ARGS buf, n, dt, peer, tag, comm
CCS_INLINE struct ccs_record *describe_send(unsigned kind, unsigned flags, const void *buf, int n, MPI_Datatype dt,
                                            int peer, int tag, MPI_Comm comm, void *ra)
{
    (void)tag;
    return record_begin(comm, kind, flags, n, dt, peer, buf, nbytes(n, dt), ra);
}

#define MPI_SHAPE_recv_PARAMS void *buf, int n, MPI_Datatype dt, int peer, int tag, MPI_Comm comm
#define MPI_SHAPE_recv_ARGS buf, n, dt, peer, tag, comm
#define describe_recv describe_send

#define MPI_SHAPE_sendrecv_PARAMS                                                                                  \
    const void *sb, int sc, MPI_Datatype sdt, int dest, int stag, void *rb, int rc, MPI_Datatype rdt, int src,     \
        int rtag, MPI_Comm comm
#define MPI_SHAPE_sendrecv_ARGS sb, sc, sdt, dest, stag, rb, rc, rdt, src, rtag, comm
/* Sendrecv: the send side (peer, bytes), the receive buffer. */
CCS_INLINE struct ccs_record *describe_sendrecv(unsigned kind, unsigned flags, const void *sb, int sc,
                                                MPI_Datatype sdt, int dest, int stag, void *rb, int rc,
                                                MPI_Datatype rdt, int src, int rtag, MPI_Comm comm, void *ra)
{
    (void)sb, (void)stag, (void)rc, (void)rdt, (void)src, (void)rtag;
    return record_begin(comm, kind, flags, sc, sdt, dest, rb, nbytes(sc, sdt), ra);
}

/* What follows a shape's parameters, and the flag it gives the record. */
#define MPI_TAIL_none_PARAMS
#define MPI_TAIL_none_ARGS
#define MPI_TAIL_none_FLAGS 0
#define MPI_TAIL_status_PARAMS , MPI_Status *st
#define MPI_TAIL_status_ARGS , st
#define MPI_TAIL_status_FLAGS 0
#define MPI_TAIL_req_PARAMS , MPI_Request *q
#define MPI_TAIL_req_ARGS , q
#define MPI_TAIL_req_FLAGS CCS_F_NONBLOCKING

/* ------------------------------------------------- the generated wrappers */

#define GENERATE(name, shape, kind, tail)                                                                          \
    CCS_INLINE int w_##name(MPI_SHAPE_##shape##_PARAMS MPI_TAIL_##tail##_PARAMS, void *ra)                         \
    {                                                                                                              \
        if (!ccs_mpi_active())                                                                                     \
            return CALL_REAL(name, MPI_SHAPE_##shape##_ARGS MPI_TAIL_##tail##_ARGS);                               \
        struct ccs_record *r =                                                                                     \
            describe_##shape(CCS_KIND_##kind, MPI_TAIL_##tail##_FLAGS, MPI_SHAPE_##shape##_ARGS, ra);              \
        return record_end(r, CALL_REAL(name, MPI_SHAPE_##shape##_ARGS MPI_TAIL_##tail##_ARGS));                    \
    }                                                                                                              \
    CCS_MPI_ENTRY(name, (MPI_SHAPE_##shape##_PARAMS MPI_TAIL_##tail##_PARAMS),                                     \
                  MPI_SHAPE_##shape##_ARGS MPI_TAIL_##tail##_ARGS)
CCS_MPI_GENERATED(GENERATE)
#undef GENERATE

/* A persistent collective's init (CCS_MPI_PERSISTENT): the call members
 * match, in the order of their inits (MPI 4.0, 6.13: the inits follow the
 * ordering rules of collectives; the starts of different requests may come
 * in any order on different members, MPICH's coll/p_order test).  So the
 * init is recorded on the collective sequence as its nonblocking twin would
 * be, and the description kept for the request's starts (mpi_persist.c),
 * which are counted off the sequence. */
#define GENERATE_INIT(name, shape, kind)                                                                           \
    CCS_INLINE int w_##name(MPI_SHAPE_##shape##_PARAMS, MPI_Info info, MPI_Request *q, void *ra)                   \
    {                                                                                                              \
        if (!ccs_mpi_active())                                                                                     \
            return CALL_REAL(name, MPI_SHAPE_##shape##_ARGS, info, q);                                             \
        struct ccs_mpi_pcoll p = {.comm = CCS_MPI_HKEY(comm)};                                                     \
        describe_##shape(CCS_KIND_##kind, CCS_F_NONBLOCKING | CAPTURE, MPI_SHAPE_##shape##_ARGS, &p);              \
        struct ccs_record *r = ccs_call_begin_active(p.cm, &p.call, ra);                                           \
        int ret = CALL_REAL(name, MPI_SHAPE_##shape##_ARGS, info, q);                                              \
        ccs_call_end(r, ret != MPI_SUCCESS);                                                                       \
        if (ret == MPI_SUCCESS)                                                                                    \
            ccs_mpi_persist_init(q, &p);                                                                           \
        return ret;                                                                                                \
    }                                                                                                              \
    CCS_MPI_ENTRY(name, (MPI_SHAPE_##shape##_PARAMS, MPI_Info info, MPI_Request * q), MPI_SHAPE_##shape##_ARGS,    \
                  info, q)
CCS_MPI_PERSISTENT(GENERATE_INIT)
#undef GENERATE_INIT

/* ------------------------------------------- apart: MPI_Allreduce, Iallreduce */

/* Written by hand: coalescing (coalesce_mpi.c) may take an all-reduce over
 * (defer it, or fold it into a step's single all-reduce), before it is
 * described; Q is NULL for MPI_Allreduce.  One predictable branch while
 * coalescing is off. */
CCS_INLINE int real_allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                              MPI_Request *q)
{
    return q ? CALL_REAL(Iallreduce, sb, rb, n, dt, op, comm, q) : CALL_REAL(Allreduce, sb, rb, n, dt, op, comm);
}

CCS_INLINE int allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *q,
                         void *ra)
{
    if (!ccs_mpi_active())
        return real_allreduce(sb, rb, n, dt, op, comm, q);
    int crc;
    if (CCS_UNLIKELY(atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed)) &&
        ccs_coalesce_mpi_allreduce(sb, rb, n, dt, op, comm, q, ra, &crc))
        return crc;
    struct ccs_record *r = describe_red(CCS_KIND_ALLREDUCE, q ? CCS_F_NONBLOCKING : 0, sb, rb, n, dt, op, comm, ra);
    return record_end(r, real_allreduce(sb, rb, n, dt, op, comm, q));
}

/* MPI_Allreduce but for its common case, out of line. */
__attribute__((noinline)) static int allreduce_general(MPI_SHAPE_red_PARAMS, void *ra)
{
    return allreduce(MPI_SHAPE_red_ARGS, NULL, ra);
}

/* The common case, a sum of a positive count of a predefined basic type on
 * the thread's last communicator from its last call site, coalescing off,
 * has no call out of line before the real one (ccs_call_fast), so that the
 * arguments stay in registers up to it; the record is the one describe_red
 * gives (ccs_mpi_sig_basic of a count above 0).  Anything else takes the
 * general path.  Each test below is one branch: a value the general path
 * would compute (the clamped count, a slot found or not) is not computed
 * here for a case that leaves. */
CCS_INLINE int w_Allreduce(MPI_SHAPE_red_PARAMS, void *ra)
{
    __typeof__(PMPI_Allreduce) *real = ccs_real_Allreduce;
    struct ccs_ring *ring = ccs_call_ring(); /* not NULL: interception is on */
    const struct ccs_mpi_dt_slot *s = ccs_mpi_dt_slot(dt);
    struct ccs_comm *cm;
    if (CCS_LIKELY(ring != NULL) && CCS_LIKELY(real != NULL) && CCS_LIKELY(op == MPI_SUM) && CCS_LIKELY(n > 0) &&
        CCS_LIKELY(!atomic_load_explicit(&ccs_coalesce_on, memory_order_relaxed)) && CCS_LIKELY(s->dt == dt) &&
        CCS_LIKELY(s->size != 0) && CCS_LIKELY((cm = ccs_mpi_comm_cached(ring, comm)) != NULL)) {
        struct ccs_call c = {.kind = CCS_KIND_ALLREDUCE,
                             .dtype = s->norm,
                             .op = CCS_OP_SUM,
                             .flags = (uint8_t)INPLACE(sb),
                             .backend = CCS_BE_MPI,
                             .root = -1,
                             .count = (uint64_t)n,
                             .bytes = (uint64_t)n * s->size,
                             .buf = rb};
        struct ccs_record *r = ccs_call_fast(ring, cm, &c, ra);
        if (CCS_LIKELY(r != NULL)) {
            int rc = real(MPI_SHAPE_red_ARGS);
            ccs_call_end_in(ring, r, rc != MPI_SUCCESS);
            return rc;
        }
    }
    return allreduce_general(MPI_SHAPE_red_ARGS, ra);
}
CCS_MPI_ENTRY(Allreduce, (MPI_SHAPE_red_PARAMS), MPI_SHAPE_red_ARGS)

CCS_INLINE int w_Iallreduce(MPI_SHAPE_red_PARAMS, MPI_Request *q, void *ra)
{
    return allreduce(MPI_SHAPE_red_ARGS, q, ra);
}
CCS_MPI_ENTRY(Iallreduce, (MPI_SHAPE_red_PARAMS, MPI_Request *q), MPI_SHAPE_red_ARGS, q)
