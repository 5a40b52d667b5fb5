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

/* ----------------------------------------------------------------- comm.c */

struct ccs_comm {
    _Atomic uintptr_t handle; /* local handle; 0 = free slot, 1 = tombstone */
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
    void *feature[2];         /* per-communicator state of later features */
};

#define CCS_COMM_SLOT_BITS 12
#define CCS_COMM_SLOTS (1u << CCS_COMM_SLOT_BITS)

/* Hot path: the live entry for HANDLE, or NULL.  Lock-free. */
CCS_HIDDEN struct ccs_comm *ccs_comm_lookup(int backend, uintptr_t handle);

/* Registers a new communicator (slow path, takes a mutex).  Returns the
 * entry, or NULL when the table is full (logged once; calls on it are then
 * forwarded unrecorded). */
CCS_HIDDEN struct ccs_comm *ccs_comm_register(int backend, uintptr_t handle, uint64_t id, uint64_t parent,
                                              int rank, int size, int how, int color);

/* Retires an entry (its handle may be reused for a new communicator). */
CCS_HIDDEN void ccs_comm_retire(struct ccs_comm *c);

/* Identity of the N-th child of PARENT (N counted per parent on every member
 * alike), of the given creating call and color/discriminator. */
CCS_HIDDEN uint64_t ccs_comm_child_id(struct ccs_comm *parent, int how, int64_t discriminator);

/* For a handle the shim never saw created: registers it with a local-only
 * identity (agreed = 0) and logs that once.  Slow path. */
CCS_HIDDEN struct ccs_comm *ccs_comm_adopt(int backend, uintptr_t handle, int rank, int size);

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

/* Fingerprint of the fields every member must agree on for KIND: the kind and
 * the nonblocking flag always; count unless the kind is a v-variant; dtype;
 * op for reductions; root for rooted kinds.  Point-to-point kinds hash the
 * kind only. */
CCS_HIDDEN uint64_t ccs_fingerprint(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                    int root);

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
    uint64_t count;      /* element count that must agree (see ccs_fingerprint) */
    uint64_t bytes;      /* payload bytes */
    const void *buf;     /* (receive) buffer */
};

/* Starts recording one call on C (NULL C: recorded with comm 0, unsequenced).
 * Returns the record to pass to ccs_call_end, or NULL when not recording.
 * The hot path leaves rec->fingerprint 0: it is a pure function of fields
 * the record holds, so whoever reads a ring computes it with
 * ccs_record_fingerprint() (the trace writer fills it in the file). */
CCS_HIDDEN struct ccs_record *ccs_call_begin(struct ccs_comm *c, const struct ccs_call *call, void *ret_addr);

/* Completes it: duration, error flag, publishes it to the ring. */
CCS_HIDDEN void ccs_call_end(struct ccs_record *r, int failed);

/* The fingerprint of a record read from a ring. */
static inline uint64_t ccs_record_fingerprint(const struct ccs_record *r)
{
    return ccs_fingerprint(r->kind, r->flags, r->count, r->dtype, r->op, r->root);
}

/* Records a marker (step) in the calling thread's ring. */
CCS_HIDDEN void ccs_record_mark(unsigned kind, uint32_t step);

/* --------------------------------------------------------------- ring.c */

/* Per-thread single-producer ring of records.  The writer thread (consumer)
 * drains [tail, head); the producer never waits: when it laps the consumer
 * the oldest records are lost and counted.  The last records stay readable
 * as the flight recorder. */
struct ccs_ring {
    _Atomic uint64_t head;          /* records published (producer) */
    _Atomic uint64_t tail;          /* records consumed (writer) */
    _Atomic uint64_t dropped;       /* records lost to overflow (writer) */
    _Atomic(struct ccs_record *) inflight; /* record of a call in progress */
    uint64_t mask;                  /* capacity - 1 */
    struct ccs_ring *next;          /* list of all rings */
    uint32_t index;                 /* small thread index */
    uint32_t pid;                   /* process that owns it (fork check) */
    uint64_t counts[CCS_KIND_MAX];  /* calls by kind (producer only) */
    uint64_t bytes[CCS_KIND_MAX];   /* bytes by kind (producer only) */
    struct ccs_record rec[];        /* capacity records */
};

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

/* Copies up to MAX records from [tail, head) of R into OUT and advances its
 * tail; counts records lost to overflow.  Consumer side only. */
CCS_HIDDEN size_t ccs_ring_drain(struct ccs_ring *r, struct ccs_record *out, size_t max);

/* Copies the last N published records of R, oldest first (flight recorder).
 * Returns how many. */
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

#endif
