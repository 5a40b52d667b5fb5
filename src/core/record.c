/*
 * record.c - the hot path: one record per intercepted call, written straight
 * into the calling thread's ring and published when the call returns.
 */
#include "registry.h"
#include "shim.h"


/* Class of each kind, from the one list. */
static const uint8_t kind_class[CCS_KIND_MAX] = {
#define CCS_X(e, n, s, c) [n] = c,
    CCS_KIND_LIST(CCS_X)
#undef CCS_X
};

/* Communicator-management calls that are collective over the communicator
 * they are called on, and so take a sequence number there. */
static inline int sequenced_comm_call(unsigned kind)
{
    return kind == CCS_KIND_COMM_DUP || kind == CCS_KIND_COMM_SPLIT || kind == CCS_KIND_COMM_CREATE ||
           kind == CCS_KIND_COMM_SHRINK;
}

/* Set while this thread is inside a recorded call: a call nested in it (an
 * MPI implementation that calls its own public API) is not counted again. */
static __thread int busy __attribute__((tls_model("initial-exec")));
static __thread uintptr_t last_pc __attribute__((tls_model("initial-exec")));
static __thread uint32_t last_site __attribute__((tls_model("initial-exec")));

struct ccs_record *ccs_call_begin(struct ccs_comm *c, const struct ccs_call *call, void *ret_addr)
{
    if (CCS_UNLIKELY(!atomic_load_explicit(&ccs_active, memory_order_relaxed)) || busy)
        return NULL;
    struct ccs_ring *r = ccs_ring_self();
    if (CCS_UNLIKELY(!r))
        return NULL;
    if (CCS_UNLIKELY(!atomic_load_explicit(&ccs_features_started, memory_order_relaxed)))
        ccs_features_first_call(); /* e.g. the trace writer's thread */
    unsigned kind = call->kind < CCS_KIND_MAX ? call->kind : 0;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    struct ccs_record *rec = &r->rec[h & r->mask];
    uint64_t seq = 0;
    int cls = kind_class[kind];
    if (c) {
        /* Load + store, not an atomic RMW: see struct ccs_comm. */
        if (cls == CCS_CLASS_COLL || (cls == CCS_CLASS_COMM && sequenced_comm_call(kind))) {
            seq = atomic_load_explicit(&c->seq, memory_order_relaxed) + 1;
            atomic_store_explicit(&c->seq, seq, memory_order_relaxed);
        } else if (cls == CCS_CLASS_P2P) {
            seq = atomic_load_explicit(&c->p2p, memory_order_relaxed) + 1;
            atomic_store_explicit(&c->p2p, seq, memory_order_relaxed);
        }
    }
    busy = 1;
    rec->seq = seq;
    rec->comm = c ? c->id : 0;
    rec->fingerprint = 0; /* see ccs_record_fingerprint */
    rec->bytes = call->bytes;
    rec->count = call->count;
    rec->buf = (uint64_t)(uintptr_t)call->buf;
    rec->step = (uint32_t)atomic_load_explicit(&ccs_step, memory_order_relaxed);
    rec->pysite = atomic_load_explicit(&ccs_pysite_current, memory_order_relaxed); /* ccshim_annotate */
    rec->reserved2 = 0;
    /* Most calls come from the site the thread called from last time. */
    if ((uintptr_t)ret_addr != last_pc) {
        last_pc = (uintptr_t)ret_addr;
        last_site = ccs_site_id(ret_addr);
    }
    rec->site = last_site;
    rec->root = call->root;
    rec->kind = (uint16_t)kind;
    rec->dtype = call->dtype;
    rec->op = call->op;
    rec->flags = call->flags;
    rec->backend = call->backend;
    rec->group_depth = call->group_depth;
    rec->thread = (uint8_t)r->index;
    rec->reserved = 0;
    rec->t_dur = 0;
    r->counts[kind]++;
    r->bytes[kind] += call->bytes;
    atomic_store_explicit(&r->inflight, rec, memory_order_release);
    rec->t_start = ccs_timing ? ccs_ticks() : 0;
    return rec;
}

void ccs_call_end(struct ccs_record *rec, int failed)
{
    if (!rec)
        return;
    struct ccs_ring *r = ccs_ring_self();
    if (rec->t_start)
        rec->t_dur = ccs_ticks() - rec->t_start;
    if (failed)
        rec->flags |= CCS_F_ERROR;
    atomic_store_explicit(&r->inflight, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->head, atomic_load_explicit(&r->head, memory_order_relaxed) + 1,
                          memory_order_release);
    busy = 0;
}

void ccs_record_mark(unsigned kind, uint32_t step)
{
    struct ccs_call call = {.kind = (uint16_t)kind, .root = -1};
    struct ccs_record *rec = ccs_call_begin(NULL, &call, __builtin_return_address(0));
    if (rec)
        rec->step = step;
    ccs_call_end(rec, 0);
}
