/*
 * desync_rules.c - MISMATCH, DESYNC, STRAGGLER and DEAD from a view of all
 * ranks (docs/desync.md).  Run by every rank over shared memory and by the
 * coordinator over the whole job, every period; allocation is fine here.
 *
 * The DESYNC rule is a wait-for analysis: a rank blocked at (comm X, seq s)
 * waits for the members of X that have not issued s.  It is stuck only if
 * every rank it waits for is itself stuck, or gone (exited, finalizing,
 * dead, or freed X before s).  Ranks that compute are never stuck, so a
 * healthy run with long uneven compute yields at most a STRAGGLER warning.
 */
#include "desync_rules.h"
#include "ccs_kinds.h"
#include "shim.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* snprintf through a va_list: texts here are cut to their buffers on
 * purpose, which the compiler's truncation warnings cannot know. */
__attribute__((format(printf, 3, 4))) static int sfmt(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    return r;
}

/* ------------------------------------------------------------ seen set */

struct ccs_dsx_seen {
    uint64_t *key, *val;
    size_t cap, n;
};

struct ccs_dsx_seen *ccs_dsx_seen_new(void)
{
    return calloc(1, sizeof(struct ccs_dsx_seen));
}

void ccs_dsx_seen_free(struct ccs_dsx_seen *s)
{
    if (!s)
        return;
    free(s->key);
    free(s->val);
    free(s);
}

static uint64_t seen_key(uint32_t cls, uint64_t comm, uint64_t seq)
{
    return ccs_hash_mix(ccs_hash_mix(cls, comm), seq) | 1;
}

/* Slot of KEY (inserting it with VAL when absent); NULL when out of memory. */
static uint64_t *seen_slot(struct ccs_dsx_seen *s, uint64_t key, uint64_t val, int *inserted)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        uint64_t *nk = calloc(nc, sizeof *nk), *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return NULL;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->key[i]) {
                size_t j = s->key[i] & (nc - 1);
                while (nk[j])
                    j = (j + 1) & (nc - 1);
                nk[j] = s->key[i];
                nv[j] = s->val[i];
            }
        free(s->key);
        free(s->val);
        s->key = nk;
        s->val = nv;
        s->cap = nc;
    }
    size_t j = key & (s->cap - 1);
    while (s->key[j] && s->key[j] != key)
        j = (j + 1) & (s->cap - 1);
    *inserted = !s->key[j];
    if (!s->key[j]) {
        s->key[j] = key;
        s->val[j] = val;
        s->n++;
    }
    return &s->val[j];
}

int ccs_dsx_seen_has(const struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq)
{
    if (!s->cap)
        return 0;
    uint64_t key = seen_key(cls, comm, seq);
    size_t j = key & (s->cap - 1);
    while (s->key[j] && s->key[j] != key)
        j = (j + 1) & (s->cap - 1);
    return s->key[j] == key;
}

int ccs_dsx_seen_add(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq)
{
    int ins = 0;
    return seen_slot(s, seen_key(cls, comm, seq), 0, &ins) ? ins : 0;
}

/* First time (CLS, COMM, SEQ) was noted; notes NOW if never. */
static uint64_t seen_since(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq, uint64_t now)
{
    int ins = 0;
    uint64_t *v = seen_slot(s, seen_key(cls, comm, seq), now, &ins);
    return v ? *v : now;
}

/* Private classes for timers in the seen set. */
#define SUSPECT_HASH 100
#define CANDIDATE 101
#define CANDIDATE_MISMATCH 102
#define SKEW 103

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

static uint64_t mode_u64(uint64_t *v, size_t n, size_t *count)
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

struct ent {
    uint64_t comm;
    int32_t wrank, crank;
    const struct ccs_dsx_comm *e;
};

struct grp {
    size_t lo, hi; /* [lo, hi) in ents */
    int32_t size;
    int complete;    /* every member known */
    uint64_t memo_s; /* memo of the last (s -> result) evaluated this pass */
    int memo_r;
};

struct ctx {
    const struct ccs_dsx_view *v;
    const struct ccs_dsx_thresholds *t;
    struct ccs_dsx_seen *seen;
    const struct ccs_dsx_sink *sink;
    struct ent *ents;
    size_t nents;
    struct grp *g;
    size_t ng;
    uint8_t *term, *stuck;
    const struct ccs_dsx_comm **be; /* entry a rank is blocked in, or NULL */
    int emitted;
};

static int at_boundary(const struct ctx *c, const struct ent *m, uint32_t *s);

static int cmp_ent(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->crank != y->crank)
        return x->crank < y->crank ? -1 : 1;
    return x->wrank < y->wrank ? -1 : x->wrank > y->wrank;
}

static struct grp *find_group(struct ctx *c, uint64_t comm)
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

static int gone_for(struct ctx *c, const struct ent *m)
{
    return c->term[m->wrank] || m->e->state == CCS_DSX_FREED;
}

/* Member M died (its process is gone without exiting: killed, or its
 * heartbeat stopped) having issued S without finishing it, as its last
 * status says: blocked in S, or S not known complete (on the device, what
 * completed; else the calls that returned).  Its part of S never comes, so
 * it holds the others at S like a member behind: a dead process is dead
 * whatever seq it last published.  (A rank killed between enqueueing its
 * part of S and the device running it published the same seq as the
 * others, and was never named.) */
static int died_in(const struct ctx *c, const struct ent *m, uint64_t s)
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
 * gone (MODE 1, "certain", needs at least one).  When none is behind, mode
 * 0 holds if a stuck member is blocked in G at another seq.  A member that
 * died inside S (died_in) counts as one behind, gone, but never makes the
 * verdict certain: its last status may be a period old, so the others must
 * have been blocked block_ms first.  Memoised per group for one pass (MODE
 * is the same for a whole pass). */
static int group_holds(struct ctx *c, struct grp *g, uint64_t s, int mode)
{
    if (g->memo_r >= 0 && g->memo_s == s)
        return g->memo_r;
    int behind = 0, ok = g->complete, other = 0;
    for (size_t i = g->lo; i < g->hi && ok; i++) {
        const struct ent *m = &c->ents[i];
        if (m->e->issued < s) {
            behind++;
            if (mode == 1)
                ok = gone_for(c, m);
            else
                ok = c->stuck[m->wrank] || gone_for(c, m);
        } else if (died_in(c, m, s)) {
            behind++;
            ok = mode == 0;
        } else if (mode == 0 && c->stuck[m->wrank] && c->be[m->wrank] && c->be[m->wrank]->id == c->ents[i].comm &&
                   c->be[m->wrank]->blocked.seq != s) {
            other = 1;
        }
    }
    int r = ok && (behind > 0 || (mode == 0 && other));
    g->memo_s = s;
    g->memo_r = r;
    return r;
}

static void reset_memo(struct ctx *c)
{
    for (size_t i = 0; i < c->ng; i++)
        c->g[i].memo_r = -1;
}

/* ------------------------------------------------------------ verdicts */

static void add_party(struct ctx *c, struct ccs_dsx_verdict *v, const struct ent *m, uint32_t role)
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

static void emit(struct ctx *c, struct ccs_dsx_verdict *v)
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

static void ranks_of(int32_t *r, size_t n, char *buf, size_t cap)
{
    qsort(r, n, sizeof *r, cmp_i32);
    ccs_ranks_str(r, n, buf, cap);
}

/* --- MISMATCH */

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
 * when the history reaches back before the step and on past it). */
static void step_count(const struct ccs_dsx_comm *e, uint32_t step, char *buf, size_t n)
{
    unsigned k = 0, before = 0, after = 0;
    for (unsigned h = 0; h < e->nhist && h < CCS_DSX_HIST; h++) {
        k += e->hist[h].step == step;
        before |= e->hist[h].step < step || e->hist[h].seq == 1;
        after |= e->hist[h].step > step;
    }
    if (e->state == CCS_DSX_BLOCKED) {
        k += e->blocked.step == step;
        after |= e->blocked.step > step;
    }
    sfmt(buf, n, "%s%u", before && after ? "" : "at least ", k);
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
    sfmt(v->line, sizeof v->line,
         "comm=%#llx size=%d seq=%llu: ranks out of step: in step %u rank %d issued %s, rank %d issued %s; "
         "from there on they issue the same operations in different steps (rank %d last at %s; rank %d last at %s)",
         (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, where, x->wrank, cx, y->wrank, cy,
         x->wrank, x->e->site_last[0] ? x->e->site_last : "?", y->wrank,
         y->e->site_last[0] ? y->e->site_last : "?");
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
    uint32_t maj = (uint32_t)mode_u64(vals, n, NULL);
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
                add_party(c, v, m, oddstep > maj ? CCS_DSX_R_BEHIND : CCS_DSX_R_AHEAD);
        }
    }
    for (size_t a = 0; a < n; a++)
        if (ops[a].op->step == maj)
            add_party(c, v, &c->ents[ops[a].ent], CCS_DSX_R_AGREES);
    uint32_t where = oddstep < maj ? oddstep : maj;
    v->cls = CCS_DSX_DESYNC;
    v->comm = c->ents[g->lo].comm;
    v->seq = ops[0].seq;
    v->comm_size = g->size;
    if (nodd == nagree && nodd == 1) {
        skew_line_two_ranks(c, g, v, ops, n, where);
    } else {
        char ro[256], ra[256], os[160];
        ranks_of(odd, nodd, ro, sizeof ro);
        ranks_of(agree, nagree, ra, sizeof ra);
        ccs_dsx_op_str(ops[0].op, os, sizeof os);
        sfmt(v->line, sizeof v->line,
             "comm=%#llx size=%d seq=%llu: rank%s %s issued seq %llu (%s) in step %u where rank%s %s issued it in "
             "step %u: rank%s %s issued %s collectives than the others in step %u and %s behind from there on",
             (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nodd > 1 ? "s" : "", ro,
             (unsigned long long)v->seq, os, oddstep, nagree > 1 ? "s" : "", ra, maj, nodd > 1 ? "s" : "", ro,
             oddstep > maj ? "fewer" : "more", where, oddstep > maj ? (nodd > 1 ? "are" : "is") : "the others are");
    }
    emit(c, v);
    free(v), free(odd), free(agree);
}

/* The same operation at one seq, issued in different steps (both marked,
 * >= 1): the ranks are out of step although nothing hangs yet, e.g. one
 * skipped an all-reduce of identical ones earlier in the step.  Reported
 * once per communicator as a DESYNC naming the step where it happened.
 * Returns 1 when the run was skewed (reported or waiting to be). */
static int step_skew(struct ctx *c, struct grp *g, const struct opref *ops, size_t n)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t a = 0; a < n; a++) {
        uint32_t st = ops[a].op->step;
        if (st == 0)
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
    uint64_t since = seen_since(c->seen, CANDIDATE_MISMATCH, comm, seq, c->v->now_ms);
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
        if (at_boundary(c, &c->ents[i], NULL))
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
    uint32_t best = n ? (uint32_t)mode_u64(k, n, NULL) : 0;
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
    uint64_t maj = mode_u64(vals, n, NULL);
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
            add_party(c, v, &c->ents[ops[a].ent], CCS_DSX_R_DIFFERS);
    for (size_t a = 0; a < n; a++)
        if (!odd_one(&ops[a], maj, msig))
            add_party(c, v, &c->ents[ops[a].ent], tie ? CCS_DSX_R_DIFFERS : CCS_DSX_R_AGREES);
    char ro[256], ra[256], so[160], sa[160];
    ranks_of(odd, nodd, ro, sizeof ro);
    ranks_of(agree, nagree, ra, sizeof ra);
    ccs_dsx_op_str(oddop, so, sizeof so);
    ccs_dsx_op_str(majop, sa, sizeof sa);
    v->cls = CCS_DSX_MISMATCH;
    v->comm = c->ents[g->lo].comm;
    v->seq = ops[0].seq;
    v->comm_size = g->size;
    if (tie)
        /* No majority (two ranks, or two halves): both sides, neutrally,
         * the lower ranks first. */
        sfmt(v->line, sizeof v->line, "comm=%#llx size=%d seq=%llu: rank%s %s issued %s, rank%s %s issued %s",
             (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nagree > 1 ? "s" : "",
             odd[0] < agree[0] ? ro : ra, odd[0] < agree[0] ? so : sa, nodd > 1 ? "s" : "",
             odd[0] < agree[0] ? ra : ro, odd[0] < agree[0] ? sa : so);
    else
        sfmt(v->line, sizeof v->line,
             "comm=%#llx size=%d seq=%llu: rank%s %s issued %s where rank%s %s issued %s%s",
             (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nodd > 1 ? "s" : "", ro, so,
             nagree > 1 ? "s" : "", ra, sa, variants ? " (and other variants)" : "");
    emit(c, v);
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
        uint64_t since = seen_since(c->seen, CANDIDATE_MISMATCH, comm, seq, c->v->now_ms);
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

static void mismatch_hashes(struct ctx *c, struct grp *g)
{
    uint64_t comm = c->ents[g->lo].comm, at = 0;
    const struct ent *x = NULL, *y = NULL;
    /* (seq, hash) of every member at its last seq and checkpoints, sorted:
     * two hashes at one seq differ -> the sequences differ at or before it. */
    struct hk *hv = malloc((g->hi - g->lo) * 3 * sizeof *hv);
    size_t n = 0;
    if (!hv)
        return;
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ccs_dsx_comm *e = c->ents[i].e;
        if (e->flags & CCS_DSX_HASH_LOST)
            continue;
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
    free(hv);
    if (!at)
        return;
    if (c->sink && c->sink->detail)
        c->sink->detail(comm, c->sink->arg);
    uint64_t since = seen_since(c->seen, SUSPECT_HASH, comm, 0, c->v->now_ms);
    if (c->v->now_ms - since < c->t->suspect_ms || !ccs_dsx_seen_add(c->seen, CCS_DSX_MISMATCH, comm, 0))
        return;
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    if (!v)
        return;
    v->cls = CCS_DSX_MISMATCH;
    v->comm = comm;
    v->seq = at;
    v->comm_size = g->size;
    add_party(c, v, x, CCS_DSX_R_DIFFERS);
    add_party(c, v, y, CCS_DSX_R_DIFFERS);
    sfmt(v->line, sizeof v->line,
         "comm=%#llx size=%d seq=%llu: ranks %d and %d issued different operations at or before seq %llu "
         "(fingerprint hashes differ; the records are no longer kept)",
         (unsigned long long)comm, g->size, (unsigned long long)at, x->wrank, y->wrank, (unsigned long long)at);
    emit(c, v);
    free(v);
}

static void rule_mismatch(struct ctx *c)
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

/* 1 when member M waits at the end of step S for the members of its comm. */
static int at_boundary(const struct ctx *c, const struct ent *m, uint32_t *s)
{
    const struct ccs_dsx_status *st = c->v->st[m->wrank];
    if (!(m->e->flags & CCS_DSX_BOUNDARY) || !st->boundary || c->term[m->wrank])
        return 0;
    if (s)
        *s = st->boundary - 1;
    return 1;
}

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
    int units; /* the counts are the helper's backward passes (it skipped DDP's reductions) */
    uint32_t passed_to; /* the furthest step a member went on to */
};

/* Member K of a step that ended for it with the count AT_COUNT the ranks at
 * the boundary made, as far as its status says. */
static int alike(const struct bnd *b, size_t k, long at_count)
{
    return at_count >= 0 && b->count[k] == at_count;
}

static void boundary_classify(struct ctx *c, struct grp *g, struct bnd *b)
{
    long at_count = -2;
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        uint32_t ms;
        if (at_boundary(c, m, &ms) && ms == b->s) {
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
        if (!gone_for(c, m) && at_boundary(c, m, &ms) && ms == b->s) {
            long n = b->units ? units_in_step(c->v->st[m->wrank], b->s) : calls_in_step(m->e, b->s, c->v->st[m->wrank]->step);
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
        b->count[k] = b->units ? units_in_step(st, b->s) : calls_in_step(m->e, b->s, c->v->st[m->wrank]->step);
        if (gone_for(c, m)) {
            b->what[k] = B_GONE;
            b->gone++;
            b->dead += c->v->dead && c->v->dead[m->wrank];
        } else if (at_boundary(c, m, &ms) && ms == b->s) {
            b->what[k] = B_AT;
        } else if (alike(b, k, at_count)) {
            /* It ended the step with the same count: the two agreed, and the
             * rank still shown at the boundary has not published its leaving
             * yet (statuses are not one instant). */
            b->what[k] = B_RUNNING;
        } else if (st->step > b->s || (at_boundary(c, m, &ms) && ms > b->s)) {
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
static void boundary_line(struct ctx *c, struct grp *g, const struct bnd *b, struct ccs_dsx_verdict *v)
{
    size_t n = g->hi - g->lo, nodd = 0, nblk = 0, nat = 0;
    int32_t *odd = malloc(n * sizeof *odd), *blk = malloc(n * sizeof *blk);
    if (!odd || !blk) {
        free(odd), free(blk);
        return;
    }
    long mode = boundary_mode(b, n), oddc = -1;
    int odd_at = 1;
    const struct ent *first_at = NULL, *first_blk = NULL;
    unsigned kind = CCS_KIND_MAX;
    for (size_t i = g->lo, k = 0; i < g->hi; i++, k++) {
        const struct ent *m = &c->ents[i];
        if (b->what[k] == B_AT) {
            nat++;
            first_at = first_at ? first_at : m;
            kind = b->units ? CCS_KIND_MAX + 1 : m->e->step_now == b->s ? m->e->step_kind : m->e->prev_kind;
        }
        if (b->count[k] >= 0 && b->count[k] != mode && (oddc < 0 || b->count[k] == oddc)) {
            oddc = b->count[k];
            odd[nodd++] = m->wrank;
            odd_at &= b->what[k] == B_AT;
        }
        if (c->be[m->wrank] == m->e && b->what[k] != B_GONE) {
            blk[nblk++] = m->wrank;
            first_blk = first_blk ? first_blk : m;
        }
    }
    char ro[256], rb[256], ops[160], tail[400] = "";
    size_t o = 0;
    if (!nodd) { /* counts alike or unknown: the ranks at the boundary are the subject */
        for (size_t i = g->lo, k = 0; i < g->hi; i++, k++)
            if (b->what[k] == B_AT)
                odd[nodd++] = c->ents[i].wrank;
        oddc = !first_at ? -1
               : b->units ? units_in_step(c->v->st[first_at->wrank], b->s)
                          : calls_in_step(first_at->e, b->s, c->v->st[first_at->wrank]->step);
        odd_at = 1;
    }
    ranks_of(odd, nodd, ro, sizeof ro);
    int w = odd_at ? sfmt(v->line, sizeof v->line, "comm=%#llx size=%d seq=%llu: rank%s %s ended step %u after %ld %s",
                          (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nodd > 1 ? "s" : "",
                          ro, b->s, oddc, calls_word(kind, oddc))
                   : sfmt(v->line, sizeof v->line, "comm=%#llx size=%d seq=%llu: rank%s %s made %ld %s in step %u",
                          (unsigned long long)v->comm, g->size, (unsigned long long)v->seq, nodd > 1 ? "s" : "",
                          ro, oddc, calls_word(kind, oddc), b->s);
    o = w > 0 ? (size_t)w : 0;
    if (o < sizeof v->line && mode >= 0 && mode != oddc)
        o += (size_t)sfmt(v->line + o, sizeof v->line - o, " where the others %s %ld", odd_at ? "made" : "ended it after",
                          mode);
    if (o < sizeof v->line && b->passed)
        o += (size_t)sfmt(v->line + o, sizeof v->line - o, "%s went on to step %u",
                          mode >= 0 && mode != oddc ? (b->passed > 1 ? " and they" : " and it") : "; the others",
                          b->passed_to);
    if (first_blk && o < sizeof v->line) {
        ranks_of(blk, nblk, rb, sizeof rb);
        ccs_dsx_op_str(&first_blk->e->blocked, ops, sizeof ops);
        o += (size_t)sfmt(v->line + o, sizeof v->line - o, "; rank%s %s blocked in %s at seq %llu for %.1f s",
                          nblk > 1 ? "s" : "", rb, ops, (unsigned long long)first_blk->e->blocked.seq,
                          first_blk->e->blocked_ms / 1000.0);
    }
    if (b->gone && o < sizeof v->line)
        o += (size_t)sfmt(v->line + o, sizeof v->line - o, "; %d member%s gone", b->gone, b->gone > 1 ? "s" : "");
    if (first_at && first_at->e->site_last[0])
        sfmt(tail, sizeof tail, "; rank %d last at %s", first_at->wrank, first_at->e->site_last);
    if (first_blk && first_blk->e->site_blocked[0]) {
        size_t t = strlen(tail);
        sfmt(tail + t, sizeof tail - t, "; rank %d at %s", first_blk->wrank, first_blk->e->site_blocked);
    }
    if (o < sizeof v->line)
        sfmt(v->line + o, sizeof v->line - o, " (at the end of the step, before its optimizer step: the ranks made "
                                                "different numbers of calls)%s", tail);
    (void)nat;
    free(odd), free(blk);
}

static void boundary_verdict(struct ctx *c, struct grp *g, uint32_t s)
{
    size_t n = g->hi - g->lo;
    struct bnd b = {.what = calloc(n, sizeof *b.what), .count = calloc(n, sizeof *b.count), .s = s,
                    .min_issued = UINT64_MAX};
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    if (!b.what || !b.count || !v)
        goto out;
    boundary_classify(c, g, &b);
    if (b.undecided)
        goto out; /* its records are still being read */
    if (!b.passed && !b.passed_unknown && !b.waits && !b.gone && !b.differ)
        goto out; /* the others are still in the step, or ended it alike */
    uint64_t comm = c->ents[g->lo].comm, sref = b.min_issued + 1;
    if (!b.passed && !b.gone && !b.differ) {
        /* Only blocked members, or members gone on whose count is not known:
         * the snapshots are not one instant; it must hold for a quarter of
         * the block threshold (the whole of it for an unknown count) first. */
        uint64_t since = seen_since(c->seen, CANDIDATE, comm, sref, c->v->now_ms);
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
        static const uint32_t role[] = {[B_RUNNING] = CCS_DSX_R_AGREES, [B_AT] = CCS_DSX_R_BEHIND,
                                        [B_PASSED] = CCS_DSX_R_AHEAD, [B_WAITS] = CCS_DSX_R_WAITING,
                                        [B_GONE] = CCS_DSX_R_BEHIND};
        add_party(c, v, &c->ents[i], role[b.what[k]]);
    }
    boundary_line(c, g, &b, v);
    emit(c, v);
out:
    free(b.what), free(b.count), free(v);
}

static void rule_boundary(struct ctx *c)
{
    for (size_t gi = 0; gi < c->ng; gi++) {
        struct grp *g = &c->g[gi];
        if (!g->complete)
            continue; /* members elsewhere: the coordinator sees them all */
        uint32_t s = UINT32_MAX, ms;
        for (size_t i = g->lo; i < g->hi; i++)
            if (at_boundary(c, &c->ents[i], &ms) && ms < s)
                s = ms;
        if (s != UINT32_MAX)
            boundary_verdict(c, g, s);
    }
}

/* --- DESYNC, DEAD and STRAGGLER */

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
    uint64_t s = mode_u64(vals, nv, count);
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
    if (life != CCS_DSX_ALIVE)
        sfmt(what, n, "%s", ccs_dsx_life_name(life));
    else if (m->e->state == CCS_DSX_FREED)
        sfmt(what, n, "freed the communicator");
    else if (b && b->id == comm) {
        ccs_dsx_op_str(&b->blocked, os, sizeof os);
        sfmt(what, n, "blocked in %s at seq %llu", os, (unsigned long long)b->blocked.seq);
    } else if (b) {
        ccs_dsx_op_str(&b->blocked, os, sizeof os);
        sfmt(what, n, "blocked in %s on comm=%#llx seq %llu", os, (unsigned long long)b->id,
             (unsigned long long)b->blocked.seq);
    } else
        sfmt(what, n, "running");
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
        int in = m->e->issued >= sref && died_in(c, m, sref);
        if (m->e->issued < sref || in) {
            d->nb++;
            uint32_t life = c->v->dead && c->v->dead[m->wrank] ? CCS_DSX_DIED : c->v->st[m->wrank]->life;
            d->ndead += life == CCS_DSX_DIED;
            char what[200], how[48];
            behind_what(c, m, comm, life, what, sizeof what);
            if (in)
                sfmt(how, sizeof how, "issued it");
            else
                sfmt(how, sizeof how, "%llu behind", (unsigned long long)(sref - m->e->issued));
            if (d->nb <= 6 && bo + 8 < sizeof d->behind) {
                int w = sfmt(d->behind + bo, sizeof d->behind - bo, "; rank %d at seq %llu (%s, %s)", m->wrank,
                             (unsigned long long)(in ? sref : m->e->issued), how, what);
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
        sfmt(d->behind + bo, sizeof d->behind - bo, "; and %zu more behind", d->nb - 6);
}

/* The parties of a DESYNC at SREF: the ranks behind first, then ahead,
 * then waiting. */
static void desync_parties(struct ctx *c, struct grp *g, uint64_t sref, struct ccs_dsx_verdict *v)
{
    for (size_t i = g->lo; i < g->hi; i++)
        if ((c->ents[i].e->issued < sref || died_in(c, &c->ents[i], sref)) && v->nparty < CCS_DSX_PARTIES / 2)
            add_party(c, v, &c->ents[i], CCS_DSX_R_BEHIND);
    for (size_t i = g->lo; i < g->hi; i++)
        if (stuck_here(c, &c->ents[i]) && c->ents[i].e->blocked.seq > sref)
            add_party(c, v, &c->ents[i], CCS_DSX_R_AHEAD);
    for (size_t i = g->lo; i < g->hi; i++)
        if (stuck_here(c, &c->ents[i]) && c->ents[i].e->blocked.seq == sref)
            add_party(c, v, &c->ents[i], CCS_DSX_R_WAITING);
}

/* A DESYNC (or DEAD, when every rank behind died) on G, where someone is
 * stuck; CERTAIN: every stuck member waits only for ranks that are gone,
 * else the verdict must hold for a quarter of block_ms first. */
static void desync_verdict(struct ctx *c, struct grp *g, int certain)
{
    uint64_t comm = c->ents[g->lo].comm;
    size_t best;
    uint64_t sref = blocked_seq(c, g, &best);
    if (!best)
        return;
    if (!certain) {
        uint64_t since = seen_since(c->seen, CANDIDATE, comm, sref, c->v->now_ms);
        if (c->v->now_ms - since < c->t->block_ms / 4)
            return; /* must hold on later passes too: statuses are not one snapshot */
    }
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
    char rw[256], ra[256], ops[160], aheadtxt[300] = "";
    ranks_of(d.wait, d.nw, rw, sizeof rw);
    ccs_dsx_op_str(d.wop, ops, sizeof ops);
    if (d.na) {
        ranks_of(d.ahead, d.na, ra, sizeof ra);
        sfmt(aheadtxt, sizeof aheadtxt, "; rank%s %s blocked at a later seq (ahead)", d.na > 1 ? "s" : "", ra);
    }
    v->cls = cls;
    v->comm = comm;
    v->seq = sref;
    v->comm_size = g->size;
    sfmt(v->line, sizeof v->line, "comm=%#llx size=%d seq=%llu: rank%s %s blocked in %s at seq %llu for %.1f s%s%s",
         (unsigned long long)comm, g->size, (unsigned long long)sref, d.nw > 1 ? "s" : "", rw, ops,
         (unsigned long long)sref, d.wms / 1000.0, d.behind, aheadtxt);
    emit(c, v);
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
        if (m->e->issued < s && !c->be[m->wrank] && !gone_for(c, m) && !at_boundary(c, m, NULL)) {
            late[nl++] = m->wrank;
            add_party(c, v, m, CCS_DSX_R_BEHIND);
        }
    }
    for (size_t i = g->lo; i < g->hi; i++) {
        const struct ent *m = &c->ents[i];
        if (c->be[m->wrank] == m->e && m->e->blocked.seq == s) {
            wait[nw++] = m->wrank;
            wop = wop ? wop : &m->e->blocked;
            add_party(c, v, m, CCS_DSX_R_WAITING);
        }
    }
    char rw[256], rl[256], ops[160];
    ranks_of(wait, nw, rw, sizeof rw);
    ranks_of(late, nl, rl, sizeof rl);
    ccs_dsx_op_str(wop, ops, sizeof ops);
    v->cls = CCS_DSX_STRAGGLER;
    v->comm = comm;
    v->seq = s;
    v->comm_size = g->size;
    sfmt(v->line, sizeof v->line,
         "comm=%#llx size=%d seq=%llu: rank%s %s waited %.1f s in %s for rank%s %s (not in any collective: "
         "computing or in point-to-point); a warning, not a desync",
         (unsigned long long)comm, g->size, (unsigned long long)s, nw > 1 ? "s" : "", rw, waited_ms / 1000.0, ops,
         nl > 1 ? "s" : "", rl);
    if (nl)
        emit(c, v);
    free(wait), free(late), free(v);
}

static void rule_blocked(struct ctx *c)
{
    int32_t wsize = c->v->wsize;
    int any = 0;
    for (int32_t r = 0; r < wsize; r++)
        any |= c->be[r] != NULL;
    if (!any)
        return;
    /* Certain verdicts: blocked ranks waiting only for ranks that are gone. */
    reset_memo(c);
    uint8_t *certain = calloc((size_t)wsize, 1);
    if (!certain)
        return;
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_comm *b = c->be[r];
        if (!b || c->term[r])
            continue;
        struct grp *g = find_group(c, b->id);
        certain[r] = g && group_holds(c, g, b->blocked.seq, 1);
    }
    /* Stuck set: start from every blocked-long-enough or certain rank and
     * every gone rank; drop blocked ranks that wait for a rank not stuck. */
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_comm *b = c->be[r];
        c->stuck[r] = c->term[r] || (b && (certain[r] || b->blocked_ms >= c->t->block_ms));
    }
    for (int changed = 1; changed;) {
        changed = 0;
        reset_memo(c);
        for (int32_t r = 0; r < wsize; r++) {
            const struct ccs_dsx_comm *b = c->be[r];
            if (!c->stuck[r] || c->term[r] || !b)
                continue;
            struct grp *g = find_group(c, b->id);
            if (!g || !group_holds(c, g, b->blocked.seq, 0)) {
                c->stuck[r] = 0;
                changed = 1;
            }
        }
    }
    /* One verdict per communicator someone is stuck in. */
    for (size_t gi = 0; gi < c->ng; gi++) {
        struct grp *g = &c->g[gi];
        int has = 0, cert = 1;
        for (size_t i = g->lo; i < g->hi; i++) {
            const struct ent *m = &c->ents[i];
            if (stuck_here(c, m)) {
                has = 1;
                cert &= certain[m->wrank];
            }
        }
        if (has)
            desync_verdict(c, g, cert);
    }
    /* Stragglers: waiting long for a rank that is not in any collective. */
    for (int32_t r = 0; r < wsize; r++) {
        const struct ccs_dsx_comm *b = c->be[r];
        if (!b || c->stuck[r] || c->term[r] || b->blocked_ms < c->t->straggler_ms)
            continue;
        struct grp *g = find_group(c, b->id);
        if (g)
            straggler_verdict(c, g, b->blocked.seq, b->blocked_ms);
    }
    free(certain);
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
        if (size <= wsize)
            c.g[c.ng++] =
                (struct grp){.lo = i, .hi = j, .size = size, .complete = (int32_t)distinct == size, .memo_r = -1};
        i = j;
    }
    rule_boundary(&c);
    rule_mismatch(&c);
    rule_blocked(&c);
    rc = c.emitted;
out:
    free(c.ents);
    free(c.g);
    free(c.term);
    free(c.stuck);
    free(c.be);
    return rc;
}
