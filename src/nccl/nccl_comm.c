/*
 * nccl_comm.c - NCCL communicator creation and destruction, interposed.
 *
 * Identity (the same on every member, computed without talking to anyone):
 *   ncclCommInitRank(Config)  hash of the ncclUniqueId's bytes
 *   ncclCommInitRankScalable  hash of the first ncclUniqueId
 *   ncclCommInitAll           per process: host, pid, call number, device
 *   ncclCommSplit/Shrink      ccs_comm_child_id(parent, kind, color or the
 *                             hash of the excluded ranks)
 * Records: COMM_INIT on the new communicator (unsequenced: the members
 * cannot have issued anything on it before), COMM_SPLIT / COMM_SHRINK on the
 * parent (sequenced there: collective over the parent, like any collective),
 * COMM_FINALIZE, COMM_FREE (ncclCommDestroy) and COMM_ABORT on the
 * communicator itself (unsequenced: NCCL does not make them collective, and
 * an abort is often local to the ranks that noticed a failure).
 */
#include "desync_nccl.h"
#include "log.h"
#include "nccl_internal.h"
#include "coalesce_nccl.h"
#include "nccl_redop.h"
#include "nccl_track.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "record.h"
#include "runtime.h"
#include "trace_format.h"
#include <string.h>
#include <unistd.h>

static atomic_int world_from_nccl; /* the first communicator set the world */
static _Atomic uint64_t init_all_calls;

static uint64_t unique_id_hash(const ncclUniqueId *id)
{
    return ccs_hash_bytes(id->internal, sizeof id->internal, CCS_NCCL_ID_SEED) | 1; /* 0 means "none" */
}

/* Starts the record of a call that creates a communicator: it has no entry
 * yet, so the record starts on none and is moved onto the new one by
 * created(). */
static struct ccs_record *begin_create(unsigned kind, int nranks, void *ra)
{
    struct ccs_call call = {.kind = (uint16_t)kind, .backend = CCS_BE_NCCL, .root = -1, .count = (uint64_t)nranks};
    return ccs_call_begin(NULL, &call, ra);
}

/* ncclInProgress: a nonblocking communicator, accepted and being set up. */
static inline int accepted(ncclResult_t rc)
{
    return rc == ncclSuccess || rc == ncclInProgress;
}

/* Registers COMM once the real call accepted it, moves the record R onto it
 * and completes R.  An NCCL-only job learns its world rank and size from its
 * first communicator when the launcher's environment did not say. */
static void created(struct ccs_record *r, ncclResult_t rc, ncclComm_t comm, uint64_t id, uint64_t parent, int rank,
                    int nranks, unsigned how, int color, int first)
{
    struct ccs_comm *c = NULL;
    if (accepted(rc) && comm) {
        c = ccs_comm_register(CCS_BE_NCCL, (uintptr_t)comm, id, parent, rank, nranks, (int)how, color);
        if (first && rank >= 0 && nranks > 0 && ccs_world_rank() < 0 && atomic_exchange(&world_from_nccl, 1) == 0)
            ccs_runtime_set_world(rank, nranks);
        if (c)
            ccs_desync_nccl_init(); /* desync detection, once the rank is known (docs/desync.md) */
        if (c && rc == ncclSuccess && rank >= 0 && ccs_nccl_group_depth() == 0)
            ccs_coalesce_nccl_comm_ready(comm);
    }
    if (r) {
        if (c)
            r->comm = c->id;
        ccs_call_end(r, !accepted(rc));
    }
}

/* Rank and size of a communicator the real NCCL made, -1 when it cannot say
 * yet: one created inside a group is only set up at ncclGroupEnd, and a
 * nonblocking one (ncclInProgress) when NCCL gets to it. */
static void query(ncclComm_t comm, ncclResult_t rc, int *rank, int *size)
{
    if (rc != ncclSuccess || ccs_nccl_group_depth() > 0) {
        *rank = *size = -1;
        return;
    }
    __typeof__(&pncclCommUserRank) user_rank = CCS_NCCL_REAL(CommUserRank);
    __typeof__(&pncclCommCount) count = CCS_NCCL_REAL(CommCount);
    if (!user_rank || user_rank(comm, rank) != ncclSuccess)
        *rank = -1;
    if (!count || count(comm, size) != ncclSuccess)
        *size = -1;
}

/* Remembers that COMM runs nonblocking (CONFIG->blocking = 0; a split
 * without a config inherits its parent's mode): coalescing never puts a
 * call on its blocking private communicator into such a communicator's
 * group, which NCCL refuses. */
static void note_mode(ncclComm_t *comm, ncclResult_t rc, const ncclConfig_t *config, const struct ccs_comm *parent)
{
    if (!accepted(rc) || !comm || !*comm)
        return;
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, (uintptr_t)*comm);
    if (c)
        c->nonblocking = config ? config->blocking == 0 : parent ? parent->nonblocking : 0;
}

CCS_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    __typeof__(&pncclCommInitRank) real = CCS_NCCL_REAL(CommInitRank);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(comm, nranks, commId, rank);
    struct ccs_record *r = begin_create(CCS_KIND_COMM_INIT, nranks, __builtin_return_address(0));
    ncclResult_t rc = real(comm, nranks, commId, rank);
    created(r, rc, comm ? *comm : NULL, unique_id_hash(&commId), 0, rank, nranks, CCS_KIND_COMM_INIT, -1, 1);
    return rc;
}

CCS_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                               ncclConfig_t *config)
{
    __typeof__(&pncclCommInitRankConfig) real = CCS_NCCL_REAL(CommInitRankConfig);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(comm, nranks, commId, rank, config);
    struct ccs_record *r = begin_create(CCS_KIND_COMM_INIT, nranks, __builtin_return_address(0));
    ncclResult_t rc = real(comm, nranks, commId, rank, config);
    created(r, rc, comm ? *comm : NULL, unique_id_hash(&commId), 0, rank, nranks, CCS_KIND_COMM_INIT, -1, 1);
    note_mode(comm, rc, config, NULL);
    return rc;
}

CCS_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                 ncclUniqueId *commIds, ncclConfig_t *config)
{
    __typeof__(&pncclCommInitRankScalable) real = CCS_NCCL_REAL(CommInitRankScalable);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(newcomm, nranks, myrank, nId, commIds, config);
    /* Read the id before the call: the arguments are the caller's until it returns. */
    uint64_t id = nId > 0 && commIds ? unique_id_hash(&commIds[0]) : 0;
    struct ccs_record *r = begin_create(CCS_KIND_COMM_INIT, nranks, __builtin_return_address(0));
    ncclResult_t rc = real(newcomm, nranks, myrank, nId, commIds, config);
    created(r, rc, newcomm && id ? *newcomm : NULL, id, 0, myrank, nranks, CCS_KIND_COMM_INIT, -1, 1);
    note_mode(newcomm, rc, config, NULL);
    return rc;
}

/* All members live in this process, so nothing needs to agree across
 * processes: each member gets its own identity (its records are the only
 * ones in this process's trace under it). */
CCS_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    __typeof__(&pncclCommInitAll) real = CCS_NCCL_REAL(CommInitAll);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(comm, ndev, devlist);
    void *ra = __builtin_return_address(0);
    struct ccs_record *r = begin_create(CCS_KIND_COMM_INIT, ndev, ra);
    ncclResult_t rc = real(comm, ndev, devlist);
    if (!accepted(rc) || !comm || ndev <= 0) {
        created(r, rc, NULL, 0, 0, -1, -1, CCS_KIND_COMM_INIT, -1, 0);
        return rc;
    }
    const char *host = ccs_hostname();
    uint64_t base = ccs_hash_bytes(host, strlen(host), CCS_NCCL_ID_SEED);
    base = ccs_hash_mix(ccs_hash_mix(base, (uint64_t)getpid()), atomic_fetch_add(&init_all_calls, 1));
    for (int i = 0; i < ndev; i++) {
        int rank, size;
        query(comm[i], rc, &rank, &size);
        uint64_t id = ccs_hash_mix(ccs_hash_mix(base, (uint64_t)i), (uint64_t)(devlist ? devlist[i] : i)) | 1;
        /* The first member takes the record of the call; the others get a
         * record each, so that every communicator has its COMM_INIT. */
        if (i > 0)
            r = begin_create(CCS_KIND_COMM_INIT, ndev, ra);
        created(r, rc, comm[i], id, 0, rank, size, CCS_KIND_COMM_INIT, -1, 0);
    }
    if (ccs_world_rank() < 0 && atomic_exchange(&world_from_nccl, 1) == 0)
        ccs_runtime_set_world(0, 1); /* one process drives every device */
    return rc;
}

/* Completes a split or shrink: CHILD_ID was derived on every member, even on
 * those that get no communicator (NCCL_SPLIT_NOCOLOR), so the parent's child
 * count stays the same everywhere. */
static void derived(struct ccs_record *r, ncclResult_t rc, struct ccs_comm *parent, ncclComm_t *newcomm,
                    unsigned how, int64_t discriminator, int color)
{
    if (accepted(rc) && parent) {
        uint64_t id = ccs_comm_child_id(parent, (int)how, discriminator);
        if (newcomm && *newcomm) {
            int rank, size;
            query(*newcomm, rc, &rank, &size);
            ccs_comm_register(CCS_BE_NCCL, (uintptr_t)*newcomm, id, parent->id, rank, size, (int)how, color);
        }
    }
    if (r)
        ccs_call_end(r, !accepted(rc));
}

CCS_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                      ncclConfig_t *config)
{
    __typeof__(&pncclCommSplit) real = CCS_NCCL_REAL(CommSplit);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(comm, color, key, newcomm, config);
    struct ccs_comm *parent = ccs_nccl_comm(comm);
    struct ccs_call call = {.kind = CCS_KIND_COMM_SPLIT, .backend = CCS_BE_NCCL, .root = -1};
    struct ccs_record *r = ccs_call_begin(parent, &call, __builtin_return_address(0));
    ncclResult_t rc = real(comm, color, key, newcomm, config);
    derived(r, rc, parent, newcomm, CCS_KIND_COMM_SPLIT, color, color);
    note_mode(newcomm, rc, config, parent);
    return rc;
}

CCS_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                       ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    __typeof__(&pncclCommShrink) real = CCS_NCCL_REAL(CommShrink);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    /* Every remaining member passes the same list: it tells shrinks apart. */
    int64_t excluded =
        excludeRanksList && excludeRanksCount > 0
            ? (int64_t)ccs_hash_bytes(excludeRanksList, (size_t)excludeRanksCount * sizeof *excludeRanksList, 0)
            : 0;
    struct ccs_comm *parent = ccs_nccl_comm(comm);
    struct ccs_call call = {.kind = CCS_KIND_COMM_SHRINK, .backend = CCS_BE_NCCL, .root = -1};
    struct ccs_record *r = ccs_call_begin(parent, &call, __builtin_return_address(0));
    ncclResult_t rc = real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    derived(r, rc, parent, newcomm, CCS_KIND_COMM_SHRINK, excluded, -1);
    note_mode(newcomm, rc, config, parent);
    return rc;
}

CCS_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    __typeof__(&pncclCommFinalize) real = CCS_NCCL_REAL(CommFinalize);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    if (!ccs_nccl_on())
        return real(comm);
    struct ccs_call call = {.kind = CCS_KIND_COMM_FINALIZE, .backend = CCS_BE_NCCL, .root = -1};
    struct ccs_record *r = ccs_call_begin(ccs_nccl_comm(comm), &call, __builtin_return_address(0));
    ncclResult_t rc = real(comm);
    if (r)
        ccs_call_end(r, !accepted(rc));
    return rc;
}

/* Destroy and abort: the entry is retired before the real call, because
 * once NCCL has freed the communicator another thread may get the same
 * handle for a new one, which must not be retired by mistake.  A handle the
 * shim never saw is not adopted just to be retired. */
static ncclResult_t end_comm(__typeof__(&pncclCommDestroy) real, ncclComm_t comm, unsigned kind, void *ra)
{
    if (!ccs_nccl_on())
        return real(comm);
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, (uintptr_t)comm);
    struct ccs_call call = {.kind = (uint16_t)kind, .backend = CCS_BE_NCCL, .root = -1};
    struct ccs_record *r = ccs_call_begin(c, &call, ra);
    if (comm)
        ccs_nccl_redop_forget_comm((uintptr_t)comm);
    ccs_comm_retire(c);
    ccs_ntrack_forget(comm); /* the background thread no longer asks about it */
    ncclResult_t rc = real(comm);
    if (r)
        ccs_call_end(r, !accepted(rc));
    return rc;
}

CCS_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    __typeof__(&pncclCommDestroy) real = CCS_NCCL_REAL(CommDestroy);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    return end_comm(real, comm, CCS_KIND_COMM_FREE, __builtin_return_address(0));
}

CCS_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    __typeof__(&pncclCommAbort) real = CCS_NCCL_REAL(CommAbort);
    if (CCS_UNLIKELY(!real))
        return ncclInternalError;
    return end_comm(real, comm, CCS_KIND_COMM_ABORT, __builtin_return_address(0));
}
