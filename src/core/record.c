/*
 * record.c - the hot path: one record per intercepted call, written straight
 * into the calling thread's ring and published when the call returns.  The
 * common case is inline in record.h (ccs_call_begin/ccs_call_end); this file
 * holds the rare parts: a thread's or the process's first call, a call from
 * a new site, and markers.
 */
#include "callsite.h"
#include "record.h"
#include "registry.h"
#include "attributes.h"
#include "ring.h"
#include "trace_format.h"

struct ccs_ring *ccs_call_first(void)
{
    struct ccs_ring *r = ccs_tls_ring;
    /* Inside a recorded call (the first-call hooks run outside any). */
    if (r && atomic_load_explicit(&r->inflight, memory_order_relaxed))
        return NULL;
    r = ccs_ring_self();
    if (CCS_UNLIKELY(!r))
        return NULL;
    if (!atomic_load_explicit(&ccs_features_started, memory_order_relaxed))
        ccs_features_first_call(); /* e.g. the trace writer's thread */
    ccs_tls_call_ring = r; /* the next calls of this thread skip this function */
    return r;
}

void ccs_call_new_site(struct ccs_ring *r, struct ccs_record *rec, void *ret_addr)
{
    uint32_t site = ccs_site_id(ret_addr);
    r->last_pc = (uintptr_t)ret_addr;
    r->last_site_word = CCS_AT(site, 4, 4);
    rec->site = site;
}

void ccs_record_mark(unsigned kind, uint32_t step)
{
    struct ccs_call call = {.kind = (uint16_t)kind, .root = -1};
    struct ccs_record *rec = ccs_call_begin(NULL, &call, __builtin_return_address(0));
    if (rec)
        __atomic_store_n(&rec->step, step, __ATOMIC_RELAXED);
    ccs_call_end(rec, 0);
}

void ccs_record_foreign(unsigned kind, unsigned call, uint64_t comm, unsigned flags, uint64_t t_start, int failed)
{
    if (!atomic_load_explicit(&ccs_active, memory_order_relaxed))
        return;
    struct ccs_ring *r = ccs_tls_call_ring ? ccs_tls_call_ring : ccs_call_first();
    /* Inside an intercepted call (a backend calling back into the job):
     * its record is the one in flight. */
    if (!r || atomic_load_explicit(&r->inflight, memory_order_relaxed))
        return;
    struct ccs_record *rec = &r->rec[atomic_load_explicit(&r->head, memory_order_relaxed) & r->mask];
    uint64_t now = ccs_timing ? ccs_ticks() : 0;
    /* Unsequenced (seq 0): desync's collector keeps only sequenced records,
     * and these are compared through the foreign call's identity instead
     * (ccshim_foreign_call), never as a communicator's calls. */
    rec->seq = 0;
    rec->comm = comm;
    rec->fingerprint = 0;
    rec->bytes = rec->count = rec->buf = 0;
    rec->t_start = ccs_timing ? t_start : 0;
    rec->t_dur = ccs_timing && now > t_start ? now - t_start : 0;
    uint32_t step = (uint32_t)atomic_load_explicit(&ccs_step, memory_order_relaxed);
    uint32_t pysite = atomic_load_explicit(&ccs_pysite_current, memory_order_relaxed);
    ccs_record_word(rec, 64, CCS_AT(step, 0, 4)); /* site 0: the Python line is the pysite */
    ccs_record_word(rec, 72, CCS_AT((uint32_t)-1, 0, 4) | CCS_AT((uint16_t)kind, 4, 2));
    ccs_record_word(rec, 80,
                    CCS_AT((uint8_t)(flags | (failed ? CCS_F_ERROR : 0)), 0, 1) | CCS_AT(CCS_BE_TORCH, 1, 1) |
                        r->thread_word | CCS_AT(call, 4, 4));
    ccs_record_word(rec, 88, CCS_AT(pysite, 0, 4));
    atomic_store_explicit(&r->head, atomic_load_explicit(&r->head, memory_order_relaxed) + 1, memory_order_release);
}

void ccs_record_snapshot(const struct ccs_record *p, struct ccs_record *out)
{
    /* ONCE fields were written before publication (ordered by the acquire
     * load of the in-flight pointer): plain reads; LIVE ones atomic. */
    ccs_record_copy(out, p, 1);
}
