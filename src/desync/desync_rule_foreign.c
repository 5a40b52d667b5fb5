/*
 * desync_rule_foreign.c - the DESYNC rule over collectives ccshim does not
 * intercept (docs/desync.md, "torch.distributed"): the members of one
 * torch.distributed process group, each blocked in a call of that group
 * that the torch helper identified (ccshim_foreign_call: the group, the
 * call's seq among the group's collectives, its kind), and the calls cannot
 * be one: different kinds at one seq, or different seqs.  Applied by
 * ccs_dsx_rules_run (desync_rules.c) after the blocked rule.
 *
 * Only the members of one group are compared: a rank waiting in group A
 * while another waits in group B may both wait for a third rank that is
 * slow, and a rank of the group that is not in the call (computing, in an
 * intercepted call, gone) leaves the group to the other rules.  A group
 * whose members sit at one seq in calls of one kind is matched: it
 * completes, however long (a straggler at most).
 */
#include "ccs_kinds.h"
#include "desync_rules_ctx.h"
#include "fingerprint.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank R is alive, blocked in no intercepted collective, and inside a
 * foreign call with an identity. */
static int identified(const struct ctx *c, int32_t r)
{
    const struct ccs_dsx_status *st = c->v->st[r];
    return st && !c->term[r] && !c->be[r] && st->foreign_ms > 0 && st->foreign[0] && st->foreign_gseq &&
           st->foreign_group;
}

/* One identified rank, as the rule sorts them: by group, then seq. */
struct member {
    uint64_t group, seq;
    int32_t r;
};

static int cmp_member(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Why the members R[0..N) of one group (sorted by seq), all in its calls,
 * cannot complete them, into WHY; 0 when they may (one seq, one
 * collective; or the ranks ahead finished the very collective the others
 * are still in). */
static int cannot_complete(const struct ctx *c, const struct member *m, size_t n, char *why, size_t wn)
{
    const struct ccs_dsx_status *lo = c->v->st[m[0].r], *hi = c->v->st[m[n - 1].r];
    if (lo->foreign_gseq == hi->foreign_gseq) {
        for (size_t i = 1; i < n; i++)
            if (ccs_torch_call_same(c->v->st[m[i].r]->foreign_kind) != ccs_torch_call_same(lo->foreign_kind)) {
                ccs_dsx_rules_fmt(why, wn, "different collectives at the group's call %llu",
                                  (unsigned long long)lo->foreign_gseq);
                return 1;
            }
        return 0;
    }
    /* Members ahead at the next seq whose call before it (the one the
     * others are in) was the same collective finished their part of it:
     * it completes for the others too (by the backend's progress, as an
     * MPI collective every member issued), they are slow, not stuck.  Any
     * other spread: the ranks ahead left a call the others are not in, or
     * returned from a different one at that seq. */
    for (size_t i = 0; i < n; i++) {
        const struct ccs_dsx_status *s = c->v->st[m[i].r];
        if (s->foreign_gseq == lo->foreign_gseq)
            continue;
        if (s->foreign_gseq != lo->foreign_gseq + 1 || s->foreign_prev == CCS_TC_NONE)
            goto out_of_step;
        for (size_t j = 0; j < n && m[j].seq == lo->foreign_gseq; j++)
            if (ccs_torch_call_same(c->v->st[m[j].r]->foreign_kind) != ccs_torch_call_same(s->foreign_prev))
                goto out_of_step;
    }
    return 0;
out_of_step:
    ccs_dsx_rules_fmt(why, wn, "the group's members at different calls (%llu to %llu), none of them returning",
                      (unsigned long long)lo->foreign_gseq, (unsigned long long)hi->foreign_gseq);
    return 1;
}

/* A verdict's party for rank R, of the group GROUP of SIZE members where
 * it is member CRANK (the order of the ranks: torch's group ranks are the
 * global ranks in increasing order). */
static void party(const struct ctx *c, struct ccs_dsx_verdict *v, int32_t r, int32_t crank, uint32_t role,
                  uint64_t group, int32_t size)
{
    if (v->nparty >= CCS_DSX_PARTIES)
        return;
    const struct ccs_dsx_status *st = c->v->st[r];
    struct ccs_dsx_party *p = &v->party[v->nparty++];
    memset(p, 0, sizeof *p);
    p->wrank = r;
    p->role = role;
    p->life = st->life;
    p->pid = st->pid;
    memcpy(p->host, st->host, sizeof p->host);
    p->c.id = group;
    p->c.rank = crank;
    p->c.size = size;
    p->c.issued = p->c.done = st->foreign_gseq - 1; /* the calls it returned from */
    p->c.state = CCS_DSX_IDLE;                      /* not an intercepted call: no operation to name */
    p->c.backend = CCS_BE_TORCH;                    /* the report says where it is (desync_report.c) */
    snprintf(p->c.site_blocked, sizeof p->c.site_blocked, "%s", st->foreign);
}

/* The DESYNC of group members M[0..N) (sorted by seq), held for a quarter
 * of block_ms first as every DESYNC (desync_rule_blocked.c). */
static void verdict(struct ctx *c, const struct member *m, size_t n, const char *why)
{
    const struct ccs_dsx_status *lo = c->v->st[m[0].r], *hi = c->v->st[m[n - 1].r];
    uint64_t group = lo->foreign_group, seq = lo->foreign_gseq;
    uint64_t since = ccs_dsx_seen_held(c->seen, CANDIDATE_FOREIGN, group, ccs_hash_mix(seq, hi->foreign_gseq),
                                       c->v->now_ms, c->t->block_ms);
    if (c->v->now_ms - since < c->t->block_ms / 4)
        return;
    if (!ccs_dsx_seen_add(c->seen, CCS_DSX_DESYNC, group, seq))
        return;
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    int32_t *sorted = malloc(n * sizeof *sorted);
    if (!v || !sorted) {
        free(v), free(sorted);
        return;
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = m[i].r;
    qsort(sorted, n, sizeof *sorted, cmp_i32); /* ascending ranks: their place in the group */
    v->cls = CCS_DSX_DESYNC;
    v->comm = group;
    v->seq = seq;
    v->comm_size = (int32_t)n;
    size_t o =
        (size_t)ccs_dsx_rules_fmt(v->line, sizeof v->line,
                                  "comm=%#llx size=%zu seq=%llu: torch.distributed group, every member "
                                  "blocked past %.1f s",
                                  (unsigned long long)group, n, (unsigned long long)seq, c->t->block_ms / 1000.0);
    for (size_t i = 0; i < n; i++) {
        int32_t w = sorted[i];
        const struct ccs_dsx_status *st = c->v->st[w];
        uint32_t role = lo->foreign_gseq == hi->foreign_gseq ? (uint32_t)CCS_DSX_R_DIFFERS
                        : st->foreign_gseq == seq            ? (uint32_t)CCS_DSX_R_WAITING
                                                             : (uint32_t)CCS_DSX_R_AHEAD;
        party(c, v, w, (int32_t)i, role, group, (int32_t)n);
        if (o < sizeof v->line) {
            int k = ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o, "; rank %d in %s (call %llu) for %.1f s", w,
                                      st->foreign, (unsigned long long)st->foreign_gseq, st->foreign_ms / 1000.0);
            o += k > 0 ? (size_t)k : 0;
        }
    }
    if (o < sizeof v->line)
        ccs_dsx_rules_fmt(v->line + o, sizeof v->line - o, ": %s", why);
    ccs_dsx_rules_emit(c, v);
    free(v), free(sorted);
}

void ccs_dsx_rule_foreign(struct ctx *c)
{
    int32_t wsize = c->v->wsize;
    size_t n = 0;
    for (int32_t r = 0; r < wsize; r++)
        n += identified(c, r);
    if (n < 2)
        return;
    struct member *m = malloc(n * sizeof *m);
    if (!m)
        return;
    n = 0;
    for (int32_t r = 0; r < wsize; r++)
        if (identified(c, r))
            m[n++] = (struct member){c->v->st[r]->foreign_group, c->v->st[r]->foreign_gseq, r};
    qsort(m, n, sizeof *m, cmp_member);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint32_t size = c->v->st[m[i].r]->foreign_size;
        int ok = size >= 2;
        for (; j < n && m[j].group == m[i].group; j++)
            ok &= c->v->st[m[j].r]->foreign_size == size && c->v->st[m[j].r]->foreign_ms >= c->t->block_ms;
        /* Every member in the group's calls (as many as its size says it
         * has), each past the block threshold: none is coming. */
        char why[160];
        if (ok && j - i == size && cannot_complete(c, m + i, j - i, why, sizeof why))
            verdict(c, m + i, j - i, why);
        i = j;
    }
    free(m);
}
