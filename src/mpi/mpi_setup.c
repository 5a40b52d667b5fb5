/*
 * mpi_setup.c - the MPI side of libccshim-mpi.so that is not a collective:
 * MPI_Init/Finalize, where the features are started and ended, and
 * communicator creation, from which every communicator gets an identity all
 * of its members derive alike without exchanging a message.
 */
#include "log.h"
#include "mpi_shim.h"
#include "coalesce_mpi.h"
#include "registry.h"
#include "desync.h"
#include "desync_mpi.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "record.h"
#include "runtime.h"
#include "trace_format.h"
#include "process.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static MPI_Group world_group = MPI_GROUP_NULL;

/* ------------------------------------------------------- communicators */

/* World rank of rank 0 of COMM: the same for every member of COMM and
 * different for two disjoint communicators made by one call. */
static int leader_world_rank(MPI_Comm comm)
{
    MPI_Group g;
    int zero = 0, wr = -1, inter = 0;
    if (comm == MPI_COMM_NULL || world_group == MPI_GROUP_NULL)
        return -1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return -1;
    if (PMPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return -1;
    PMPI_Group_translate_ranks(g, 1, &zero, world_group, &wr);
    PMPI_Group_free(&g);
    return wr;
}

/* An intercommunicator's identity is this process's own: the members of a
 * group would derive the same one, but what they pass to a collective on
 * it legitimately differs (a root passes MPI_ROOT, its group's others
 * MPI_PROC_NULL), so their records must never be compared as one
 * communicator's (comm.h: never agreed; desync's search of the records
 * goes by identity).  Its children derive theirs from it, so are local
 * too. */
static struct ccs_comm *register_comm(MPI_Comm comm, uint64_t id, uint64_t parent, int how, int color)
{
    int rank = -1, size = -1, remote = ccs_mpi_remote_size(comm);
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (remote > 0)
        id = ccs_hash_mix(id, 0x696e746572ull << 24 ^ (uint64_t)(uint32_t)ccs_world_rank()) | 1;
    return ccs_comm_register_inter(CCS_BE_MPI, (uintptr_t)comm, id, parent, rank, size, remote, how, color);
}

static void after_init(void)
{
    int rank = -1, size = -1;
    ccs_runtime_init();
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    ccs_runtime_set_world(rank, size);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    /* Fixed identities: every rank of the job computes the same. */
    uint64_t world = ccs_hash_bytes("MPI_COMM_WORLD", 14, 0) | 1;
    ccs_comm_register(CCS_BE_MPI, (uintptr_t)MPI_COMM_WORLD, world, 0, rank, size, CCS_KIND_COMM_INIT, -1);
    ccs_comm_register(CCS_BE_MPI, (uintptr_t)MPI_COMM_SELF, ccs_hash_mix(ccs_hash_bytes("MPI_COMM_SELF", 13, 0),
                                                                         (uint64_t)rank) | 1,
                      0, 0, 1, CCS_KIND_COMM_INIT, -1);
    ccs_desync_mpi_init();
    ccs_coalesce_mpi_init();
    ccs_features_first_call(); /* the trace writer names its file by rank */
    ccs_runtime_signals_after_mpi_init(); /* after MPI's own handlers */
}

/* Tells runtime.c that this is libccshim-mpi.so (signals after MPI_Init). */
CCS_HIDDEN const int ccs_mpi_library = 1;

static int w_Init(int *argc, char ***argv, void *ra)
{
    (void)ra;
    if (!CCS_REAL(Init))
        return MPI_ERR_INTERN;
    int rc = ccs_real_Init(argc, argv);
    if (rc == MPI_SUCCESS && ccs_mpi_active())
        after_init();
    return rc;
}
CCS_MPI_ENTRY(Init, (int *argc, char ***argv), argc, argv)

static int w_Init_thread(int *argc, char ***argv, int required, int *provided, void *ra)
{
    (void)ra;
    if (!CCS_REAL(Init_thread))
        return MPI_ERR_INTERN;
    int rc = ccs_real_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS && ccs_mpi_active())
        after_init();
    return rc;
}
CCS_MPI_ENTRY(Init_thread, (int *argc, char ***argv, int required, int *provided), argc, argv, required, provided)

static int w_Finalize(void *ra)
{
    (void)ra;
    if (!CCS_REAL(Finalize))
        return MPI_ERR_INTERN;
    /* Flush first: a job that hangs or dies in MPI_Finalize keeps its trace. */
    if (ccs_mpi_active()) {
        ccs_desync_note_exit(CCS_DESYNC_FINALIZING);
        ccs_runtime_finish(CCS_END_FINALIZE, 0);
    }
    if (world_group != MPI_GROUP_NULL)
        PMPI_Group_free(&world_group);
    return ccs_real_Finalize();
}
CCS_EXPORT int MPI_Finalize(void) { return w_Finalize(__builtin_return_address(0)); }
CCS_EXPORT int PMPI_Finalize(void) { return w_Finalize(__builtin_return_address(0)); }

/* After a creating call on PARENT returned NEWCOMM: counts the child on
 * PARENT and registers NEWCOMM under the identity every member derives.
 * Every member of PARENT calls this, including those that get
 * MPI_COMM_NULL, so the per-parent child count stays the same everywhere. */
static void created(struct ccs_comm *parent, MPI_Comm newcomm, int how, int color)
{
    if (!parent)
        return;
    int leader = leader_world_rank(newcomm);
    uint64_t id = ccs_comm_child_id(parent, how, (int64_t)(((uint64_t)(uint32_t)color << 32) | (uint32_t)leader));
    if (newcomm != MPI_COMM_NULL) {
        struct ccs_comm *c = register_comm(newcomm, id, parent->id, how, color);
        /* A child of a communicator known only locally (an intercommunicator
         * or one made by a call not intercepted) is known only locally too. */
        if (c && !parent->agreed)
            c->agreed = 0;
    }
}

static struct ccs_record *begin_mgmt(struct ccs_comm *c, int kind, int color, void *ra)
{
    struct ccs_call call = {.kind = (uint16_t)kind, .backend = CCS_BE_MPI, .root = color};
    return ccs_call_begin(c, &call, ra);
}

static int w_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm, void *ra)
{
    if (!CCS_REAL(Comm_dup))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_dup(comm, newcomm);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_DUP, -1, ra);
    int rc = ccs_real_Comm_dup(comm, newcomm);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        created(p, *newcomm, CCS_KIND_COMM_DUP, -1);
    return rc;
}
CCS_MPI_ENTRY(Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm), comm, newcomm)

static int w_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, void *ra)
{
    if (!CCS_REAL(Comm_dup_with_info))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_dup_with_info(comm, info, newcomm);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_DUP, -1, ra);
    int rc = ccs_real_Comm_dup_with_info(comm, info, newcomm);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        created(p, *newcomm, CCS_KIND_COMM_DUP, -1);
    return rc;
}
CCS_MPI_ENTRY(Comm_dup_with_info, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm), comm, info, newcomm)

/* MPI_Comm_idup and MPI_Comm_idup_with_info, after the real call on COMM
 * (entry P) returned RC with *NEWCOMM. */
static void idup_created(struct ccs_comm *p, MPI_Comm comm, int rc, const MPI_Comm *newcomm)
{
    if (rc == MPI_SUCCESS && p) {
        /* The new communicator is not usable before the request completes;
         * its group is the parent's, so the parent names its leader. */
        int leader = leader_world_rank(comm);
        uint64_t id = ccs_comm_child_id(p, CCS_KIND_COMM_DUP, (int64_t)(((uint64_t)UINT32_MAX << 32) | (uint32_t)leader));
        struct ccs_comm *c = *newcomm != MPI_COMM_NULL
                                 ? ccs_comm_register_inter(CCS_BE_MPI, (uintptr_t)*newcomm, id, p->id, p->rank,
                                                           p->size, p->remote_size, CCS_KIND_COMM_DUP, -1)
                                 : NULL;
        if (c && !p->agreed)
            c->agreed = 0;
    }
}

static int w_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *req, void *ra)
{
    if (!CCS_REAL(Comm_idup))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_idup(comm, newcomm, req);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_DUP, -1, ra);
    if (r)
        r->flags |= CCS_F_NONBLOCKING;
    int rc = ccs_real_Comm_idup(comm, newcomm, req);
    ccs_call_end(r, rc != MPI_SUCCESS);
    idup_created(p, comm, rc, newcomm);
    return rc;
}
CCS_MPI_ENTRY(Comm_idup, (MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *req), comm, newcomm, req)

#ifdef HAVE_MPI_COMM_IDUP_WITH_INFO
static int w_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *req, void *ra)
{
    if (!CCS_REAL(Comm_idup_with_info))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_idup_with_info(comm, info, newcomm, req);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_DUP, -1, ra);
    if (r)
        r->flags |= CCS_F_NONBLOCKING;
    int rc = ccs_real_Comm_idup_with_info(comm, info, newcomm, req);
    ccs_call_end(r, rc != MPI_SUCCESS);
    idup_created(p, comm, rc, newcomm);
    return rc;
}
CCS_MPI_ENTRY(Comm_idup_with_info, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *req), comm, info,
              newcomm, req)
#endif

static int w_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm, void *ra)
{
    if (!CCS_REAL(Comm_split))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_split(comm, color, key, newcomm);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_SPLIT, color, ra);
    int rc = ccs_real_Comm_split(comm, color, key, newcomm);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        created(p, *newcomm, CCS_KIND_COMM_SPLIT, color);
    return rc;
}
CCS_MPI_ENTRY(Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm), comm, color, key, newcomm)

static int w_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm, void *ra)
{
    if (!CCS_REAL(Comm_split_type))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_split_type(comm, type, key, info, newcomm);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_SPLIT, type, ra);
    int rc = ccs_real_Comm_split_type(comm, type, key, info, newcomm);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        created(p, *newcomm, CCS_KIND_COMM_SPLIT, type);
    return rc;
}
CCS_MPI_ENTRY(Comm_split_type, (MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm), comm, type,
              key, info, newcomm)

static int w_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm, void *ra)
{
    if (!CCS_REAL(Comm_create))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_create(comm, group, newcomm);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_CREATE, -1, ra);
    int rc = ccs_real_Comm_create(comm, group, newcomm);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        created(p, *newcomm, CCS_KIND_COMM_CREATE, -1);
    return rc;
}
CCS_MPI_ENTRY(Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm), comm, group, newcomm)

static int w_Comm_free(MPI_Comm *comm, void *ra)
{
    if (!CCS_REAL(Comm_free))
        return MPI_ERR_INTERN;
    uintptr_t key = comm ? CCS_MPI_HKEY(*comm) : 0;
    if (!ccs_mpi_active() || !comm)
        return ccs_real_Comm_free(comm);
    if (ccs_mpi_hget(&ccs_mpi_topos, key)) /* its handle may be reused for a communicator of another topology */
        ccs_mpi_hdel(&ccs_mpi_topos, key);
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_MPI, (uintptr_t)*comm);
    struct ccs_call call = {.kind = CCS_KIND_COMM_FREE, .backend = CCS_BE_MPI, .root = -1};
    struct ccs_record *r = ccs_call_begin(c, &call, ra);
    int rc = ccs_real_Comm_free(comm);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        ccs_comm_retire(c);
    return rc;
}
CCS_MPI_ENTRY(Comm_free, (MPI_Comm * comm), comm)

/* -------------------------------------------- topologies, intercommunicators */

/* The constructors collective over every member of the communicator they
 * are called on (OLD, entry P): counted on it as KIND (color COLOR), the
 * new communicator, MPI_COMM_NULL on members left out included, named as
 * its N-th child (created). */
static int ctor_end(struct ccs_comm *p, struct ccs_record *r, int rc, const MPI_Comm *nc, int kind, int color)
{
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        created(p, *nc, kind, color);
    return rc;
}

static int w_Cart_create(MPI_Comm old, int nd, const int dims[], const int periods[], int reorder, MPI_Comm *nc,
                         void *ra)
{
    if (!CCS_REAL(Cart_create))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Cart_create(old, nd, dims, periods, reorder, nc);
    struct ccs_comm *p = ccs_mpi_comm(old);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_CART, -1, ra);
    return ctor_end(p, r, ccs_real_Cart_create(old, nd, dims, periods, reorder, nc), nc, CCS_KIND_COMM_CART, -1);
}
CCS_MPI_ENTRY(Cart_create, (MPI_Comm old, int nd, const int dims[], const int periods[], int reorder, MPI_Comm *nc),
              old, nd, dims, periods, reorder, nc)

static int w_Graph_create(MPI_Comm old, int nn, const int index[], const int edges[], int reorder, MPI_Comm *nc,
                          void *ra)
{
    if (!CCS_REAL(Graph_create))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Graph_create(old, nn, index, edges, reorder, nc);
    struct ccs_comm *p = ccs_mpi_comm(old);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_GRAPH, -1, ra);
    return ctor_end(p, r, ccs_real_Graph_create(old, nn, index, edges, reorder, nc), nc, CCS_KIND_COMM_GRAPH, -1);
}
CCS_MPI_ENTRY(Graph_create, (MPI_Comm old, int nn, const int index[], const int edges[], int reorder, MPI_Comm *nc),
              old, nn, index, edges, reorder, nc)

static int w_Dist_graph_create(MPI_Comm old, int n, const int src[], const int deg[], const int dst[],
                               const int w[], MPI_Info info, int reorder, MPI_Comm *nc, void *ra)
{
    if (!CCS_REAL(Dist_graph_create))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Dist_graph_create(old, n, src, deg, dst, w, info, reorder, nc);
    struct ccs_comm *p = ccs_mpi_comm(old);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_DIST_GRAPH, -1, ra);
    return ctor_end(p, r, ccs_real_Dist_graph_create(old, n, src, deg, dst, w, info, reorder, nc), nc,
                    CCS_KIND_COMM_DIST_GRAPH, -1);
}
CCS_MPI_ENTRY(Dist_graph_create,
              (MPI_Comm old, int n, const int src[], const int deg[], const int dst[], const int w[], MPI_Info info,
               int reorder, MPI_Comm *nc),
              old, n, src, deg, dst, w, info, reorder, nc)

static int w_Dist_graph_create_adjacent(MPI_Comm old, int indeg, const int src[], const int srcw[], int outdeg,
                                        const int dst[], const int dstw[], MPI_Info info, int reorder, MPI_Comm *nc,
                                        void *ra)
{
    if (!CCS_REAL(Dist_graph_create_adjacent))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Dist_graph_create_adjacent(old, indeg, src, srcw, outdeg, dst, dstw, info, reorder, nc);
    struct ccs_comm *p = ccs_mpi_comm(old);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_DIST_GRAPH_ADJ, -1, ra);
    return ctor_end(
        p, r, ccs_real_Dist_graph_create_adjacent(old, indeg, src, srcw, outdeg, dst, dstw, info, reorder, nc), nc,
        CCS_KIND_COMM_DIST_GRAPH_ADJ, -1);
}
CCS_MPI_ENTRY(Dist_graph_create_adjacent,
              (MPI_Comm old, int indeg, const int src[], const int srcw[], int outdeg, const int dst[],
               const int dstw[], MPI_Info info, int reorder, MPI_Comm *nc),
              old, indeg, src, srcw, outdeg, dst, dstw, info, reorder, nc)

/* Collective over the local communicator (each group calls it on its own):
 * the intercommunicator is its child there, known to this side only (an
 * intercommunicator is never agreed: comm.h). */
static int w_Intercomm_create(MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader, int tag,
                              MPI_Comm *nc, void *ra)
{
    if (!CCS_REAL(Intercomm_create))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Intercomm_create(local, local_leader, peer, remote_leader, tag, nc);
    struct ccs_comm *p = ccs_mpi_comm(local);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_INTERCOMM, tag, ra);
    return ctor_end(p, r, ccs_real_Intercomm_create(local, local_leader, peer, remote_leader, tag, nc), nc,
                    CCS_KIND_COMM_INTERCOMM, tag);
}
CCS_MPI_ENTRY(Intercomm_create,
              (MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader, int tag, MPI_Comm *nc), local,
              local_leader, peer, remote_leader, tag, nc)

/* Collective over the intercommunicator: the merged communicator is its
 * child, and like it known locally only. */
static int w_Intercomm_merge(MPI_Comm inter, int high, MPI_Comm *nc, void *ra)
{
    if (!CCS_REAL(Intercomm_merge))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Intercomm_merge(inter, high, nc);
    struct ccs_comm *p = ccs_mpi_comm(inter);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_MERGE, high, ra);
    return ctor_end(p, r, ccs_real_Intercomm_merge(inter, high, nc), nc, CCS_KIND_COMM_MERGE, high);
}
CCS_MPI_ENTRY(Intercomm_merge, (MPI_Comm inter, int high, MPI_Comm *nc), inter, high, nc)

/* ---------------------------------------- communicators made from a group */

/* MPI_Comm_create_group (on a communicator, by the group's members only)
 * and MPI-4's MPI_Comm_create_from_group (from a group alone): not every
 * member of a parent calls them, so the parent's child count cannot name
 * the result.  Its members name it instead: the world ranks of its members
 * in rank order and the call's tag, and how many communicators this rank
 * made before under the same key (the members make their calls of one key
 * in the same order, so they count alike). */
static pthread_mutex_t made_mu = PTHREAD_MUTEX_INITIALIZER;
#define MADE_KEYS 4096
static struct {
    uint64_t key, n;
} made[MADE_KEYS];

/* The times KEY was counted before, then counts it; UINT64_MAX when the
 * table is full (4096 keys: communicators of as many member sets and tags;
 * the identity is then local, the communicator not compared). */
static uint64_t made_before(uint64_t key)
{
    uint64_t n = UINT64_MAX;
    pthread_mutex_lock(&made_mu);
    for (int i = 0; i < MADE_KEYS; i++) {
        if (made[i].key == key || made[i].key == 0) {
            made[i].key = key;
            n = made[i].n++;
            break;
        }
    }
    pthread_mutex_unlock(&made_mu);
    return n;
}

/* Hash of the world ranks of COMM's members in rank order, 0 when not
 * known (no world group: sessions without MPI_Init; or out of memory). */
static uint64_t members_hash(MPI_Comm comm)
{
    MPI_Group g;
    int n = 0, inter = 0;
    if (comm == MPI_COMM_NULL || world_group == MPI_GROUP_NULL ||
        PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter || PMPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return 0;
    uint64_t h = 0;
    int *r = PMPI_Group_size(g, &n) == MPI_SUCCESS && n > 0 ? malloc(2 * (size_t)n * sizeof *r) : NULL;
    if (r) {
        for (int i = 0; i < n; i++)
            r[i] = i;
        if (PMPI_Group_translate_ranks(g, n, r, world_group, r + n) == MPI_SUCCESS)
            h = ccs_hash_bytes(r + n, (size_t)n * sizeof *r, 0x6d656d62ull) | 1;
        free(r);
    }
    PMPI_Group_free(&g);
    return h;
}

/* Registers NEWCOMM, made by HOW with TAG (an int tag, or a string's
 * hash) on PARENT (NULL: from groups alone). */
static void made_from_group(struct ccs_comm *parent, MPI_Comm newcomm, int how, uint64_t tag)
{
    if (newcomm == MPI_COMM_NULL)
        return;
    uint64_t members = members_hash(newcomm);
    uint64_t key = ccs_hash_mix(ccs_hash_mix(ccs_hash_mix(parent ? parent->id : 0, (uint64_t)how), tag), members);
    uint64_t n = made_before(key);
    struct ccs_comm *c = register_comm(newcomm, ccs_hash_mix(key, n) | 1, parent ? parent->id : 0, how, -1);
    if (c && (!members || n == UINT64_MAX || (parent && !parent->agreed)))
        c->agreed = 0;
}

static int w_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *nc, void *ra)
{
    if (!CCS_REAL(Comm_create_group))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_create_group(comm, group, tag, nc);
    struct ccs_comm *p = ccs_mpi_comm(comm);
    struct ccs_record *r = begin_mgmt(p, CCS_KIND_COMM_CREATE_GROUP, tag, ra);
    int rc = ccs_real_Comm_create_group(comm, group, tag, nc);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS && p)
        made_from_group(p, *nc, CCS_KIND_COMM_CREATE_GROUP, (uint64_t)(uint32_t)tag);
    return rc;
}
CCS_MPI_ENTRY(Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *nc), comm, group, tag, nc)

#ifdef HAVE_MPI_COMM_FROM_GROUP
static uint64_t string_tag(const char *tag)
{
    return tag ? ccs_hash_bytes(tag, strlen(tag), 0x746167ull) : 0;
}

static int w_Comm_create_from_group(MPI_Group group, const char *tag, MPI_Info info, MPI_Errhandler eh,
                                    MPI_Comm *nc, void *ra)
{
    if (!CCS_REAL(Comm_create_from_group))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Comm_create_from_group(group, tag, info, eh, nc);
    struct ccs_record *r = begin_mgmt(NULL, CCS_KIND_COMM_FROM_GROUP, -1, ra);
    int rc = ccs_real_Comm_create_from_group(group, tag, info, eh, nc);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        made_from_group(NULL, *nc, CCS_KIND_COMM_FROM_GROUP, string_tag(tag));
    return rc;
}
CCS_MPI_ENTRY(Comm_create_from_group,
              (MPI_Group group, const char *tag, MPI_Info info, MPI_Errhandler eh, MPI_Comm *nc), group, tag, info,
              eh, nc)

/* An intercommunicator: named, its groups' sizes known, never agreed. */
static int w_Intercomm_create_from_groups(MPI_Group local, int local_leader, MPI_Group remote, int remote_leader,
                                          const char *tag, MPI_Info info, MPI_Errhandler eh, MPI_Comm *nc, void *ra)
{
    if (!CCS_REAL(Intercomm_create_from_groups))
        return MPI_ERR_INTERN;
    if (!ccs_mpi_active())
        return ccs_real_Intercomm_create_from_groups(local, local_leader, remote, remote_leader, tag, info, eh, nc);
    struct ccs_record *r = begin_mgmt(NULL, CCS_KIND_COMM_FROM_GROUP, -1, ra);
    int rc = ccs_real_Intercomm_create_from_groups(local, local_leader, remote, remote_leader, tag, info, eh, nc);
    ccs_call_end(r, rc != MPI_SUCCESS);
    if (rc == MPI_SUCCESS)
        made_from_group(NULL, *nc, CCS_KIND_COMM_FROM_GROUP, string_tag(tag));
    return rc;
}
CCS_MPI_ENTRY(Intercomm_create_from_groups,
              (MPI_Group local, int local_leader, MPI_Group remote, int remote_leader, const char *tag,
               MPI_Info info, MPI_Errhandler eh, MPI_Comm *nc),
              local, local_leader, remote, remote_leader, tag, info, eh, nc)
#endif
