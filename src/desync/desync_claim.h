/*
 * desync_claim.h - who of a host logs a verdict (issue 45: one line per
 * host per verdict, one full report per job).  Each host's shared segment
 * holds a table of claims, one 64-bit word per verdict: the verdict's key
 * and the world rank that logs it there, set by one compare-and-swap, so
 * that every rank of the host that sees the verdict, in whatever order and
 * from whatever path (its own rules, a post of another local rank, the
 * coordinator's verdict posted by the leader), finds the same owner.
 * Pure: no I/O; the scale simulation and the unit tests use it as the
 * runtime does.
 */
#ifndef CCS_DESYNC_CLAIM_H
#define CCS_DESYNC_CLAIM_H

#include "attributes.h"
#include "desync_proto.h"
#include <stdatomic.h>
#include <stdint.h>

/* Claims a host keeps: distinct verdicts in one job on one host.  Once
 * full, a verdict is logged by the rank its own view picks (the old rule:
 * a race may then give two lines). */
#define CCS_DSX_NCLAIM 256

struct ccs_dsx_claims {
    _Atomic uint64_t w[CCS_DSX_NCLAIM]; /* key << 24 | (owner + 1); 0 free */
    _Atomic uint8_t seen[CCS_DSX_NCLAIM]; /* 1: the owner has the verdict (ccs_dsx_claim_seen) */
};

/* The most world ranks an owner can name (24 bits). */
#define CCS_DSX_CLAIM_MAXRANK ((1 << 24) - 2)

/* A verdict's key: its class, communicator and, for a class judged once
 * per seq, its seq (ccs_verdict_once), as the "reported" set has it;
 * 40 bits, never 0. */
CCS_HIDDEN uint64_t ccs_dsx_claim_key(const struct ccs_dsx_verdict *v);

/* The rank that logs KEY on this host: the owner already claimed, or
 * PROPOSED, claimed now (then *WON is 1); *SLOT (may be NULL): the claim's
 * place.  -1 when the table is full or PROPOSED is out of range (the
 * caller falls back on its own view).  Lock-free and safe between
 * processes: claims are never removed, and every claimer of one key
 * probes the same places in the same order, so two of them meet at the
 * first free one and one compare-and-swap decides. */
CCS_HIDDEN int32_t ccs_dsx_claim(struct ccs_dsx_claims *t, uint64_t key, int32_t proposed, int *won,
                                 unsigned *slot);

/* The owner of the claim at SLOT has the verdict (its own rules judged it,
 * or it read it in the segment): its maker need not post it.  And whether
 * it has. */
CCS_HIDDEN void ccs_dsx_claim_seen(struct ccs_dsx_claims *t, unsigned slot);
CCS_HIDDEN int ccs_dsx_claim_was_seen(struct ccs_dsx_claims *t, unsigned slot);

/* The rank a rank proposes to log verdict V on its host.  For the
 * coordinator's verdict (COORD 1) the full report is rank 0's (the
 * coordinator's process): on rank 0's host (RANK0_HERE) rank 0 logs the
 * line with its report, elsewhere LOWEST.  For a verdict of the host's own
 * rules, LOWEST, which then writes the full report too.  LOWEST: the
 * lowest rank of the host still running as the proposer sees it (its own
 * rank when it sees none). */
CCS_HIDDEN int32_t ccs_dsx_claim_propose(int coord, int rank0_here, int32_t lowest);

#endif
