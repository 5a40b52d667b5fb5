/*
 * coalesce.h - coalescing of redundant per-mini-batch all-reduces
 * (docs/coalescing.md has the proof and every option).
 *
 * A job that all-reduces the same gradient bucket N times per step, each
 * time re-reducing what it accumulated since, gets the same final result
 * when reductions 1..N-1 are answered locally "as if every rank held what
 * this rank holds" and only the N-th is performed for real.  The files:
 *
 *   coalesce_policy.c  CCSHIM_COALESCE* parsing, filters (op, dtype, size,
 *                      call site), the switch the wrappers test
 *   coalesce_table.c   the preallocated identity table and the decision
 *                      defer / real / pass for one call
 *   coalesce_defer.c   the local answer's arithmetic on the host
 *   coalesce_step.c    step markers: auto learning, agreement, verification
 *   coalesce_boundary.c  the end of a step: the ranks ended it alike before
 *                      anything is completed
 *   coalesce_complete.c  completing deferred reductions before a step
 *   coalesce_mpi.c     the MPI path (libccshim-mpi.so only)
 *   coalesce_nccl.c    the NCCL path (on the caller's stream, through NCCL)
 *
 * Hot path: a wrapper tests ccs_coalesce_on (one relaxed load of a global,
 * predicted not taken while coalescing is off) and only then calls in here.
 * Nothing in here allocates, locks or makes a system call per call.
 */
#ifndef CCS_COALESCE_H
#define CCS_COALESCE_H

#include "attributes.h"
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

/* Nonzero while coalescing may defer calls (policy every:N or auto, and not
 * switched off after a failed verification). */
extern CCS_HIDDEN atomic_int ccs_coalesce_on;

/* ------------------------------------------------------ coalesce_policy.c */

enum ccs_coalesce_mode { CCS_COALESCE_OFF = 0, CCS_COALESCE_EVERY = 1, CCS_COALESCE_AUTO = 2 };

struct ccs_coalesce_policy {
    int mode;          /* enum ccs_coalesce_mode */
    uint32_t every;    /* N of every:N (>= 2) */
};

/* Parses a CCSHIM_COALESCE value ("off", "every:N" with 2 <= N <= 1000000,
 * "auto").  Returns 0, or -1 with WHY (N bytes) naming what was expected. */
CCS_HIDDEN int ccs_coalesce_parse(const char *s, struct ccs_coalesce_policy *p, char *why, size_t n);

/* The policy in force (OFF until ccs_coalesce_init). */
CCS_HIDDEN const struct ccs_coalesce_policy *ccs_coalesce_policy(void);

/* Reads the settings and switches coalescing on when asked.  Idempotent. */
CCS_HIDDEN void ccs_coalesce_init(void);

/* Puts policy P in force and switches coalescing on or off to match (init,
 * and unit tests). */
CCS_HIDDEN void ccs_coalesce_configure(const struct ccs_coalesce_policy *p);

/* How many policies were put in force so far: the step module restarts
 * what it counts since the policy when this changes. */
CCS_HIDDEN uint32_t ccs_coalesce_policy_generation(void);

/* 1 when a reduction of OP over DTYPE with BYTES per rank may be coalesced
 * (SUM, AVG, host-scalar PreMulSum; floating point; >= MIN_BYTES). */
CCS_HIDDEN int ccs_coalesce_eligible(unsigned op, unsigned dtype, uint64_t bytes);

/* 1 when the call site at PC may be coalesced (CCSHIM_COALESCE_INCLUDE and
 * _EXCLUDE); decided once per call site, cached. */
CCS_HIDDEN int ccs_coalesce_site_ok(void *pc);

/* Switches coalescing off for the rest of the run (after a failed check
 * under CCSHIM_ON_DESYNC=warn).  Calls already deferred stay deferred. */
CCS_HIDDEN void ccs_coalesce_disable(const char *why);

/* Nonzero while a language helper avoids the per-mini-batch reductions
 * itself (ccshim_coalesce_helper): every call is real, nothing is learned. */
extern CCS_HIDDEN atomic_int ccs_coalesce_helper_on;
/* The helper's skipped mini-batches of the current step and its generation
 * (bumped by every ccshim_coalesce_helper_skipped). */
CCS_HIDDEN void ccs_coalesce_helper_step(uint32_t *gen, uint32_t *skipped);

/* 1 when CCSHIM_ON_DESYNC asks to end the job on a desync. */
CCS_HIDDEN int ccs_coalesce_abort_on_error(void);


/* ------------------------------------------------------- coalesce_table.c */

#define CCS_COALESCE_SLOTS 1024 /* identities; a power of two */
#define CCS_COALESCE_BACKENDS 3 /* enum ccs_backend: none, MPI, NCCL */

/* One reduction identity: (communicator, buffers, count, datatype, op). */
struct ccs_coal_id {
    _Atomic uint64_t hash;   /* 0: free; set last, with release, when ready */
    uint64_t comm;           /* communicator identity (same on every member) */
    uintptr_t handle;        /* local communicator handle */
    uintptr_t send, recv;    /* buffers (send = recv when in place) */
    uint64_t count;
    uint64_t scalar;         /* PreMulSum scalar bytes, 0 otherwise */
    uint8_t dtype, op, backend;
    int32_t size;            /* communicator size W */
    uint32_t ordinal;        /* order of first sight on its communicator: the
                                same on every member, unlike the addresses,
                                where no member's allocator reused a freed
                                bucket's address for a new one */
    uint32_t agreed_ord;     /* its place among the identities its members
                                agreed on (auto), else ORDINAL: what every
                                member orders and compares it by */
    uint32_t seen_step1;     /* 1 + the last step that called it (0: none) */
    uint32_t agree_waits;    /* auto: markers it waited for members to learn it */
    _Atomic uint32_t period; /* N: every N-th call is real; 0 = pass through */
    _Atomic uint32_t pending;/* deferred calls since the last real one */
    _Atomic uint32_t in_step;/* calls since the last step marker */
    uint32_t learned;        /* auto: calls in the last counted step, 0 = none yet */
    uint32_t learn_run;      /* auto: consecutive counted steps with LEARNED calls */
    uint32_t agree_failed;   /* auto: its communicator's members disagreed on it */
    uint32_t completions;    /* deferred calls completed before an optimizer step */
    uint32_t comm_first;     /* step of its communicator's first identity */
    _Atomic int32_t aux;     /* the backend's cached value (NCCL: device), -1 unknown */
    _Atomic uintptr_t stream;/* the backend's last queue for it (NCCL: stream) */
    _Atomic uint64_t deferred, real; /* totals */
    /* The torch helper's mode (ccshim_coalesce_helper): reductions it made
     * DDP skip, counted at this identity's first real call of each step. */
    uint32_t helper_gen;
    _Atomic uint64_t helper_avoided, helper_real;
};

/* What to do with one call. */
enum ccs_coalesce_action { CCS_COALESCE_PASS = 0, CCS_COALESCE_DEFER = 1, CCS_COALESCE_REAL = 2 };

/* The identity of a call, inserted on first sight (slow path, once).
 * NULL when the table is full (logged once; the call passes through). */
CCS_HIDDEN struct ccs_coal_id *ccs_coalesce_identity(uint64_t comm, uintptr_t handle, int size, const void *send,
                                                     const void *recv, uint64_t count, unsigned dtype, unsigned op,
                                                     uint64_t scalar, unsigned backend);

/* Counts one call of ID and says whether to defer it, perform it as the
 * coalesced real call, or pass it through untouched. */
CCS_HIDDEN enum ccs_coalesce_action ccs_coalesce_decide(struct ccs_coal_id *id);

/* The NCCL path remembers the stream of the last call on ID, so that a
 * completion before the optimizer step can be queued behind it. */
static inline void ccs_coalesce_note_stream(struct ccs_coal_id *id, const void *stream)
{
    atomic_store_explicit(&id->stream, (uintptr_t)stream, memory_order_relaxed);
}

/* Visits every identity (step markers, reports). */
CCS_HIDDEN void ccs_coalesce_foreach(void (*fn)(struct ccs_coal_id *, void *), void *arg);
/* ID's place among the identities of its communicator for which AMONG(X,
 * ID) holds, in order of first sight: how many of them came before it.
 * Not its ordinal, which counts every identity the communicator ever had:
 * where DDP's bucket rebuild gave one rank's new bucket the freed address
 * (that identity goes on) and another's a new one (a new identity, one
 * ordinal further), the ordinals differ while the buckets in use match. */
CCS_HIDDEN uint32_t ccs_coalesce_place(const struct ccs_coal_id *id,
                                       int (*among)(const struct ccs_coal_id *x, const struct ccs_coal_id *id));

/* Forgets every identity (unit tests only). */
CCS_HIDDEN void ccs_coalesce_table_reset(void);

/* "comm 0x.. buffer 0x.. 3152 x float64 sum" for logs. */
CCS_HIDDEN void ccs_coalesce_describe(const struct ccs_coal_id *id, char *buf, size_t n);

/* ------------------------------------------------------- coalesce_defer.c */

/* The local answer of a deferred reduction: OUT = FACTOR x IN for COUNT
 * elements of DTYPE (float32, float64, float16, bfloat16) on the host; IN
 * may equal OUT.  Returns 0, or -1 for another datatype. */
CCS_HIDDEN int ccs_coalesce_scale_host(void *out, const void *in, uint64_t count, unsigned dtype, double factor);

/* The factor of the local answer: SUM W, AVG 1, PreMulSum a x W (SCALAR
 * holds a's bytes in DTYPE).  Returns 0, or -1 when OP is none of those. */
CCS_HIDDEN int ccs_coalesce_factor(unsigned op, unsigned dtype, uint64_t scalar, int size, double *factor);

/* Conversions for the 16-bit datatypes (round to nearest even). */
CCS_HIDDEN float ccs_half_to_float(uint16_t h);
CCS_HIDDEN uint16_t ccs_float_to_half(float f);
CCS_HIDDEN float ccs_bf16_to_float(uint16_t h);
CCS_HIDDEN uint16_t ccs_float_to_bf16(float f);

/* -------------------------------------------------------- coalesce_step.c */

/* At every step marker: auto learning and agreement, verification that no
 * deferred call was left without its real one.  STEP is the step that
 * begins (the first mark passes 1). */
CCS_HIDDEN void ccs_coalesce_step_end(uint64_t step);


/* ------------------------------------------------------ coalesce_boundary.c */

/* At the end of a step, before deferred reductions are completed: when this
 * rank has some pending, waits until every member of their communicators
 * ended the step with the same calls (over desync's side channel; published
 * as a step boundary meanwhile).  Returns 0 when they did (or nothing is
 * pending, or there is no side channel to ask), -1 when they did not: a
 * verdict was reported and nothing may be completed.  Decided once per step. */
CCS_HIDDEN int ccs_coalesce_boundary(void);
/* The same at the end of STEP (a step marker: the counter moved on already). */
CCS_HIDDEN int ccs_coalesce_boundary_of(uint32_t step);

/* Deferred calls on this rank still waiting for their real reduction. */
CCS_HIDDEN uint64_t ccs_coalesce_pending_calls(void);

/* Completes every identity left with deferred calls before an optimizer
 * step reads the buffers (ccshim_coalesce_complete).  BY_CALLER: the caller
 * averaged the values itself; otherwise each buffer gets a real reduction
 * through the backend's completion service, in the same order on every
 * rank.  Returns the identities completed, or -1 when one could not be. */
CCS_HIDDEN int64_t ccs_coalesce_complete(int by_caller);

/* A backend's completion service: makes ID's receive buffer hold the mean
 * over the communicator's members of what each holds now (the reduction the
 * deferred calls stood for; docs/coalescing.md).  Collective over ID's
 * communicator.  Returns 0, or -1 (logged). */
typedef int (*ccs_coalesce_complete_fn)(struct ccs_coal_id *id);
extern CCS_HIDDEN ccs_coalesce_complete_fn ccs_coalesce_completer[CCS_COALESCE_BACKENDS];

/* At the end of the run (MPI_Finalize, exit): the same verification, and a
 * one-line account of deferred and real calls. */
CCS_HIDDEN void ccs_coalesce_finish(void);

/* Agreement for auto: each member of a communicator contributes a 64-bit
 * digest of the identities it would coalesce there; the service fills
 * AGREED[i] with 1 when every member of COMMS[i] gave DIGESTS[i].  Every
 * rank calls it at the same step marker.  Returns 0, or -1 when no service
 * is available (nothing is then coalesced). */
typedef int (*ccs_coalesce_agree_fn)(size_t n, const uint64_t *comms, const int32_t *sizes,
                                     const uint64_t *digests, uint8_t *agreed);
extern CCS_HIDDEN ccs_coalesce_agree_fn ccs_coalesce_agree;

#endif
