/*
 * nccl_real.c - finding the real NCCL behind the interposer.
 *
 * libccshim links neither NCCL nor CUDA.  NCCL (since 2.16.2) exports every
 * function twice, pncclX (strong) and ncclX (weak); our ncclX forwards to
 * pncclX, falling back to ncclX for a library built without the profiling
 * names.  ccs_real_symbol only looks at what is already loaded, so a job that
 * never loads NCCL never gets NCCL (or CUDA) loaded by us.  A function this
 * NCCL lacks (ncclCommShrink before 2.27, say) costs nothing until called.
 */
#include "log.h"
#include "nccl_internal.h"
#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "real.h"
#include "ring.h"
#include "runtime.h"
#include <stdio.h>

_Atomic(void *) ccs_nccl_fns[CCS_NCCL_FN_COUNT];

static const char *const fn_names[CCS_NCCL_FN_COUNT] = {
#define CCS_X(name, ...) [CCS_NCCL_FN_##name] = #name,
    CCS_NCCL_FN_LIST(CCS_X)
#undef CCS_X
};

static const char *const sonames[] = {"libnccl.so.2", "libnccl.so", NULL};
static int missing_logged[CCS_NCCL_FN_COUNT];

void *ccs_nccl_resolve(enum ccs_nccl_fn f)
{
    char name[64];
    if ((unsigned)f >= CCS_NCCL_FN_COUNT)
        return NULL;
    snprintf(name, sizeof name, "pnccl%s", fn_names[f]);
    void *p = ccs_real_symbol(name, sonames);
    if (!p)
        p = ccs_real_symbol(name + 1, sonames);
    if (!p) {
        /* Not cached: a library loaded later may still provide it. */
        ccs_log_once(&missing_logged[f], CCS_LOG_ERROR,
                     "nccl%s called but no loaded NCCL library defines pnccl%s or nccl%s; returning "
                     "ncclInternalError",
                     fn_names[f], fn_names[f], fn_names[f]);
        return NULL;
    }
    /* Racing threads find the same pointer; either store is right. */
    atomic_store_explicit(&ccs_nccl_fns[f], p, memory_order_release);
    return p;
}

int ccs_nccl_first_call(void)
{
    static atomic_int tried;
    /* A plain load first: a disabled shim pays no atomic exchange per call. */
    if (!atomic_load_explicit(&tried, memory_order_relaxed) && atomic_exchange(&tried, 1) == 0)
        ccs_runtime_init();
    return atomic_load_explicit(&ccs_active, memory_order_relaxed);
}

/* Asks NCCL again for the rank and size of a communicator registered before it was ready. */
int ccs_nccl_comm_requery(struct ccs_comm *c)
{
    if (c->rank >= 0 && c->size > 0)
        return 0;
    ncclComm_t h = (ncclComm_t)atomic_load_explicit(&c->handle, memory_order_acquire);
    __typeof__(&pncclCommGetAsyncError) async = CCS_NCCL_REAL(CommGetAsyncError);
    __typeof__(&pncclCommUserRank) user_rank = CCS_NCCL_REAL(CommUserRank);
    __typeof__(&pncclCommCount) count = CCS_NCCL_REAL(CommCount);
    ncclResult_t st = ncclSuccess;
    int rank = -1, size = -1;
    if (!user_rank || !count || (async && (async(h, &st) != ncclSuccess || st != ncclSuccess)))
        return -1;
    if (user_rank(h, &rank) != ncclSuccess || count(h, &size) != ncclSuccess || rank < 0 || size <= 0 ||
        rank >= size)
        return -1;
    ccs_comm_set_rank(c, rank, size);
    CCS_LOG(DEBUG, "NCCL communicator %#llx is ready: rank %d of %d", (unsigned long long)c->id, rank, size);
    return 0;
}

struct ccs_comm *ccs_nccl_comm_slow(ncclComm_t comm)
{
    struct ccs_comm *c = ccs_comm_lookup(CCS_BE_NCCL, (uintptr_t)comm);
    if (CCS_LIKELY(c != NULL)) {
        if (CCS_UNLIKELY(c->size <= 0))
            ccs_nccl_comm_requery(c);
        ccs_ring_set_last_comm(c);
        return c;
    }
    if (comm == NULL)
        return c;
    return ccs_nccl_adopt(comm);
}

struct ccs_comm *ccs_nccl_adopt(ncclComm_t comm)
{
    int rank = -1, size = -1;
    __typeof__(&pncclCommUserRank) user_rank = CCS_NCCL_REAL(CommUserRank);
    __typeof__(&pncclCommCount) count = CCS_NCCL_REAL(CommCount);
    if (!user_rank || user_rank(comm, &rank) != ncclSuccess)
        rank = -1;
    if (!count || count(comm, &size) != ncclSuccess)
        size = -1;
    return ccs_comm_adopt(CCS_BE_NCCL, (uintptr_t)comm, rank, size);
}

/* Sizes by enum ccs_dtype, as constants (ccs_kinds.h), for the table below. */
enum {
#define CCS_X(e, n, s, z) DT_SIZE_##e = z,
    CCS_DTYPE_LIST(CCS_X)
#undef CCS_X
};
/* clang-format off */
#define DT(e) {CCS_DT_##e, DT_SIZE_##e}
/* clang-format on */

/* Every type of nccl.h's list (a newer nccl.h's type missing here reads as
 * norm 0, size 0, as before). */
const struct ccs_nccl_dt ccs_nccl_dt_table[ncclNumTypes] = {
    [ncclInt8] = DT(INT8),         [ncclUint8] = DT(UINT8),        [ncclInt32] = DT(INT32),
    [ncclUint32] = DT(UINT32),     [ncclInt64] = DT(INT64),        [ncclUint64] = DT(UINT64),
    [ncclFloat16] = DT(FLOAT16),   [ncclFloat32] = DT(FLOAT32),    [ncclFloat64] = DT(FLOAT64),
    [ncclBfloat16] = DT(BFLOAT16), [ncclFloat8e4m3] = DT(FP8E4M3), [ncclFloat8e5m2] = DT(FP8E5M2),
};
#undef DT
