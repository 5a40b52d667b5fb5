/*
 * desync_search.c - the coordinator's search for the first seq where a
 * communicator's members differ, by halving the interval between a seq
 * whose hashes agree and one where they differ (desync_search.h).
 */
#include "desync_search.h"
#include <string.h>

#define PROBE_EVERY_MS 100 /* a new probe of a communicator whose hashes agree */
#define PROBE_GIVE_UP_MS 1000

/* The search of COMM (of SIZE members), started when new in a free slot,
 * one not seen for 10 s, or else the one seen longest ago that is not
 * narrowing an interval (it only knows the seq its hashes agree through,
 * which a probe finds again); NULL when none is.  (Communicators take
 * turns in the statuses when a rank has more than CCS_DSX_MAXCOMM: the
 * first ones seen kept every slot before, and the others were never
 * searched.) */
static struct ccs_dsx_search *search_of(struct ccs_dsx_search *srch, uint64_t comm, int32_t size, uint64_t now)
{
    struct ccs_dsx_search *free_slot = NULL, *idle = NULL;
    for (int i = 0; i < CCS_DSX_NSEARCH; i++) {
        struct ccs_dsx_search *x = &srch[i];
        if (x->comm == comm)
            return x;
        if (!free_slot && (!x->comm || now - x->seen_ms > 10000))
            free_slot = x;
        if (x->comm && x->seen_ms != now && !x->probe && !x->hi && (!idle || x->seen_ms < idle->seen_ms))
            idle = x;
    }
    if (!free_slot)
        free_slot = idle;
    if (!free_slot || size < 2)
        return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->comm = comm;
    free_slot->size = size;
    free_slot->min_done = UINT64_MAX; /* as every pass starts it: a new search probes in its first pass */
    return free_slot;
}

/* The hash RANK's entry E reports through SEQ: 1 and *H, else 0. */
static int hash_at(const struct ccs_dsx_comm *e, uint64_t seq, uint64_t *h)
{
    if (e->done == seq) {
        *h = e->hash;
        return 1;
    }
    for (int p = 0; p < 2; p++)
        if (e->cp_seq[p] == seq) {
            *h = e->cp_hash[p];
            return 1;
        }
    return 0;
}

/* The first member's entry E: its last seq and checkpoints are the
 * candidates, each answered by it. */
static void candidates(struct ccs_dsx_search *x, const struct ccs_dsx_comm *e)
{
    uint64_t seq[3] = {e->done, e->cp_seq[0], e->cp_seq[1]}, hash[3] = {e->hash, e->cp_hash[0], e->cp_hash[1]};
    for (int k = 0; k < 3; k++) {
        int dup = !seq[k];
        for (int j = 0; j < x->ncand; j++)
            dup |= x->cand[j] == seq[k];
        if (dup)
            continue;
        x->cand[x->ncand] = seq[k];
        x->cand_hash[x->ncand] = hash[k];
        x->cand_n[x->ncand] = 1;
        x->cand_differ[x->ncand++] = 0;
    }
}

/* Another member's entry E answers the candidates it holds. */
static void answer_candidates(struct ccs_dsx_search *x, const struct ccs_dsx_comm *e)
{
    for (int k = 0; k < x->ncand; k++) {
        uint64_t h;
        if (hash_at(e, x->cand[k], &h)) {
            x->cand_n[k]++;
            x->cand_differ[k] |= h != x->cand_hash[k];
        }
    }
}

/* A seq every member's status answers for moves the search without a
 * probe: hashes that agree there raise LO, hashes that differ lower HI.
 * So members that run (or finished) in step, their last seq or a
 * checkpoint in common, are checked in every pass without reading their
 * rings back, and a difference there is halved at once.  A probe out
 * below LO is moot then (one the rings no longer held would wait out
 * PROBE_GIVE_UP_MS: HPCC's exit waited 0.75 s for one). */
static void settle_from_statuses(struct ccs_dsx_search *x)
{
    int halving = x->hi != 0; /* a probe out now halves an interval; else it is a look */
    for (int k = 0; k < x->ncand; k++) {
        uint64_t c = x->cand[k];
        if (x->cand_n[k] != x->size || c <= x->lo || (x->hi && c >= x->hi))
            continue;
        if (x->cand_differ[k]) {
            x->hi = c;
            x->want_ms = 0; /* a new interval: its records are asked for at once */
        } else {
            x->lo = c;
        }
    }
    /* A look out when the hashes are found to differ is dropped too: the
     * halving starts at once.  (At a high call rate the members' rings no
     * longer hold the seq of a look by the time it arrives, and it was
     * waited out, PROBE_GIVE_UP_MS, before the halving began.) */
    if (x->probe && (x->probe <= x->lo || (x->hi && (x->probe >= x->hi || !halving))))
        x->probe = 0;
}

/* One member's status ST and its entry E for the communicator of X (DEAD:
 * its heartbeat stopped), counted into X's pass. */
static void note_member(struct ccs_dsx_search *x, const struct ccs_dsx_status *st, const struct ccs_dsx_comm *e,
                        uint8_t dead, uint64_t now)
{
    x->seen_ms = now;
    x->n++;
    /* A member that freed the communicator, finalizes or exits
     * still answers: it lingers until the coordinator says BYE
     * (desync_exit.c, exit_linger). */
    x->alive += st->life != CCS_DSX_DIED && !dead;
    x->finished += e->state == CCS_DSX_FREED || st->life == CCS_DSX_FINALIZING || st->life == CCS_DSX_EXITED;
    x->min_done = e->done < x->min_done ? e->done : x->min_done;
    if (x->n == 1)
        candidates(x, e);
    else
        answer_candidates(x, e);
    uint64_t h;
    if (x->probe && hash_at(e, x->probe, &h)) {
        if (x->answered++ == 0)
            x->hash = h;
        else
            x->differ |= h != x->hash;
    }
}

/* The search X after the pass gathered its members (seen in this pass, at
 * NOW): the answer to its probe taken, then its next probe, or the records
 * of the interval it narrowed down to asked for. */
static void search_step(struct ccs_dsx_search *x, uint64_t now, const struct ccs_dsx_search_out *out)
{
    if (x->n != x->size || x->alive != x->size) {
        x->probe = 0; /* members gone or unknown: the rules judge */
        return;
    }
    if (x->probe && (x->differ || x->answered == x->size)) {
        if (x->differ)
            x->hi = x->probe;
        else
            x->lo = x->probe;
        x->want_ms = 0; /* a new interval: its records are asked for at once */
        x->probe = 0;
    } else if (x->probe && now - x->probe_ms > PROBE_GIVE_UP_MS) {
        x->probe = 0;
    }
    settle_from_statuses(x);
    if (x->probe)
        return;
    if (x->hi && x->hi <= x->lo)
        x->hi = 0; /* (stale) */
    uint64_t p = 0, narrow = 0;
    if (x->hi && x->hi - x->lo <= CCS_DSX_HIST) {
        /* Found within a history's length: the records of (lo, lo + 32],
         * asked for at once, then again every 300 ms until the rules
         * judge.  (The interval of 300 ms once ran from the last probe,
         * so the first request waited 300 ms after the answer that
         * narrowed the search: on two hosts most of a MISMATCH's
         * half-second.) */
        if (!x->want_ms || now - x->want_ms >= 300) {
            out->want(x->comm, x->lo + CCS_DSX_HIST / 2, out->arg);
            x->want_ms = now;
        }
        return;
    } else if (x->hi) {
        p = x->lo + (x->hi - x->lo) / 2;
        narrow = CCS_DSX_NARROW_BIT;
    } else if ((now - x->last_ms >= PROBE_EVERY_MS || x->finished == x->size) && x->min_done > x->lo &&
               x->min_done != UINT64_MAX) {
        /* (every member finished: their last seqs are checked at once,
         * while they linger, not up to PROBE_EVERY_MS later) */
        p = x->min_done;
    }
    if (p) {
        x->probe = p;
        x->probe_ms = x->last_ms = now;
        out->probe(x->comm, p | narrow, out->arg);
    }
}

void ccs_dsx_search_pass(struct ccs_dsx_search srch[CCS_DSX_NSEARCH], int32_t wsize,
                         const struct ccs_dsx_status *const *sts, const uint8_t *dead,
                         const struct ccs_dsx_seen *seen, uint64_t now, const struct ccs_dsx_search_out *out)
{
    for (int i = 0; i < CCS_DSX_NSEARCH; i++) {
        struct ccs_dsx_search *x = &srch[i];
        x->n = x->answered = x->alive = x->finished = 0;
        x->min_done = UINT64_MAX;
        x->differ = 0;
        x->ncand = 0;
    }
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_status *st = sts[r];
        if (!st)
            continue;
        for (uint32_t q = 0; q < st->ncomm && q < CCS_DSX_MAXCOMM; q++) {
            const struct ccs_dsx_comm *e = &st->comm[q];
            if (e->size < 2 || ccs_dsx_seen_has(seen, CCS_DSX_MISMATCH, e->id, 0))
                continue;
            struct ccs_dsx_search *x = search_of(srch, e->id, e->size, now);
            if (x && x->size == e->size)
                note_member(x, st, e, dead[r], now);
        }
    }
    for (int i = 0; i < CCS_DSX_NSEARCH; i++)
        if (srch[i].comm && srch[i].seen_ms == now)
            search_step(&srch[i], now, out);
}

int ccs_dsx_search_settled(const struct ccs_dsx_search srch[CCS_DSX_NSEARCH], uint64_t pass_ms)
{
    for (int i = 0; i < CCS_DSX_NSEARCH; i++) {
        const struct ccs_dsx_search *x = &srch[i];
        /* Out of the last pass (no longer in view, or judged: a MISMATCH
         * is left to the rules), or members gone: nothing to wait for. */
        if (!x->comm || x->seen_ms != pass_ms || x->n != x->size || x->alive != x->size)
            continue;
        if (x->probe || x->hi || (x->min_done != UINT64_MAX && x->min_done > x->lo))
            return 0;
    }
    return 1;
}
