/*
 * uncovered.h - communication this job sets up that ccshim does not
 * intercept (a torch.distributed process group on gloo): noted by a
 * language helper (ccshim_uncovered) or, for a PyTorch rank that recorded
 * no collective at all, guessed at exit; written into the trace's META
 * (uncovered=) and said once per job at exit, by rank 0.
 */
#ifndef CCS_UNCOVERED_H
#define CCS_UNCOVERED_H

#include "attributes.h"
#include <stddef.h>
#include <stdint.h>

/* The META line ("uncovered=WHAT\n") once something was noted, else NULL;
 * its length in *LEN.  Async-signal-safe (built when noted). */
CCS_HIDDEN const char *ccs_uncovered_meta(size_t *len);

/* At exit, before the last flush: a PyTorch rank of a job of several that
 * recorded COLLECTIVES == 0 and noted nothing is noted as "torch" (its
 * backend is one ccshim does not intercept, or it made no collective). */
CCS_HIDDEN void ccs_uncovered_at_exit(uint64_t collectives);

/* At exit, after the summary: rank 0 says what was not covered, once. */
CCS_HIDDEN void ccs_uncovered_say(uint64_t collectives);

#endif
