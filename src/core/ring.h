/*
 * ring.h - the per-thread single-producer rings of records (ring.c) and
 * the words a record is written in.  Readers (the trace writer, desync's
 * collector, the flight recorder) copy through cursors of their own; the
 * producer never waits.
 */
#ifndef CCS_RING_H
#define CCS_RING_H

#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include "trace_format.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct ccs_comm; /* comm.h */

/* The record is written in 8-byte words where its fields are narrower: the
 * bytes in memory are exactly the fields' (docs/trace-format.md), in the
 * machine's byte order.  CCS_AT(v, off, size): the unsigned V of SIZE
 * bytes at byte OFF of such a word (the compiler folds the constant ones
 * into one). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CCS_AT(v, off, size) ((uint64_t)(v) << (64 - 8 * ((off) + (size))))
#else
#define CCS_AT(v, off, size) ((uint64_t)(v) << (8 * (off)))
#endif

/* A reader's place in one ring: a cursor of its own and the records it
 * lost (overwritten by the producer before or while it read them).  Atomic
 * only so that others may look at it (the summary reads a ring's lost
 * count); one thread reads through a cursor at a time. */
struct ccs_ring_cursor {
    _Atomic uint64_t next; /* index of the next record to read */
    _Atomic uint64_t lost; /* records lost to overflow so far */
};

/* Per-thread single-producer ring of records.  Readers copy [cursor, head)
 * through ccs_ring_read; the producer never waits: when it laps a reader
 * the oldest records are lost and counted in that reader's cursor.  The
 * last records stay readable as the flight recorder. */
struct ccs_ring {
    /* The producer's line, written by every call. */
    _Atomic uint64_t head;          /* records published (producer) */
    _Atomic(struct ccs_record *) inflight; /* record of a call in progress; non-NULL
                                       also means "inside a recorded call": a call
                                       nested in it is not recorded again */
    uint64_t mask;                  /* capacity - 1 */
    struct ccs_comm *last_comm;     /* the thread's last communicator, either
                                       backend's: a wrapper's fast path finds
                                       it on the line it reads anyway (each
                                       backend's cached look-up tests that the
                                       entry is its own and holds the handle) */
    uint32_t index;                 /* small thread index */
    uint32_t pid;                   /* process that owns it (fork check) */
    /* For the hot path, on the line every call reads anyway (producer
     * only): the thread's last call site (most calls come from where the
     * last one did), and fields of the record already in place in the
     * 8-byte words it is written in (see ccs_call_record). */
    uintptr_t last_pc;              /* return address of the last call */
    uint64_t last_site_word;        /* its site id at the site's place in the word at 64 */
    uint64_t thread_word;           /* the thread byte (index) at its place in the word at 80 */
    /* The draining reader's cursor (the trace writer's; its lost count is
     * the summary's), kept off the producer's line so that a drain does
     * not take the line every call writes away from its core. */
    _Alignas(64) struct ccs_ring_cursor drain;
    struct ccs_ring *next;          /* list of all rings (set once, before the ring is listed) */
    _Alignas(64) uint64_t counts[CCS_KIND_MAX]; /* calls by kind (producer only) */
    _Alignas(64) struct ccs_record rec[]; /* capacity records */
};

_Static_assert(offsetof(struct ccs_ring, drain) == 64, "a ring's producer fields fill one cache line, no more");

/* The calling thread's ring, mapped on first use; NULL when out of memory
 * (logged once; recording is then off in that thread).  The fast path is
 * inline: one thread-local load. */
extern CCS_HIDDEN __thread struct ccs_ring *ccs_tls_ring __attribute__((tls_model("initial-exec")));
CCS_HIDDEN struct ccs_ring *ccs_ring_self_slow(void);
static inline struct ccs_ring *ccs_ring_self(void)
{
    struct ccs_ring *r = ccs_tls_ring;
    return CCS_LIKELY(r != NULL) ? r : ccs_ring_self_slow();
}

/* Makes C the calling thread's last communicator (a backend's table look-up
 * that found it), where its wrappers' fast paths look first; nothing before
 * the thread's ring exists. */
static inline void ccs_ring_set_last_comm(struct ccs_comm *c)
{
    struct ccs_ring *r = ccs_tls_ring;
    if (r != NULL)
        r->last_comm = c;
}

/* The hot path's look-up of a backend's communicator: R's last one when it
 * is of BACKEND and still holds HANDLE (the test the table's own probe
 * makes: a retired entry no longer holds the handle, a re-registered one is
 * the live entry for it), else NULL (the backend then asks the table, which
 * makes the entry the thread's last).  Both backends' wrappers use it. */
static inline struct ccs_comm *ccs_ring_last_comm(const struct ccs_ring *r, uintptr_t handle, int backend)
{
    struct ccs_comm *c = r->last_comm;
    if (CCS_LIKELY(c != NULL) && atomic_load_explicit(&c->handle, memory_order_acquire) == handle &&
        CCS_LIKELY(c->backend == backend))
        return c;
    return NULL;
}

/* The ring the hot path records into: the thread's ring once the features
 * have started (ccs_call_first sets it); NULL sends the call through
 * ccs_call_first.  One test on the hot path for "first call of this thread"
 * and "first call of this process", cleared in a forked child (whose first
 * call starts the child's features) by ccs_ring_reset_all. */
extern CCS_HIDDEN __thread struct ccs_ring *ccs_tls_call_ring __attribute__((tls_model("initial-exec")));

/* First ring in the list of all rings (walk with ->next). */
CCS_HIDDEN struct ccs_ring *ccs_ring_first(void);

/* Copies up to MAX records of R from C's cursor on into OUT, oldest first,
 * and moves the cursor past them.  Records the producer overwrote before
 * or while they were copied are left out and counted in C->lost.  Returns
 * how many records OUT holds: 0 only when R has nothing new for C.  Any
 * thread but R's producer; one thread at a time per cursor.  No lock, no
 * allocation, no system call (a signal handler may read). */
CCS_HIDDEN size_t ccs_ring_read(struct ccs_ring *r, struct ccs_ring_cursor *c, struct ccs_record *out, size_t max);

/* A reader of every ring of this process through cursors of its own, one
 * per ring (by the ring's index), apart from the rings' draining cursors
 * (the trace writer's): the metrics and the desync collector hold one each. */
#define CCS_RING_READER_RINGS 1024
struct ccs_ring_reader {
    struct ccs_ring_cursor cursor[CCS_RING_READER_RINGS];
};

/* Reads what each ring of this process recorded since RD's last pass,
 * oldest first per ring, in chunks of at most MAX records copied into BUF,
 * each handed to EACH(CTX, BUF, N); EACH returning nonzero ends the pass.
 * TAIL > 0: at most TAIL records a ring, a cursor further back first moved
 * up to the newest TAIL (the older ones skipped, not counted as lost: a
 * reader of the newest state); TAIL 0: all.  Returns how many rings RD
 * could not read (indices beyond its cursors).  One thread at a time per
 * reader; no lock, no allocation. */
CCS_HIDDEN size_t ccs_ring_reader_pass(struct ccs_ring_reader *rd, uint64_t tail, struct ccs_record *buf,
                                       size_t max, int (*each)(void *ctx, struct ccs_record *recs, size_t n),
                                       void *ctx);

/* The records RD's cursors lost to rings that lapped them. */
CCS_HIDDEN uint64_t ccs_ring_reader_lost(const struct ccs_ring_reader *rd);

/* Sets RD's cursors at the rings' heads: what they hold now is not new
 * (a start, a forked child's, whose rings hold its parent's calls). */
CCS_HIDDEN void ccs_ring_reader_at_end(struct ccs_ring_reader *rd);

/* ccs_ring_read through the ring's own draining cursor (R->drain). */
CCS_HIDDEN size_t ccs_ring_drain(struct ccs_ring *r, struct ccs_record *out, size_t max);

/* Sets C at R's current head (what R holds now is not new to C), no loss. */
CCS_HIDDEN void ccs_ring_cursor_at_end(struct ccs_ring *r, struct ccs_ring_cursor *c);

/* Copies the last N published records of R, oldest first (flight recorder);
 * any of them overwritten while copied are left out.  Returns how many. */
CCS_HIDDEN size_t ccs_ring_last(struct ccs_ring *r, struct ccs_record *out, size_t n);

/* After fork: forget the parent's unconsumed records. */
CCS_HIDDEN void ccs_ring_reset_all(void);

#endif
