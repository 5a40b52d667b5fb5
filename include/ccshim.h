/*
 * ccshim.h - public API of libccshim, the collective-communication shim.
 *
 * libccshim is normally preloaded (LD_PRELOAD, or `ccshim-run -- PROG`) into an
 * unmodified job.  The functions below are the few things a job may call on
 * purpose.  A job must build and run the same whether or not the library is
 * preloaded, so every function here is declared weak for callers: when the
 * library is absent its address is NULL.  Use the CCSHIM_* macros, which
 * check for that and do nothing when the shim is not loaded:
 *
 *     #include <ccshim.h>
 *     ...
 *     optimizer_step();
 *     CCSHIM_STEP_MARK();          // no-op without the shim
 *
 * No link flag is needed for the macros (do not link -lccshim: the library
 * is meant to be preloaded, not linked).  Other languages can look the symbol
 * up at run time, e.g. Python: ctypes.CDLL(None).ccshim_step_mark().
 *
 * Copyright (c) 2026 the ccshim authors.  MIT licence, see COPYING.
 */
#ifndef CCSHIM_H
#define CCSHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CCSHIM_VERSION_MAJOR 0
#define CCSHIM_VERSION_MINOR 1
#define CCSHIM_VERSION_PATCH 0

#if defined(CCSHIM_BUILDING_LIBRARY)
#define CCSHIM_API __attribute__((visibility("default")))
#else
#define CCSHIM_API __attribute__((weak))
#endif

/*
 * Marks the end of one training step (call it right after the optimizer
 * step) and returns the number of the step that begins now (the first step
 * is 0; the first mark returns 1).  Every collective recorded afterwards
 * carries the new step number.  Thread-safe; costs one atomic increment.
 */
CCSHIM_API uint64_t ccshim_step_mark(void);

/* Returns the current step number (0 before the first mark). */
CCSHIM_API uint64_t ccshim_step_current(void);

/*
 * Says, once, that this process marks its steps (a language helper that
 * calls ccshim_step_mark at every optimizer step, as `ccshim-run --torch`
 * does): a rank still in its step 0 is then known to be in step 0, not one
 * that never marks steps, and desync detection can name another rank that
 * marked steps at the same collectives (docs/desync.md, "out of step").
 */
CCSHIM_API void ccshim_step_marking(void);

/*
 * Says that this thread enters (begin) or left (end) a collective that
 * ccshim does not intercept, WHAT naming it ("torch.distributed.all_gather
 * (gloo) at train.py:12 in main", at most 95 characters kept), GROUP_SIZE
 * its group's ranks (0: unknown).  Desync detection then knows the rank is
 * blocked in a collective, not computing: one blocked in it past the block
 * threshold while the others wait in intercepted ones is a DESYNC naming it
 * (docs/desync.md).  Calls nest; only the outermost is named.  The torch
 * helper (`ccshim-run --torch`) calls them around torch.distributed's
 * functions.
 */
CCSHIM_API void ccshim_foreign_begin(const char *what, int group_size);
/*
 * ccshim_foreign_begin for a torch.distributed collective, with what
 * desync detection compares across the members of its group and what the
 * trace records of it (docs/desync.md, "torch.distributed";
 * docs/trace-format.md): GROUP identifies the process group, derived
 * alike on every member (nonzero), this process its member GROUP_RANK of
 * GROUP_SIZE; SEQ counts the collectives the job issued on GROUP, this one
 * included (from 1; every member must count the same calls; 0 when not
 * counted); KIND and PREV_KIND name this call and the group's call at
 * SEQ - 1 as torch.distributed spells them ("all_reduce", "gather"; NULL
 * when none or unknown).  A KIND ccshim does not know, or a GROUP or SEQ of
 * 0, gives no identity: the call is then only named, as by
 * ccshim_foreign_begin.  Ended by ccshim_foreign_end, which records it
 * (the outermost call of the thread, when KIND is known).
 */
CCSHIM_API void ccshim_foreign_call(const char *what, uint64_t group, int group_rank, int group_size, uint64_t seq,
                                    const char *kind, const char *prev_kind);
/*
 * Records a torch.distributed collective KIND issued with async_op=True on
 * GROUP (as ccshim_foreign_call), which does not block here: counted in
 * the trace, flagged nonblocking; nothing for desync.
 */
CCSHIM_API void ccshim_foreign_issued(uint64_t group, int group_rank, int group_size, const char *kind);
CCSHIM_API void ccshim_foreign_end(void);

/* Returns the library version as "MAJOR.MINOR.PATCH". */
CCSHIM_API const char *ccshim_version(void);

/*
 * Flushes this process's trace to CCSHIM_TRACE_DIR now (it is also flushed
 * at MPI_Finalize, at exit and on fatal signals).  Returns 0 on success, -1
 * when tracing is off or the write failed (the log says why).
 */
CCSHIM_API int ccshim_flush(void);

/*
 * Returns the number of collectives this process issued since the last
 * ccshim_step_mark (all communicators).  A helper that marks steps from
 * several optimizers uses it to mark once per iteration.
 */
CCSHIM_API uint64_t ccshim_step_collectives(void);

/*
 * Coalescing (CCSHIM_COALESCE, docs/coalescing.md) answers most
 * per-mini-batch all-reduces locally and performs the last one of each step
 * for real.  When a step ends early (a short last batch, a bucket rebuilt
 * mid-step, an every:N that does not match the schedule), some buffers still
 * hold this rank's local value.  Call these right before the optimizer step:
 *
 *     if (CCSHIM_COALESCE_PENDING())
 *         CCSHIM_COALESCE_COMPLETE();   // every rank, at the same point
 *     optimizer_step();
 *     CCSHIM_STEP_MARK();
 *
 * ccshim_coalesce_pending returns the deferred all-reduces on this rank that
 * still wait for their real reduction (0 when none, and when coalescing is
 * off).  It is the same on every rank of a job whose ranks issue the same
 * reductions.
 *
 * ccshim_coalesce_complete(CCSHIM_COMPLETE_REDUCE) makes each such buffer
 * hold the true reduction, by one real all-reduce per buffer (sum over the
 * ranks of what each holds, divided by their number), on the buffer's own
 * communicator, in the same order on every rank: a collective, which every
 * rank must call at the same point.  With CCSHIM_COMPLETE_BY_CALLER the
 * caller has already replaced the values by their mean over the ranks (the
 * PyTorch helper does so on .grad) and ccshim only forgets them.  Returns
 * the number of buffers completed (0: nothing was pending), or -1 when one
 * could not be (logged; coalescing is then switched off).
 *
 * ccshim_coalesce_boundary makes sure first that every rank ended the step
 * alike: a rank with deferred calls pending waits until every member of
 * their communicators ended the same step with the same calls (over
 * ccshim's side channel).  It returns 0 when they did (or when nothing is
 * pending here), -1 when they did not: the ranks made different numbers of
 * calls in the step (one skipped a mini-batch), a DESYNC naming them was
 * reported (and under CCSHIM_ON_DESYNC=abort the job is being ended), and
 * nothing may be completed: no rank would meet the completion.
 * CCSHIM_COMPLETE_REDUCE calls it itself; a caller that averages its own
 * copies (CCSHIM_COMPLETE_BY_CALLER) calls it before averaging.  A step
 * marker with calls pending calls it too.
 *
 * Without the call, a step marker that finds deferred calls pending reports
 * them and ends the job (CCSHIM_ON_DESYNC=abort) or switches coalescing off
 * (warn): the optimizer step before that marker read local values.
 */
#define CCSHIM_COMPLETE_REDUCE 0
#define CCSHIM_COMPLETE_BY_CALLER 1
CCSHIM_API uint64_t ccshim_coalesce_pending(void);
CCSHIM_API int64_t ccshim_coalesce_complete(int how);
CCSHIM_API int ccshim_coalesce_boundary(void);

/*
 * For a language helper that coalesces by itself (the PyTorch helper skips
 * DDP's per-mini-batch synchronisation, as no_sync() does, once ccshim's
 * coalescing has learned and agreed the step's pattern):
 *
 * ccshim_coalesce_period returns N when coalescing is on and every
 * reduction identity it coalesces has N calls per step (every:N: N), else 0.
 * ccshim_coalesce_helper(1) says the helper now avoids the per-mini-batch
 * reductions itself: ccshim performs every reduction for real and stops
 * learning; ccshim_coalesce_helper(0) hands coalescing back (learned
 * again).  Returns 0, or -1 when coalescing is off.
 * ccshim_coalesce_helper_skipped(K), right before the reduction of a step
 * that carries K skipped mini-batches, counts them in the closing line.
 * ccshim_step_units(N): this rank made N units of work (backward passes)
 * in this step so far; desync names them in its verdicts.
 * ccshim_step_units_word(): the same count as a 32-bit word to store into
 * (from ctypes, say: a store, not a foreign call, per forward pass).
 * ccshim_step_boundary(N): as ccshim_coalesce_boundary, for a rank whose
 * gradients are left unreduced by the helper after N units: waits until
 * every rank ended the step with N; 0 when they did, -1 when they did not.
 * ccshim_coalesce_step_calls(): the all-reduces coalescing has seen since
 * the last step marker (0 when coalescing is off): a helper that made the
 * step's reductions itself learns whether ccshim saw them, and so whether
 * its side channel can compare the ranks' counts in later steps.
 */
CCSHIM_API uint32_t ccshim_coalesce_period(void);
CCSHIM_API int ccshim_coalesce_helper(int on);
CCSHIM_API void ccshim_coalesce_helper_skipped(uint32_t skipped);
CCSHIM_API void ccshim_step_units(uint32_t units);
CCSHIM_API uint32_t *ccshim_step_units_word(void);
CCSHIM_API int ccshim_step_boundary(uint32_t units);
CCSHIM_API uint64_t ccshim_coalesce_step_calls(void);

/*
 * ccshim_verdict(CLS, LINE): a language helper reached a verdict itself
 * (the PyTorch helper compares the first step's counts over the model's
 * process group, where ccshim's side channel knows no communicator yet) and
 * has logged LINE.  CLS is "MISMATCH", "DESYNC", "DEAD" or "STRAGGLER".
 * ccshim counts it as its own (ccshim_verdicts_total, docs/metrics.md), and
 * a rank waiting at its step boundary stops waiting.  0, or -1 (logged) for
 * another CLS.
 */
CCSHIM_API int ccshim_verdict(const char *cls, const char *line);

/*
 * ccshim_uncovered(WHAT): a language helper saw the job set up
 * communication that ccshim does not intercept (the PyTorch helper: a
 * torch.distributed process group on gloo, WHAT "gloo").  The trace
 * records it (META uncovered=WHAT, so ccshim-audit says why it found no
 * collectives instead of an all-clear) and rank 0 says it once at exit,
 * with what ccshim covers (MPI and NCCL).  The first WHAT noted is kept.
 * 0, or -1 (logged) when WHAT is not a name (letters, digits, '.', '_',
 * '-'; at most 32).
 */
CCSHIM_API int ccshim_uncovered(const char *what);

/*
 * Annotated call sites (docs/python-sites.md): a language helper names the
 * line of the program that causes the collectives issued from now on, e.g.
 * "train.py:318 in train_step"; ccshim records it beside the native call
 * site in the trace, shows it in ccshim-audit and names it in desync
 * verdicts.  `ccshim-run --torch` does this for PyTorch jobs.
 *
 * ccshim_annotate interns SITE (at most 199 bytes are kept) the first time
 * it is seen (a short spin lock; not for signal handlers) and makes it the
 * current site of the whole process: every collective recorded afterwards,
 * on any thread, carries it, until the next call.  It returns the site's id
 * (>= 1), or 0 when SITE is NULL or empty (the current site is then cleared)
 * or more than 4096 distinct sites were interned (logged once).
 *
 * ccshim_annotate_id makes an id returned earlier the current site again:
 * one relaxed atomic store, no string work.  0, or an id never returned,
 * clears it.  ccshim_annotate_current returns the current id, so a wrapper
 * can restore what was current before it:
 *
 *     static uint32_t id;
 *     uint32_t prev = ccshim_annotate_current();
 *     if (id) ccshim_annotate_id(id); else id = ccshim_annotate("solver.c:88 in step");
 *     ...collectives...
 *     ccshim_annotate_id(prev);
 *
 * The current site is process-wide on purpose: a framework may issue the
 * collectives on its own threads (PyTorch's autograd engine reduces DDP's
 * buckets there while the Python thread waits in backward()).
 */
CCSHIM_API uint32_t ccshim_annotate(const char *site);
CCSHIM_API void ccshim_annotate_id(uint32_t id);
CCSHIM_API uint32_t ccshim_annotate_current(void);

/*
 * The current site as a word in memory, for runtimes whose foreign calls
 * cost more than a store (Python's ctypes: ~0.2 us a call against ~0.05 us
 * to store through c_uint32.from_address).  Store into it only ids that
 * ccshim_annotate returned, or 0, as one aligned 32-bit store; the hot path
 * reads it with a relaxed atomic load.
 */
CCSHIM_API uint32_t *ccshim_annotate_word(void);

/* The same calls, safe whether or not the library is loaded. */
#define CCSHIM_STEP_MARK() ((void)(ccshim_step_mark ? ccshim_step_mark() : 0))
#define CCSHIM_FLUSH() (ccshim_flush ? ccshim_flush() : -1)
#define CCSHIM_LOADED() (ccshim_step_mark != 0)
#define CCSHIM_ANNOTATE(site) (ccshim_annotate ? ccshim_annotate(site) : 0u)
#define CCSHIM_ANNOTATE_ID(id) ((void)(ccshim_annotate_id ? ccshim_annotate_id(id) : (void)0))
#define CCSHIM_COALESCE_PENDING() (ccshim_coalesce_pending ? ccshim_coalesce_pending() : 0)
#define CCSHIM_COALESCE_BOUNDARY() (ccshim_coalesce_boundary ? ccshim_coalesce_boundary() : 0)
#define CCSHIM_COALESCE_COMPLETE()                                                                                 \
    (ccshim_coalesce_complete ? ccshim_coalesce_complete(CCSHIM_COMPLETE_REDUCE) : 0)

#ifdef __cplusplus
}
#endif

#endif /* CCSHIM_H */
