/*
 * registry.h - the hooks of the features built on the core (the trace
 * writer, desync detection, coalescing, live metrics, NCCL completion
 * tracking), so that the core names no feature and no feature names
 * another.
 *
 * A feature registers one table of functions (any may be NULL) from its
 * constructor, or when a backend starts it; the core calls them at the
 * moments it owns: the first recorded call of the process, each step
 * marker, the end of the run, a flush, and fork; desync passes each verdict
 * on to them.  A feature answers questions about its own facts through its
 * query hook, so that another reads them (metrics: the detector's last
 * pass) without a function in the core for each.
 *
 * The services the core offers beside the hooks, a header each, named by
 * concern: agree.h (agreement across ranks), step.h (a rank at its step
 * boundary, its step units and marking, a foreign collective), verdicts.h
 * (the verdict classes and the count of STOP verdicts), abort.h (ways to end
 * the job).
 */
#ifndef CCS_REGISTRY_H
#define CCS_REGISTRY_H

#include "attributes.h"
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
    /* A fact of this feature another one asks for, named "feature.fact"
     * (e.g. "desync.last_pass_ms"): fills *VALUE and returns 0, or returns
     * -1 when FACT is not this feature's.  Called
     * from any thread, the asker's (metrics' writer): relaxed loads only, no
     * lock, no I/O.  The facts a feature answers are listed where it
     * defines its table. */
    int (*query)(const char *fact, uint64_t *value);
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

/* For a feature that reads another's fact: the first registered feature
 * that answers FACT fills *VALUE; returns 0, or -1 when none does (*VALUE
 * untouched: e.g. the feature is not in this library, or not started). */
CCS_HIDDEN int ccs_features_query(const char *fact, uint64_t *value);

#endif
