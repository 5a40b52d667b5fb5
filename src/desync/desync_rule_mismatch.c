/*
 * desync_rule_mismatch.c - the MISMATCH rule (docs/desync.md): members of a
 * communicator whose calls at one seq differ, found from their records or,
 * without them, from their running hashes.  Applied by ccs_dsx_rules_run
 * (desync_rules.c).
 */
#include "ccs_kinds.h"
#include "desync_rules_ctx.h"
#include "fingerprint.h"
#include "trace_format.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opref {
    uint64_t seq, key;
    size_t ent;
    const struct ccs_dsx_op *op;
};

static int cmp_opref(const void *a, const void *b)
{
    const struct opref *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->ent < y->ent ? -1 : x->ent > y->ent;
}

static uint64_t op_key(const struct ccs_dsx_op *op)
{
    return op->fp ^ ((op->flags & CCS_F_DEFERRED) ? 0x9e3779b97f4a7c15ULL : 0);
}

/* "16" or "at least 12": E's collectives in STEP, from its history (exact
 * when the history reaches back before the step and on past it with no seq
 * missing in between: a pass that read only the newest records can leave
 * gaps in it). */
static void step_count(const struct ccs_dsx_comm *e, uint32_t step, char *buf, size_t n)
{
    unsigned k = 0, before = 0, after = 0, gap = 0;
    for (unsigned h = 0; h < e->nhist && h < CCS_DSX_HIST; h++) {
        k += e->hist[h].step == step;
        before |= e->hist[h].step < step || e->hist[h].seq == 1;
        after |= e->hist[h].step > step;
        gap |= h > 0 && e->hist[h].seq != e->hist[h - 1].seq + 1 && e->hist[h].step >= step &&
               e->hist[h - 1].step <= step;
    }
    if (e->state == CCS_DSX_BLOCKED) {
        unsigned last = e->nhist && e->nhist <= CCS_DSX_HIST ? e->nhist - 1 : 0;
        k += e->blocked.step == step;
        after |= e->blocked.step > step;
        gap |= e->nhist && e->blocked.seq != e->hist[last].seq + 1 && e->blocked.step >= step &&
               e->hist[last].step <= step;
    }
    ccs_dsx_rules_fmt(buf, n, "%s%u", before && after && !gap ? "" : "at least ", k);
}

/* 1 when every member of G issued SEQ or is gone (and G is complete). */
static int all_reached(const struct ctx *c, const struct grp *g, uint64_t seq)
{
    int all = g->complete;
    for (size_t m = g->lo; m < g->hi && all; m++)
        all = c->ents[m].e->issued >= seq || c->term[c->ents[m].wrank];
    return all;
}

/* Two ranks out of step at OPS[0..N)'s seq: no majority to blame.  Both
 * counts in step WHERE, from the published histories, and both call sites,
 * into V's line. */
static void skew_line_two_ranks(struct ctx *c, struct grp *g, struct ccs_dsx_verdict *v, const struct opref *ops,
                                size_t n, uint32_t where)
{
    for (uint32_t p = 0; p < v->nparty; p++)
        v->party[p].role = CCS_DSX_R_DIFFERS;
    const struct ent *x = NULL, *y = NULL;
    for (size_t a = 0; a < n; a++) {
        const struct ent *m = &c->ents[ops[a].ent];
        if (!x || m->wrank < x->wrank)
            y = x, x = m;
        else if (!y || m->wrank < y->wrank)
            y = m;
    }
    char cx[48], cy[48];
    step_count(x->e, where, cx, sizeof cx);
    step_count(y->e, where, cy, sizeof cy);
    ccs_dsx_rules_fmt(
        v->line, sizeof v->line,
        "comm=%#llx size=%d seq=%llu: ranks out of step: in step %u rank %d issued %s, rank %d issued %s; "
        "from there on they issue the same operations in different steps (rank %d last at %s; rank %d last at %s)",
        (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, where, x->wrank, cx, y->wrank, cy,
        x->wrank, x->e->site_last[0] ? x->e->site_last : "?", y->wrank, y->e->site_last[0] ? y->e->site_last : "?");
}

/* Ranks out of step where some are still in step 0 at OPS[0..N)'s seq
 * (they mark steps, marks_steps) while the others marked steps already:
 * "rank 1 marked 6 steps by seq 18 where rank 0 is still in step 0 (8
 * backward passes in it so far)", into V's line. */
static void skew_line_step_zero(struct ctx *c, struct grp *g, struct ccs_dsx_verdict *v, const struct opref *ops,
                                size_t n)
{
    int32_t *zero = malloc(n * sizeof *zero), *on = malloc(n * sizeof *on);
    if (!zero || !on) {
        free(zero), free(on);
        return;
    }
    size_t nz = 0, no = 0;
    const struct ent *fz = NULL, *fo = NULL; /* the lowest rank of each side */
    uint32_t fo_step = 0;
    for (size_t a = 0; a < n; a++) {
        const struct ent *m = &c->ents[ops[a].ent];
        if (ops[a].op->step == 0) {
            zero[nz++] = m->wrank;
            fz = !fz || m->wrank < fz->wrank ? m : fz;
        } else {
            on[no++] = m->wrank;
            if (!fo || m->wrank < fo->wrank) {
                fo = m;
                fo_step = ops[a].op->step;
            }
        }
    }
    if (!fz || !fo) { /* (not reached: both sides are there) */
        free(zero), free(on);
        return;
    }
    char rz[256], ro[256], units[64] = "";
    ccs_dsx_rules_ranks(zero, nz, rz, sizeof rz);
    ccs_dsx_rules_ranks(on, no, ro, sizeof ro);
    const struct ccs_dsx_status *sz = c->v->st[fz->wrank], *so = c->v->st[fo->wrank];
    if (sz->step == 0 && sz->units)
        ccs_dsx_rules_fmt(units, sizeof units, " (%u backward passes in it so far)", sz->units);
    char cz[48], co[48], zstate[96];
    step_count(fz->e, 0, cz, sizeof cz);
    step_count(fo->e, 0, co, sizeof co);
    if (sz->step == 0)
        ccs_dsx_rules_fmt(zstate, sizeof zstate, "%s still in step 0", nz > 1 ? "are" : "is");
    else
        ccs_dsx_rules_fmt(zstate, sizeof zstate, "marked %u by seq %llu", sz->step,
                          (unsigned long long)fz->e->issued);
    ccs_dsx_rules_fmt(
        v->line, sizeof v->line,
        "comm=%#llx size=%d seq=%llu: ranks out of step: rank%s %s marked %u step%s by seq %llu where rank%s %s "
        "%s%s; in step 0 rank %d issued %s, rank %d issued %s; seq %llu is in step %u on rank %d and in "
        "step 0 on rank %d: from there on they reduce different steps' gradients together (rank %d last at %s; "
        "rank %d last at %s)",
        (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, no > 1 ? "s" : "", ro, so->step,
        so->step == 1 ? "" : "s", (unsigned long long)fo->e->issued, nz > 1 ? "s" : "", rz, zstate, units,
        fz->wrank, cz, fo->wrank, co,
        (unsigned long long)v->seq, fo_step, fo->wrank, fz->wrank, fz->wrank,
        fz->e->site_last[0] ? fz->e->site_last : "?", fo->wrank, fo->e->site_last[0] ? fo->e->site_last : "?");
    free(zero), free(on);
}

/* The steps between A's and B's records at the newest seq both histories
 * hold (0 when none): a gap that grows means different step patterns. */
static uint32_t steps_apart(const struct ccs_dsx_comm *a, const struct ccs_dsx_comm *b)
{
    unsigned na = a->nhist < CCS_DSX_HIST ? a->nhist : CCS_DSX_HIST, nb = b->nhist < CCS_DSX_HIST ? b->nhist : CCS_DSX_HIST;
    for (unsigned i = na; i-- > 0;)
        for (unsigned j = nb; j-- > 0;)
            if (b->hist[j].seq == a->hist[i].seq) {
                uint32_t x = a->hist[i].step, y = b->hist[j].step;
                return x > y ? x - y : y - x;
            } else if (b->hist[j].seq < a->hist[i].seq) {
                break;
            }
    return 0;
}

/* The widest steps_apart between a member in step 0 at OPS's seq and one
 * past it. */
static uint32_t zero_gap(const struct ctx *c, const struct opref *ops, size_t n)
{
    uint32_t gap = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            if (ops[a].op->step == 0 && ops[b].op->step > 0) {
                uint32_t g = steps_apart(c->ents[ops[a].ent].e, c->ents[ops[b].ent].e);
                gap = g > gap ? g : gap;
            }
    return gap;
}

/* The DESYNC of ranks out of step at OPS[0..N)'s seq: the majority step
 * there, the others are the odd ones. */
static void skew_verdict(struct ctx *c, struct grp *g, const struct opref *ops, size_t n)
{
    uint64_t *vals = malloc(n * sizeof *vals);
    if (!vals)
        return;
    for (size_t a = 0; a < n; a++)
        vals[a] = ops[a].op->step;
    uint32_t maj = (uint32_t)ccs_dsx_mode_u64(vals, n, NULL);
    free(vals);
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    int32_t *odd = malloc(n * sizeof *odd), *agree = malloc(n * sizeof *agree);
    if (!v || !odd || !agree) {
        free(v), free(odd), free(agree);
        return;
    }
    size_t nodd = 0, nagree = 0;
    uint32_t oddstep = 0;
    for (size_t a = 0; a < n; a++) {
        const struct ent *m = &c->ents[ops[a].ent];
        if (ops[a].op->step == maj)
            agree[nagree++] = m->wrank;
        else {
            odd[nodd++] = m->wrank;
            oddstep = ops[a].op->step;
            if (v->nparty < CCS_DSX_PARTIES / 2)
                ccs_dsx_rules_party(c, v, m, oddstep > maj ? CCS_DSX_R_BEHIND : CCS_DSX_R_AHEAD);
        }
    }
    for (size_t a = 0; a < n; a++)
        if (ops[a].op->step == maj)
            ccs_dsx_rules_party(c, v, &c->ents[ops[a].ent], CCS_DSX_R_AGREES);
    uint32_t where = oddstep < maj ? oddstep : maj;
    v->cls = CCS_DSX_DESYNC;
    v->comm = c->ents[g->lo].comm;
    v->seq = ops[0].seq;
    v->comm_size = g->size;
    /* A rank in step 0 beside one two steps or more on at their newest
     * common seq: different step patterns (each rank another loss, the gap
     * growing), said by the marks; one step apart, the counts in step 0 say
     * more (a skipped mini-batch). */
    if (where == 0 && zero_gap(c, ops, n) >= 2) {
        skew_line_step_zero(c, g, v, ops, n);
    } else if (nodd == nagree && nodd == 1) {
        skew_line_two_ranks(c, g, v, ops, n, where);
    } else {
        char ro[256], ra[256], os[160];
        ccs_dsx_rules_ranks(odd, nodd, ro, sizeof ro);
        ccs_dsx_rules_ranks(agree, nagree, ra, sizeof ra);
        ccs_dsx_op_str(ops[0].op, os, sizeof os);
        ccs_dsx_rules_fmt(
            v->line, sizeof v->line,
            "comm=%#llx size=%d seq=%llu: rank%s %s issued seq %llu (%s) in step %u where rank%s %s issued it in "
            "step %u: rank%s %s issued %s collectives than the others in step %u and %s behind from there on",
            (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nodd > 1 ? "s" : "", ro,
            (unsigned long long)v->seq, os, oddstep, nagree > 1 ? "s" : "", ra, maj, nodd > 1 ? "s" : "", ro,
            oddstep > maj ? "fewer" : "more", where, oddstep > maj ? (nodd > 1 ? "are" : "is") : "the others are");
    }
    ccs_dsx_rules_emit(c, v);
    free(v), free(odd), free(agree);
}

/* 1 when the rank of status ST marks steps: it has marked one, its helper
 * said it will (ccshim_step_marking: the torch helper, which marks the
 * step at its optimizer step), or it counts the backward passes of the
 * step it is in.  A rank in step 0
 * that does neither may simply never mark steps: its step 0 says nothing. */
static int marks_steps(const struct ccs_dsx_status *st)
{
    return st && (st->step > 0 || st->units > 0 || st->units_prev > 0 || (st->flags & CCS_DSX_ST_MARKS));
}

/* The same operation at one seq, issued in different steps (both marked,
 * >= 1, or one still in its step 0 while marking steps, marks_steps):
 * the ranks are out of step although nothing hangs yet, e.g. one
 * skipped an all-reduce of identical ones earlier in the step, or runs a
 * different loss (fewer backward passes a step: issue 41's two datasets,
 * one rank's steps averaged against the other's mini-batches).  Reported
 * once per communicator as a DESYNC naming the step where it happened.
 * Returns 1 when the run was skewed (reported or waiting to be). */
static int step_skew(struct ctx *c, struct grp *g, const struct opref *ops, size_t n)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t a = 0; a < n; a++) {
        uint32_t st = ops[a].op->step;
        if (st == 0 && !marks_steps(c->v->st[c->ents[ops[a].ent].wrank]))
            return 0;
        lo = st < lo ? st : lo;
        hi = st > hi ? st : hi;
    }
    if (lo == hi)
        return 0;
    uint64_t comm = c->ents[g->lo].comm, seq = ops[0].seq;
    /* As for a MISMATCH: every member's record of the seq, asked for where
     * it is not in view; one host's view leaves the verdict to the coordinator. */
    if (n < (size_t)g->size && c->sink && c->sink->want)
        c->sink->want(comm, seq, c->sink->arg);
    if (c->t->partial && !g->complete)
        return 1;
    uint64_t since = ccs_dsx_seen_since(c->seen, CANDIDATE_MISMATCH, comm, seq, c->v->now_ms);
    if (!all_reached(c, g, seq) && c->v->now_ms - since < c->t->mismatch_wait_ms)
        return 1;
    if (n < (size_t)g->size && c->v->now_ms - since < c->t->record_wait_ms && c->sink && c->sink->want)
        return 1;
    /* Under coalescing the rank with the odd count stops at its step
     * boundary within moments, and the boundary rule names the step and both
     * counts exactly: give it that time, and leave it the verdict. */
    int deferred = 0;
    for (size_t a = 0; a < n; a++)
        deferred |= (ops[a].op->flags & CCS_F_DEFERRED) != 0;
    for (size_t i = g->lo; i < g->hi; i++)
        if (ccs_dsx_rules_at_boundary(c, &c->ents[i], NULL))
            return 1;
    if (deferred && c->v->now_ms - since < c->t->block_ms / 4)
        return 1;
    if (ccs_dsx_seen_add(c->seen, SKEW, comm, 0))
        skew_verdict(c, g, ops, n);
    return 1;
}

/* The basic-type pattern of an operation whose fingerprint has only its
 * signature's size (ccs_sig_key): 0 when there is nothing to compare. */
static uint32_t sig_key(const struct ccs_dsx_op *op)
{
    return ccs_sig_key(op->kind, op->dtype, op->sig);
}

/* The most frequent nonzero sig_key among OPS[i..j) with fingerprint KEY
 * (0 when none names its types), in O(n log n). */
static uint32_t majority_sig(const struct opref *ops, size_t i, size_t j, uint64_t key)
{
    uint64_t *k = malloc((j - i + 1) * sizeof *k);
    size_t n = 0;
    if (!k)
        return 0;
    for (size_t a = i; a < j; a++)
        if (ops[a].key == key && sig_key(ops[a].op))
            k[n++] = sig_key(ops[a].op);
    uint32_t best = n ? (uint32_t)ccs_dsx_mode_u64(k, n, NULL) : 0;
    free(k);
    return best;
}

/* OPS[a] differs from the majority (fingerprint MAJ, basic types MSIG):
 * another fingerprint, or basic types named on both sides that differ. */
static int odd_one(const struct opref *o, uint64_t maj, uint32_t msig)
{
    uint32_t k = sig_key(o->op);
    return o->key != maj || (k && msig && k != msig);
}

/* The run of OPS from I with the same seq: its end (*J), and 1 when its
 * operations differ (another fingerprint, or the same size with other basic
 * types where both sides name theirs). */
static int run_differs(const struct opref *ops, size_t i, size_t n, size_t *j)
{
    int differ = 0;
    uint32_t k0 = 0;
    size_t e = i;
    for (; e < n && ops[e].seq == ops[i].seq; e++) {
        differ |= ops[e].key != ops[i].key;
        uint32_t k = sig_key(ops[e].op);
        if (k && k0 && k != k0)
            differ = 1;
        k0 = k0 ? k0 : k;
    }
    *j = e;
    return differ;
}

/* The MISMATCH of the operations OPS[0..N) of one seq that differ: the
 * majority operation, the odd ranks, and the line. */
static void mismatch_verdict(struct ctx *c, struct grp *g, const struct opref *ops, size_t n)
{
    uint64_t *vals = malloc(n * sizeof *vals);
    if (!vals)
        return;
    for (size_t a = 0; a < n; a++)
        vals[a] = ops[a].key;
    uint64_t maj = ccs_dsx_mode_u64(vals, n, NULL);
    free(vals);
    uint32_t msig = majority_sig(ops, 0, n, maj);
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    int32_t *odd = malloc(n * sizeof *odd), *agree = malloc(n * sizeof *agree);
    if (!v || !odd || !agree) {
        free(v), free(odd), free(agree);
        return;
    }
    size_t nodd = 0, nagree = 0, variants = 0;
    const struct ccs_dsx_op *oddop = NULL, *majop = NULL;
    for (size_t a = 0; a < n; a++) {
        const struct ent *m = &c->ents[ops[a].ent];
        if (!odd_one(&ops[a], maj, msig)) {
            agree[nagree++] = m->wrank;
            /* Prefer an operation that names its basic types. */
            if (!majop || (!sig_key(majop) && sig_key(ops[a].op)))
                majop = ops[a].op;
        } else {
            if (!oddop)
                oddop = ops[a].op;
            else if (op_key(oddop) != ops[a].key || sig_key(oddop) != sig_key(ops[a].op))
                variants++;
            odd[nodd++] = m->wrank;
        }
    }
    /* Culprits first in the block, then the majority (no majority: every
     * side differs). */
    int tie = nodd == nagree && !variants;
    for (size_t a = 0; a < n; a++)
        if (odd_one(&ops[a], maj, msig) && v->nparty < CCS_DSX_PARTIES / 2)
            ccs_dsx_rules_party(c, v, &c->ents[ops[a].ent], CCS_DSX_R_DIFFERS);
    for (size_t a = 0; a < n; a++)
        if (!odd_one(&ops[a], maj, msig))
            ccs_dsx_rules_party(c, v, &c->ents[ops[a].ent], tie ? CCS_DSX_R_DIFFERS : CCS_DSX_R_AGREES);
    char ro[256], ra[256], so[160], sa[160];
    ccs_dsx_rules_ranks(odd, nodd, ro, sizeof ro);
    ccs_dsx_rules_ranks(agree, nagree, ra, sizeof ra);
    ccs_dsx_op_str(oddop, so, sizeof so);
    ccs_dsx_op_str(majop, sa, sizeof sa);
    v->cls = CCS_DSX_MISMATCH;
    v->comm = c->ents[g->lo].comm;
    v->seq = ops[0].seq;
    v->comm_size = g->size;
    if (tie)
        /* No majority (two ranks, or two halves): both sides, neutrally,
         * the lower ranks first. */
        ccs_dsx_rules_fmt(v->line, sizeof v->line,
                          "comm=%#llx size=%d seq=%llu: rank%s %s issued %s, rank%s %s issued %s",
                          (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nagree > 1 ? "s" : "",
                          odd[0] < agree[0] ? ro : ra, odd[0] < agree[0] ? so : sa, nodd > 1 ? "s" : "",
                          odd[0] < agree[0] ? ra : ro, odd[0] < agree[0] ? sa : so);
    else
        ccs_dsx_rules_fmt(v->line, sizeof v->line,
                          "comm=%#llx size=%d seq=%llu: rank%s %s issued %s where rank%s %s issued %s%s",
                          (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nodd > 1 ? "s" : "", ro,
                          so, nagree > 1 ? "s" : "", ra, sa, variants ? " (and other variants)" : "");
    ccs_dsx_rules_emit(c, v);
    free(v), free(odd), free(agree);
}

/* The first seq where G's records differ (OPS, N: every member's records):
 * a MISMATCH once every member reached it and its records are in view, or
 * a step skew (step_skew) where the same operations differ in step only. */
static void mismatch_records(struct ctx *c, struct grp *g, struct opref *ops, size_t n)
{
    qsort(ops, n, sizeof *ops, cmp_opref);
    for (size_t i = 0, j; i < n; i = j) {
        if (!run_differs(ops, i, n, &j)) {
            if (step_skew(c, g, ops + i, j - i))
                return;
            continue;
        }
        uint64_t comm = c->ents[g->lo].comm, seq = ops[i].seq;
        /* Certain already; wait until every member reached the seq (or a
         * short while) so that the majority named is the real one. */
        int all = all_reached(c, g, seq);
        uint64_t since = ccs_dsx_seen_since(c->seen, CANDIDATE_MISMATCH, comm, seq, c->v->now_ms);
        if (!all && c->v->now_ms - since < c->t->mismatch_wait_ms)
            return;
        /* Every member's own record of the seq: the majority is counted, not
         * guessed.  Members whose record is not in view (their history moved
         * on, or lives on another host) are asked for the records they keep
         * around the seq, for up to record_wait_ms. */
        size_t have = j - i, members = (size_t)g->size;
        if (have < members && c->sink && c->sink->want)
            c->sink->want(comm, seq, c->sink->arg);
        if ((c->t->partial && !g->complete) ||
            (have < members && c->v->now_ms - since < c->t->record_wait_ms && c->sink && c->sink->want))
            return;
        if (ccs_dsx_seen_add(c->seen, CCS_DSX_MISMATCH, comm, 0))
            mismatch_verdict(c, g, ops + i, j - i);
        return;
    }
}

/* Hashes that differ where no records overlap: ask for the records, and
 * after suspect_ms report what is known. */
struct hk {
    uint64_t seq, hash;
    size_t ent;
};

static int cmp_hk(const void *a, const void *b)
{
    const struct hk *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* The verdict from the hashes alone at AT, HV[i..j) every member's hash
 * there when ALL (sorted by hash), else X and Y the first two that differ:
 * with every member's hash and a majority among them, the odd ranks are
 * named against it; otherwise the two. */
static void hash_verdict(struct ctx *c, struct grp *g, uint64_t at, const struct hk *hv, size_t i, size_t j, int all,
                         const struct ent *x, const struct ent *y)
{
    uint64_t comm = c->ents[g->lo].comm, maj = 0;
    size_t best = 0;
    for (size_t a = i, b; all && a < j; a = b) { /* the largest run of one hash */
        for (b = a; b < j && hv[b].hash == hv[a].hash; b++)
            ;
        if (b - a > best)
            best = b - a, maj = hv[a].hash;
    }
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    int32_t *odd = malloc((j - i + 1) * sizeof *odd), *agree = malloc((j - i + 1) * sizeof *agree);
    if (!v || !odd || !agree) {
        free(v), free(odd), free(agree);
        return;
    }
    v->cls = CCS_DSX_MISMATCH;
    v->comm = comm;
    v->seq = at;
    v->comm_size = g->size;
    if (all && 2 * best > j - i) {
        size_t nodd = 0, nagree = 0;
        for (size_t a = i; a < j; a++)
            if (hv[a].hash != maj && v->nparty < CCS_DSX_PARTIES / 2)
                ccs_dsx_rules_party(c, v, &c->ents[hv[a].ent], CCS_DSX_R_DIFFERS);
        for (size_t a = i; a < j; a++) {
            const struct ent *m = &c->ents[hv[a].ent];
            if (hv[a].hash != maj)
                odd[nodd++] = m->wrank;
            else {
                agree[nagree++] = m->wrank;
                ccs_dsx_rules_party(c, v, m, CCS_DSX_R_AGREES);
            }
        }
        char ro[256], ra[256];
        ccs_dsx_rules_ranks(odd, nodd, ro, sizeof ro);
        ccs_dsx_rules_ranks(agree, nagree, ra, sizeof ra);
        ccs_dsx_rules_fmt(v->line, sizeof v->line,
                          "comm=%#llx size=%d seq=%llu: rank%s %s issued other operations than rank%s %s at or before "
                          "seq %llu (fingerprint hashes differ; the records are no longer kept)",
                          (unsigned long long)comm, g->size, (unsigned long long)at, nodd > 1 ? "s" : "", ro,
                          nagree > 1 ? "s" : "", ra, (unsigned long long)at);
    } else {
        ccs_dsx_rules_party(c, v, x, CCS_DSX_R_DIFFERS);
        ccs_dsx_rules_party(c, v, y, CCS_DSX_R_DIFFERS);
        ccs_dsx_rules_fmt(
            v->line, sizeof v->line,
            "comm=%#llx size=%d seq=%llu: ranks %d and %d issued different operations at or before seq %llu "
            "(fingerprint hashes differ; the records are no longer kept)",
            (unsigned long long)comm, g->size, (unsigned long long)at, x->wrank, y->wrank, (unsigned long long)at);
    }
    ccs_dsx_rules_emit(c, v);
    free(v), free(odd), free(agree);
}

static void mismatch_hashes(struct ctx *c, struct grp *g)
{
    uint64_t comm = c->ents[g->lo].comm, at = 0;
    const struct ent *x = NULL, *y = NULL;
    /* (seq, hash) of every member at its last seq and checkpoints, sorted:
     * two hashes at one seq differ -> the sequences differ at or before it. */
    struct hk *hv = malloc((g->hi - g->lo) * 3 * sizeof *hv);
    size_t n = 0, i0 = 0;
    if (!hv)
        return;
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ccs_dsx_comm *e = c->ents[i].e;
        if (e->done)
            hv[n++] = (struct hk){e->done, e->hash, i};
        for (int p = 0; p < 2; p++)
            if (e->cp_seq[p] && e->cp_seq[p] != e->done)
                hv[n++] = (struct hk){e->cp_seq[p], e->cp_hash[p], i};
    }
    qsort(hv, n, sizeof *hv, cmp_hk);
    for (size_t i = 0; i + 1 < n && !at; i++)
        if (hv[i].seq == hv[i + 1].seq && hv[i].hash != hv[i + 1].hash)
            at = hv[i].seq, x = &c->ents[hv[i].ent], y = &c->ents[hv[i + 1].ent];
    if (!at) {
        free(hv);
        return;
    }
    if (c->sink && c->sink->detail)
        c->sink->detail(comm, c->sink->arg);
    uint64_t since = ccs_dsx_seen_since(c->seen, SUSPECT_HASH, comm, 0, c->v->now_ms);
    if (c->v->now_ms - since >= c->t->suspect_ms && ccs_dsx_seen_add(c->seen, CCS_DSX_MISMATCH, comm, 0)) {
        while (hv[i0].seq != at)
            i0++;
        size_t j0 = i0;
        while (j0 < n && hv[j0].seq == at)
            j0++;
        /* (a member has one entry per seq: its last seq is not a checkpoint too) */
        hash_verdict(c, g, at, hv, i0, j0, g->complete && j0 - i0 == (size_t)g->size, x, y);
    }
    free(hv);
}

void ccs_dsx_rule_mismatch(struct ctx *c)
{
    size_t cap = 0;
    struct opref *ops = NULL;
    for (size_t gi = 0; gi < c->ng; gi++) {
        struct grp *g = &c->g[gi];
        size_t need = 0;
        for (size_t i = g->lo; i < g->hi; i++)
            need += c->ents[i].e->nhist + 1u;
        if (need > cap) {
            free(ops);
            cap = need * 2;
            ops = malloc(cap * sizeof *ops);
            if (!ops)
                return;
        }
        size_t n = 0;
        for (size_t i = g->lo; i < g->hi; i++) {
            const struct ccs_dsx_comm *e = c->ents[i].e;
            for (unsigned h = 0; h < e->nhist; h++)
                ops[n++] = (struct opref){e->hist[h].seq, op_key(&e->hist[h]), i, &e->hist[h]};
            if (e->state == CCS_DSX_BLOCKED)
                ops[n++] = (struct opref){e->blocked.seq, op_key(&e->blocked), i, &e->blocked};
        }
        int before = c->emitted;
        /* One host's view of a communicator with members elsewhere: the
         * coordinator judges; records that differ here are only asked to be
         * kept (mismatch_records returns before a verdict). */
        if (g->hi - g->lo >= 2)
            mismatch_records(c, g, ops, n);
        if (c->t->partial && !g->complete)
            continue;
        /* (Once a MISMATCH is reported, the hashes differ for good.) */
        if (c->emitted == before && g->hi - g->lo >= 2 &&
            !ccs_dsx_seen_has(c->seen, CCS_DSX_MISMATCH, c->ents[g->lo].comm, 0))
            mismatch_hashes(c, g);
    }
    free(ops);
}
