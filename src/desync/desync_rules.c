/*
 * desync_rules.c - one pass of the detection rules (docs/desync.md) over a
 * view of all ranks: the members of each communicator grouped, then the
 * step-boundary, MISMATCH, blocked and foreign-call rules (desync_rule_*.c)
 * applied in turn, their helpers below them (desync_rules_ctx.c).  Run by
 * every rank over shared memory and by the coordinator over the whole job,
 * every period; allocation is fine here.
 */
#include "desync_rules.h"
#include "desync_rules_ctx.h"
#include <stdint.h>
#include <stdlib.h>

static int cmp_ent(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->crank != y->crank)
        return x->crank < y->crank ? -1 : 1;
    return x->wrank < y->wrank ? -1 : x->wrank > y->wrank;
}

int ccs_dsx_rules_run(const struct ccs_dsx_view *view, const struct ccs_dsx_thresholds *t,
                      struct ccs_dsx_seen *seen, const struct ccs_dsx_sink *sink)
{
    struct ctx c = {.v = view, .t = t, .seen = seen, .sink = sink};
    int32_t wsize = view->wsize;
    int rc = -1;
    for (int32_t r = 0; r < wsize; r++)
        if (view->st[r])
            c.nents += view->st[r]->ncomm;
    c.ents = malloc((c.nents + 1) * sizeof *c.ents);
    c.g = malloc((c.nents + 1) * sizeof *c.g);
    c.term = calloc((size_t)wsize + 1, 1);
    c.stuck = calloc((size_t)wsize + 1, 1);
    c.be = calloc((size_t)wsize + 1, sizeof *c.be);
    if (!c.ents || !c.g || !c.term || !c.stuck || !c.be)
        goto out;
    size_t k = 0;
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_status *st = view->st[r];
        if (!st)
            continue;
        c.term[r] = st->life != CCS_DSX_ALIVE || (view->dead && view->dead[r]);
        for (uint32_t i = 0; i < st->ncomm && i < CCS_DSX_MAXCOMM; i++) {
            const struct ccs_dsx_comm *e = &st->comm[i];
            c.ents[k++] = (struct ent){e->id, r, e->rank, e};
            if (e->state == CCS_DSX_BLOCKED && !c.term[r] && (!c.be[r] || e->blocked_ms > c.be[r]->blocked_ms))
                c.be[r] = e;
        }
    }
    c.nents = k;
    qsort(c.ents, c.nents, sizeof *c.ents, cmp_ent);
    for (size_t i = 0; i < c.nents;) {
        size_t j = i, distinct = 0;
        int32_t size = 0, last = -1;
        while (j < c.nents && c.ents[j].comm == c.ents[i].comm) {
            size = c.ents[j].e->size > size ? c.ents[j].e->size : size;
            distinct += c.ents[j].crank != last;
            last = c.ents[j].crank;
            j++;
        }
        /* A communicator larger than the world (an MPI_Intercomm_merge
         * with spawned processes, or a peer's lie) has members that
         * publish nowhere here: no verdict about it can hold, and every
         * client refuses one (ccs_dsx_check_verdict) and drops the
         * coordinator.  Left out (found by tests/fuzz/fuzz_dsx_coord.c). */
        /* Members not in view that the tree's folds know blocked: whole
         * for the blocked rule's wait-for analysis (they have issued what
         * they are blocked at), not for the rules that read each member's
         * records or steps. */
        uint64_t unseen = 0;
        if ((int32_t)distinct < size && view->unseen)
            unseen = view->unseen(c.ents[i].comm, size, distinct, view->unseen_arg);
        if (size <= wsize)
            c.g[c.ng++] = (struct grp){.lo = i,
                                       .hi = j,
                                       .size = size,
                                       .complete = (int32_t)distinct == size,
                                       .unseen_n = unseen ? (size_t)size - distinct : 0,
                                       .unseen_issued = unseen ? unseen : UINT64_MAX,
                                       .memo_r = -1};
        i = j;
    }
    ccs_dsx_rule_boundary(&c);
    ccs_dsx_rule_mismatch(&c);
    ccs_dsx_rule_blocked(&c);
    ccs_dsx_rule_foreign(&c);
    rc = c.emitted;
out:
    free(c.ents);
    free(c.g);
    free(c.term);
    free(c.stuck);
    free(c.be);
    return rc;
}
