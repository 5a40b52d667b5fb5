/*
 * desync_rule_blocked.c - the DESYNC, DEAD and STRAGGLER rules
 * (docs/desync.md), applied by ccs_dsx_rules_run (desync_rules.c).
 *
 * A wait-for analysis: a rank blocked at (comm X, seq s) waits for the
 * members of X that have not issued s.  It is stuck only if every rank it
 * waits for is itself stuck, or gone (exited, finalizing, dead, or freed X
 * before s).  Ranks that compute are never stuck, so a healthy run with long
 * uneven compute yields at most a STRAGGLER warning.
 */
#include "ccs_kinds.h"
#include "desync_rules_ctx.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank R is alive, blocked in no intercepted collective, and inside a
 * collective ccshim does not intercept (a gloo call of torch.distributed,
 * said by the torch helper): the status's FOREIGN. */
static int in_foreign(const struct ctx *c, int32_t r)
{
    const struct ccs_dsx_status *st = c->v->st[r];
    return st && !c->term[r] && !c->be[r] && st->foreign_ms > 0 && st->foreign[0];
}

/* Rank R, in a foreign call past the block threshold, may be stuck: the
 * ranks in foreign calls are fewer than that call's group (its size, or
 * the world's when unknown), so at least one member of its group is not in
 * it.  With as many in foreign calls as the group holds, they may all be
 * in that one call, which then completes: no verdict (which call each is
 * in cannot be matched; docs/desync.md). */
static int foreign_candidate(const struct ctx *c, int32_t r)
{
    if (!in_foreign(c, r) || c->v->st[r]->foreign_ms < c->t->block_ms)
        return 0;
    uint32_t size = c->v->st[r]->foreign_size ? c->v->st[r]->foreign_size : (uint32_t)c->v->wsize;
    uint32_t n = 0;
    for (int32_t q = 0; q < c->v->wsize; q++)
        n += in_foreign(c, q);
    return n < size;
}

/* A rank in a foreign call stays stuck while every other rank of the world
 * is known and stuck, gone, or in a foreign call itself: it waits for a
 * member of its group that it cannot see, and none is computing, so none
 * can come. */
static int foreign_holds(const struct ctx *c, int32_t r)
{
    for (int32_t q = 0; q < c->v->wsize; q++) {
        if (q == r || c->term[q] || in_foreign(c, q))
            continue;
        if (!c->v->st[q] || !c->stuck[q])
            return 0;
    }
    return 1;
}

/* 1 when member M of its group is stuck and blocked in that group. */
static int stuck_here(const struct ctx *c, const struct ent *m)
{
    return c->stuck[m->wrank] && !c->term[m->wrank] && c->be[m->wrank] == m->e;
}

/* The seq most of G's stuck members are blocked at; *COUNT of them (0:
 * none). */
static uint64_t blocked_seq(struct ctx *c, struct grp *g, size_t *count)
{
    *count = 0;
    uint64_t *vals = malloc((g->hi - g->lo) * sizeof *vals);
    size_t nv = 0;
    if (!vals)
        return 0;
    for (size_t i = g->lo; i < g->hi; i++)
        if (stuck_here(c, &c->ents[i]))
            vals[nv++] = c->ents[i].e->blocked.seq;
    uint64_t s = ccs_dsx_mode_u64(vals, nv, count);
    free(vals);
    return s;
}

/* What member M of communicator COMM, behind, is doing (LIFE: its life
 * state), into WHAT. */
static void behind_what(const struct ctx *c, const struct ent *m, uint64_t comm, uint32_t life, char *what,
                        size_t n)
{
    const struct ccs_dsx_comm *b = c->be[m->wrank];
    char os[128];
    const struct ccs_dsx_status *st = c->v->st[m->wrank];
    if (life != CCS_DSX_ALIVE)
        ccs_dsx_rules_fmt(what, n, "%s", ccs_dsx_life_name(life));
    else if (in_foreign(c, m->wrank))
        ccs_dsx_rules_fmt(what, n, "not in it: in %s for %.1f s", st->foreign, st->foreign_ms / 1000.0);
    else if (m->e->state == CCS_DSX_FREED)
        ccs_dsx_rules_fmt(what, n, "freed the communicator");
    else if (b && b->id == comm) {
        ccs_dsx_op_str(&b->blocked, os, sizeof os);
        ccs_dsx_rules_fmt(what, n, "blocked in %s at seq %llu", os, (unsigned long long)b->blocked.seq);
    } else if (b) {
        ccs_dsx_op_str(&b->blocked, os, sizeof os);
        ccs_dsx_rules_fmt(what, n, "blocked in %s on comm=%#llx seq %llu", os, (unsigned long long)b->id,
                          (unsigned long long)b->blocked.seq);
    } else
        ccs_dsx_rules_fmt(what, n, "running");
}

/* G's members blocked at SREF and how they wait (the ranks behind into
 * BEHIND, the first 6; the waiting and ahead ranks into the lists). */
struct desync_parts {
    int32_t *wait, *ahead;
    size_t nw, na, nb, ndead;
    const struct ccs_dsx_op *wop; /* the operation they wait in */
    uint32_t wms;                 /* the longest wait */
    char behind[CCS_DSX_LINE];
};

static void desync_parts(struct ctx *c, struct grp *g, uint64_t sref, struct desync_parts *d)
{
    uint64_t comm = c->ents[g->lo].comm;
    size_t bo = 0;
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        int in = m->e->issued >= sref && ccs_dsx_rules_died_in(c, m, sref);
        if (m->e->issued < sref || in) {
            d->nb++;
            uint32_t life = c->v->dead && c->v->dead[m->wrank] ? CCS_DSX_DIED : c->v->st[m->wrank]->life;
            d->ndead += life == CCS_DSX_DIED;
            char what[200], how[48];
            behind_what(c, m, comm, life, what, sizeof what);
            if (in)
                ccs_dsx_rules_fmt(how, sizeof how, "issued it");
            else
                ccs_dsx_rules_fmt(how, sizeof how, "%llu behind", (unsigned long long)(sref - m->e->issued));
            if (d->nb <= 6 && bo + 8 < sizeof d->behind) {
                int w = ccs_dsx_rules_fmt(d->behind + bo, sizeof d->behind - bo, "; rank %d at seq %llu (%s, %s)",
                                          m->wrank, (unsigned long long)(in ? sref : m->e->issued), how, what);
                if (w > 0)
                    bo += (size_t)w < sizeof d->behind - bo ? (size_t)w : sizeof d->behind - bo - 1;
            }
        } else if (stuck_here(c, m)) {
            if (m->e->blocked.seq == sref) {
                d->wait[d->nw++] = m->wrank;
                d->wop = d->wop ? d->wop : &m->e->blocked;
                d->wms = m->e->blocked_ms > d->wms ? m->e->blocked_ms : d->wms;
            } else if (m->e->blocked.seq > sref) {
                d->ahead[d->na++] = m->wrank;
            }
        }
    }
    if (d->nb > 6 && bo + 8 < sizeof d->behind)
        ccs_dsx_rules_fmt(d->behind + bo, sizeof d->behind - bo, "; and %zu more behind", d->nb - 6);
}

/* The parties of a DESYNC at SREF: the ranks behind first, then ahead,
 * then waiting. */
static void desync_parties(struct ctx *c, struct grp *g, uint64_t sref, struct ccs_dsx_verdict *v)
{
    for (size_t i = g->lo; i < g->hi; i++)
        if ((c->ents[i].e->issued < sref || ccs_dsx_rules_died_in(c, &c->ents[i], sref)) &&
            v->nparty < CCS_DSX_PARTIES / 2)
            ccs_dsx_rules_party(c, v, &c->ents[i], CCS_DSX_R_BEHIND);
    for (size_t i = g->lo; i < g->hi; i++)
        if (stuck_here(c, &c->ents[i]) && c->ents[i].e->blocked.seq > sref)
            ccs_dsx_rules_party(c, v, &c->ents[i], CCS_DSX_R_AHEAD);
    for (size_t i = g->lo; i < g->hi; i++)
        if (stuck_here(c, &c->ents[i]) && c->ents[i].e->blocked.seq == sref)
            ccs_dsx_rules_party(c, v, &c->ents[i], CCS_DSX_R_WAITING);
}

/* A DESYNC (or DEAD, when every rank behind died) on G, where someone is
 * stuck (certain or not: the members it waits for being gone spares it the
 * block threshold only).  The verdict must hold, without a break, for a
 * quarter of block_ms first: statuses are not one snapshot, and a blocked
 * rank's status may be a period old when the others' are read (a "blocked
 * 0.0 s" in a barrier the others had already left, seen beside their
 * next state). */
static void desync_verdict(struct ctx *c, struct grp *g)
{
    uint64_t comm = c->ents[g->lo].comm;
    size_t best;
    uint64_t sref = blocked_seq(c, g, &best);
    if (!best)
        return;
    uint64_t since = ccs_dsx_seen_held(c->seen, CANDIDATE, comm, sref, c->v->now_ms, c->t->block_ms);
    if (c->v->now_ms - since < c->t->block_ms / 4)
        return;
    size_t n = g->hi - g->lo;
    struct desync_parts d = {.wait = malloc(n * sizeof(int32_t)), .ahead = malloc(n * sizeof(int32_t))};
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    if (!d.wait || !d.ahead || !v) {
        free(d.wait), free(d.ahead), free(v);
        return;
    }
    desync_parts(c, g, sref, &d);
    if (!d.wop) {
        /* No stuck member has issued SREF: statuses that contradict
         * themselves (ccs_dsx_check_status refuses them).  No verdict
         * rather than a NULL operation named below (tests/fuzz). */
        free(d.wait), free(d.ahead), free(v);
        return;
    }
    uint32_t cls = d.nb && d.ndead == d.nb ? (uint32_t)CCS_DSX_DEAD : (uint32_t)CCS_DSX_DESYNC;
    if (!ccs_dsx_seen_add(c->seen, cls, comm, sref)) {
        free(d.wait), free(d.ahead), free(v);
        return;
    }
    desync_parties(c, g, sref, v);
    char rw[300], ra[256], ops[160], aheadtxt[300] = "";
    ccs_dsx_rules_ranks(d.wait, d.nw, rw, sizeof rw);
    /* Waiting members the tree's relays counted without their statuses. */
    if (g->unseen_n)
        ccs_dsx_rules_fmt(rw + strlen(rw), sizeof rw - strlen(rw), " and %zu more", g->unseen_n);
    ccs_dsx_op_str(d.wop, ops, sizeof ops);
    if (d.na) {
        ccs_dsx_rules_ranks(d.ahead, d.na, ra, sizeof ra);
        ccs_dsx_rules_fmt(aheadtxt, sizeof aheadtxt, "; rank%s %s blocked at a later seq (ahead)",
                          d.na > 1 ? "s" : "", ra);
    }
    v->cls = cls;
    v->comm = comm;
    v->seq = sref;
    v->comm_size = g->size;
    ccs_dsx_rules_fmt(
        v->line, sizeof v->line, "comm=%#llx size=%d seq=%llu: rank%s %s blocked in %s at seq %llu for %.1f s%s%s",
        (unsigned long long)comm, g->size, (unsigned long long)sref, d.nw + g->unseen_n > 1 ? "s" : "", rw, ops,
        (unsigned long long)sref, d.wms / 1000.0, d.behind, aheadtxt);
    ccs_dsx_rules_emit(c, v);
    free(d.wait), free(d.ahead), free(v);
}

static void straggler_verdict(struct ctx *c, struct grp *g, uint64_t s, uint32_t waited_ms)
{
    uint64_t comm = c->ents[g->lo].comm;
    if (!ccs_dsx_seen_add(c->seen, CCS_DSX_STRAGGLER, comm, s))
        return;
    size_t n = g->hi - g->lo;
    int32_t *wait = malloc(n * sizeof *wait), *late = malloc(n * sizeof *late);
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    if (!wait || !late || !v) {
        free(wait), free(late), free(v);
        return;
    }
    size_t nw = 0, nl = 0;
    const struct ccs_dsx_op *wop = NULL;
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        if (m->e->issued < s && !c->be[m->wrank] && !ccs_dsx_rules_gone(c, m) && !ccs_dsx_rules_unknown(m) &&
            !ccs_dsx_rules_at_boundary(c, m, NULL)) {
            late[nl++] = m->wrank;
            ccs_dsx_rules_party(c, v, m, CCS_DSX_R_BEHIND);
        }
    }
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        if (c->be[m->wrank] == m->e && m->e->blocked.seq == s) {
            wait[nw++] = m->wrank;
            wop = wop ? wop : &m->e->blocked;
            ccs_dsx_rules_party(c, v, m, CCS_DSX_R_WAITING);
        }
    }
    /* A late rank in a foreign call is named as such, not as computing. */
    int32_t fr = -1;
    for (size_t i = 0; i < nl && fr < 0; i++)
        if (in_foreign(c, late[i]))
            fr = late[i];
    char rw[300], rl[256], ops[160], why[200];
    if (fr >= 0)
        ccs_dsx_rules_fmt(why, sizeof why, "rank %d in %s, which ccshim does not intercept, for %.1f s", fr,
                          c->v->st[fr]->foreign, c->v->st[fr]->foreign_ms / 1000.0);
    else
        ccs_dsx_rules_fmt(why, sizeof why, "not in any collective: computing or in point-to-point");
    ccs_dsx_rules_ranks(wait, nw, rw, sizeof rw);
    if (g->unseen_n)
        ccs_dsx_rules_fmt(rw + strlen(rw), sizeof rw - strlen(rw), " and %zu more", g->unseen_n);
    ccs_dsx_rules_ranks(late, nl, rl, sizeof rl);
    ccs_dsx_op_str(wop, ops, sizeof ops);
    v->cls = CCS_DSX_STRAGGLER;
    v->comm = comm;
    v->seq = s;
    v->comm_size = g->size;
    ccs_dsx_rules_fmt(
        v->line, sizeof v->line,
        "comm=%#llx size=%d seq=%llu: rank%s %s waited %.1f s in %s for rank%s %s (%s); a warning, not a desync",
        (unsigned long long)comm, g->size, (unsigned long long)s, nw + g->unseen_n > 1 ? "s" : "", rw,
        waited_ms / 1000.0, ops, nl > 1 ? "s" : "", rl, why);
    if (nl)
        ccs_dsx_rules_emit(c, v);
    free(wait), free(late), free(v);
}

void ccs_dsx_rule_blocked(struct ctx *c)
{
    int32_t wsize = c->v->wsize;
    int any = 0;
    for (int32_t r = 0; r < wsize; r++)
        any |= c->be[r] != NULL;
    if (!any)
        return;
    /* Certain: blocked ranks waiting only for ranks that are gone (their
     * counts final), stuck before the block threshold. */
    ccs_dsx_rules_reset_memo(c);
    uint8_t *certain = calloc((size_t)wsize, 1);
    if (!certain)
        return;
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_comm *b = c->be[r];
        if (!b || c->term[r])
            continue;
        struct grp *g = ccs_dsx_rules_group(c, b->id);
        certain[r] = g && ccs_dsx_rules_holds(c, g, b->blocked.seq, 1);
    }
    /* Stuck set: start from every blocked-long-enough or certain rank and
     * every gone rank; drop blocked ranks that wait for a rank not stuck. */
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_comm *b = c->be[r];
        c->stuck[r] = c->term[r] || (b && (certain[r] || b->blocked_ms >= c->t->block_ms)) ||
                      foreign_candidate(c, r);
    }
    for (int changed = 1; changed;) {
        changed = 0;
        ccs_dsx_rules_reset_memo(c);
        for (int32_t r = 0; r < wsize; r++) {
            const struct ccs_dsx_comm *b = c->be[r];
            if (c->stuck[r] && in_foreign(c, r) && !foreign_holds(c, r)) {
                c->stuck[r] = 0;
                changed = 1;
                continue;
            }
            if (!c->stuck[r] || c->term[r] || !b)
                continue;
            struct grp *g = ccs_dsx_rules_group(c, b->id);
            if (!g || !ccs_dsx_rules_holds(c, g, b->blocked.seq, 0)) {
                c->stuck[r] = 0;
                changed = 1;
            }
        }
    }
    /* One verdict per communicator someone is stuck in. */
    for (size_t gi = 0; gi < c->ng; gi++) {
        struct grp *g = &c->g[gi];
        int has = 0;
        for (size_t i = g->lo; i < g->hi; i++)
            has |= stuck_here(c, &c->ents[i]);
        if (has)
            desync_verdict(c, g);
    }
    /* Stragglers: waiting long for a rank that is not in any collective. */
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_comm *b = c->be[r];
        if (!b || c->stuck[r] || c->term[r] || b->blocked_ms < c->t->straggler_ms)
            continue;
        struct grp *g = ccs_dsx_rules_group(c, b->id);
        if (g)
            straggler_verdict(c, g, b->blocked.seq, b->blocked_ms);
    }
    free(certain);
}
