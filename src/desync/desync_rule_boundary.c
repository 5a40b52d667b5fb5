/*
 * desync_rule_boundary.c - ranks waiting at their step boundary with
 * different numbers of calls in the step (docs/desync.md, "a rank at its
 * step boundary", under coalescing).  Applied by ccs_dsx_rules_run
 * (desync_rules.c).
 */
#include "ccs_kinds.h"
#include "desync_rules_ctx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- A rank at its step boundary (coalescing)
 *
 * Under coalescing a rank whose step left deferred reductions pending waits
 * at the end of the step (before completing them and before its optimizer
 * step) until every member of the communicator has ended the same step with
 * the same calls (registry.h, ccs_boundary_enter).  It issues nothing more
 * meanwhile.  So a member that went on past that step, a member blocked in
 * a collective the waiting rank has not issued, or members waiting at the
 * same boundary after different numbers of calls, can never meet it: the
 * ranks made different numbers of calls in that step.  A member still
 * computing in the step is only late: no verdict. */

/* E's calls in step S, from its published counts plus the call it is
 * blocked in; -1 when they do not say (E's newest records are from later
 * steps than the two it counts). */
static long calls_in_step(const struct ccs_dsx_comm *e, uint32_t s, uint32_t rank_step)
{
    long n = -1;
    /* Counted from the records folded so far: none until every call issued
     * is folded (the call blocked in has no record yet). */
    uint64_t folded = e->done + (e->state == CCS_DSX_BLOCKED && e->blocked.seq > e->done ? 1 : 0);
    if (folded < e->issued)
        return -1;
    if (e->step_calls && e->step_now == s)
        n = e->step_calls;
    else if (e->prev_calls && e->step_prev == s)
        n = e->prev_calls;
    else if (!e->step_calls || e->step_now < s)
        n = rank_step > s ? -1 : 0; /* nothing of step S completed yet; gone on past it: not known */
    /* A call blocked on the host has no record yet; one blocked on the
     * device (NCCL) returned and was counted already. */
    if (e->state == CCS_DSX_BLOCKED && e->blocked.step == s && e->blocked.seq > e->done)
        n = (n < 0 ? 0 : n) + 1;
    return n;
}

/* ST's backward passes in step S as the torch helper counted them, -1 when
 * not known. */
static long units_in_step(const struct ccs_dsx_status *st, uint32_t s)
{
    if (st->step == s && st->units)
        return st->units;
    if (st->step == s + 1 && st->units_prev)
        return st->units_prev;
    return -1;
}

/* "all-reduces" for a count of calls of KIND (CCS_KIND_MAX: mixed;
 * CCS_KIND_MAX + 1: the helper's backward passes). */
static const char *calls_word(unsigned kind, long n)
{
    if (kind == CCS_KIND_MAX + 1)
        return n == 1 ? "backward pass" : "backward passes";
    if (kind == CCS_KIND_ALLREDUCE)
        return n == 1 ? "all-reduce" : "all-reduces";
    return n == 1 ? "collective" : "collectives";
}

enum bnd_what { B_RUNNING = 0, B_AT, B_PASSED, B_WAITS, B_GONE };

struct bnd {
    enum bnd_what *what;
    long *count;
    uint32_t s;
    uint64_t min_issued; /* lowest issued seq of the members at the boundary */
    int passed, waits, gone, dead, differ;
    int passed_unknown; /* went on, its count in the step not known: judged after block_ms */
    int undecided;      /* a rank at the boundary whose count is not known yet: no verdict this pass */
    int units;          /* the counts are the helper's backward passes (it skipped DDP's reductions) */
    uint32_t passed_to; /* the furthest step a member went on to */
};

/* Member K of a step that ended for it with the count AT_COUNT the ranks at
 * the boundary made, as far as its status says. */
static int alike(const struct bnd *b, size_t k, long at_count)
{
    return at_count >= 0 && b->count[k] == at_count;
}

/* M, in the step of the ranks at the boundary, has been blocked for the
 * whole block threshold in a call they have not issued.  A member that
 * ended the step alike with them and left the boundary is blocked there
 * only until they leave it too (the agreement is mutual: they join it well
 * within block_ms).  So the same count of backward passes is a coincidence
 * of the moment (issue 41: a rank with a plain loss at the boundary after
 * its 2 forwards, one with a cached loss blocked in the reduction of its
 * 2nd mini-batch), and M waits for them: a DESYNC, not a rank running. */
static int blocked_past(const struct ctx *c, const struct bnd *b, const struct ent *m)
{
    return b->units && c->be[m->wrank] == m->e && m->e->blocked.seq > b->min_issued &&
           c->v->st[m->wrank]->step == b->s && m->e->blocked_ms >= c->t->block_ms;
}

static void boundary_classify(struct ctx *c, struct grp *g, struct bnd *b)
{
    long at_count = -2;
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        uint32_t ms;
        if (ccs_dsx_rules_at_boundary(c, m, &ms) && ms == b->s) {
            if (m->e->issued < b->min_issued)
                b->min_issued = m->e->issued;
            b->units |= units_in_step(c->v->st[m->wrank], b->s) > 0;
        }
    }
    /* What the ranks at the boundary made (they agree among themselves, or
     * that alone is the desync). */
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        uint32_t ms;
        if (!ccs_dsx_rules_gone(c, m) && ccs_dsx_rules_at_boundary(c, m, &ms) && ms == b->s) {
            long n = b->units ? units_in_step(c->v->st[m->wrank], b->s)
                              : calls_in_step(m->e, b->s, c->v->st[m->wrank]->step);
            if (n < 0)
                b->undecided = 1;
            if (at_count != -2 && at_count != n)
                b->differ = 1;
            at_count = n;
        }
    }
    for (size_t i = g->lo, k = 0; i < g->hi; i++, k++) {
        const struct ent *m = &c->ents[i];
        const struct ccs_dsx_status *st = c->v->st[m->wrank];
        uint32_t ms = 0;
        /* A rank whose status is still in an earlier step (its thread may
         * not have published for a while) has no count of step S yet: a 0
         * there would read "the others made 0" in the line. */
        b->count[k] = st->step < b->s ? -1
                      : b->units      ? units_in_step(st, b->s)
                                      : calls_in_step(m->e, b->s, c->v->st[m->wrank]->step);
        if (ccs_dsx_rules_gone(c, m)) {
            b->what[k] = B_GONE;
            b->gone++;
            b->dead += c->v->dead && c->v->dead[m->wrank];
        } else if (ccs_dsx_rules_at_boundary(c, m, &ms) && ms == b->s) {
            b->what[k] = B_AT;
        } else if (alike(b, k, at_count) && !blocked_past(c, b, m)) {
            /* It ended the step with the same count: the two agreed, and the
             * rank still shown at the boundary has not published its leaving
             * yet (statuses are not one instant). */
            b->what[k] = B_RUNNING;
        } else if (st->step > b->s || (ccs_dsx_rules_at_boundary(c, m, &ms) && ms > b->s)) {
            b->what[k] = B_PASSED;
            if (b->count[k] < 0 || at_count < 0)
                b->passed_unknown++;
            else
                b->passed++;
            b->passed_to = st->step > b->passed_to ? st->step : b->passed_to;
        } else if (c->be[m->wrank] == m->e && m->e->blocked.seq > b->min_issued) {
            b->what[k] = B_WAITS;
            b->waits++;
        } else {
            b->what[k] = B_RUNNING;
        }
    }
}

/* The count most members made (ties: the one of more members not at the
 * boundary, then the larger); -1 when no count is known. */
static long boundary_mode(const struct bnd *b, size_t n)
{
    long best = -1;
    size_t bn = 0, bo = 0;
    for (size_t i = 0; i < n; i++) {
        if (b->count[i] < 0)
            continue;
        size_t k = 0, o = 0;
        for (size_t j = 0; j < n; j++)
            if (b->count[j] == b->count[i]) {
                k++;
                o += b->what[j] != B_AT;
            }
        if (k > bn || (k == bn && (o > bo || (o == bo && b->count[i] > best)))) {
            best = b->count[i];
            bn = k;
            bo = o;
        }
    }
    return best;
}

/* The verdict's line: who ended the step after how many calls, where the
 * others made how many, who is blocked where, and the call sites. */
/* The subject of a boundary verdict: the ranks whose count differs from the
 * others' (or, counts alike or unknown, the ranks at the boundary), and the
 * ranks blocked in a collective meanwhile. */
struct subject {
    int32_t *odd, *blk;
    size_t nodd, nblk;
    long mode, oddc; /* the others' count, the odd ranks' */
    int odd_at;      /* every odd rank is at the boundary (ended the step) */
    const struct ent *first_at, *first_blk;
    unsigned kind; /* what was counted (calls_word) */
};

static void boundary_subject(struct ctx *c, const struct grp *g, const struct bnd *b, struct subject *s)
{
    s->mode = boundary_mode(b, g->hi - g->lo), s->oddc = -1, s->odd_at = 1, s->kind = CCS_KIND_MAX;
    for (size_t i = g->lo, k = 0; i < g->hi; i++, k++) {
        const struct ent *m = &c->ents[i];
        if (b->what[k] == B_AT) {
            s->first_at = s->first_at ? s->first_at : m;
            s->kind = b->units ? CCS_KIND_MAX + 1 : m->e->step_now == b->s ? m->e->step_kind : m->e->prev_kind;
        }
        if (b->count[k] >= 0 && b->count[k] != s->mode && (s->oddc < 0 || b->count[k] == s->oddc)) {
            s->oddc = b->count[k];
            s->odd[s->nodd++] = m->wrank;
            s->odd_at &= b->what[k] == B_AT;
        }
        if (c->be[m->wrank] == m->e && b->what[k] != B_GONE) {
            s->blk[s->nblk++] = m->wrank;
            s->first_blk = s->first_blk ? s->first_blk : m;
        }
    }
    if (s->nodd)
        return;
    /* counts alike or unknown: the ranks at the boundary are the subject */
    for (size_t i = g->lo, k = 0; i < g->hi; i++, k++)
        if (b->what[k] == B_AT)
            s->odd[s->nodd++] = c->ents[i].wrank;
    const struct ent *at = s->first_at;
    s->oddc = !at        ? -1
              : b->units ? units_in_step(c->v->st[at->wrank], b->s)
                         : calls_in_step(at->e, b->s, c->v->st[at->wrank]->step);
    s->odd_at = 1;
}

/* "rank 1 ended step 3 after 15 ... where the others made 16 ... went on to
 * step 4": the line's head; returns its length. */
static size_t boundary_head(const struct grp *g, const struct bnd *b, const struct subject *s,
                            struct ccs_dsx_verdict *v)
{
    char ro[256];
    ccs_dsx_rules_ranks(s->odd, s->nodd, ro, sizeof ro);
    const char *pl = s->nodd > 1 ? "s" : "";
    int w = s->odd_at ? ccs_dsx_rules_fmt(v->line, sizeof v->line,
                                          "comm=%#llx size=%d seq=%llu: rank%s %s ended step %u after %ld %s",
                                          (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, pl, ro,
                                          b->s, s->oddc, calls_word(s->kind, s->oddc))
                      : ccs_dsx_rules_fmt(v->line, sizeof v->line,
                                          "comm=%#llx size=%d seq=%llu: rank%s %s made %ld %s in step %u",
                                          (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, pl, ro,
                                          s->oddc, calls_word(s->kind, s->oddc), b->s);
    size_t o = w > 0 ? (size_t)w : 0;
    int others = s->mode >= 0 && s->mode != s->oddc;
    if (o < sizeof v->line && others)
        o += (size_t)ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o, " where the others %s %ld",
                                       s->odd_at ? "made" : "ended it after", s->mode);
    if (o < sizeof v->line && b->passed)
        o += (size_t)ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o, "%s went on to step %u",
                                       others ? (b->passed > 1 ? " and they" : " and it") : "; the others",
                                       b->passed_to);
    return o;
}

/* The rest of the line from O on: who is blocked where, members gone, the
 * sites, and what the ranks did. */
static void boundary_tail(const struct bnd *b, const struct subject *s, struct ccs_dsx_verdict *v, size_t o)
{
    char rb[256], ops[160], tail[400] = "";
    if (s->first_blk && o < sizeof v->line) {
        ccs_dsx_rules_ranks(s->blk, s->nblk, rb, sizeof rb);
        ccs_dsx_op_str(&s->first_blk->e->blocked, ops, sizeof ops);
        o += (size_t)ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o,
                                       "; rank%s %s blocked in %s at seq %llu for %.1f s", s->nblk > 1 ? "s" : "",
                                       rb, ops, (unsigned long long)s->first_blk->e->blocked.seq,
                                       s->first_blk->e->blocked_ms / 1000.0);
    }
    if (b->gone && o < sizeof v->line)
        o += (size_t)ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o, "; %d member%s gone", b->gone,
                                       b->gone > 1 ? "s" : "");
    if (s->first_at && s->first_at->e->site_last[0])
        ccs_dsx_rules_fmt(tail, sizeof tail, "; rank %d last at %s", s->first_at->wrank, s->first_at->e->site_last);
    if (s->first_blk && s->first_blk->e->site_blocked[0]) {
        size_t t = strlen(tail);
        ccs_dsx_rules_fmt(tail + t, sizeof tail - t, "; rank %d at %s", s->first_blk->wrank,
                          s->first_blk->e->site_blocked);
    }
    if (o < sizeof v->line)
        ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o,
                          " (at the end of the step, before its optimizer step: the ranks made "
                          "different numbers of calls)%s",
                          tail);
}

static void boundary_line(struct ctx *c, struct grp *g, const struct bnd *b, struct ccs_dsx_verdict *v)
{
    size_t n = g->hi - g->lo;
    struct subject s = {.odd = malloc(n * sizeof *s.odd), .blk = malloc(n * sizeof *s.blk)};
    if (s.odd && s.blk) {
        boundary_subject(c, g, b, &s);
        boundary_tail(b, &s, v, boundary_head(g, b, &s, v));
    }
    free(s.odd), free(s.blk);
}

static void boundary_verdict(struct ctx *c, struct grp *g, uint32_t s)
{
    size_t n = g->hi - g->lo;
    struct bnd b = {
        .what = calloc(n, sizeof *b.what), .count = calloc(n, sizeof *b.count), .s = s, .min_issued = UINT64_MAX};
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    if (!b.what || !b.count || !v)
        goto out;
    boundary_classify(c, g, &b);
    if (b.undecided)
        goto out; /* its records are still being read */
    if (!b.passed && !b.passed_unknown && !b.waits && !b.gone && !b.differ)
        goto out; /* the others are still in the step, or ended it alike */
    uint64_t comm = c->ents[g->lo].comm, sref = b.min_issued + 1;
    if (!b.passed && !b.differ) {
        /* Only blocked or gone members, or members gone on whose count is
         * not known: the snapshots are not one instant (a member that ended
         * the step with this one and then freed the communicator or exited
         * is gone beside this one's status of a period ago, still at the
         * boundary); it must hold without a break for a quarter of the
         * block threshold (the whole of it for an unknown count) first. */
        uint64_t since = ccs_dsx_seen_held(c->seen, CANDIDATE, comm, sref, c->v->now_ms, c->t->block_ms);
        if (c->v->now_ms - since < (b.passed_unknown ? c->t->block_ms : c->t->block_ms / 4))
            goto out;
        b.passed += b.passed_unknown;
    }
    uint32_t cls = b.gone && b.dead == b.gone && !b.passed && !b.waits && !b.differ ? (uint32_t)CCS_DSX_DEAD
                                                                                    : (uint32_t)CCS_DSX_DESYNC;
    if (ccs_dsx_seen_has(c->seen, CCS_DSX_DESYNC, comm, sref) || !ccs_dsx_seen_add(c->seen, cls, comm, sref))
        goto out;
    v->cls = cls;
    v->comm = comm;
    v->seq = sref;
    v->comm_size = g->size;
    for (size_t i = g->lo, k = 0; i < g->hi; i++, k++) {
        static const uint32_t role[] = {[B_RUNNING] = CCS_DSX_R_AGREES,
                                        [B_AT] = CCS_DSX_R_BEHIND,
                                        [B_PASSED] = CCS_DSX_R_AHEAD,
                                        [B_WAITS] = CCS_DSX_R_WAITING,
                                        [B_GONE] = CCS_DSX_R_BEHIND};
        ccs_dsx_rules_party(c, v, &c->ents[i], role[b.what[k]]);
    }
    boundary_line(c, g, &b, v);
    ccs_dsx_rules_emit(c, v);
out:
    free(b.what), free(b.count), free(v);
}

void ccs_dsx_rule_boundary(struct ctx *c)
{
    for (size_t gi = 0; gi < c->ng; gi++) {
        struct grp *g = &c->g[gi];
        if (!g->complete)
            continue; /* members elsewhere: the coordinator sees them all */
        uint32_t s = UINT32_MAX, ms;
        for (size_t i = g->lo; i < g->hi; i++)
            if (ccs_dsx_rules_at_boundary(c, &c->ents[i], &ms) && ms < s)
                s = ms;
        if (s != UINT32_MAX)
            boundary_verdict(c, g, s);
    }
}
