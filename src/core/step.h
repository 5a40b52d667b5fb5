/*
 * step.h - services: what the process's steps are doing, as others see
 * them.  Coalescing says here when a rank waits at its step boundary;
 * the core (runtime.c) keeps what the language helpers said (step units,
 * step marking, a collective ccshim does not intercept); desync publishes
 * all of it in the rank's status (desync_collect.c, desync.c).
 */
#ifndef CCS_STEP_H
#define CCS_STEP_H

#include "attributes.h"
#include <stddef.h>
#include <stdint.h>

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
/* A foreign call's identity (ccshim_foreign_call), all 0 when it has
 * none: its process group's id, alike on every member, the call's seq among
 * the collectives issued on that group, the call's kind and that of the
 * call at seq - 1 (enum ccs_torch_call; NONE when unknown). */
struct ccs_foreign_id {
    uint64_t group, seq;
    uint16_t kind, prev;
};
/* Seqs beyond this are not taken (desync refuses them from a peer). */
#define CCS_FOREIGN_MAX_SEQ (1ull << 48)
/* The collective ccshim does not intercept that this process is in
 * (ccshim_foreign_begin or _call), as of NOW_MS (monotonic): 1 with its
 * name in WHAT (N bytes), how long in *MS (>= 1), its group's size in *SIZE
 * (0 = unknown) and its identity in *ID; 0 when in none. */
#define CCS_FOREIGN_MAX 96
CCS_HIDDEN int ccs_foreign_now(uint64_t now_ms, char *what, size_t n, uint32_t *ms, uint32_t *size,
                               struct ccs_foreign_id *id);

#endif
