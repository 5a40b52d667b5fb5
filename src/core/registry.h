/*
 * registry.h - what the core offers the features built on it (the trace
 * writer, desync detection, coalescing) and what the backends offer them,
 * so that the core names no feature and no feature names another.
 *
 * Hooks: a feature registers one table of functions (any may be NULL) from
 * its constructor, or when a backend starts it; the core calls them at the
 * moments it owns: the first recorded call of the process, each step
 * marker, the end of the run, a flush, and fork; desync passes each verdict
 * on to them.  Services: one function each, registered by whoever can
 * provide it (desync's side channel agrees on values across ranks; the MPI
 * and NCCL backends can end the job) and used by whoever needs it.
 */
#ifndef CCS_REGISTRY_H
#define CCS_REGISTRY_H

#include "attributes.h"
#include "ccs_kinds.h"
#include "comm.h"
#include <stdatomic.h>
#include <stdint.h>

struct ccs_feature {
    const char *name;
    /* The first recorded call of this process (and of a forked child). */
    void (*first_call)(void);
    /* A step marker: STEP begins (the first marker passes 1). */
    void (*step)(uint64_t step);
    /* The run ends (enum ccs_end_reason): MPI_Finalize, then (again) the
     * process's exit; not called for CCS_END_SIGNAL.  In the reverse order of
     * registration, as atexit would: the features a backend starts while the
     * job runs (desync detection, NCCL completion tracking) finish before
     * those registered from constructors (coalescing), and every finish hook
     * runs before the features flush and the summary is written
     * (ccs_runtime_finish). */
    void (*finish)(int reason);
    /* Write what is buffered; REASON < 0: a periodic or ccshim_flush flush.
     * Must be async-signal-safe when REASON is CCS_END_SIGNAL.  Returns 0,
     * or -1 (nothing to flush, or it failed). */
    int (*flush)(int reason, int signo);
    /* In the child after fork (the core's own pthread_atfork handler, after
     * the core has reset its rings and identity), in registration order. */
    void (*fork_child)(void);
    /* Before fatal-signal handlers are installed (and again when the
     * identity changes): prepare what flush(CCS_END_SIGNAL) needs, so that
     * it can stay async-signal-safe. */
    void (*prepare_signal)(void);
    /* Path of the trace file, or NULL (the exit summary names it). */
    const char *(*trace_path)(void);
    /* A verdict this process learned of, once each: CLS its class as the
     * logs name it ("MISMATCH", "DESYNC", "STRAGGLER", "DEAD"), on
     * communicator COMM at sequence number SEQ, LINE what follows the class
     * on the log line.  Called from desync's thread, which it must not hold
     * up (no blocking, no I/O; count, copy, signal). */
    void (*verdict)(const char *cls, uint64_t comm, uint64_t seq, const char *line);
};

/* Registers F (kept by pointer: static storage).  Returns 0, or -1 when the
 * table is full (a programming error, logged). */
CCS_HIDDEN int ccs_feature_register(const struct ccs_feature *f);

/* Nonzero once the first recorded call ran the first_call hooks; the hot
 * path tests it with one relaxed load. */
extern CCS_HIDDEN atomic_int ccs_features_started;

/* The core's side: each calls the hook of every registered feature. */
CCS_HIDDEN void ccs_features_first_call(void);
CCS_HIDDEN void ccs_features_step(uint64_t step);
CCS_HIDDEN void ccs_features_finish(int reason);
/* Returns 0 when at least one feature flushed, else -1. */
CCS_HIDDEN int ccs_features_flush(int reason, int signo);
CCS_HIDDEN void ccs_features_fork_child(void);
CCS_HIDDEN void ccs_features_prepare_signal(void);
CCS_HIDDEN const char *ccs_features_trace_path(void);
/* For the feature that reaches verdicts (desync): each feature's verdict hook. */
CCS_HIDDEN void ccs_features_verdict(const char *cls, uint64_t comm, uint64_t seq, const char *line);

/* ------------------------------------------------------------ agreement */

/* Agreement on one 64-bit value among the members of communicator C: each
 * member passes MINE under the same KEY; fills the largest and smallest
 * value contributed.  Returns 0, or -1 when it could not complete within
 * TIMEOUT_MS (or no service).  Slow path: step markers only. */
typedef int (*ccs_agree_fn)(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                            uint64_t *agreed_min, int timeout_ms);

/* Registers the agreement service (NULL withdraws it). */
CCS_HIDDEN void ccs_agree_register(ccs_agree_fn fn);
/* 1 when a service is registered and running. */
CCS_HIDDEN int ccs_agree_available(void);
CCS_HIDDEN int ccs_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                             uint64_t *agreed_min, int timeout_ms);

/* --------------------------------------------------------- step boundary */

/* A rank that must complete deferred reductions (coalescing) first waits,
 * at the end of its step, until every member of the communicators concerned
 * has ended the same step with the same calls.  While it waits it says so
 * here; desync publishes it (docs/desync.md, "a rank at its step boundary"),
 * so that a rank blocked in a collective that the waiting rank will never
 * issue is a DESYNC, not a straggler.  At most CCS_BOUNDARY_COMMS
 * communicators; single writer (the thread at the boundary), any reader. */
#define CCS_BOUNDARY_COMMS 8
CCS_HIDDEN void ccs_boundary_enter(uint32_t step, const uint64_t *comms, uint32_t n);
CCS_HIDDEN void ccs_boundary_leave(void);
/* The step waited at the end of, plus one (0: not at a boundary), and the
 * communicators into COMMS (CCS_BOUNDARY_COMMS entries), their number into *N. */
CCS_HIDDEN uint32_t ccs_boundary_get(uint64_t *comms, uint32_t *n);

/* The units of work (backward passes) a language helper counted in this
 * step (ccshim_step_units) and in the last one; 0 when none counts them. */
CCS_HIDDEN void ccs_step_units(uint32_t *now, uint32_t *prev);
/* 1 when this process marks its steps: it marked one, or a language helper
 * said it will (ccshim_step_marking). */
CCS_HIDDEN int ccs_step_marking(void);
/* The collective ccshim does not intercept that this process is in
 * (ccshim_foreign_begin), as of NOW_MS (monotonic): 1 with its name in WHAT
 * (N bytes), how long in *MS (>= 1) and its group's size in *SIZE (0 =
 * unknown); 0 when in none. */
#define CCS_FOREIGN_MAX 96
CCS_HIDDEN int ccs_foreign_now(uint64_t now_ms, char *what, size_t n, uint32_t *ms, uint32_t *size);

/* ------------------------------------------------------------- verdicts */

/* The verdict classes' names (ccs_kinds.h's CCS_VERDICT_LIST, in its
 * order), as the logs and the verdict hook name them. */
extern CCS_HIDDEN const char *const ccs_verdict_class[CCS_VERDICT_CLASSES];

/* Desync counts here every verdict it reports whose class's policy is STOP
 * (CCS_VERDICT_LIST); a rank waiting at its step boundary stops waiting
 * when the count moves (the job is desynchronised: nothing it waits for
 * comes). */
CCS_HIDDEN void ccs_verdict_note(void);
CCS_HIDDEN uint64_t ccs_verdicts_seen(void);

/* The detector notes here the end of each of its passes over the ranks'
 * statuses; others read when it last did (monotonic ms, 0: never), e.g. to
 * show that detection is alive.  Relaxed atomics. */
CCS_HIDDEN void ccs_detector_pass_note(void);
CCS_HIDDEN uint64_t ccs_detector_last_pass_ms(void);

/* ---------------------------------------------------------------- abort */

/* A way to end the whole job: FN(ARG, COMM) aborts the job (COMM: the
 * communicator concerned, 0 when none) and returns only on failure, with
 * -1, or with 1 when this process can no longer take that way (MPI is
 * finalized here: MPI_Abort is erroneous after MPI_Finalize; the ranks
 * still running see the same verdict and end the job).  Backends register theirs (MPI_Abort, ncclCommAbort); up to 4.
 * JOB_WIDE: one process's call ends every process of the job (MPI_Abort);
 * 0 where each process must end its own part (ncclCommAbort is local). */
CCS_HIDDEN int ccs_abort_register(int (*fn)(void *arg, uint64_t comm), void *arg, int job_wide);
/* 1 when a registered way that ccs_abort_job may take ends every process of
 * the job from one (the first that succeeds for the verdict's communicator
 * is known only by trying: in a process with NCCL and MPI, NCCL's abort
 * fails for an MPI communicator and MPI_Abort ends the job).  The caller
 * then gives the reporting rank its time before any abort. */
CCS_HIDDEN int ccs_abort_job_wide(void);
/* Tries each registered way in turn; returns 0 when one did, 1 when none
 * did and one is no longer open to this process (above), -1 when none ended
 * the job (the caller then ends this process). */
CCS_HIDDEN int ccs_abort_job(uint64_t comm);

#endif
