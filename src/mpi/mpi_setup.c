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

static struct ccs_comm *register_comm(MPI_Comm comm, uint64_t id, uint64_t parent, int how, int color)
{
    int rank = -1, size = -1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    return ccs_comm_register_inter(CCS_BE_MPI, (uintptr_t)comm, id, parent, rank, size, ccs_mpi_remote_size(comm),
                                   how, color);
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
    return rc;
}
CCS_MPI_ENTRY(Comm_idup, (MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *req), comm, newcomm, req)

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
    if (!ccs_mpi_active() || !comm)
        return ccs_real_Comm_free(comm);
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
