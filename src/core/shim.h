/*
 * shim.h - the core's internal API, used by the interposers (mpi_wrap.c,
 * nccl_wrap.c) and by the features built on the core (desync, coalescing).
 *
 * Hot path: a wrapper does
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
 * All internal non-static symbols are ccs_ and hidden (CCS_HIDDEN).
 */
#ifndef CCS_SHIM_H
#define CCS_SHIM_H

#include "ccs_kinds.h"
#include "trace_format.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CCS_HIDDEN __attribute__((visibility("hidden")))
#define CCS_EXPORT __attribute__((visibility("default")))
/* A hot-path helper inlined even where the compiler would not (so that a
 * wrapper's constant arguments fold through it). */
#define CCS_INLINE static inline __attribute__((always_inline))
#define CCS_LIKELY(x) __builtin_expect(!!(x), 1)
#define CCS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------ process.c */

/* Nonzero while interception is on; a wrapper that sees 0 just forwards. */
extern CCS_HIDDEN atomic_int ccs_active;

/* Nonzero when records carry times (a trace is written): reading the clock
 * is most of the hot path's cost, so it is skipped when nothing would read
 * the times. */
extern CCS_HIDDEN int ccs_timing;

/* World rank and size: from MPI after MPI_Init, else from the launcher's
 * environment (torchrun, Open MPI, PMI, Slurm), else -1. */
CCS_HIDDEN int ccs_world_rank(void);
CCS_HIDDEN int ccs_world_size(void);
CCS_HIDDEN const char *ccs_hostname(void);
CCS_HIDDEN const char *ccs_job_id(void);

/* The step: ccshim_step_mark increments it; records carry it. */
extern CCS_HIDDEN _Atomic uint64_t ccs_step;

/* Current step (relaxed load). */
CCS_HIDDEN uint32_t ccs_step_now(void);

/* At start-up: host name and world from the environment; the job id once
 * the configuration (CCSHIM_JOB_ID) is read; in a forked child, the world
 * again; from MPI after MPI_Init (ccs_runtime_set_world). */
CCS_HIDDEN void ccs_process_detect(void);
CCS_HIDDEN void ccs_process_detect_job(void);
CCS_HIDDEN void ccs_process_forked(void);
CCS_HIDDEN void ccs_process_set_world(int rank, int size);

/* ------------------------------------------------------------ runtime.c */

/* Idempotent; called by the library constructor and, defensively, by the
 * first wrapper entered.  Returns 0, or -1 when the shim disabled itself. */
CCS_HIDDEN int ccs_runtime_init(void);

/* World rank and size from MPI after MPI_Init; reopens a per-rank log. */
CCS_HIDDEN void ccs_runtime_set_world(int rank, int size);

/* Flushes the trace and writes the summary; REASON is enum ccs_end_reason.
 * Called from MPI_Finalize, atexit and fatal-signal handlers. */
CCS_HIDDEN void ccs_runtime_finish(int reason, int signo);

/* Installs the fatal-signal handlers after MPI_Init (libccshim-mpi.so), in
 * front of the MPI library's own, which then still run. */
CCS_HIDDEN void ccs_runtime_signals_after_mpi_init(void);

/* ----------------------------------------------------------------- comm.c */

struct ccs_comm {
    /* Line-aligned: every field a call reads or writes (handle, id, size,
     * backend, seq, p2p) is on the entry's first cache line. */
    _Alignas(64) _Atomic uintptr_t handle; /* local handle; 0 = free slot, 1 = tombstone */
    uint64_t id;              /* identity, the same on every member */
    uint64_t parent;          /* parent's identity, 0 when none */
    int32_t rank, size;       /* this process's rank; member count */
    uint16_t backend;         /* enum ccs_backend */
    uint16_t how;             /* enum ccs_kind of the creating call */
    int32_t color;            /* split color or -1 */
    uint64_t t_created;       /* ticks */
    /* Sequence counters.  Relaxed load+store, not an atomic RMW: a correct
     * program never issues two collectives on one communicator at once
     * (MPI and NCCL both forbid it), so no update can be lost. */
    _Atomic uint64_t seq;     /* next collective sequence number (from 1) */
    _Atomic uint64_t p2p;     /* point-to-point calls so far */
    _Atomic uint64_t children;/* communicators created from this one so far */
    int agreed;               /* 1 when every member derives the same id */
    int32_t remote_size;      /* MPI intercommunicator: the remote group's size (the length of
                                 its collectives' per-peer arrays); 0 for any other */
    uint8_t nonblocking;      /* NCCL: made with config.blocking = 0 (or split from one) */
    void *feature[2];         /* per-communicator state of later features */
};

_Static_assert(offsetof(struct ccs_comm, p2p) + sizeof(uint64_t) <= 64,
               "the fields of a communicator entry every call uses share one cache line");

#define CCS_COMM_SLOT_BITS 12
#define CCS_COMM_SLOTS (1u << CCS_COMM_SLOT_BITS)

/* Hot path: the live entry for HANDLE, or NULL.  Lock-free. */
CCS_HIDDEN struct ccs_comm *ccs_comm_lookup(int backend, uintptr_t handle);

/* Registers a new communicator (slow path, takes a mutex).  Returns the
 * entry, or NULL when the table is full (logged once; calls on it are then
 * forwarded unrecorded). */
CCS_HIDDEN struct ccs_comm *ccs_comm_register(int backend, uintptr_t handle, uint64_t id, uint64_t parent,
                                              int rank, int size, int how, int color);
/* The same for an MPI intercommunicator whose remote group has REMOTE_SIZE
 * (> 0) members, set before the entry is published; an intercommunicator
 * is never agreed (its calls are counted, not compared).  REMOTE_SIZE 0 is
 * ccs_comm_register. */
CCS_HIDDEN struct ccs_comm *ccs_comm_register_inter(int backend, uintptr_t handle, uint64_t id, uint64_t parent,
                                                    int rank, int size, int remote_size, int how, int color);

/* Sets the rank and size of C once known (a communicator registered before
 * it was ready: nonblocking, or created inside a group).  Slow path. */
CCS_HIDDEN void ccs_comm_set_rank(struct ccs_comm *c, int rank, int size);
/* Retires an entry (its handle may be reused for a new communicator). */
CCS_HIDDEN void ccs_comm_retire(struct ccs_comm *c);

/* Identity of the N-th child of PARENT (N counted per parent on every member
 * alike), of the given creating call and color/discriminator. */
CCS_HIDDEN uint64_t ccs_comm_child_id(struct ccs_comm *parent, int how, int64_t discriminator);

/* For a handle the shim never saw created: registers it with a local-only
 * identity (agreed = 0) and logs that once.  Slow path. */
CCS_HIDDEN struct ccs_comm *ccs_comm_adopt(int backend, uintptr_t handle, int rank, int size);
/* The same for an MPI intercommunicator (REMOTE_SIZE as above). */
CCS_HIDDEN struct ccs_comm *ccs_comm_adopt_inter(int backend, uintptr_t handle, int rank, int size, int remote_size);

/* Visits every live entry (for the writer and the features). */
CCS_HIDDEN void ccs_comm_foreach(void (*fn)(struct ccs_comm *, void *), void *arg);

/* Copies up to MAX communicator definitions, the FROM-th registered onwards,
 * into OUT (for the trace writer, which keeps its own cursor).  Returns how many. */
CCS_HIDDEN size_t ccs_comm_defs(size_t from, struct ccs_trace_comm *out, size_t max);

/* ---------------------------------------------------------- fingerprint.c */

/* 64-bit mixing hash of a byte string, and of one more word. */
CCS_HIDDEN uint64_t ccs_hash_bytes(const void *p, size_t n, uint64_t seed);
CCS_HIDDEN uint64_t ccs_hash_mix(uint64_t h, uint64_t v);

/* Slot index (BITS bits) of a pointer-like key: one multiplication, for the
 * hot path's table probes (Fibonacci hashing; the high bits are the mixed ones). */
static inline size_t ccs_slot_hash(uint64_t key, unsigned bits)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> (64 - bits));
}

/* Fingerprint of the fields every member must agree on for KIND under MPI's
 * matching rules (fingerprint.c): the kind and the nonblocking flag always;
 * for reductions the whole type signature (COUNT, DTYPE, SIG) and the op;
 * for bcast/gather/scatter/allgather(v)/alltoall the signature's size in
 * bytes; the root for rooted kinds.  SIG: hash of a multi-type signature's
 * repeating unit (DTYPE CCS_DT_DERIVED, COUNT then in bytes), else 0.
 * Point-to-point kinds hash the kind only. */
CCS_HIDDEN uint64_t ccs_fingerprint_sig(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                        int root, uint32_t sig);
/* The same with SIG 0 (one basic type, as NCCL always has). */
CCS_HIDDEN uint64_t ccs_fingerprint(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                    int root);
/* Bytes of COUNT elements of DTYPE (COUNT itself for CCS_DT_DERIVED). */
CCS_HIDDEN uint64_t ccs_sig_bytes(uint64_t count, unsigned dtype);
/* For the kinds whose fingerprint has the signature's size only: the
 * basic-type pattern to compare beside it (a dtype, or SIG for a derived
 * one), 0 when there is none to compare (empty, MPI_PACKED, not known, or
 * a kind that needs none).  Two members of one collective whose keys are
 * both nonzero must have equal keys. */
CCS_HIDDEN uint32_t ccs_sig_key(unsigned kind, unsigned dtype, uint32_t sig);

/* ------------------------------------------------------------- record.c */

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
 * rec->fingerprint stays 0 in a ring: it is a pure function of fields
 * the record holds, so whoever reads a ring computes it with
 * ccs_record_fingerprint() (the trace writer fills it in the file).
 * Inline (below, after struct ccs_ring): a wrapper's call costs no call of
 * its own and its constant fields (kind, backend) fold. */
static inline struct ccs_record *ccs_call_begin(struct ccs_comm *c, const struct ccs_call *call, void *ret_addr);

/* Completes it: duration, error flag, publishes it to the ring. */
static inline void ccs_call_end(struct ccs_record *r, int failed);

/* The fingerprint of a record read from a ring. */
static inline uint64_t ccs_record_fingerprint(const struct ccs_record *r)
{
    return ccs_fingerprint_sig(r->kind, r->flags, r->count, r->dtype, r->op, r->root, r->sig);
}

/* Records a marker (step) in the calling thread's ring. */
CCS_HIDDEN void ccs_record_mark(unsigned kind, uint32_t step);
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

/* --------------------------------------------------------------- ring.c */

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
    struct ccs_ring *next;          /* list of all rings */
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

/* First ring in the list of all rings (walk with ->next). */
CCS_HIDDEN struct ccs_ring *ccs_ring_first(void);

/* Copies up to MAX records of R from C's cursor on into OUT, oldest first,
 * and moves the cursor past them.  Records the producer overwrote before
 * or while they were copied are left out and counted in C->lost.  Returns
 * how many records OUT holds: 0 only when R has nothing new for C.  Any
 * thread but R's producer; one thread at a time per cursor.  No lock, no
 * allocation, no system call (a signal handler may read). */
CCS_HIDDEN size_t ccs_ring_read(struct ccs_ring *r, struct ccs_ring_cursor *c, struct ccs_record *out, size_t max);

/* ccs_ring_read through the ring's own draining cursor (R->drain). */
CCS_HIDDEN size_t ccs_ring_drain(struct ccs_ring *r, struct ccs_record *out, size_t max);

/* Sets C at R's current head (what R holds now is not new to C), no loss. */
CCS_HIDDEN void ccs_ring_cursor_at_end(struct ccs_ring *r, struct ccs_ring_cursor *c);

/* Copies the last N published records of R, oldest first (flight recorder);
 * any of them overwritten while copied are left out.  Returns how many. */
CCS_HIDDEN size_t ccs_ring_last(struct ccs_ring *r, struct ccs_record *out, size_t n);

/* After fork: forget the parent's unconsumed records. */
CCS_HIDDEN void ccs_ring_reset_all(void);

/* -------------------------------------------------------------- clock.c */

/* Cheap monotonic ticks (TSC on x86-64, else CLOCK_MONOTONIC ns). */
static inline uint64_t ccs_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    extern uint64_t ccs_clock_mono_ns(void);
    return ccs_clock_mono_ns();
#endif
}
CCS_HIDDEN uint64_t ccs_clock_mono_ns(void);
/* Slow paths: CLOCK_MONOTONIC in ms; sleeps MS ms (resumed after signals). */
CCS_HIDDEN uint64_t ccs_clock_mono_ms(void);
CCS_HIDDEN void ccs_sleep_ms(long ms);
/* Ticks to ns since start (trace time base); calibrated as time passes. */
CCS_HIDDEN uint64_t ccs_ticks_to_ns(uint64_t ticks);
CCS_HIDDEN uint64_t ccs_ticks_delta_ns(uint64_t dticks);
CCS_HIDDEN void ccs_clock_init(void);
CCS_HIDDEN void ccs_clock_recalibrate(void);
CCS_HIDDEN uint64_t ccs_clock_start_mono_ns(void);
CCS_HIDDEN uint64_t ccs_clock_start_realtime_ns(void);

/* ----------------------------------------------------------- callsite.c */

/* Id (>= 1) of the call site at PC, unwinding and caching its stack on first
 * sight; 0 when the site table is full.  Lock-free after first sight. */
CCS_HIDDEN uint32_t ccs_site_id(void *pc);

#define CCS_MAX_STACK 32

/* Copies site ID's stack; returns 0, or -1 for an unknown id. */
CCS_HIDDEN int ccs_site_get(uint32_t id, void **pcs, uint32_t *depth);

/* Number of sites so far (ids are 1..n). */
CCS_HIDDEN uint32_t ccs_site_count(void);

/* Writes "func+0xoff (module+0xoff)" for PC into BUF (dladdr; diagnostic path). */
CCS_HIDDEN void ccs_site_symbolize(void *pc, char *buf, size_t n);

/* Writes "func+0xoff at file.c:LINE (module+0xoff)" for PC, through libdw
 * (loaded RTLD_LOCAL on first use), falling back to ccs_site_symbolize.
 * Diagnostic path only: the desync reports (symbolize_dw.c). */
CCS_HIDDEN void ccs_site_symbolize_full(void *pc, char *buf, size_t n);

/* Another process's call site as ccs_site_symbolize wrote it without a
 * symbol ("MODULE+0xOFFSET"): when this process has MODULE loaded too (the
 * same program on every rank), names it as ccs_site_symbolize_full does.
 * 0, or -1 when TEXT is not of that form or MODULE is not loaded here. */
CCS_HIDDEN int ccs_site_resymbolize(const char *text, char *out, size_t n);

/* ----------------------------------------------------------- pysite.c */

/* Annotated call sites (ccshim_annotate): the current one, process-wide;
 * the hot path copies it into rec->pysite with one relaxed load. */
#define CCS_PYSITE_TEXT 200 /* bytes of one site's text, NUL included */
extern CCS_HIDDEN _Atomic uint32_t ccs_pysite_current;

/* Id (>= 1) of TEXT, interned on first sight (slow path); 0 for NULL or
 * empty text or when the table is full (logged once). */
CCS_HIDDEN uint32_t ccs_pysite_intern(const char *text);

/* Text of ID (stable storage), or NULL for 0 or an unknown id.  Lock-free. */
CCS_HIDDEN const char *ccs_pysite_text(uint32_t id);

/* Number of sites so far (ids are 1..n). */
CCS_HIDDEN uint32_t ccs_pysite_count(void);

/* In the child after fork. */
CCS_HIDDEN void ccs_pysite_forked(void);

/* ------------------------------------------------------------- real.c */

/* The next definition of NAME after this library (dlsym RTLD_NEXT); failing
 * that, NAME in an already loaded library among SONAMES (NULL-terminated),
 * without loading anything.  NULL when none. */
CCS_HIDDEN void *ccs_real_symbol(const char *name, const char *const *sonames);

/* ------------------------------------------------- record.c (inline) */

/* The ring the hot path records into: the thread's ring once the features
 * have started (ccs_call_first sets it); NULL sends the call through
 * ccs_call_first.  One test on the hot path for "first call of this thread"
 * and "first call of this process", cleared in a forked child (whose first
 * call starts the child's features) by ccs_ring_reset_all. */
extern CCS_HIDDEN __thread struct ccs_ring *ccs_tls_call_ring __attribute__((tls_model("initial-exec")));

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
 * What it does not store, because a ring slot always holds 0 there: the
 * fingerprint (left to readers, see ccs_record_fingerprint; no one writes
 * a ring slot's fingerprint), and without ccs_timing the times (ccs_timing
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
    uint64_t seq = 0, comm = 0;
    if (c) {
        /* Load + store, not an atomic RMW: see struct ccs_comm. */
        enum ccs_counter which = ccs_kind_counter(kind);
        if (which == CCS_COUNTER_SEQ) {
            seq = atomic_load_explicit(&c->seq, memory_order_relaxed) + 1;
            atomic_store_explicit(&c->seq, seq, memory_order_relaxed);
        } else if (which == CCS_COUNTER_P2P) {
            seq = atomic_load_explicit(&c->p2p, memory_order_relaxed) + 1;
            atomic_store_explicit(&c->p2p, seq, memory_order_relaxed);
        }
        comm = c->id;
    }
    uint32_t step = (uint32_t)atomic_load_explicit(&ccs_step, memory_order_relaxed);
    uint32_t pysite = atomic_load_explicit(&ccs_pysite_current, memory_order_relaxed); /* ccshim_annotate */
    rec->seq = seq;
    rec->comm = comm;
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
    r->counts[kind]++;
    return rec;
}

/* Publishes REC: from here on the desync thread may copy it
 * (ccs_record_snapshot), so the fields still written (t_dur, flags, and
 * step for marks) are relaxed atomics: plain moves on x86-64 and aarch64,
 * and no data race. */
CCS_INLINE struct ccs_record *ccs_call_publish(struct ccs_ring *r, struct ccs_record *rec)
{
    atomic_store_explicit(&r->inflight, rec, memory_order_release);
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

/* The common case of ccs_call_begin_active and nothing else, with no call
 * out of line: the thread's ring ready, not inside a recorded call, the
 * call site the thread's last one.  Else NULL, having done nothing: the
 * caller then takes its general path (ccs_call_begin_active).  For a
 * wrapper that keeps its arguments in registers up to the real call.
 * *RING: the ring, for ccs_call_end_in. */
CCS_INLINE struct ccs_record *ccs_call_fast(struct ccs_comm *c, const struct ccs_call *call, void *ret_addr,
                                            struct ccs_ring **ring)
{
    struct ccs_ring *r = *ring = ccs_tls_call_ring;
    if (CCS_UNLIKELY(r == NULL || atomic_load_explicit(&r->inflight, memory_order_relaxed) != NULL ||
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
