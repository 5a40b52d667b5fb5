/*
 * timing.c - how much time the collectives took, and how much of it was
 * waiting for other ranks (mpiP's "MPI time" and its imbalance): per step,
 * per rank and per call site, with the share of each process's run time,
 * and what coalescing saved.
 *
 * A rank's wait in a call is its time in it minus the fastest rank's time
 * in the same call (the same communicator and seq): what the fastest rank
 * spent is the call's own cost, the rest was spent waiting for the last
 * rank to arrive.  The fastest time of each call is known only once every
 * rank is read, so the reader keeps, per (comm, seq), the fastest time, the
 * sum and the number of ranks, and the wait of a (step, rank) is found
 * afterwards from the seqs it made there (audit_seqsum: consecutive, from
 * first_seq).  Held per call of one rank, not per record: capped like the
 * reference fingerprints (max_ref_fp per communicator, summed), beyond which
 * the wait is left out and said to be partial.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct seqtime {
    struct seqtime_key {
        uint64_t comm, seq;
    } k;
    uint64_t min_ns, sum_ns;
    uint32_t n, site;
};

struct sizetime {
    struct sizetime_key {
        uint64_t comm, bytes;
        uint32_t kind, pad;
    } k;
    uint64_t real_n, real_ns, def_n, def_ns;
};

void audit_time_init(struct audit *a)
{
    hmap_init(&a->seqtimes, sizeof(struct seqtime), sizeof(struct seqtime_key));
    hmap_init(&a->steptimes, sizeof(struct audit_steptime), sizeof(struct audit_steptime_key));
    hmap_init(&a->sizetimes, sizeof(struct sizetime), sizeof(struct sizetime_key));
}

void audit_time_free(struct audit *a)
{
    hmap_free(&a->seqtimes);
    hmap_free(&a->steptimes);
    hmap_free(&a->sizetimes);
}

static struct audit_steptime *steptime(struct audit *a, uint32_t step, int32_t rank)
{
    struct audit_steptime_key k;
    memset(&k, 0, sizeof k);
    k.step = step;
    k.rank = rank;
    return hmap_get(&a->steptimes, &k, 1);
}

void audit_time_record(struct audit *a, struct audit_file *f, const struct ccs_record *r, uint32_t step,
                       uint32_t site)
{
    if (ccs_kind_class(r->kind) != CCS_CLASS_COLL)
        return;
    if (r->t_start || r->t_dur)
        a->timed = 1;
    f->coll_ns += r->t_dur;
    struct audit_steptime *st = steptime(a, step, f->rank);
    if (st)
        st->time_ns += r->t_dur;
    if (site && site <= a->nsites)
        a->site_list[site - 1]->time_ns += r->t_dur;
    /* Coalescing: the deferred calls' own time, and the same calls' time
     * where they were made for real (not the helper's one reduction, which
     * carries a step's worth of buckets). */
    if (ccs_kind_reduces(r->kind) && !(r->flags & (CCS_F_HELPER | CCS_F_COALESCED))) {
        struct sizetime_key zk;
        memset(&zk, 0, sizeof zk);
        zk.comm = r->comm;
        zk.bytes = r->bytes;
        zk.kind = r->kind;
        struct sizetime *z = hmap_get(&a->sizetimes, &zk, 1);
        if (z && (r->flags & CCS_F_DEFERRED)) {
            z->def_n++;
            z->def_ns += r->t_dur;
        } else if (z) {
            z->real_n++;
            z->real_ns += r->t_dur;
        }
    }
    if (!r->comm || !r->seq || !ccs_kind_sequenced(r->kind))
        return;
    if (a->reading_inflight) {
        /* A call that never completed: every rank in it was waiting (for
         * one that never came), none is the call's own cost.  Left out of
         * the fastest times, its time is all wait (audit_time_finish). */
        if (site && site <= a->nsites)
            a->site_list[site - 1]->wait_ns += r->t_dur;
        return;
    }
    struct seqtime_key k;
    memset(&k, 0, sizeof k);
    k.comm = r->comm;
    k.seq = r->seq;
    struct seqtime *t = hmap_get(&a->seqtimes, &k, 0);
    if (!t) {
        if (a->seqtimes.n >= a->max_ref_fp * (a->ncomms ? a->ncomms : 1)) {
            a->time_capped = 1;
            return;
        }
        if (!(t = hmap_get(&a->seqtimes, &k, 1)))
            return;
        t->min_ns = r->t_dur;
        t->site = site;
    }
    if (r->t_dur < t->min_ns)
        t->min_ns = r->t_dur;
    t->sum_ns += r->t_dur;
    t->n++;
}

void audit_time_finish(struct audit *a)
{
    /* Per (step, rank): the fastest times of the seqs it made there. */
    for (size_t i = 0; i < a->seqsums.cap; i++) {
        const struct audit_seqsum *ss = hmap_slot(&a->seqsums, i);
        if (!ss || !ss->ncoll)
            continue;
        uint64_t fastest = 0;
        for (uint64_t q = ss->first_seq; q < ss->first_seq + ss->ncoll; q++) {
            struct seqtime_key k;
            memset(&k, 0, sizeof k);
            k.comm = ss->k.comm;
            k.seq = q;
            const struct seqtime *t = hmap_get(&a->seqtimes, &k, 0);
            if (t)
                fastest += t->min_ns;
        }
        struct audit_steptime *st = steptime(a, ss->k.step, ss->k.rank);
        if (!st)
            continue;
        /* The rank's own time on this comm in this step, sequenced calls:
         * from the cells (count, time) of its sequenced kinds. */
        uint64_t own = 0;
        for (unsigned kind = 0; kind < CCS_KIND_MAX; kind++) {
            if (!ccs_kind_sequenced(kind) || ccs_kind_class(kind) != CCS_CLASS_COLL)
                continue;
            for (uint32_t d = 0; d < 3; d++) {
                struct audit_cell_key ck;
                memset(&ck, 0, sizeof ck);
                ck.comm = ss->k.comm;
                ck.step = ss->k.step;
                ck.rank = ss->k.rank;
                ck.kind = kind;
                ck.deferred = d;
                const struct audit_cell *c = hmap_get(&a->cells, &ck, 0);
                if (c)
                    own += c->time_ns;
            }
        }
        uint64_t w = own > fastest ? own - fastest : 0;
        st->wait_ns += w;
    }
    for (size_t i = 0; i < a->steptimes.cap; i++) {
        const struct audit_steptime *st = hmap_slot(&a->steptimes, i);
        if (!st)
            continue;
        for (size_t j = 0; j < a->nfiles; j++)
            if (a->files[j].rank == st->k.rank && a->files[j].status != FILE_REFUSED) {
                a->files[j].wait_ns += st->wait_ns;
                break;
            }
    }
    /* Per site: every rank's time beyond the fastest, by the site of the
     * call (as the first rank read names it). */
    for (size_t i = 0; i < a->seqtimes.cap; i++) {
        const struct seqtime *t = hmap_slot(&a->seqtimes, i);
        if (t && t->site && t->site <= a->nsites)
            a->site_list[t->site - 1]->wait_ns += t->sum_ns - (uint64_t)t->n * t->min_ns;
    }
    /* Coalescing: a deferred call saved its real twin's mean time, less
     * its own; claimed only where the job made such real calls. */
    memset(&a->saved, 0, sizeof a->saved);
    uint64_t gained = 0, spent = 0; /* unsigned: a damaged file's times may be anything */
    for (size_t i = 0; i < a->sizetimes.cap; i++) {
        const struct sizetime *z = hmap_slot(&a->sizetimes, i);
        if (!z || !z->def_n)
            continue;
        a->saved.deferred += z->def_n;
        if (!z->real_n)
            continue;
        a->saved.measured += z->def_n;
        gained += z->def_n * (z->real_ns / z->real_n);
        spent += z->def_ns;
    }
    a->saved.saved_ns = gained > spent ? gained - spent : 0;
}

static int steptime_cmp(const void *x, const void *y)
{
    const struct audit_steptime *a = *(struct audit_steptime *const *)x, *b = *(struct audit_steptime *const *)y;
    if (a->k.step != b->k.step)
        return a->k.step < b->k.step ? -1 : 1;
    return a->k.rank < b->k.rank ? -1 : a->k.rank > b->k.rank;
}

struct audit_steptime **audit_sorted_steptimes(const struct audit *a, size_t *n)
{
    return (struct audit_steptime **)hmap_sorted(&a->steptimes, steptime_cmp, n);
}

const char *fmt_share(uint64_t part, uint64_t whole, char *buf, size_t n)
{
    if (!whole)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.1f%%", 100.0 * (double)part / (double)whole);
    return buf;
}
