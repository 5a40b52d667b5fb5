/*
 * desync_rules_ctx.c - the helpers every rule uses (desync_rules_ctx.h):
 * texts, the members of a communicator and whether they hold the others at
 * a seq, and a verdict's parties.  Below the rules: it calls none of them.
 */
#include "desync_rules_ctx.h"
#include "ccs_kinds.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* snprintf through a va_list: texts here are cut to their buffers on
 * purpose, which the compiler's truncation warnings cannot know. */
__attribute__((format(printf, 3, 4))) int ccs_dsx_rules_fmt(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    return r;
}

/* ------------------------------------------------------------ text */

void ccs_dsx_op_str(const struct ccs_dsx_op *op, char *buf, size_t n)
{
    ccs_call_str(op->kind, op->count, op->dtype, op->op, op->root, op->flags, buf, n);
}

/* The most frequent of N values (ties: the larger), in O(n log n). */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t ccs_dsx_mode_u64(uint64_t *v, size_t n, size_t *count)
{
    qsort(v, n, sizeof *v, cmp_u64);
    uint64_t best = n ? v[0] : 0;
    size_t bc = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j] == v[i])
            j++;
        if (j - i >= bc)
            bc = j - i, best = v[i];
        i = j;
    }
    if (count)
        *count = bc;
    return best;
}

/* ------------------------------------------------------------ the view */

struct grp *ccs_dsx_rules_group(struct ctx *c, uint64_t comm)
{
    size_t lo = 0, hi = c->ng;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t id = c->ents[c->g[mid].lo].comm;
        if (id == comm)
            return &c->g[mid];
        if (id < comm)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int ccs_dsx_rules_gone(struct ctx *c, const struct ent *m)
{
    if (ccs_dsx_rules_unknown(m))
        return 0;
    return c->term[m->wrank] || m->e->state == CCS_DSX_FREED;
}

/* M freed its communicator and its count there is not known exactly (it
 * was freed more than a period after the last count read, and its final
 * count was not kept): whether it issued a seq above that count cannot be
 * told, so it is neither behind nor gone. */
int ccs_dsx_rules_unknown(const struct ent *m)
{
    return m->e->state == CCS_DSX_FREED && !(m->e->flags & CCS_DSX_FINAL);
}

/* Member M died (its process is gone without exiting: killed, or its
 * heartbeat stopped) having issued S without finishing it, as its last
 * status says: blocked in S, or S not known complete (on the device, what
 * completed; else the calls that returned).  Its part of S never comes, so
 * it holds the others at S like a member behind: a dead process is dead
 * whatever seq it last published.  (A rank killed between enqueueing its
 * part of S and the device running it published the same seq as the
 * others, and was never named.) */
int ccs_dsx_rules_died_in(const struct ctx *c, const struct ent *m, uint64_t s)
{
    const struct ccs_dsx_comm *e = m->e;
    int died = (c->v->dead && c->v->dead[m->wrank]) || c->v->st[m->wrank]->life == CCS_DSX_DIED;
    if (!died || e->issued < s || e->state == CCS_DSX_FREED)
        return 0;
    if (e->state == CCS_DSX_BLOCKED && e->blocked.seq <= s)
        return 1;
    uint64_t pending = e->dev_pending < e->issued ? e->dev_pending : e->issued;
    uint64_t complete = (e->flags & CCS_DSX_DEVICE) ? e->issued - pending : e->done;
    return complete < s;
}

/* Members of G that have not issued S: all stuck or gone (MODE 0), or all
 * gone (MODE 1, "certain"); either needs at least one.  When every member
 * has issued S it never holds, whatever seqs its stuck members are blocked
 * at: S is matched (a call that differs there is the MISMATCH rule's), and
 * by MPI's progress rule a matched collective completes while its members
 * are in calls: ranks in it beside ranks already in the next are slow, not
 * stuck (5 ranks on 2 loaded cores: 3 in an all-gather for 1.8 s, 2 in the
 * next, a false DESYNC in churn-load.sh).  A member that
 * died inside S (died_in) counts as one behind, gone, but never makes the
 * verdict certain: its last status may be a period old, so the others must
 * have been blocked block_ms first.  Memoised per group for one pass (MODE
 * is the same for a whole pass). */
int ccs_dsx_rules_holds(struct ctx *c, struct grp *g, uint64_t s, int mode)
{
    if (g->memo_r >= 0 && g->memo_s == s)
        return g->memo_r;
    /* Members not in view (the tree's folds) issued UNSEEN_ISSUED: behind
     * S they may be, and nothing is known of what they do then. */
    int behind = 0, ok = (g->complete || g->unseen_n) && g->unseen_issued >= s;
    for (size_t i = g->lo; i < g->hi && ok; i++) {
        const struct ent *m = &c->ents[i];
        if (ccs_dsx_rules_unknown(m)) {
            ok = 0; /* its count is not known: no verdict can rest on it */
        } else if (m->e->issued < s) {
            behind++;
            if (mode == 1)
                ok = ccs_dsx_rules_gone(c, m);
            else
                ok = c->stuck[m->wrank] || ccs_dsx_rules_gone(c, m);
        } else if (ccs_dsx_rules_died_in(c, m, s)) {
            behind++;
            ok = mode == 0;
        }
    }
    int r = ok && behind > 0;
    g->memo_s = s;
    g->memo_r = r;
    return r;
}

void ccs_dsx_rules_reset_memo(struct ctx *c)
{
    for (size_t i = 0; i < c->ng; i++)
        c->g[i].memo_r = -1;
}

/* ------------------------------------------------------------ verdicts */

void ccs_dsx_rules_party(struct ctx *c, struct ccs_dsx_verdict *v, const struct ent *m, uint32_t role)
{
    if (v->nparty >= CCS_DSX_PARTIES)
        return;
    struct ccs_dsx_party *p = &v->party[v->nparty++];
    const struct ccs_dsx_status *st = c->v->st[m->wrank];
    memset(p, 0, sizeof *p);
    p->wrank = m->wrank;
    p->role = role;
    p->life = c->v->dead && c->v->dead[m->wrank] ? CCS_DSX_DIED : st->life;
    p->pid = st->pid;
    memcpy(p->host, st->host, sizeof p->host);
    p->c = *m->e;
    const struct ccs_dsx_comm *b = c->be[m->wrank];
    if (b && b->id != m->comm) {
        p->other_comm = b->id;
        p->other_op = b->blocked;
    }
}

void ccs_dsx_rules_emit(struct ctx *c, struct ccs_dsx_verdict *v)
{
    c->emitted++;
    if (c->sink && c->sink->verdict)
        c->sink->verdict(v, c->sink->arg);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

void ccs_dsx_rules_ranks(int32_t *r, size_t n, char *buf, size_t cap)
{
    qsort(r, n, sizeof *r, cmp_i32);
    ccs_ranks_str(r, n, buf, cap);
}

/* 1 when member M waits at the end of step S for the members of its comm. */
int ccs_dsx_rules_at_boundary(const struct ctx *c, const struct ent *m, uint32_t *s)
{
    const struct ccs_dsx_status *st = c->v->st[m->wrank];
    if (!(m->e->flags & CCS_DSX_BOUNDARY) || !st->boundary || c->term[m->wrank])
        return 0;
    if (s)
        *s = st->boundary - 1;
    return 1;
}
