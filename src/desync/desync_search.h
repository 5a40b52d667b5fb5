/*
 * desync_search.h - the coordinator's search for the first seq where a
 * communicator's members differ (docs/desync.md, "Finding the seq"):
 * probes ask every member for its running hash through one seq (read back
 * from its rings while they hold it); the hashes agree through LO and
 * differ at HI; halving the interval ends with the records of
 * (LO, LO + 32], which the rules compare.  Pure logic over the statuses the
 * coordinator holds: it sends the probes and the requests for records.
 */
#ifndef CCS_DESYNC_SEARCH_H
#define CCS_DESYNC_SEARCH_H

#include "desync_proto.h"
#include "desync_rules.h"
#include <stdint.h>

#define CCS_DSX_NSEARCH 8        /* communicators searched at once */
#define CCS_DSX_PROBE_TICK_MS 20 /* answers are looked at this often */

/* One communicator's search. */
struct ccs_dsx_search {
    uint64_t comm, lo, hi, probe, probe_ms, last_ms, seen_ms;
    uint64_t want_ms; /* when the records were last asked for (0: not yet) */
    int32_t size;
    /* this pass */
    int32_t n, answered, alive, finished;
    uint64_t min_done, hash;
    int differ;
    /* Seqs the statuses answer for without a probe: the first member's
     * last seq and checkpoints, with its hashes there; how many members
     * answer each, and whether one of them differs. */
    uint64_t cand[3], cand_hash[3];
    int32_t ncand, cand_n[3];
    int cand_differ[3];
};

struct ccs_dsx_search_out {
    void (*probe)(uint64_t comm, uint64_t seq, void *arg); /* every member: your hash through SEQ
                                                              (| CCS_DSX_NARROW_BIT while narrowing) */
    void (*want)(uint64_t comm, uint64_t seq, void *arg);  /* every member: your records around SEQ */
    void *arg;
};

/* One pass over every communicator in the statuses ST[0..WSIZE) (NULL:
 * unknown; DEAD[r] nonzero: gone) at NOW (ms): reads the answers to the
 * probes, narrows each search, and asks for the next probe or the records
 * through OUT.  Communicators with a MISMATCH in SEEN are left alone. */
void ccs_dsx_search_pass(struct ccs_dsx_search s[CCS_DSX_NSEARCH], int32_t wsize,
                         const struct ccs_dsx_status *const *st, const uint8_t *dead,
                         const struct ccs_dsx_seen *seen, uint64_t now, const struct ccs_dsx_search_out *out);

/* 1 when no search of the pass at PASS_MS is under way: every
 * communicator whose members are all there agrees through the last seq
 * they all completed, or is judged.  The coordinator holds its BYE at the
 * job's end until then, so the ranks (lingering until BYE) still answer. */
int ccs_dsx_search_settled(const struct ccs_dsx_search s[CCS_DSX_NSEARCH], uint64_t pass_ms);

/* How long a rank lingers at its exit for the coordinator's BYE, and how
 * long the coordinator holds BYE, once every rank finished, for a search
 * to settle (docs/desync.md, "The end of a job"). */
#define CCS_DSX_EXIT_SEARCH_MS 1500

#endif
