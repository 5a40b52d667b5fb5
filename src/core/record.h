/*
 * record.h - the hot path (record.c and the inline code here): one record
 * per intercepted call, written straight into the calling thread's ring.
 * A wrapper does
 *
 *     struct ccs_comm *c = ccs_comm_lookup(CCS_BE_MPI, (uintptr_t)comm);
 *     struct ccs_call call = {.kind = CCS_KIND_ALLREDUCE, ...};
 *     struct ccs_record *r = ccs_call_begin(c, &call, __builtin_return_address(0));
 *     rc = real(...);
 *     ccs_call_end(r, rc != 0);
 *
 * ccs_call_begin/end take no lock, allocate nothing and make no system call
 * (except the first call in a thread, which maps that thread's ring, and the
 * first call from a new call site, which unwinds its stack once).
 * When the shim is disabled they return NULL / do nothing, and the wrapper
 * still calls the real function with the arguments unchanged.
 *
 * The chain, outermost first: ccs_call_begin (tests ccs_active) ->
 * ccs_call_begin_active (the thread's ring, else ccs_call_first) ->
 * ccs_call_record (not inside a recorded call; a new site goes to
 * ccs_call_new_site) -> ccs_call_store (the record's words) ->
 * ccs_call_publish; ccs_call_fast is the common case alone, for a wrapper
 * that keeps its arguments in registers; ccs_call_end / ccs_call_end_in
 * complete the record.
 */
#ifndef CCS_RECORD_H
#define CCS_RECORD_H

#include "attributes.h"
#include "ccs_kinds.h"
#include "clock.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include "pysite.h"
#include "ring.h"
#include "trace_format.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What a wrapper knows about one call. */
struct ccs_call {
    uint16_t kind;       /* enum ccs_kind */
    uint8_t dtype;       /* enum ccs_dtype */
    uint8_t op;          /* enum ccs_op */
    uint8_t flags;       /* enum ccs_flag */
    uint8_t backend;     /* enum ccs_backend */
    uint8_t group_depth; /* NCCL group nesting */
    int32_t root;        /* root or peer, -1 when none */
    uint32_t sig;        /* signature hash (see ccs_fingerprint_sig), 0 when none */
    uint64_t count;      /* element count that must agree (see ccs_fingerprint) */
    uint64_t bytes;      /* payload bytes */
    const void *buf;     /* (receive) buffer */
};

/* Starts recording one call on C (NULL C: recorded with comm 0, unsequenced).
 * Returns the record to pass to ccs_call_end, or NULL when not recording.
 * In a ring, rec->fingerprint holds the communicator's running hash
 * through the call (0 for a call not on the collective sequence); the
 * fingerprint itself is a pure function of fields the record holds, so
 * whoever needs it computes it with ccs_record_fingerprint() (the trace
 * writer fills it in the file).
 * Inline (below): a wrapper's call costs no call of
 * its own and its constant fields (kind, backend) fold. */
static inline struct ccs_record *ccs_call_begin(struct ccs_comm *c, const struct ccs_call *call, void *ret_addr);

/* Completes it: duration, error flag, publishes it to the ring. */
static inline void ccs_call_end(struct ccs_record *r, int failed);

/* Records a marker (step) in the calling thread's ring. */
CCS_HIDDEN void ccs_record_mark(unsigned kind, uint32_t step);
/* Records in the calling thread's ring a collective ccshim did not
 * intercept, which the torch helper saw (ccshim_foreign_call, _issued):
 * KIND (enum ccs_kind) on torch.distributed group COMM, CALL its
 * torch.distributed function (enum ccs_torch_call, in the record's sig),
 * FLAGS (CCS_F_NONBLOCKING for async_op), begun at T_START (ccs_ticks,
 * when timing), ended now, FAILED when it raised.  Backend
 * torch.distributed, seq 0 (docs/trace-format.md).  Python-rate: not on
 * any intercepted call's path. */
CCS_HIDDEN void ccs_record_foreign(unsigned kind, unsigned call, uint64_t comm, unsigned flags, uint64_t t_start,
                                   int failed);
/* Copies an in-flight record P (loaded with acquire from ring->inflight)
 * without racing its thread, which may still write t_dur, flags and step
 * (relaxed atomics).  Recheck ring->inflight afterwards. */
CCS_HIDDEN void ccs_record_snapshot(const struct ccs_record *p, struct ccs_record *out);

/* Every field of struct ccs_record, in order, by how the calling thread
 * writes it: ONCE(f) before the record is published, LIVE(f) also after,
 * until the call returns (t_dur and flags in ccs_call_end, flags in a
 * wrapper, step in a mark), so that a copy of a published record reads it
 * with a relaxed atomic load.  The snapshot copies a record with
 * ccs_record_copy, generated from this list, and the size check below
 * fails when a field is added to the record and not here.  The hot path
 * (ccs_call_record) writes the narrow fields in 8-byte words; a check
 * beside it pins the offsets it relies on. */
#define CCS_RECORD_FIELDS(ONCE, LIVE)                                                                      \
    ONCE(seq) ONCE(comm) ONCE(fingerprint) ONCE(bytes) ONCE(count) ONCE(buf) ONCE(t_start) LIVE(t_dur)    \
    LIVE(step) ONCE(site) ONCE(root) ONCE(kind) ONCE(dtype) ONCE(op) LIVE(flags) ONCE(backend)           \
    ONCE(group_depth) ONCE(thread) ONCE(sig) ONCE(pysite) ONCE(reserved2)

#define CCS_X_SIZE(f) +sizeof(((struct ccs_record *)0)->f)
_Static_assert(0 CCS_RECORD_FIELDS(CCS_X_SIZE, CCS_X_SIZE) == sizeof(struct ccs_record),
               "CCS_RECORD_FIELDS must list every field of struct ccs_record");
#undef CCS_X_SIZE

/* Copies every field of SRC into DST.  SRC_PUBLISHED (a constant, so that
 * the choice folds): SRC is a published record whose LIVE fields its
 * thread may still write; else SRC is private (plain loads throughout). */
CCS_INLINE void ccs_record_copy(struct ccs_record *dst, const struct ccs_record *src, int src_published)
{
#define CCS_X_ONCE(f) dst->f = src->f;
#define CCS_X_LIVE(f) dst->f = src_published ? __atomic_load_n(&src->f, __ATOMIC_RELAXED) : src->f;
    CCS_RECORD_FIELDS(CCS_X_ONCE, CCS_X_LIVE)
#undef CCS_X_ONCE
#undef CCS_X_LIVE
}

/* The rare parts of the hot path, out of line and cold, each called where
 * the fewest values are live, so that a wrapper's fast path keeps its
 * values in registers and saves none for them:
 *
 * ccs_call_first: the first call of a thread (maps its ring) or of the
 * process (runs the features' first-call hooks).  Returns the thread's
 * ring to record into, or NULL when this call is not recorded (inside a
 * recorded call, or no ring).
 *
 * ccs_call_new_site: REC of a call from a new return address (not R's last
 * one), written but not yet published: its site id, which becomes R's
 * last site (called after the stores, where only R, REC and the return
 * address are live). */
CCS_HIDDEN struct ccs_ring *ccs_call_first(void) __attribute__((cold, noinline));
CCS_HIDDEN void ccs_call_new_site(struct ccs_ring *r, struct ccs_record *rec, void *ret_addr)
    __attribute__((cold, noinline));

/* The words the hot path stores: each starts at a multiple of 8 and holds
 * exactly these fields, in this order (a change to the record that breaks
 * this fails here, not in a trace). */
_Static_assert(offsetof(struct ccs_record, step) == 64 && offsetof(struct ccs_record, site) == 68 &&
                   offsetof(struct ccs_record, root) == 72 && offsetof(struct ccs_record, kind) == 76 &&
                   offsetof(struct ccs_record, dtype) == 78 && offsetof(struct ccs_record, op) == 79 &&
                   offsetof(struct ccs_record, flags) == 80 && offsetof(struct ccs_record, backend) == 81 &&
                   offsetof(struct ccs_record, group_depth) == 82 && offsetof(struct ccs_record, thread) == 83 &&
                   offsetof(struct ccs_record, sig) == 84 && offsetof(struct ccs_record, pysite) == 88 &&
                   offsetof(struct ccs_record, reserved2) == 92 && sizeof(struct ccs_record) == 96 &&
                   sizeof(((struct ccs_record *)0)->kind) == 2 && sizeof(((struct ccs_record *)0)->root) == 4,
               "the hot path's record words (ccs_call_record) must match struct ccs_record");

/* Stores the 8 bytes W at byte offset OFF of REC (a multiple of 8). */
CCS_INLINE void ccs_record_word(struct ccs_record *rec, size_t off, uint64_t w)
{
    __builtin_memcpy((char *)rec + off, &w, sizeof w);
}

/* Writes the record of a call on C into R's next slot, with R's last call
 * site, and counts it; does not publish it.  The rest of ccs_call_begin is
 * in ccs_call_record and ccs_call_fast (always inline: with a wrapper's
 * constant kind the counter choice folds away).
 *
 * What it does not store, because a ring slot always holds 0 there:
 * without ccs_timing the times (ccs_timing
 * is set before the shim turns active and never changes, so a process's
 * slots either always get times or never do).  A ring is mapped zeroed, so
 * a slot reused on a later lap, and one a reader copies while it is in
 * flight, reads 0 there as on the first lap. */
CCS_INLINE struct ccs_record *ccs_call_store(struct ccs_ring *r, struct ccs_comm *c, const struct ccs_call *call)
{
    unsigned kind = call->kind < CCS_KIND_MAX ? call->kind : 0;
    struct ccs_record *rec = &r->rec[atomic_load_explicit(&r->head, memory_order_relaxed) & r->mask];
    /* One register for the slot's address: left to itself the compiler
     * rebuilds it from the index for each differently typed store. */
    __asm__("" : "+r"(rec));
    uint64_t seq = 0, comm = 0, hash = 0;
    uint32_t step = (uint32_t)atomic_load_explicit(&ccs_step, memory_order_relaxed);
    enum ccs_counter which = c ? ccs_kind_counter(kind) : CCS_COUNTER_NONE;
    if (c) {
        /* Load + store, not an atomic RMW: see struct ccs_comm. */
        if (which == CCS_COUNTER_SEQ) {
            seq = atomic_load_explicit(&c->seq, memory_order_relaxed) + 1;
            atomic_store_explicit(&c->seq, seq, memory_order_relaxed);
            /* The communicator's running hash through this call: what
             * desync's thread would otherwise fold from every record
             * (docs/performance.md, "The detector's cost").  One
             * multiply-add on the line just used. */
            hash = ccs_running_hash(atomic_load_explicit(&c->hash, memory_order_relaxed),
                                    ccs_fp_words(kind, call->flags, call->count, call->dtype, call->op, call->root,
                                                 call->sig),
                                    call->flags & CCS_F_DEFERRED);
            atomic_store_explicit(&c->hash, hash, memory_order_relaxed);
        } else if (which == CCS_COUNTER_P2P) {
            seq = atomic_load_explicit(&c->p2p, memory_order_relaxed) + 1;
            atomic_store_explicit(&c->p2p, seq, memory_order_relaxed);
        }
        comm = c->id;
    }
    uint32_t pysite = atomic_load_explicit(&ccs_pysite_current, memory_order_relaxed); /* ccshim_annotate */
    rec->seq = seq;
    rec->comm = comm;
    rec->fingerprint = hash; /* in a ring: the running hash (see ccs_record_fingerprint) */
    rec->bytes = call->bytes;
    rec->count = call->count;
    rec->buf = (uint64_t)(uintptr_t)call->buf;
    if (CCS_UNLIKELY(ccs_timing)) {
        rec->t_start = ccs_ticks();
        rec->t_dur = 0;
    }
    ccs_record_word(rec, 64, CCS_AT(step, 0, 4) | r->last_site_word); /* most calls: the last site */
    ccs_record_word(rec, 72, CCS_AT((uint32_t)call->root, 0, 4) | CCS_AT((uint16_t)kind, 4, 2) |
                                 CCS_AT(call->dtype, 6, 1) | CCS_AT(call->op, 7, 1));
    ccs_record_word(rec, 80, CCS_AT(call->flags, 0, 1) | CCS_AT(call->backend, 1, 1) |
                                 CCS_AT(call->group_depth, 2, 1) | r->thread_word |
                                 CCS_AT(call->sig, 4, 4));
    ccs_record_word(rec, 88, CCS_AT(pysite, 0, 4)); /* reserved2 0 */
    if (which == CCS_COUNTER_SEQ) {
        /* The communicator's step bookkeeping (calls per step for desync),
         * last, where fewest values are live: a test and an OR. */
        if (CCS_UNLIKELY(atomic_load_explicit(&c->step_at, memory_order_relaxed) != step))
            ccs_comm_step_turn(c, step, seq);
        atomic_store_explicit(&c->kinds,
                              atomic_load_explicit(&c->kinds, memory_order_relaxed) | (1ull << (kind & 63)),
                              memory_order_relaxed);
    }
    r->counts[kind]++;
    return rec;
}

/* Asks for the lines of the ring's next slot (the record after REC) ahead
 * of its call.  A default ring (6 MiB) is too large to stay in the core's
 * caches between laps, so without this each call's stores missed and
 * waited in the store buffer; on two ranks Open MPI's locked FIFO write
 * drains the store buffer before the send, so the miss was paid on the
 * exchange's critical path (about 7 ns a call on the Intel host of
 * docs/performance.md, "The ring's next slot").  Issued before the real
 * call, the fetch completes while the call waits for the other rank.
 * Built for the baseline x86-64 this is a read prefetch (prefetcht0: a
 * line no other core holds arrives exclusive, so the store that follows
 * needs no further request); aarch64 gets a store prefetch.  A hint: it
 * neither faults nor orders, so the last slot's successor is not looked
 * for: its address, one record past the ring, is computed as an integer
 * (no pointer beyond the array) and lands in the ring's own last page or
 * nowhere it matters; the first slot then misses once a lap. */
CCS_INLINE void ccs_call_warm_next_slot(const struct ccs_record *rec)
{
    uintptr_t next = (uintptr_t)rec + sizeof *rec;
    __builtin_prefetch((const void *)next, 1, 3);
    __builtin_prefetch((const void *)(next + sizeof *rec - 1), 1, 3); /* a record spans two lines */
}

/* Publishes REC: from here on the desync thread may copy it
 * (ccs_record_snapshot), so the fields still written (t_dur, flags, and
 * step for marks) are relaxed atomics: plain moves on x86-64 and aarch64,
 * and no data race. */
CCS_INLINE struct ccs_record *ccs_call_publish(struct ccs_ring *r, struct ccs_record *rec)
{
    atomic_store_explicit(&r->inflight, rec, memory_order_release);
    ccs_call_warm_next_slot(rec);
    return rec;
}

/* The body of ccs_call_begin once the ring R exists. */
CCS_INLINE struct ccs_record *ccs_call_record(struct ccs_ring *r, struct ccs_comm *c,
                                                 const struct ccs_call *call, void *ret_addr)
{
    /* Inside a recorded call already (an MPI implementation calling its own
     * public API): not counted again.  The in-flight pointer is the flag, on
     * the line this call writes anyway. */
    if (atomic_load_explicit(&r->inflight, memory_order_relaxed))
        return NULL;
    struct ccs_record *rec = ccs_call_store(r, c, call);
    if (CCS_UNLIKELY((uintptr_t)ret_addr != r->last_pc))
        ccs_call_new_site(r, rec, ret_addr);
    return ccs_call_publish(r, rec);
}

/* The thread's call ring for a wrapper's fast path, or NULL (the thread's
 * first call, a forked child's first call, or interception off).  Non-NULL
 * only once ccs_call_first ran, which only a call that saw ccs_active set
 * reaches, and ccs_active is never cleared: so a fast path that has the ring
 * needs no test of ccs_active of its own. */
CCS_INLINE struct ccs_ring *ccs_call_ring(void)
{
    return ccs_tls_call_ring;
}

/* The common case of ccs_call_begin_active and nothing else, with no call
 * out of line: in R, the thread's call ring (ccs_call_ring, not NULL), not
 * inside a recorded call, the call site the thread's last one.  Else NULL,
 * having done nothing: the caller then takes its general path
 * (ccs_call_begin_active).  For a wrapper that keeps its arguments in
 * registers up to the real call; it ends the record with ccs_call_end_in(R). */
CCS_INLINE struct ccs_record *ccs_call_fast(struct ccs_ring *r, struct ccs_comm *c, const struct ccs_call *call,
                                            void *ret_addr)
{
    if (CCS_UNLIKELY(atomic_load_explicit(&r->inflight, memory_order_relaxed) != NULL ||
                     (uintptr_t)ret_addr != r->last_pc))
        return NULL;
    return ccs_call_publish(r, ccs_call_store(r, c, call));
}

/* ccs_call_begin for a caller that has just seen ccs_active nonzero (a
 * wrapper's first test): the same without a second look at it. */
CCS_INLINE struct ccs_record *ccs_call_begin_active(struct ccs_comm *c, const struct ccs_call *call,
                                                    void *ret_addr)
{
    struct ccs_ring *r = ccs_tls_call_ring;
    if (CCS_UNLIKELY(r == NULL)) {
        r = ccs_call_first();
        if (!r)
            return NULL;
    }
    return ccs_call_record(r, c, call, ret_addr);
}

CCS_INLINE struct ccs_record *ccs_call_begin(struct ccs_comm *c, const struct ccs_call *call, void *ret_addr)
{
    if (CCS_UNLIKELY(!atomic_load_explicit(&ccs_active, memory_order_relaxed)))
        return NULL;
    return ccs_call_begin_active(c, call, ret_addr);
}

/* ccs_call_end of a record REC (not NULL) of the ring R (a caller that kept
 * the ring ccs_call_fast gave it). */
CCS_INLINE void ccs_call_end_in(struct ccs_ring *r, struct ccs_record *rec, int failed)
{
    if (ccs_timing)
        __atomic_store_n(&rec->t_dur, ccs_ticks() - rec->t_start, __ATOMIC_RELAXED);
    if (CCS_UNLIKELY(failed))
        __atomic_store_n(&rec->flags, (uint8_t)(rec->flags | CCS_F_ERROR), __ATOMIC_RELAXED);
    atomic_store_explicit(&r->inflight, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->head, atomic_load_explicit(&r->head, memory_order_relaxed) + 1,
                          memory_order_release);
}

CCS_INLINE void ccs_call_end(struct ccs_record *rec, int failed)
{
    if (rec)
        ccs_call_end_in(ccs_tls_ring, rec, failed); /* the ring REC is in */
}

#endif
