/*
 * ccs_kinds.h - the one list of everything ccshim names: kinds of calls,
 * datatypes, reduction ops, flags.  The runtime, the trace format and the
 * tools all expand these X-macros, so names and numbers never drift.
 * Numbers are part of the trace format: append, never renumber.  The lists
 * and their enums look alike by design: data, one row per name.
 */
#ifndef CCS_KINDS_H
#define CCS_KINDS_H

#include <stddef.h>
#include <stdint.h>

/* Classes of call. */
#define CCS_CLASS_COLL 1 /* collective, sequenced per communicator */
#define CCS_CLASS_P2P 2  /* point-to-point, counted, not sequenced across ranks */
#define CCS_CLASS_COMM 3 /* communicator management */
#define CCS_CLASS_MARK 4 /* step marker */

/* The kinds of call, one row each, one column per fact about a kind; every
 * switch over kinds is generated from it (here, names.c, fingerprint.c):
 *
 *   X(ENUM, number, "name", class, counter, sig, bytes, op, root, types, otf2, in_place)
 *
 *   class    CCS_CLASS_*
 *   counter  which counter of the communicator numbers the call (the
 *            record's seq): SEQ, the collective sequence, for collectives
 *            and for the calls that make a communicator from the one they
 *            are called on (dup, split, create, shrink: collective over it);
 *            P2P, the point-to-point counter; NONE for the rest
 *            (enum ccs_counter: CCS_COUNTER_ and this)
 *   sig, bytes, op, root: 1 when that enters the kind's fingerprint, the
 *            fields every member must agree on under MPI's matching rules
 *            (fingerprint.c; docs/desync.md, "What must agree"): sig, the
 *            whole type signature (count, datatype, signature hash); bytes,
 *            only its size in bytes; op, the reduction operator; root, the
 *            root.  A collective's kind and nonblocking flag always enter.
 *            Reductions: the same count, datatype and op on every member,
 *            so the whole signature enters.  Bcast, gather, scatter,
 *            allgather, alltoall: every member's type signature of what it
 *            sends or receives per peer must match, and MPI_PACKED may stand
 *            for any of them: its size enters.  Allgatherv: every member
 *            receives the same whole (the size of the sum).  Gatherv,
 *            scatterv: only the root; alltoallv/w, barrier: nothing more.
 *            Neighbourhood collectives: nothing more either: a rank's counts
 *            match only its neighbours' (and may differ from the next
 *            neighbourhood's: on a ring of 4, even ranks may send 2 and odd
 *            ones 3), so no field is one every member shares.
 *   counter  of the constructors: SEQ where every member of the
 *            communicator it is called on calls it (cart, graph, dist
 *            graph, intercomm on the local one, merge on the
 *            intercommunicator); NONE where only some do (create_group:
 *            the group's members) or there is none (from_group: MPI-4's
 *            MPI_Comm_create_from_group and
 *            MPI_Intercomm_create_from_groups, made from groups alone).
 *   types    1 when members compare the basic types beside the signature's
 *            size (ccs_sig_key): in desync's published history, where a
 *            side that cannot name them is left out (desync_rules.c)
 *   otf2     the collective operation as MPI and OTF2 name it (OTF2's
 *            OTF2_COLLECTIVE_OP_<otf2>: tools/audit/out_otf2.c); NONE for a
 *            kind that is not a collective
 *   in_place when a call that passes both buffers (NCCL) works in place
 *            (enum ccs_in_place, CCS_IN_PLACE_ and this): SAME, the send and
 *            receive buffers are one; OWN_IN_RECV, also when the send buffer
 *            is the rank's own block of the receive buffer (gathering);
 *            OWN_IN_SEND, also when the receive buffer is the rank's own
 *            block of the send buffer (scattering)
 *
 * The op column is also whether a kind reduces (ccs_kind_reduces): a
 * reduction, and only a reduction, has an operator that must agree.
 *
 * A row that leaves out a column does not build, and the assertions below
 * reject a row whose facts contradict each other (a non-collective with
 * fingerprint fields, a collective not on the collective sequence, a
 * collective without its OTF2 type, ...).  tests/unit/kinds-table.sh feeds
 * them bad rows; tests/unit/kinds-lists.sh checks that the docs' kinds
 * tables and the exported MPI symbols (tests/integration/symbols-mpi.txt)
 * name every kind of the list. */
#define CCS_KIND_LIST(X)                                                                                                                         \
    /* ENUM                 number  "name"                  class           counter sig bytes op root types otf2                  in_place */     \
    X(ALLREDUCE,            1,      "allreduce",            CCS_CLASS_COLL, SEQ,    1,  0,    1, 0,   0,    ALLREDUCE,            SAME)           \
    X(REDUCE,               2,      "reduce",               CCS_CLASS_COLL, SEQ,    1,  0,    1, 1,   0,    REDUCE,               SAME)           \
    X(BCAST,                3,      "bcast",                CCS_CLASS_COLL, SEQ,    0,  1,    0, 1,   1,    BCAST,                SAME)           \
    X(ALLGATHER,            4,      "allgather",            CCS_CLASS_COLL, SEQ,    0,  1,    0, 0,   1,    ALLGATHER,            OWN_IN_RECV)    \
    X(ALLGATHERV,           5,      "allgatherv",           CCS_CLASS_COLL, SEQ,    0,  1,    0, 0,   1,    ALLGATHERV,           SAME)           \
    X(REDUCE_SCATTER,       6,      "reduce_scatter",       CCS_CLASS_COLL, SEQ,    1,  0,    1, 0,   0,    REDUCE_SCATTER,       OWN_IN_SEND)    \
    X(REDUCE_SCATTER_BLOCK, 7,      "reduce_scatter_block", CCS_CLASS_COLL, SEQ,    1,  0,    1, 0,   0,    REDUCE_SCATTER_BLOCK, OWN_IN_SEND)    \
    X(ALLTOALL,             8,      "alltoall",             CCS_CLASS_COLL, SEQ,    0,  1,    0, 0,   1,    ALLTOALL,             SAME)           \
    X(ALLTOALLV,            9,      "alltoallv",            CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLTOALLV,            SAME)           \
    X(GATHER,               10,     "gather",               CCS_CLASS_COLL, SEQ,    0,  1,    0, 1,   1,    GATHER,               OWN_IN_RECV)    \
    X(GATHERV,              11,     "gatherv",              CCS_CLASS_COLL, SEQ,    0,  0,    0, 1,   1,    GATHERV,              SAME)           \
    X(SCATTER,              12,     "scatter",              CCS_CLASS_COLL, SEQ,    0,  1,    0, 1,   1,    SCATTER,              OWN_IN_SEND)    \
    X(SCATTERV,             13,     "scatterv",             CCS_CLASS_COLL, SEQ,    0,  0,    0, 1,   1,    SCATTERV,             SAME)           \
    X(BARRIER,              14,     "barrier",              CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    BARRIER,              SAME)           \
    X(SCAN,                 15,     "scan",                 CCS_CLASS_COLL, SEQ,    1,  0,    1, 0,   0,    SCAN,                 SAME)           \
    X(EXSCAN,               16,     "exscan",               CCS_CLASS_COLL, SEQ,    1,  0,    1, 0,   0,    EXSCAN,               SAME)           \
    X(ALLTOALLW,            17,     "alltoallw",            CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLTOALLW,            SAME)           \
    X(NEIGHBOR_ALLGATHER,   18,     "neighbor_allgather",   CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLGATHER,            SAME)           \
    X(NEIGHBOR_ALLGATHERV,  19,     "neighbor_allgatherv",  CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLGATHERV,           SAME)           \
    X(NEIGHBOR_ALLTOALL,    20,     "neighbor_alltoall",    CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLTOALL,             SAME)           \
    X(NEIGHBOR_ALLTOALLV,   21,     "neighbor_alltoallv",   CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLTOALLV,            SAME)           \
    X(NEIGHBOR_ALLTOALLW,   22,     "neighbor_alltoallw",   CCS_CLASS_COLL, SEQ,    0,  0,    0, 0,   0,    ALLTOALLW,            SAME)           \
    X(SEND,                 32,     "send",                 CCS_CLASS_P2P,  P2P,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(RECV,                 33,     "recv",                 CCS_CLASS_P2P,  P2P,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(SENDRECV,             34,     "sendrecv",             CCS_CLASS_P2P,  P2P,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_INIT,            48,     "comm_init",            CCS_CLASS_COMM, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_DUP,             49,     "comm_dup",             CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_SPLIT,           50,     "comm_split",           CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_CREATE,          51,     "comm_create",          CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_FREE,            52,     "comm_free",            CCS_CLASS_COMM, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_SHRINK,          53,     "comm_shrink",          CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_FINALIZE,        54,     "comm_finalize",        CCS_CLASS_COMM, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_ABORT,           55,     "comm_abort",           CCS_CLASS_COMM, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_CART,            56,     "comm_cart",            CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_GRAPH,           57,     "comm_graph",           CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_DIST_GRAPH,      58,     "comm_dist_graph",      CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_DIST_GRAPH_ADJ,  59,     "comm_dist_graph_adj",  CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_INTERCOMM,       60,     "comm_intercomm",       CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_MERGE,           61,     "comm_merge",           CCS_CLASS_COMM, SEQ,    0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_CREATE_GROUP,    62,     "comm_create_group",    CCS_CLASS_COMM, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(COMM_FROM_GROUP,      63,     "comm_from_group",      CCS_CLASS_COMM, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)           \
    X(STEP,                 64,     "step",                 CCS_CLASS_MARK, NONE,   0,  0,    0, 0,   0,    NONE,                 SAME)

enum ccs_kind {
#define CCS_X(e, n, s, ...) CCS_KIND_##e = n,
    CCS_KIND_LIST(CCS_X)
#undef CCS_X
    CCS_KIND_MAX = 65
};

/* Which counter of a communicator numbers a call of KIND (the list's
 * counter column).  The one definition: the hot path numbers calls with it
 * and desync compares exactly the calls it sequences.  A switch over
 * constants: it folds where KIND does. */
enum ccs_counter { CCS_COUNTER_NONE = 0, CCS_COUNTER_SEQ = 1, CCS_COUNTER_P2P = 2 };

static inline enum ccs_counter ccs_kind_counter(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, cnt, ...)                                                                        \
    case n:                                                                                                \
        return CCS_COUNTER_##cnt;
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return CCS_COUNTER_NONE;
}

/* CCS_KIND_IS_NONE(tok): 1 when the token TOK is NONE, else 0, at
 * preprocessing time (the probe idiom: CCS_KIND_PROBE_NONE expands to two
 * arguments, any other token to one), so that a row's token columns can say
 * "does not apply" and the assertions and expansions tell it apart. */
#define CCS_KIND_PROBE_NONE ~, 1
#define CCS_KIND_SECOND_(a, b, ...) b
#define CCS_KIND_SECOND(...) CCS_KIND_SECOND_(__VA_ARGS__)
#define CCS_KIND_IS_NONE(tok) CCS_KIND_SECOND(CCS_KIND_PROBE_##tok, 0, ~)

/* When a call that passes both buffers works in place (the in_place
 * column). */
enum ccs_in_place { CCS_IN_PLACE_SAME, CCS_IN_PLACE_OWN_IN_RECV, CCS_IN_PLACE_OWN_IN_SEND };

/* The facts of one row agree: asserted for every row wherever this header
 * is read, so that a new kind that contradicts itself fails to build
 * (tests/unit/kinds-table.sh feeds it bad rows). */
#define CCS_KIND_FACTS_AGREE(e, n, s, c, cnt, sig, bytes, op, root, types, otf2, inpl)                    \
    _Static_assert(n > 0 && n < CCS_KIND_MAX, "kind " s ": number out of range");                         \
    _Static_assert((c) == CCS_CLASS_COLL || !((sig) | (bytes) | (op) | (root) | (types)),                  \
                   "kind " s ": only a collective has fingerprint fields");                               \
    _Static_assert(!((sig) && (bytes)), "kind " s ": the whole signature or its size, not both");        \
    _Static_assert(!(op) || (sig), "kind " s ": a reduction's whole signature enters with its op");       \
    _Static_assert(!(types) || !(sig), "kind " s ": basic types are compared beside the size only");      \
    _Static_assert((c) != CCS_CLASS_COLL || CCS_COUNTER_##cnt == CCS_COUNTER_SEQ,                          \
                   "kind " s ": a collective is on the collective sequence");                            \
    _Static_assert(((c) == CCS_CLASS_P2P) == (CCS_COUNTER_##cnt == CCS_COUNTER_P2P),                      \
                   "kind " s ": point-to-point calls, and they alone, on the point-to-point counter");   \
    _Static_assert((c) != CCS_CLASS_MARK || CCS_COUNTER_##cnt == CCS_COUNTER_NONE,                         \
                   "kind " s ": a marker is not numbered");                                             \
    _Static_assert(((c) == CCS_CLASS_COLL) == !CCS_KIND_IS_NONE(otf2),                                     \
                   "kind " s ": a collective, and only a collective, names its OTF2 collective type");  \
    _Static_assert((c) == CCS_CLASS_COLL || CCS_IN_PLACE_##inpl == CCS_IN_PLACE_SAME,                      \
                   "kind " s ": only a collective has blocks to be in place in");
CCS_KIND_LIST(CCS_KIND_FACTS_AGREE)

/* Nonzero when KIND takes the collective sequence number. */
static inline int ccs_kind_sequenced(unsigned kind) { return ccs_kind_counter(kind) == CCS_COUNTER_SEQ; }

/* 1 when KIND is a reduction (the op column): counted as a real reduction
 * by metrics, keyed by its buffer in ccshim-audit. */
static inline int ccs_kind_reduces(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, cnt, sig, bytes, op, ...)                                                         \
    case n:                                                                                                \
        return op;
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

/* When a call of KIND that passes both buffers works in place (the
 * in_place column).  A switch over constants: it folds where KIND does. */
static inline enum ccs_in_place ccs_kind_in_place(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, cnt, sig, bytes, op, root, types, otf2, inpl)                                    \
    case n:                                                                                                \
        return CCS_IN_PLACE_##inpl;
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return CCS_IN_PLACE_SAME;
}

/* X(ENUM, number, "name", size in bytes or 0 when not fixed) */
#define CCS_DTYPE_LIST(X)                                                     \
    X(NONE, 0, "none", 0)                                                     \
    X(INT8, 1, "int8", 1)                                                     \
    X(UINT8, 2, "uint8", 1)                                                   \
    X(INT16, 3, "int16", 2)                                                   \
    X(UINT16, 4, "uint16", 2)                                                 \
    X(INT32, 5, "int32", 4)                                                   \
    X(UINT32, 6, "uint32", 4)                                                 \
    X(INT64, 7, "int64", 8)                                                   \
    X(UINT64, 8, "uint64", 8)                                                 \
    X(FLOAT16, 9, "float16", 2)                                               \
    X(BFLOAT16, 10, "bfloat16", 2)                                            \
    X(FLOAT32, 11, "float32", 4)                                              \
    X(FLOAT64, 12, "float64", 8)                                              \
    X(FP8E4M3, 13, "fp8e4m3", 1)                                              \
    X(FP8E5M2, 14, "fp8e5m2", 1)                                              \
    X(LONG_DOUBLE, 15, "long_double", 16)                                     \
    X(BYTE, 16, "byte", 1)                                                    \
    X(CHAR, 17, "char", 1)                                                    \
    X(PAIR, 18, "pair", 0)                                                    \
    X(COMPLEX64, 19, "complex64", 8)                                          \
    X(COMPLEX128, 20, "complex128", 16)                                       \
    X(DERIVED, 30, "derived", 0)                                              \
    X(UNKNOWN, 31, "unknown", 0)

enum ccs_dtype {
#define CCS_X(e, n, s, z) CCS_DT_##e = n,
    CCS_DTYPE_LIST(CCS_X)
#undef CCS_X
    CCS_DT_MAX = 32
};

/* X(ENUM, number, "name") */
#define CCS_OP_LIST(X)                                                        \
    X(NONE, 0, "none")                                                        \
    X(SUM, 1, "sum")                                                          \
    X(PROD, 2, "prod")                                                        \
    X(MAX, 3, "max")                                                          \
    X(MIN, 4, "min")                                                          \
    X(AVG, 5, "avg")                                                          \
    X(PREMULSUM, 6, "premulsum")                                              \
    X(BAND, 7, "band")                                                        \
    X(BOR, 8, "bor")                                                          \
    X(BXOR, 9, "bxor")                                                        \
    X(LAND, 10, "land")                                                       \
    X(LOR, 11, "lor")                                                         \
    X(LXOR, 12, "lxor")                                                       \
    X(MINLOC, 13, "minloc")                                                   \
    X(MAXLOC, 14, "maxloc")                                                   \
    X(REPLACE, 15, "replace")                                                 \
    X(NO_OP, 16, "no_op")                                                     \
    X(USER, 17, "user")

enum ccs_op {
#define CCS_X(e, n, s) CCS_OP_##e = n,
    CCS_OP_LIST(CCS_X)
#undef CCS_X
    CCS_OP_LIMIT = 18 /* one past the last op */
};

/* X(ENUM, bit, "name") - record flags */
#define CCS_FLAG_LIST(X)                                                      \
    X(IN_PLACE, 0x01, "in_place")                                             \
    X(NONBLOCKING, 0x02, "nonblocking")                                       \
    X(IN_GROUP, 0x04, "in_group")                                             \
    X(DEFERRED, 0x08, "deferred")                                             \
    X(COALESCED, 0x10, "coalesced")                                           \
    X(ERROR, 0x20, "error")                                                   \
    X(CAPTURED, 0x40, "captured")                                             \
    X(HELPER, 0x80, "helper") /* the one real reduction of a step the torch helper made DDP skip the rest of */

enum ccs_flag {
#define CCS_X(e, b, s) CCS_F_##e = b,
    CCS_FLAG_LIST(CCS_X)
#undef CCS_X
};

/* Backends: X(ENUM, number, "name", otf2), otf2 the paradigm OTF2 files
 * its communicators and calls under (OTF2_PARADIGM_<otf2>:
 * tools/audit/out_otf2.c).  TORCH: the torch helper's records of the calls
 * it saw on a backend ccshim does not intercept (gloo): counted, not
 * sequenced (trace format 3). */
#define CCS_BACKEND_LIST(X)                                                   \
    X(NONE, 0, "none", USER)                                                  \
    X(MPI, 1, "mpi", MPI)                                                     \
    X(NCCL, 2, "nccl", USER)                                                  \
    X(TORCH, 3, "torch.distributed", USER)

enum ccs_backend {
#define CCS_X(e, n, s, ...) CCS_BE_##e = n,
    CCS_BACKEND_LIST(CCS_X)
#undef CCS_X
        CCS_BE_LIMIT /* one past the last (the list is in order) */
};

/* The collectives of torch.distributed that the torch helper names to
 * ccshim (ccshim_foreign_call), one row each:
 *
 *   X(ENUM, number, "name", same, kind)
 *
 *   name    the function as torch.distributed spells it
 *   same    the row of the collective the backend runs for it: two calls
 *           of one SAME are the same collective on the wire (all_gather and
 *           all_gather_into_tensor), and desync compares SAME, never the
 *           spelling (docs/desync.md, "torch.distributed")
 *   kind    the ccs_kind of its trace record (backend torch.distributed;
 *           docs/trace-format.md): the collective it is, an object
 *           collective as the tensor one it stands for (0: none)
 *
 * Numbers are part of desync's status (foreign_kind, foreign_prev) and of
 * the trace (the records' sig, backend torch.distributed): append, never
 * renumber.  NONE: no kind (not a collective the helper names). */
#define CCS_TORCH_CALL_LIST(X)                                                                                     \
    X(NONE, 0, "", NONE, 0)                                                                                        \
    X(ALL_REDUCE, 1, "all_reduce", ALL_REDUCE, CCS_KIND_ALLREDUCE)                                                 \
    X(ALL_REDUCE_COALESCED, 2, "all_reduce_coalesced", ALL_REDUCE_COALESCED, CCS_KIND_ALLREDUCE)                   \
    X(ALL_REDUCE_MULTIGPU, 3, "all_reduce_multigpu", ALL_REDUCE, CCS_KIND_ALLREDUCE)                               \
    X(ALL_GATHER, 4, "all_gather", ALL_GATHER, CCS_KIND_ALLGATHER)                                                 \
    X(ALL_GATHER_INTO_TENSOR, 5, "all_gather_into_tensor", ALL_GATHER, CCS_KIND_ALLGATHER)                         \
    X(ALL_GATHER_BASE, 6, "_all_gather_base", ALL_GATHER, CCS_KIND_ALLGATHER)                                      \
    X(ALL_GATHER_MULTIGPU, 7, "all_gather_multigpu", ALL_GATHER, CCS_KIND_ALLGATHER)                               \
    X(ALL_GATHER_COALESCED, 8, "all_gather_coalesced", ALL_GATHER_COALESCED, CCS_KIND_ALLGATHER)                   \
    X(ALL_GATHER_OBJECT, 9, "all_gather_object", ALL_GATHER_OBJECT, CCS_KIND_ALLGATHER)                            \
    X(BROADCAST, 10, "broadcast", BROADCAST, CCS_KIND_BCAST)                                                       \
    X(BROADCAST_MULTIGPU, 11, "broadcast_multigpu", BROADCAST, CCS_KIND_BCAST)                                     \
    X(BROADCAST_OBJECT_LIST, 12, "broadcast_object_list", BROADCAST_OBJECT_LIST, CCS_KIND_BCAST)                   \
    X(REDUCE, 13, "reduce", REDUCE, CCS_KIND_REDUCE)                                                               \
    X(REDUCE_MULTIGPU, 14, "reduce_multigpu", REDUCE, CCS_KIND_REDUCE)                                             \
    X(REDUCE_SCATTER, 15, "reduce_scatter", REDUCE_SCATTER, CCS_KIND_REDUCE_SCATTER)                               \
    X(REDUCE_SCATTER_TENSOR, 16, "reduce_scatter_tensor", REDUCE_SCATTER, CCS_KIND_REDUCE_SCATTER)                 \
    X(REDUCE_SCATTER_BASE, 17, "_reduce_scatter_base", REDUCE_SCATTER, CCS_KIND_REDUCE_SCATTER)                    \
    X(REDUCE_SCATTER_MULTIGPU, 18, "reduce_scatter_multigpu", REDUCE_SCATTER, CCS_KIND_REDUCE_SCATTER)             \
    X(ALL_TO_ALL, 19, "all_to_all", ALL_TO_ALL, CCS_KIND_ALLTOALL)                                                 \
    X(ALL_TO_ALL_SINGLE, 20, "all_to_all_single", ALL_TO_ALL, CCS_KIND_ALLTOALL)                                   \
    X(GATHER, 21, "gather", GATHER, CCS_KIND_GATHER)                                                               \
    X(GATHER_OBJECT, 22, "gather_object", GATHER_OBJECT, CCS_KIND_GATHER)                                          \
    X(SCATTER, 23, "scatter", SCATTER, CCS_KIND_SCATTER)                                                           \
    X(SCATTER_OBJECT_LIST, 24, "scatter_object_list", SCATTER_OBJECT_LIST, CCS_KIND_SCATTER)                       \
    X(BARRIER, 25, "barrier", BARRIER, CCS_KIND_BARRIER)

enum ccs_torch_call {
#define CCS_X(e, n, s, ...) CCS_TC_##e = n,
    CCS_TORCH_CALL_LIST(CCS_X)
#undef CCS_X
        CCS_TC_LIMIT /* one past the last (the list is in order) */
};

/* The name of torch.distributed call K ("" for NONE, "?" when not in the
 * list). */
static inline const char *ccs_torch_call_name(unsigned k)
{
    switch (k) {
#define CCS_X(e, n, s, ...)                                                                                        \
    case n:                                                                                                        \
        return s;
        CCS_TORCH_CALL_LIST(CCS_X)
#undef CCS_X
    }
    return "?";
}

/* The collective torch.distributed call K runs (its SAME column), or
 * CCS_TC_NONE when K is not in the list. */
static inline unsigned ccs_torch_call_same(unsigned k)
{
    switch (k) {
#define CCS_X(e, n, s, same, kind)                                                                                 \
    case n:                                                                                                        \
        return CCS_TC_##same;
        CCS_TORCH_CALL_LIST(CCS_X)
#undef CCS_X
    }
    return CCS_TC_NONE;
}

/* The ccs_kind of torch.distributed call K's trace record (its kind
 * column), 0 when K is NONE or not in the list. */
static inline unsigned ccs_torch_call_kind(unsigned k)
{
    switch (k) {
#define CCS_X(e, n, s, same, kind)                                                                                 \
    case n:                                                                                                        \
        return kind;
        CCS_TORCH_CALL_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

/* The row named NAME (torch.distributed's spelling), CCS_TC_NONE when none. */
static inline unsigned ccs_torch_call_lookup(const char *name)
{
    if (!name || !name[0])
        return CCS_TC_NONE;
#define CCS_X(e, n, s, ...)                                                                                        \
    if (__builtin_strcmp(name, s) == 0)                                                                            \
        return n;
    CCS_TORCH_CALL_LIST(CCS_X)
#undef CCS_X
    return CCS_TC_NONE;
}

/* The classes of desync's verdicts, one row each, one column per fact:
 *
 *   X(ENUM, number, "name", policy, once, stuck)
 *
 *   number  on desync's wire (desync_proto.h's enum ccs_dsx_class, below
 *           CCS_DSX_CLASS_MAX): append, never renumber.  The rows' order
 *           is the order the logs, ccshim_verdict and the metrics list them.
 *   policy  STOP: the run is desynchronised: counted (ccs_verdict_note: a
 *           rank waiting at its step boundary or for an agreement stops
 *           waiting) and under CCSHIM_ON_DESYNC=abort the job ends; WARN: a
 *           warning, nothing more
 *   once    1: judged once per communicator, from one view of the records
 *           (the seq is not part of what makes it new): every rank of a
 *           host reports what the first to judge found, and the rules stop
 *           judging that communicator; 0: once per (communicator, seq)
 *   stuck   1: ranks wait in a call that cannot complete: the report says
 *           what to look at next (ccs_dsx_next_words)
 *
 * Used by desync (desync_proto.h, desync_verdict.c, desync_report.c), the
 * registry (ccshim_verdict) and metrics (ccshim_verdicts_total). */
#define CCS_VERDICT_LIST(X)                                                                                   \
    /* ENUM     number "name"       policy once stuck */                                                     \
    X(MISMATCH,  1,    "MISMATCH",  STOP,  1,   0)                                                           \
    X(DESYNC,    2,    "DESYNC",    STOP,  0,   1)                                                           \
    X(DEAD,      4,    "DEAD",      STOP,  0,   1)                                                           \
    X(STRAGGLER, 3,    "STRAGGLER", WARN,  0,   0)

enum ccs_verdict_policy { CCS_VERDICT_STOP = 1, CCS_VERDICT_WARN = 2 };

/* How many classes the list has. */
enum {
#define CCS_X(e, n, ...) CCS_VERDICT_ROW_##e,
    CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
        CCS_VERDICT_CLASSES
};

/* The policy column of verdict class CLS (its number); a number not in the
 * list warns (nothing is ended on what is not known). */
static inline enum ccs_verdict_policy ccs_verdict_policy(unsigned cls)
{
    switch (cls) {
#define CCS_X(e, n, s, policy, once, stuck)                                                                  \
    case n:                                                                                                \
        return CCS_VERDICT_##policy;
        CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
    }
    return CCS_VERDICT_WARN;
}

/* The once column of verdict class CLS. */
static inline int ccs_verdict_once(unsigned cls)
{
    switch (cls) {
#define CCS_X(e, n, s, policy, once, stuck)                                                                  \
    case n:                                                                                                \
        return once;
        CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

/* The stuck column of verdict class CLS. */
static inline int ccs_verdict_stuck(unsigned cls)
{
    switch (cls) {
#define CCS_X(e, n, s, policy, once, stuck)                                                                  \
    case n:                                                                                                \
        return stuck;
        CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

/* Name lookups (return "?" for numbers not in the lists); defined in names.c. */
const char *ccs_kind_name(unsigned kind);
int ccs_kind_class(unsigned kind);
const char *ccs_dtype_name(unsigned dtype);
/* Bytes of one element of DTYPE, 0 when not a fixed-size basic type.
 * Inline: the hot path's fingerprint key needs it for the kinds whose
 * signature is compared by size (a switch the compiler makes a table). */
static inline unsigned ccs_dtype_size(unsigned dtype)
{
    switch (dtype) {
#define CCS_X(e, n, s, z) case n: return z;
        CCS_DTYPE_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}
const char *ccs_op_name(unsigned op);
const char *ccs_backend_name(unsigned backend);
/* Parses a kind name; returns the kind, or -1 when unknown. */
int ccs_kind_parse(const char *name);
/* One call as the logs name it, into BUF (N bytes, always terminated when N
 * > 0): KIND's name, and for a collective but a barrier its arguments,
 * "allreduce(count=8, float32, sum, root=0, nonblocking, deferred)" (op,
 * root, nonblocking and deferred only where they apply; FLAGS: enum
 * ccs_flag).  Desync's verdicts and NCCL's asynchronous errors print it. */
void ccs_call_str(unsigned kind, uint64_t count, unsigned dtype, unsigned op, int root, unsigned flags, char *buf,
                  size_t n);
/* A sorted list of N ranks as the logs and ccshim-audit name it, "0,2-5,9",
 * into BUF (CAP bytes, terminated when CAP > 0); "..." after the last range
 * that fits when they do not all fit.  Desync's verdicts and the audit's
 * findings and table print it. */
void ccs_ranks_str(const int32_t *ranks, size_t n, char *buf, size_t cap);

#endif
