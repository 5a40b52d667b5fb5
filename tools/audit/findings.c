/*
 * findings.c - turns the aggregates into findings, each with evidence and a
 * suggested action: redundant reductions, ranks that disagree, desync
 * reports present, coalescing at work, traces cut short or unreadable.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

static struct audit_finding *add(struct audit *a, int kind, int severity)
{
    struct audit_finding *n = realloc(a->findings, (a->nfindings + 1) * sizeof *n);
    if (!n)
        return NULL;
    a->findings = n;
    struct audit_finding *f = &a->findings[a->nfindings++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->severity = severity;
    return f;
}

/* Files are sorted by rank as unsigned (unknown ranks last): bisect. */
static const struct audit_file *file_of_rank(const struct audit *a, int32_t rank)
{
    size_t lo = 0, hi = a->nfiles;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uint32_t)a->files[mid].rank < (uint32_t)rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < a->nfiles && a->files[lo].rank == rank; lo++)
        if (a->files[lo].status != FILE_REFUSED)
            return &a->files[lo];
    return NULL;
}

struct member {
    int32_t rank;
    uint64_t ncoll, fpsum;
};

static int member_cmp(const void *x, const void *y)
{
    const struct member *a = x, *b = y;
    if (a->ncoll != b->ncoll)
        return a->ncoll < b->ncoll ? -1 : 1;
    if (a->fpsum != b->fpsum)
        return a->fpsum < b->fpsum ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static int rank_cmp(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* What RANK's sequenced collectives on COMM in STEP add up to, or NULL when it made none. */
static const struct audit_seqsum *seqsum_of(const struct audit *a, uint32_t step, uint64_t comm, int32_t rank)
{
    struct audit_seqsum_key key;
    memset(&key, 0, sizeof key);
    key.comm = comm;
    key.step = step;
    key.rank = rank;
    return hmap_get((struct hmap *)&a->seqsums, &key, 0);
}

/* Members of COMM present in STEP, with what they did in it; caller frees. */
static struct member *step_members(const struct audit *a, uint32_t step, uint64_t comm, size_t *n)
{
    *n = 0;
    /* Members: ranks that ever made a sequenced call on COMM. */
    const struct audit_comm *cm = audit_comm_get((struct audit *)a, comm, 0);
    size_t cap = 0;
    struct member *m = NULL;
    for (size_t i = 0; cm && i < cm->nmembers; i++) {
        int32_t rank = cm->members[i];
        const struct audit_file *f = file_of_rank(a, rank);
        if (!f || f->last_step < step) /* its trace ended before this step */
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct member *nm = realloc(m, cap * sizeof *nm);
            if (!nm)
                break;
            m = nm;
        }
        m[*n].rank = rank;
        m[*n].ncoll = m[*n].fpsum = 0;
        const struct audit_seqsum *s = seqsum_of(a, step, comm, rank);
        if (s) {
            m[*n].ncoll = s->ncoll;
            m[*n].fpsum = s->fpsum;
        }
        (*n)++;
    }
    return m;
}

size_t audit_step_outliers(const struct audit *a, uint32_t step, uint64_t comm, int32_t *out, size_t max)
{
    size_t n;
    struct member *m = step_members(a, step, comm, &n);
    if (!m)
        return 0;
    qsort(m, n, sizeof *m, member_cmp);
    /* The largest group of identical (count, fingerprints) is the norm; on a
     * tie, the group holding the lowest rank. */
    size_t best = 0, best_len = 0;
    int32_t best_low = INT32_MAX;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int32_t low = INT32_MAX;
        while (j < n && m[j].ncoll == m[i].ncoll && m[j].fpsum == m[i].fpsum) {
            if (m[j].rank < low)
                low = m[j].rank;
            j++;
        }
        if (j - i > best_len || (j - i == best_len && low < best_low)) {
            best = i;
            best_len = j - i;
            best_low = low;
        }
        i = j;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= best && i < best + best_len)
            continue;
        if (k < max)
            out[k] = m[i].rank;
        k++;
    }
    free(m);
    if (k && max)
        qsort(out, k < max ? k : max, sizeof *out, rank_cmp);
    return k;
}

/* What the norm and an outlier did in a step, for the evidence. */
static void counts_of(const struct audit *a, uint32_t step, uint64_t comm, int32_t rank, uint64_t *ncoll)
{
    const struct audit_seqsum *s = seqsum_of(a, step, comm, rank);
    *ncoll = s ? s->ncoll : 0;
}

static uint64_t first_diff(const struct audit *a, uint64_t comm, const int32_t *ranks, size_t n)
{
    const struct audit_comm *cm = audit_comm_get((struct audit *)a, comm, 0);
    uint64_t best = 0;
    int ref_is_outlier = 0;
    for (size_t i = 0; i < n; i++)
        if (cm && ranks[i] == cm->ref_rank)
            ref_is_outlier = 1;
    for (size_t i = 0; i < a->rankcomms.cap; i++) {
        const struct audit_rankcomm *rc = hmap_slot(&a->rankcomms, i);
        if (!rc || rc->k.comm != comm || !rc->first_diff)
            continue;
        int in = 0;
        for (size_t j = 0; j < n; j++)
            in |= ranks[j] == rc->k.rank;
        /* Outliers' own departure, or everyone's when the reference is one. */
        if ((in || ref_is_outlier) && (best == 0 || rc->first_diff < best))
            best = rc->first_diff;
    }
    return best;
}

static int u32_cmp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* The steps in which COMM has sequenced calls, sorted and unique; caller frees. */
static uint32_t *comm_steps(const struct audit *a, uint64_t comm, size_t *n)
{
    uint32_t *v = NULL;
    size_t k = 0, cap = 0;
    for (size_t i = 0; i < a->seqsums.cap; i++) {
        const struct audit_seqsum *s = hmap_slot(&a->seqsums, i);
        if (!s || s->k.comm != comm)
            continue;
        if (k == cap) {
            cap = cap ? cap * 2 : 64;
            uint32_t *nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        v[k++] = s->k.step;
    }
    if (k)
        qsort(v, k, sizeof *v, u32_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1] != v[i])
            v[u++] = v[i];
    *n = u;
    return v;
}

/* A rank of the norm in STEP on COMM: the lowest member not among the
 * OUTLIERS (N), its sequenced collectives into *NCOLL; -1 when none. */
static int32_t majority_rank(const struct audit *a, uint32_t step, uint64_t comm, const int32_t *outliers, size_t n,
                             uint64_t *ncoll)
{
    size_t nm;
    struct member *m = step_members(a, step, comm, &nm);
    int32_t norm_rank = -1;
    for (size_t i = 0; m && i < nm; i++) {
        int outlier = 0;
        for (size_t j = 0; j < n; j++)
            outlier |= m[i].rank == outliers[j];
        if (!outlier && (norm_rank < 0 || m[i].rank < norm_rank))
            norm_rank = m[i].rank, *ncoll = m[i].ncoll;
    }
    free(m);
    return norm_rank;
}

static void mismatch_findings(struct audit *a)
{
    for (size_t ci = 0; ci < a->ncomms; ci++) {
        uint64_t comm = a->comms[ci].id;
        uint32_t first = 0, last = 0, nsteps = 0;
        int32_t ranks[16];
        size_t nr = 0, total_out = 0, ns;
        uint32_t *steps = comm_steps(a, comm, &ns);
        for (size_t si = 0; si < ns; si++) {
            uint32_t step = steps[si];
            int32_t out[16];
            size_t k = audit_step_outliers(a, step, comm, out, 16);
            if (!k)
                continue;
            if (!nsteps) {
                first = step;
                memcpy(ranks, out, (k < 16 ? k : 16) * sizeof *out);
                nr = k < 16 ? k : 16;
                total_out = k;
            }
            last = step;
            nsteps++;
        }
        free(steps);
        if (!nsteps)
            continue;
        struct audit_finding *f = add(a, FIND_MISMATCH, 2);
        if (!f)
            return;
        char ranks_text[128], norm_text[64];
        ccs_ranks_str(ranks, nr, ranks_text, sizeof ranks_text);
        f->step_first = first;
        f->step_last = last;
        f->steps = nsteps;
        f->comm = comm;
        f->nranks = (int)nr;
        memcpy(f->ranks, ranks, nr * sizeof *ranks);
        f->first_seq = first_diff(a, comm, ranks, nr);
        uint64_t mine = 0, norm = 0;
        counts_of(a, first, comm, ranks[0], &mine);
        int32_t norm_rank = majority_rank(a, first, comm, ranks, nr, &norm);
        snprintf(norm_text, sizeof norm_text, "%d", (int)norm_rank);
        snprintf(f->title, sizeof f->title,
                 "rank%s %s disagree%s with the others on comm %016" PRIx64 " from step %u",
                 total_out > 1 ? "s" : "", ranks_text, total_out > 1 ? "" : "s", comm, first);
        int o = snprintf(
            f->evidence, sizeof f->evidence,
            "step %u: rank %d made %" PRIu64 " sequenced collectives, rank %s (the majority) %" PRIu64 "%s; ",
            first, (int)ranks[0], mine, norm_text, norm, mine == norm ? " (same count, different calls)" : "");
        if (f->first_seq && o > 0 && (size_t)o < sizeof f->evidence)
            o += snprintf(f->evidence + o, sizeof f->evidence - (size_t)o,
                          "first differing sequence number %" PRIu64 "; ", f->first_seq);
        if (o > 0 && (size_t)o < sizeof f->evidence)
            o += snprintf(f->evidence + o, sizeof f->evidence - (size_t)o, "%u step%s affected (%u to %u)",
                          nsteps, nsteps > 1 ? "s" : "", first, last);
        for (size_t i = 0; i < nr; i++) { /* a damaged file can make this up */
            const struct audit_file *fl = file_of_rank(a, ranks[i]);
            if (fl && fl->status == FILE_DAMAGED && o > 0 && (size_t)o < sizeof f->evidence)
                o += snprintf(f->evidence + o, sizeof f->evidence - (size_t)o,
                              "; rank %d's trace is damaged (see its finding): the difference may be the "
                              "damage's",
                              (int)ranks[i]);
        }
        snprintf(f->action, sizeof f->action,
                 "A collective issued under a rank-dependent condition makes NCCL/MPI hang until the timeout. "
                 "List the calls around sequence %" PRIu64
                 " with `ccshim-audit --tsv-records DIR` (columns rank, seq) and look for the branch taken "
                 "on rank %d only; CCSHIM_DESYNC detects this at run time.",
                 f->first_seq, (int)ranks[0]);
    }
}

/* What one communicator's steps with repeated coalescible reductions show. */
struct repeats_seen {
    uint32_t nsteps, first, last;
    uint32_t kmin, kmax, kfirst; /* reductions of one buffer per step: fewest, most, in the first step */
    uint32_t bufs;               /* most buffers reduced more than once in a step */
    uint32_t ranks;              /* most ranks repeating in a step */
    uint32_t all_ranks;          /* every member repeats in every such step */
    /* the first step's example buffer */
    int32_t rank;
    uint64_t bytes, count;
    uint32_t dtype, op, site;
};

/* Gathers COMM's steps (V, sorted) in which a coalescible buffer was reduced twice or more. */
static struct repeats_seen gather_repeats(struct audit *a, struct audit_stepcomm *const *v, size_t n, uint64_t comm)
{
    struct repeats_seen r = {.all_ranks = 1};
    const struct audit_comm *cm = audit_comm_get(a, comm, 0);
    for (size_t i = 0; i < n; i++) {
        const struct audit_stepcomm *s = v[i];
        if (s->k.comm != comm || s->coalescible.max_k < 2)
            continue;
        if (!r.nsteps) {
            r.first = s->k.step;
            r.kfirst = s->coalescible.max_k;
            r.kmin = s->coalescible.min_k;
            r.rank = s->coalescible.rank;
            r.bytes = s->coalescible.bytes;
            r.count = s->coalescible.count;
            r.dtype = s->coalescible.dtype;
            r.op = s->coalescible.op;
            r.site = s->coalescible.site;
        }
        r.nsteps++;
        r.last = s->k.step;
        if (s->coalescible.min_k < r.kmin)
            r.kmin = s->coalescible.min_k;
        if (s->coalescible.max_k > r.kmax)
            r.kmax = s->coalescible.max_k;
        if (s->coalescible.repeated_bufs > r.bufs)
            r.bufs = s->coalescible.repeated_bufs;
        if (s->coalescible.ranks_repeating > r.ranks)
            r.ranks = s->coalescible.ranks_repeating;
        if (!cm || s->coalescible.ranks_repeating != cm->nmembers)
            r.all_ranks = 0;
    }
    return r;
}

/* The advice: coalesce (naming every:k when one k fits every step and rank),
 * or, without step markers, how to get them. */
static void redundancy_action(const struct audit *a, const struct repeats_seen *r, int marked, char *action,
                              size_t len)
{
    const char *py = r->site && r->site <= a->nsites ? a->site_list[r->site - 1]->pysite : NULL;
    char where[300] = "all but the last backward of the step";
    if (py) /* the Python line that issued them (ccshim-run --torch) */
        snprintf(where, sizeof where,
                 "the backward at %.200s in DDP's no_sync() for all but the last "
                 "mini-batch of the step",
                 py);
    else
        snprintf(where + strlen(where), sizeof where - strlen(where), " in DDP's no_sync()");
    if (!marked)
        snprintf(action, len,
                 "Without step markers ccshim-audit cannot tell per-mini-batch gradient reductions from an "
                 "algorithm that reduces a buffer repeatedly by design, so do not coalesce on this evidence. "
                 "If this is a training loop, mark each optimizer step (ccshim_step_mark() from ccshim.h, or "
                 "run a PyTorch job under ccshim-run --torch) and audit again: coalescing needs the markers.");
    else if (r->kmin == r->kmax && r->all_ranks && r->nsteps == r->last - r->first + 1)
        snprintf(action, len,
                 "These look like per-mini-batch gradient reductions: only the last one of each step matters. "
                 "Run with CCSHIM_COALESCE=auto (or CCSHIM_COALESCE=every:%u, as every step and rank makes %u) "
                 "to defer all but the last; in the code, wrap %s.",
                 r->kmax, r->kmax, where);
    else
        snprintf(action, len,
                 "These look like per-mini-batch gradient reductions: only the last one of each step matters. "
                 "Run with CCSHIM_COALESCE=auto, which learns the count per buffer (it is not the same in "
                 "every step and on every rank here, so no every:N fits); in the code, wrap %s.",
                 where);
}

static void fill_redundancy(const struct audit *a, struct audit_finding *f, const struct repeats_seen *r,
                            uint64_t comm, int marked)
{
    char bytes_text[32], k_text[32], site_name[256] = "an unknown site";
    if (r->site && r->site <= a->nsites)
        audit_site_name(a->site_list[r->site - 1], site_name, sizeof site_name);
    if (r->kmin == r->kmax)
        snprintf(k_text, sizeof k_text, "%u", r->kmax);
    else
        snprintf(k_text, sizeof k_text, "%u to %u", r->kmin, r->kmax);
    f->k = r->kmax;
    f->comm = comm;
    f->step_first = r->first;
    f->step_last = r->last;
    f->steps = r->nsteps;
    f->ranks[0] = r->rank;
    f->nranks = 1;
    const char *per = marked                              ? "per step"
                      : a->steps.source == STEPS_INFERRED ? "per inferred step (no step markers)"
                                                          : "in the run (no step markers)";
    snprintf(f->title, sizeof f->title, "allreduce reduces the same buffer %s times %s (comm %016" PRIx64 ")",
             k_text, per, comm);
    snprintf(f->evidence, sizeof f->evidence,
             "step %u: rank %d reduced one %s buffer (%" PRIu64 " %s, %s) %u times (from %s); %u buffer%s "
             "reduced more than once per step; %u rank%s; %u step%s (%u to %u)",
             r->first, (int)r->rank, fmt_bytes(r->bytes, bytes_text, sizeof bytes_text), r->count,
             ccs_dtype_name(r->dtype), ccs_op_name(r->op), r->kfirst, site_name, r->bufs, r->bufs == 1 ? "" : "s",
             r->ranks, r->ranks == 1 ? "" : "s", r->nsteps, r->nsteps == 1 ? "" : "s", r->first, r->last);
    redundancy_action(a, r, marked, f->action, sizeof f->action);
}

/* Whether coalescing ran on COMM: reductions it deferred (*DEFERRED) and
 * the torch helper's real reductions standing for skipped ones (*HELPER),
 * with the first step either happened in (*FROM).  1 when it ran. */
static int coalescing_on(const struct audit *a, uint64_t comm, uint64_t *deferred, uint64_t *helper, uint32_t *from)
{
    *deferred = *helper = 0;
    *from = UINT32_MAX;
    for (size_t i = 0; i < a->cells.cap; i++) {
        const struct audit_cell *c = hmap_slot((struct hmap *)&a->cells, i);
        if (!c || c->k.comm != comm || !ccs_kind_reduces(c->k.kind) || !c->k.deferred)
            continue;
        *(c->k.deferred == 1 ? deferred : helper) += c->count;
        if (c->k.step < *from)
            *from = c->k.step;
    }
    return *deferred + *helper > 0;
}

/* The finding F of repeats on a communicator where coalescing already runs:
 * what remains are the reductions it performed for real, and advising to
 * turn it on would be wrong. */
static void already_coalescing(struct audit_finding *f, const struct repeats_seen *r, uint64_t deferred,
                               uint64_t helper, uint32_t from)
{
    char steps[48];
    if (r->first == r->last)
        snprintf(steps, sizeof steps, "step %u", r->first);
    else
        snprintf(steps, sizeof steps, "steps %u to %u", r->first, r->last);
    snprintf(f->title, sizeof f->title,
             "coalescing is on, yet allreduce reduced the same buffer %u times per step in %s (comm %016" PRIx64
             ")",
             r->kmax, steps, f->comm);
    size_t o = strlen(f->evidence);
    if (deferred)
        snprintf(f->evidence + o, sizeof f->evidence - o,
                 "; coalescing deferred %" PRIu64 " reductions on this communicator, from step %u", deferred, from);
    else
        snprintf(f->evidence + o, sizeof f->evidence - o,
                 "; the torch helper made DDP skip its synchronisation on this communicator from step %u (%" PRIu64
                 " real reductions stand for skipped ones)",
                 from, helper);
    if (r->last < from)
        snprintf(f->action, sizeof f->action,
                 "Nothing to turn on: these are the reductions of the steps before coalescing deferred any "
                 "(CCSHIM_COALESCE=auto learns each buffer's count over the first steps). To avoid them too, skip "
                 "the synchronisation of all but the last backward of the step in the code (DDP's no_sync()).");
    else
        snprintf(f->action, sizeof f->action,
                 "Nothing to turn on: these are reductions coalescing performed for real while deferring others "
                 "(with CCSHIM_COALESCE=every:N, a count per step that N does not match; with auto, a count that "
                 "changes between steps). Match every:N to the count, or skip the synchronisation of all but "
                 "the last backward of the step in the code (DDP's no_sync()).");
}

/* Repeated reductions of one buffer (address, count, datatype, operation)
 * within a step that coalescing could defer (audit_coalescible).  Only
 * marked steps are evidence of per-mini-batch gradient reductions: without
 * markers the "step" is a period of the call stream (or the whole run), and
 * an iterative solver repeats its reductions just as a training loop does,
 * so there the finding says what is seen and how to get the markers, never
 * to coalesce. */
static void redundancy_findings(struct audit *a)
{
    size_t n;
    struct audit_stepcomm **v = audit_sorted_stepcomms(a, &n);
    if (!v)
        return;
    int marked = a->steps.source == STEPS_MARKERS;
    for (size_t ci = 0; ci < a->ncomms; ci++) {
        uint64_t comm = a->comms[ci].id;
        struct repeats_seen r = gather_repeats(a, v, n, comm);
        if (!r.nsteps)
            continue;
        uint32_t from;
        uint64_t deferred, helper;
        int on = coalescing_on(a, comm, &deferred, &helper, &from);
        struct audit_finding *f = add(a, FIND_REDUNDANT, marked && !on ? 1 : 0);
        if (!f)
            break;
        fill_redundancy(a, f, &r, comm, marked);
        if (on)
            already_coalescing(f, &r, deferred, helper, from);
    }
    free(v);
}

static void deferred_findings(struct audit *a)
{
    uint64_t deferred = 0, real = 0, helper = 0;
    uint32_t hlo = UINT32_MAX, hhi = 0;
    for (size_t i = 0; i < a->cells.cap; i++) {
        struct audit_cell *c = hmap_slot(&a->cells, i);
        if (!c || !ccs_kind_reduces(c->k.kind))
            continue;
        if (c->k.deferred == 1)
            deferred += c->count;
        else
            real += c->count;
        if (c->k.deferred == 2) {
            helper += c->count;
            hlo = c->k.step < hlo ? c->k.step : hlo;
            hhi = c->k.step > hhi ? c->k.step : hhi;
        }
    }
    if (helper) {
        struct audit_finding *h = add(a, FIND_DEFERRED, 0);
        if (h) {
            snprintf(h->title, sizeof h->title,
                     "coalescing by DDP itself in steps %u-%u: the torch helper made DDP skip its per-mini-batch "
                     "synchronisation (as no_sync)",
                     hlo, hhi);
            snprintf(h->evidence, sizeof h->evidence,
                     "%" PRIu64 " reductions were the one real reduction per bucket of a step whose other "
                     "backward passes skipped DDP's synchronisation (the allreduce(helper) rows); the closing "
                     "line of each rank counts the reductions avoided",
                     helper);
            snprintf(h->action, sizeof h->action,
                     "Nothing to do: DDP reduced the gradients accumulated over the step once, as under no_sync(). "
                     "Check that the trained model matches a run without CCSHIM_COALESCE before relying on it.");
            h->k = helper;
        }
    }
    if (!deferred)
        return;
    struct audit_finding *f = add(a, FIND_DEFERRED, 0);
    if (!f)
        return;
    snprintf(f->title, sizeof f->title, "coalescing deferred %" PRIu64 " of %" PRIu64 " reductions", deferred,
             deferred + real);
    snprintf(f->evidence, sizeof f->evidence,
             "%" PRIu64 " reductions were performed for real and %" PRIu64
             " were deferred (marked deferred, never sent); per step and rank see the (deferred) rows",
             real, deferred);
    snprintf(f->action, sizeof f->action,
             "Nothing to do: these reductions were replaced by local arithmetic. Check that the trained model "
             "matches a run without CCSHIM_COALESCE before relying on it.");
    f->k = deferred;
}

static void file_findings(struct audit *a)
{
    uint32_t max_last = 0;
    for (size_t i = 0; i < a->nfiles; i++)
        if (a->files[i].status != FILE_REFUSED && a->files[i].last_step > max_last)
            max_last = a->files[i].last_step;
    for (size_t i = 0; i < a->nfiles; i++) {
        struct audit_file *fl = &a->files[i];
        struct audit_finding *f;
        if (fl->status == FILE_REFUSED || fl->status == FILE_DAMAGED) {
            if (!(f = add(a, FIND_UNREADABLE, 1)))
                return;
            snprintf(f->title, sizeof f->title, "%s trace %s", fl->status == FILE_REFUSED ? "skipped" : "damaged",
                     fl->path);
            snprintf(f->evidence, sizeof f->evidence, "%s", fl->error ? fl->error : "");
            snprintf(f->action, sizeof f->action, "%s",
                     fl->status == FILE_REFUSED
                         ? "Read it with a ccshim-audit of the same or a newer version as the job's ccshim, or "
                           "remove it from the directory."
                         : "The file was altered after it was written (disk, copy or transfer): the calls read "
                           "are counted, what the evidence names is not. Traces carry no checksum, so damage "
                           "shows only where a value cannot be right: this rank's other numbers may be wrong "
                           "too. Audit without this file, or run the job again, before relying on them.");
            f->ranks[0] = fl->rank;
            f->nranks = 1;
        } else if (fl->status == FILE_TRUNCATED) {
            if (!(f = add(a, FIND_TRUNCATED, 1)))
                return;
            snprintf(f->title, sizeof f->title, "rank %d's trace is cut short at step %u", (int)fl->rank,
                     fl->last_step);
            snprintf(f->evidence, sizeof f->evidence,
                     "%s; %" PRIu64 " calls read, the last in step %u; the other ranks reach step %u: "
                     "steps %u to %u of this rank are missing",
                     fl->error ? fl->error : fl->path, fl->records, fl->last_step, max_last, fl->last_step,
                     max_last);
            snprintf(f->action, sizeof f->action,
                     "The process died (or is still running). Its last calls are in the flight-recorder dump "
                     "when one was written; compare its last step with the other ranks'.");
            f->ranks[0] = fl->rank;
            f->nranks = 1;
            f->step_first = fl->last_step;
        }
        if (fl->has_end && fl->end.dropped) {
            if (!(f = add(a, FIND_DROPPED, 1)))
                return;
            snprintf(f->title, sizeof f->title, "rank %d lost %" PRIu64 " records to ring overflow", (int)fl->rank,
                     (uint64_t)fl->end.dropped);
            snprintf(f->evidence, sizeof f->evidence, "END chunk of %s: %" PRIu64 " written, %" PRIu64 " dropped",
                     fl->path, (uint64_t)fl->end.records, (uint64_t)fl->end.dropped);
            snprintf(f->action, sizeof f->action,
                     "Counts of this rank are low by that much; raise the ring size (see docs/configuration.md).");
            f->ranks[0] = fl->rank;
            f->nranks = 1;
        }
    }
}

/* Appends to F's evidence (a line of it ends in "; "). */
static void evidence_add(struct audit_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void evidence_add(struct audit_finding *f, const char *fmt, ...)
{
    size_t o = strlen(f->evidence);
    if (o + 1 >= sizeof f->evidence)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence + o, sizeof f->evidence - o, fmt, ap);
    va_end(ap);
}

/* "file.c:18" of a site's name ("main at /x/file.c:18 (inlined ...)"), for
 * titles; the site's whole name when it has no file:line. */
static const char *short_site(const struct audit *a, uint32_t site, char *buf, size_t n)
{
    if (!site || site > a->nsites) {
        snprintf(buf, n, "an unknown site");
        return buf;
    }
    char name[512];
    const char *nm = audit_site_name(a->site_list[site - 1], name, sizeof name);
    const char *at = strstr(nm, " at ");
    if (!at) {
        snprintf(buf, n, "%s", nm);
        return buf;
    }
    at += 4;
    size_t l = strcspn(at, " (");
    const char *slash = at;
    for (const char *p = at; p < at + l; p++)
        if (*p == '/')
            slash = p + 1;
    snprintf(buf, n, "%.*s", (int)(at + l - slash), slash);
    return buf;
}

/* The call rank F was in when it ended on COMM (any comm when COMM is 0), or NULL. */
static const struct audit_inflight *inflight_of(const struct audit_file *f, uint64_t comm)
{
    for (size_t i = 0; f && i < f->ninflight; i++) {
        const struct audit_inflight *x = &f->inflight[i];
        if (ccs_kind_class(x->r.kind) == CCS_CLASS_MARK)
            continue;
        if (!comm || x->r.comm == comm)
            return x;
    }
    return NULL;
}

static const struct audit_report *flight_of(const struct audit *a, int32_t rank)
{
    for (size_t i = 0; i < a->nreports; i++)
        if (a->reports[i].flight && a->reports[i].rank == rank)
            return &a->reports[i];
    return NULL;
}

/* The global site of flight dump D's call in progress, through the site
 * ids of the same process's trace F (0 when either does not name it). */
static uint32_t flight_site(const struct audit_file *f, const struct audit_report *d)
{
    if (!f || !d || !d->inflight_site || d->inflight_site >= f->site_map_n)
        return 0;
    return f->site_map[d->inflight_site];
}

/* "03:15:24.211 UTC": the wall-clock time WALL_NS (ns since the epoch). */
static void wall_str(uint64_t wall_ns, char *buf, size_t n)
{
    time_t sec = (time_t)(wall_ns / 1000000000u);
    struct tm tm;
    if (!gmtime_r(&sec, &tm)) {
        snprintf(buf, n, "an unknown time");
        return;
    }
    snprintf(buf, n, "%02d:%02d:%02d.%03u UTC", tm.tm_hour, tm.tm_min, tm.tm_sec,
             (unsigned)(wall_ns % 1000000000u / 1000000u));
}

/* The same, of T_NS (ns from the trace's start) on rank F. */
static void wall_of(const struct audit_file *f, uint64_t t_ns, char *buf, size_t n)
{
    wall_str(f->start_realtime_ns + t_ns, buf, n);
}

/* How rank F's process ended, from its END chunk (or its absence). */
static void end_of(const struct audit_file *f, char *buf, size_t n)
{
    if (!f)
        snprintf(buf, n, "no trace");
    else if (!f->has_end)
        snprintf(buf, n, "died without ending its trace (killed by SIGKILL, or still running)");
    else if (f->end.reason == CCS_END_SIGNAL)
        snprintf(buf, n, "killed by signal %d", (int)f->end.signo);
    else if (f->end.reason == CCS_END_FINALIZE) /* an exit writes an END after it, an _exit or SIGKILL none */
        snprintf(buf, n, "finalized, no exit recorded after it");
    else if (f->end.reason == CCS_END_EXIT)
        snprintf(buf, n, "exited");
    else
        snprintf(buf, n, "flushed its trace and wrote no more");
}

/* What rank F was doing at the end, seen from COMM (whose seq S it had not
 * reached): in a call elsewhere, or not in a collective, and how it ended. */
static void state_behind(const struct audit *a, const struct audit_file *f, int32_t rank, char *buf, size_t n)
{
    char how[128], site[160], when[32];
    end_of(f, how, sizeof how);
    const struct audit_inflight *x = inflight_of(f, 0);
    const struct audit_report *fl = flight_of(a, rank);
    if (x) {
        wall_of(f, x->r.t_start, when, sizeof when);
        snprintf(buf, n, "in %s at %.100s (seq %" PRIu64 " of comm %016" PRIx64 "), blocked since %s for %.1f s; %.100s",
                 ccs_kind_name(x->r.kind), short_site(a, x->site, site, sizeof site), x->r.seq, x->r.comm, when,
                 (double)x->r.t_dur / 1e9, how);
    } else if (fl && fl->has_inflight && (!f || !f->has_end)) {
        uint32_t at = flight_site(f, fl);
        snprintf(buf, n, "in %s%s%.100s (seq %" PRIu64 " of comm %016" PRIx64 ", its flight dump); %s",
                 fl->inflight_kind, at ? " at " : "", at ? short_site(a, at, site, sizeof site) : "",
                 fl->inflight_seq, fl->inflight_comm, how);
    } else {
        snprintf(buf, n, "not in a collective; %s", how);
    }
}

/* Ranks in one state.  A state blocked in a call since a time holds
 * TIME_MARK where the time goes: ranks blocked in the same call are one
 * group however their times differ, said as the first start and the
 * range of durations. */
#define TIME_MARK "\x1f"
struct rank_state {
    char text[384];
    int32_t ranks[4096];
    size_t n;
    uint64_t since_ns;         /* earliest start, wall clock (TIME_MARK) */
    uint64_t dur_lo, dur_hi;   /* shortest and longest time in the call so far */
};

/* Adds RANK to the group of states saying TEXT (at most MAX groups); a
 * TEXT with TIME_MARK has been in its call DUR_NS since SINCE_NS. */
static void group_add_timed(struct rank_state *g, size_t *ng, size_t max, const char *text, int32_t rank,
                            uint64_t since_ns, uint64_t dur_ns)
{
    size_t i = 0;
    while (i < *ng && strcmp(g[i].text, text) != 0)
        i++;
    if (i == *ng) {
        if (*ng >= max)
            return;
        snprintf(g[i].text, sizeof g[i].text, "%s", text);
        g[i].n = 0;
        g[i].since_ns = since_ns;
        g[i].dur_lo = g[i].dur_hi = dur_ns;
        (*ng)++;
    }
    if (since_ns < g[i].since_ns)
        g[i].since_ns = since_ns;
    if (dur_ns < g[i].dur_lo)
        g[i].dur_lo = dur_ns;
    if (dur_ns > g[i].dur_hi)
        g[i].dur_hi = dur_ns;
    if (g[i].n < sizeof g[i].ranks / sizeof g[i].ranks[0])
        g[i].ranks[g[i].n++] = rank;
}

static void group_add(struct rank_state *g, size_t *ng, size_t max, const char *text, int32_t rank)
{
    group_add_timed(g, ng, max, text, rank, 0, 0);
}

static void groups_to_evidence(struct audit_finding *f, const struct rank_state *g, size_t ng)
{
    for (size_t i = 0; i < ng; i++) {
        char rt[128], when[32], span[96] = "";
        ccs_ranks_str(g[i].ranks, g[i].n, rt, sizeof rt);
        const char *mark = strstr(g[i].text, TIME_MARK);
        if (mark) {
            wall_str(g[i].since_ns, when, sizeof when);
            double lo = (double)g[i].dur_lo / 1e9, hi = (double)g[i].dur_hi / 1e9;
            char slo[16], shi[16];
            snprintf(slo, sizeof slo, "%.1f", lo);
            snprintf(shi, sizeof shi, "%.1f", hi);
            if (strcmp(slo, shi) == 0)
                snprintf(span, sizeof span, " since %s for %s s", when, shi);
            else
                snprintf(span, sizeof span, " since %s for %s-%s s", when, slo, shi);
        }
        int head = mark ? (int)(mark - g[i].text) : (int)strlen(g[i].text);
        evidence_add(f, "%srank%s %s: %.*s%s%s", i ? "; " : "", g[i].n > 1 ? "s" : "", rt, head, g[i].text, span,
                     mark ? mark + 1 : "");
    }
}

/* The post-mortem (as PyTorch's Flight Recorder analyser does it): per
 * communicator, the first sequence number some member never reached while
 * others did, what each member was doing there: blocked in the call (a
 * call in progress at the end: the trace's INFLIGHT chunk), past it, in
 * another call, not in a collective; and how each process ended. */
/* The last seq rank RANK reached on COMM: its trace's, or its flight
 * dump's call in progress where the trace has no end (a process killed
 * before it could write its last calls). */
static uint64_t reached(const struct audit *a, uint64_t comm, int32_t rank, const struct audit_report **by_dump)
{
    struct audit_rankcomm_key k = {.comm = comm, .rank = rank};
    const struct audit_rankcomm *rc = hmap_get((struct hmap *)&a->rankcomms, &k, 0);
    uint64_t s = rc ? rc->max_seq : 0;
    const struct audit_file *fl = file_of_rank(a, rank);
    const struct audit_report *d = flight_of(a, rank);
    *by_dump = NULL;
    if (d && d->has_inflight && d->inflight_comm == comm && d->inflight_seq > s && (!fl || !fl->has_end)) {
        *by_dump = d;
        s = d->inflight_seq;
    }
    return s;
}

static void postmortem_findings(struct audit *a)
{
    for (size_t ci = 0; ci < a->ncomms; ci++) {
        const struct audit_comm *c = &a->comms[ci];
        if (c->nmembers < 2)
            continue;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t m = 0; m < c->nmembers; m++) {
            const struct audit_report *d;
            uint64_t s = reached(a, c->id, c->members[m], &d);
            lo = s < lo ? s : lo;
            hi = s > hi ? s : hi;
        }
        if (lo == hi)
            continue; /* every member reached the same call */
        /* A job whose every member ended by itself, none in a call: calls
         * that differ, which the rank-mismatch finding says; the post-mortem
         * is for a job that hung or was ended. */
        int ended = 0;
        for (size_t m = 0; m < c->nmembers && !ended; m++) {
            const struct audit_file *fl = file_of_rank(a, c->members[m]);
            ended = !fl || !fl->has_end || fl->end.reason == CCS_END_SIGNAL || inflight_of(fl, c->id);
        }
        if (!ended)
            continue;
        uint64_t seq = lo + 1;
        static struct rank_state groups[16];
        size_t ng = 0;
        int32_t behind[16], blocked[16];
        size_t nb = 0, nk = 0, nbehind = 0, nblocked = 0;
        /* The call at SEQ, as a rank blocked in it shows it: its trace's
         * call in progress, else its flight dump's. */
        const char *call_kind = NULL;
        uint32_t call_site = 0;
        for (size_t m = 0; m < c->nmembers; m++) {
            int32_t rank = c->members[m];
            const struct audit_file *fl = file_of_rank(a, rank);
            const struct audit_report *d;
            uint64_t s = reached(a, c->id, rank, &d), since = 0, dur = 0;
            char text[384], how[128], site[160];
            if (s < seq) {
                state_behind(a, fl, rank, text, sizeof text);
                if (nb < 16)
                    behind[nb++] = rank;
                nbehind++;
            } else {
                const struct audit_inflight *x = inflight_of(fl, c->id);
                end_of(fl, how, sizeof how);
                if (d && s == seq) {
                    uint32_t at = flight_site(fl, d);
                    snprintf(text, sizeof text, "blocked in %s%s%s (its flight dump); %s", d->inflight_kind,
                             at ? " at " : "", at ? short_site(a, at, site, sizeof site) : "", how);
                    if (!call_kind && at) {
                        call_kind = d->inflight_kind;
                        call_site = at;
                    }
                    if (nk < 16)
                        blocked[nk++] = rank;
                    nblocked++;
                } else if (x && x->r.seq == seq) {
                    snprintf(text, sizeof text, "blocked in %s at %s" TIME_MARK "; %s", ccs_kind_name(x->r.kind),
                             short_site(a, x->site, site, sizeof site), how);
                    since = fl->start_realtime_ns + x->r.t_start;
                    dur = x->r.t_dur;
                    if (!call_kind || !call_site) {
                        call_kind = ccs_kind_name(x->r.kind);
                        call_site = x->site;
                    }
                    if (nk < 16)
                        blocked[nk++] = rank;
                    nblocked++;
                } else if (x) {
                    snprintf(text, sizeof text, "past it, blocked at seq %" PRIu64 " in %s at %s for %.1f s; %s",
                             x->r.seq, ccs_kind_name(x->r.kind), short_site(a, x->site, site, sizeof site),
                             (double)x->r.t_dur / 1e9, how);
                } else {
                    snprintf(text, sizeof text, "past it (last seq %" PRIu64 "), not in a call on it; %s", s, how);
                }
            }
            group_add_timed(groups, &ng, 16, text, rank, since, dur);
        }
        struct audit_finding *f = add(a, FIND_HANG, 2);
        if (!f)
            return;
        char bt[128], kt[128], what[256], site[160];
        ccs_ranks_str(behind, nb, bt, sizeof bt);
        ccs_ranks_str(blocked, nk, kt, sizeof kt);
        if (call_kind)
            snprintf(what, sizeof what, "%s at %s", call_kind, short_site(a, call_site, site, sizeof site));
        else
            snprintf(what, sizeof what, "the call at seq %" PRIu64, seq);
        if (nblocked)
            snprintf(f->title, sizeof f->title, "rank%s %.60s left out %.96s; rank%s %.60s blocked in it",
                     nbehind > 1 ? "s" : "", bt, what, nblocked > 1 ? "s" : "", kt);
        else
            snprintf(f->title, sizeof f->title, "rank%s %.60s stopped before %.120s, which the others made",
                     nbehind > 1 ? "s" : "", bt, what);
        evidence_add(f, "comm %016" PRIx64 " (%zu ranks), seq %" PRIu64 ", the first that not every rank reached; ",
                     c->id, c->nmembers, seq);
        groups_to_evidence(f, groups, ng);
        snprintf(f->action, sizeof f->action,
                 "Find why rank%s %.60s did not call %.100s (a branch taken on %s only, an early return or exit): "
                 "`ccshim-audit --tsv-records DIR` lists every rank's calls by seq; the desync reports, where "
                 "the job ran with CCSHIM_DESYNC, have each rank's stack.",
                 nbehind > 1 ? "s" : "", bt, what, nbehind > 1 ? "them" : "it");
        f->comm = c->id;
        f->first_seq = seq;
        f->nranks = (int)nb;
        memcpy(f->ranks, behind, nb * sizeof *behind);
    }
}

/* The runtime's verdicts (ccshim-desync-JOB-rN.txt): one finding per
 * verdict, however many ranks wrote it, with its line whole; the flight
 * dumps: one finding saying what each rank was in. */
static void report_findings(struct audit *a)
{
    int *done = calloc(a->nreports + 1, sizeof *done);
    if (!done)
        return;
    for (size_t i = 0; i < a->nreports; i++) {
        const struct audit_report *r = &a->reports[i];
        if (r->flight || done[i])
            continue;
        /* The verdict without "[seen by ...]" and the seconds, which differ by rank. */
        char key[1024];
        snprintf(key, sizeof key, "%s", r->summary);
        char *seen = strstr(key, " [seen by");
        if (seen)
            *seen = 0;
        struct audit_finding *f = add(a, FIND_REPORTS, 2);
        if (!f)
            break;
        int32_t ranks[16];
        size_t nr = 0, nfiles = 0;
        char files[512] = "";
        size_t fo = 0;
        for (size_t j = i; j < a->nreports; j++) {
            const struct audit_report *q = &a->reports[j];
            char k2[1024];
            snprintf(k2, sizeof k2, "%s", q->summary);
            char *s2 = strstr(k2, " [seen by");
            if (s2)
                *s2 = 0;
            /* the same verdict: alike up to its first " for " (blocked for N s differs) */
            const char *f1 = strstr(key, " for "), *f2 = strstr(k2, " for ");
            size_t l1 = f1 ? (size_t)(f1 - key) : strlen(key), l2 = f2 ? (size_t)(f2 - k2) : strlen(k2);
            if (q->flight || done[j] || l1 != l2 || strncmp(key, k2, l1) != 0)
                continue;
            done[j] = 1;
            nfiles++;
            if (nr < 16 && q->rank >= 0)
                ranks[nr++] = q->rank;
            const char *b = strrchr(q->path, '/');
            if (fo < sizeof files)
                fo += (size_t)snprintf(files + fo, sizeof files - fo, "%s%s", fo ? ", " : "", b ? b + 1 : q->path);
        }
        char rt[128] = "?";
        if (nr)
            ccs_ranks_str(ranks, nr, rt, sizeof rt);
        /* Title: the verdict's head ("DESYNC comm=0x.. size=3 seq=5"), the rest in the evidence. */
        const char *colon = strstr(key, ": ");
        snprintf(f->title, sizeof f->title, "runtime verdict: %.*s (reported by rank%s %s)",
                 colon ? (int)(colon - key) : 120, key, nr > 1 ? "s" : "", rt);
        snprintf(f->evidence, sizeof f->evidence, "%s%s (in %s)", colon ? "" : "", colon ? colon + 2 : key, files);
        snprintf(f->action, sizeof f->action,
                 "The detector saw this while the job ran: each report has the ranks' last operations side by "
                 "side and each rank's stack; the post-mortem finding (when the traces show it) says the same "
                 "from the traces.");
        f->nranks = (int)nr;
        memcpy(f->ranks, ranks, nr * sizeof *ranks);
    }
    free(done);
    /* Flight dumps: what each rank was in, grouped. */
    static struct rank_state groups[16];
    size_t ng = 0, nf = 0;
    int32_t ranks[16];
    size_t nr = 0;
    for (size_t i = 0; i < a->nreports; i++) {
        const struct audit_report *r = &a->reports[i];
        if (!r->flight)
            continue;
        nf++;
        if (nr < 16 && r->rank >= 0)
            ranks[nr++] = r->rank;
        char text[256];
        if (r->has_inflight)
            snprintf(text, sizeof text, "in %s, seq %" PRIu64 " of comm %016" PRIx64 " (in progress)",
                     r->inflight_kind, r->inflight_seq, r->inflight_comm);
        else
            snprintf(text, sizeof text, "no call in progress");
        group_add(groups, &ng, 16, text, r->rank);
    }
    if (!nf)
        return;
    struct audit_finding *f = add(a, FIND_REPORTS, 0);
    if (!f)
        return;
    char rt[128] = "?";
    if (nr)
        ccs_ranks_str(ranks, nr, rt, sizeof rt);
    snprintf(f->title, sizeof f->title, "%zu flight-recorder dump%s (rank%s %s)", nf, nf == 1 ? "" : "s",
             nr > 1 ? "s" : "", rt);
    evidence_add(f, "when written: ");
    groups_to_evidence(f, groups, ng);
    snprintf(f->action, sizeof f->action,
             "Each dump (ccshim-flight-JOB-rN.flight, tab-separated) lists its rank's last calls, oldest first.");
}

static void expect_findings(struct audit *a)
{
    static const char *scope[] = {"communicator", "step", "buffer"};
    for (size_t i = 0; i < a->nexpects; i++) {
        struct audit_expect *e = &a->expects[i];
        if (!e->violations)
            continue;
        struct audit_finding *f = add(a, FIND_EXPECT, 2);
        if (!f)
            return;
        snprintf(f->title, sizeof f->title, "--expect %s exceeded %" PRIu64 " time%s", e->text, e->violations,
                 e->violations == 1 ? "" : "s");
        snprintf(f->evidence, sizeof f->evidence,
                 "worst: %" PRIu64 " %s per %s (limit %" PRIu64 ") in step %u on rank %d, comm %016" PRIx64,
                 e->worst, ccs_kind_name(e->kind), scope[e->scope], e->limit, e->worst_step, (int)e->worst_rank,
                 e->worst_comm);
        snprintf(f->action, sizeof f->action,
                 "See the other findings for why; raise the limit if this is intended.");
        f->step_first = e->worst_step;
        f->k = e->worst;
        f->ranks[0] = e->worst_rank;
        f->nranks = 1;
    }
}

/* NCCL calls made while their stream was captured into a CUDA graph. */
static void captured_findings(struct audit *a)
{
    if (!a->captured)
        return;
    struct audit_finding *f = add(a, FIND_CAPTURED, 0);
    if (!f)
        return;
    snprintf(f->title, sizeof f->title,
             "%" PRIu64 " NCCL call(s) were captured into CUDA graphs: seen once, at capture; replays are not seen",
             a->captured);
    snprintf(f->evidence, sizeof f->evidence,
             "records flagged captured on ranks %d-%d; a graph replay runs them on the device without calling "
             "NCCL, so the counts and steps above hold each captured call once",
             (int)a->captured_rank_first, (int)a->captured_rank_last);
    snprintf(f->action, sizeof f->action,
             "Multiply by the number of replays to get the collectives that ran. ccshim neither coalesces nor "
             "tracks completion of captured calls (docs/nccl.md, CUDA graphs).");
    f->k = a->captured;
}

/* A run, or ranks of it, with no collective recorded: nothing to compare
 * is not agreement (an audit of it proves nothing). */
static void no_call_findings(struct audit *a)
{
    size_t readable = 0, silent = 0;
    int32_t ranks[16];
    uint64_t calls = 0, max_coll = 0;
    int32_t busy_rank = -1;
    for (size_t i = 0; i < a->nfiles; i++) /* a trace says why (gloo): uncovered_findings names it */
        if (a->files[i].status != FILE_REFUSED && a->files[i].uncovered[0])
            return;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *fl = &a->files[i];
        if (fl->status == FILE_REFUSED)
            continue;
        readable++;
        calls += fl->records;
        if (fl->collectives > max_coll)
            max_coll = fl->collectives, busy_rank = fl->rank;
        if (fl->collectives == 0) {
            if (silent < 16)
                ranks[silent] = fl->rank;
            silent++;
        }
    }
    if (!silent)
        return;
    char rt[128];
    ccs_ranks_str(ranks, silent < 16 ? silent : 16, rt, sizeof rt);
    struct audit_finding *f = add(a, FIND_NO_CALLS, silent == readable ? 2 : 1);
    if (!f)
        return;
    f->nranks = (int)(silent < 16 ? silent : 16);
    memcpy(f->ranks, ranks, (size_t)f->nranks * sizeof *ranks);
    if (silent == readable) {
        snprintf(f->title, sizeof f->title, "no collective was recorded: %zu trace%s read, none with a collective",
                 readable, readable == 1 ? "" : "s");
        snprintf(f->evidence, sizeof f->evidence,
                 "rank%s %s: 0 collectives (%" PRIu64 " other call%s: point-to-point, communicator "
                 "management)",
                 silent == 1 ? "" : "s", rt, calls, calls == 1 ? "" : "s");
        snprintf(f->action, sizeof f->action,
                 "Nothing was compared, so nothing is known to agree. Check that the job ran under ccshim-run "
                 "(or with libccshim preloaded), that its MPI or NCCL is the one ccshim intercepts (not "
                 "linked statically), and that the traces are of the run meant.");
    } else {
        snprintf(f->title, sizeof f->title, "rank%s %s recorded no collective, while rank %d recorded %" PRIu64,
                 silent == 1 ? "" : "s", rt, (int)busy_rank, max_coll);
        snprintf(f->evidence, sizeof f->evidence,
                 "%zu of %zu traces hold no collective (rank%s %s); the others' are compared without them",
                 silent, readable, silent == 1 ? "" : "s", rt);
        snprintf(f->action, sizeof f->action,
                 "A rank that skips every collective of its communicators hangs the others in a real job. If "
                 "the job completed, these processes made their calls through a library ccshim does not "
                 "intercept, or are not ranks of the job (a helper process that inherited the preload).");
    }
}

/* Two traces of one rank of one job: two runs wrote to the directory under
 * the same job id ("local" when no launcher set one, or a CCSHIM_JOB_ID
 * reused), and their calls are counted together. */
static void duplicate_rank_findings(struct audit *a)
{
    int32_t ranks[16];
    size_t nr = 0, extra = 0;
    const struct audit_file *first = NULL, *second = NULL;
    for (size_t i = 1; i < a->nfiles; i++) {
        const struct audit_file *p = &a->files[i - 1], *f = &a->files[i];
        if (f->rank < 0 || f->rank != p->rank || f->status == FILE_REFUSED || p->status == FILE_REFUSED)
            continue;
        extra++;
        if (nr && ranks[nr - 1] == f->rank)
            continue;
        if (!first)
            first = p, second = f;
        if (nr < 16)
            ranks[nr++] = f->rank;
    }
    if (!nr)
        return;
    struct audit_finding *f = add(a, FIND_DUPLICATE, 2);
    if (!f)
        return;
    char rt[128];
    ccs_ranks_str(ranks, nr, rt, sizeof rt);
    f->nranks = (int)nr;
    memcpy(f->ranks, ranks, nr * sizeof *ranks);
    snprintf(f->title, sizeof f->title,
             "rank%s %.60s of job %.60s ha%s more than one trace: their calls are counted together", nr == 1 ? "" : "s",
             rt, first->job[0] ? first->job : "(unknown)", nr == 1 ? "s" : "ve");
    snprintf(f->evidence, sizeof f->evidence, "%zu trace%s too many; for example %.400s and %.400s, both rank %d",
             extra,
             extra == 1 ? "" : "s", first->path, second->path, (int)first->rank);
    snprintf(f->action, sizeof f->action,
             "Two runs wrote to this directory under one job id (\"local\" when no launcher gave one, or a "
             "CCSHIM_JOB_ID used twice): audit each run's files apart, and give each run a directory of its "
             "own or a job id of its own.");
}

/* What ccshim could not see, where a trace says it (META uncovered=,
 * uncovered.c): a job whose collectives go through gloo recorded none (or
 * only those through MPI), and must not read as an all-clear. */
static void uncovered_findings(struct audit *a)
{
    uint64_t records = 0, torch = 0;
    size_t files = 0, noted = 0;
    const char *what = NULL;
    int32_t first = -1, last = -1;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_REFUSED)
            continue;
        files++;
        /* The torch helper's counts of gloo calls are not the calls
         * themselves (no data, no order): what ccshim intercepted is the rest. */
        records += x->records - x->torch_calls;
        torch += x->torch_calls;
        if (!x->uncovered[0])
            continue;
        if (!noted++) {
            what = x->uncovered;
            first = x->rank;
        }
        last = x->rank;
    }
    if (!files || !noted) /* (no collective and no reason known: issue 42's finding) */
        return;
    struct audit_finding *f = add(a, FIND_UNCOVERED, records ? 0 : 1);
    if (!f)
        return;
    char ranks[64], why[200] = "";
    if (noted > 1)
        snprintf(ranks, sizeof ranks, "the traces of ranks %d-%d say so", (int)first, (int)last);
    else
        snprintf(ranks, sizeof ranks, "the trace of rank %d says so", (int)first);
    if (strcmp(what, "torch") == 0)
        snprintf(why, sizeof why, "a PyTorch job whose collectives did not reach ccshim (torch.distributed's "
                 "gloo, its CPU backend, is not intercepted)");
    else
        snprintf(why, sizeof why, "the job's torch.distributed process group runs on %.32s, which ccshim does not "
                 "intercept", what);
    if (!records)
        snprintf(f->title, sizeof f->title, "no collectives recorded: %s", why);
    else
        snprintf(f->title, sizeof f->title, "only the collectives through MPI and NCCL were recorded: %s", why);
    char counted[120] = "";
    if (torch)
        snprintf(counted, sizeof counted,
                 "; %" PRIu64 " torch.distributed call%s counted by the torch helper (kinds "
                 "and steps only)",
                 torch, torch == 1 ? "" : "s");
    snprintf(f->evidence, sizeof f->evidence,
             "%zu trace%s, %" PRIu64 " collective and point-to-point record%s, %u "
             "step%s%s; %s",
             files, files == 1 ? "" : "s", records, records == 1 ? "" : "s", a->max_step + 1,
             a->max_step ? "s" : "", counted, ranks);
    snprintf(f->action, sizeof f->action,
             "ccshim intercepts MPI (mpi4py, torch's mpi backend) and NCCL (torch's nccl backend). Nothing here "
             "says the ranks agreed: on the CPU, reduce DDP's buckets through MPI with a comm hook, or use the "
             "nccl backend on GPUs (docs/coalescing.md, \"CPU jobs\").");
}

/* Issue 41: ranks whose step structures differ.  With markers: one rank
 * marked steps while another never ended its step 0, or the ranks marked
 * numbers of steps more than one apart (one apart is a job cut short
 * between two ranks' markers, or a rank's last step: left to the trace's
 * own findings).  Without markers: the ranks' call streams repeat with
 * different periods.  Either way the ranks ran different loops (different
 * losses, a rank with more mini-batches), and counts per step compare
 * different things. */
static void step_structure_findings(struct audit *a)
{
    const struct audit_file *lo = NULL, *hi = NULL;
    size_t n = 0;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *fl = &a->files[i];
        if (fl->status == FILE_REFUSED || !fl->collectives)
            continue;
        n++;
        uint64_t v = a->steps.source == STEPS_MARKERS ? fl->last_step : fl->steps.period;
        if (!lo || v < (a->steps.source == STEPS_MARKERS ? lo->last_step : lo->steps.period))
            lo = fl;
        if (!hi || v > (a->steps.source == STEPS_MARKERS ? hi->last_step : hi->steps.period))
            hi = fl;
    }
    if (n < 2 || lo == hi)
        return;
    struct audit_finding *f;
    if (a->steps.source == STEPS_MARKERS) {
        if (hi->last_step - lo->last_step < 2 || !(f = add(a, FIND_STEPS, 2)))
            return;
        char what[64] = "never ended its step 0";
        if (lo->last_step)
            snprintf(what, sizeof what, "reached step %u", lo->last_step);
        snprintf(f->title, sizeof f->title, "the ranks' steps differ: rank %d %s where rank %d reached step %u",
                 (int)lo->rank, what, (int)hi->rank, hi->last_step);
        snprintf(f->evidence, sizeof f->evidence,
                 "rank %d: %" PRIu64 " collectives in %u step(s); rank %d: %" PRIu64 " collectives in %u step(s), "
                 "each rank's steps counted from its own markers",
                 (int)lo->rank, lo->collectives, lo->last_step + 1, (int)hi->rank, hi->collectives,
                 hi->last_step + 1);
    } else {
        if (a->steps.source != STEPS_INFERRED || !lo->steps.period || !(f = add(a, FIND_STEPS, 2)))
            return;
        snprintf(f->title, sizeof f->title,
                 "the ranks' steps differ: rank %d's calls repeat every %" PRIu64 ", rank %d's every %" PRIu64,
                 (int)lo->rank, lo->steps.period, (int)hi->rank, hi->steps.period);
        snprintf(f->evidence, sizeof f->evidence,
                 "no step markers; each rank's steps inferred from its own call stream: rank %d: %" PRIu64
                 " calls examined, period %" PRIu64 " after %" PRIu64 "; rank %d: %" PRIu64 " calls examined, "
                 "period %" PRIu64 " after %" PRIu64,
                 (int)lo->rank, lo->steps.tokens, lo->steps.period, lo->steps.head, (int)hi->rank,
                 hi->steps.tokens, hi->steps.period, hi->steps.head);
    }
    snprintf(f->action, sizeof f->action,
             "The ranks ran different training loops (a different loss or number of mini-batches per rank, as a "
             "multi-dataset sampler hands each rank its own dataset): their collectives matched by order across "
             "different steps. Give every rank the same steps (the same loss and mini-batches per step), and run "
             "under ccshim-run --on-desync abort to stop such a job at once.");
    f->ranks[0] = lo->rank;
    f->ranks[1] = hi->rank;
    f->nranks = 2;
}

void audit_findings(struct audit *a)
{
    no_call_findings(a);
    duplicate_rank_findings(a);
    uncovered_findings(a);
    mismatch_findings(a);
    step_structure_findings(a);
    postmortem_findings(a);
    report_findings(a);
    redundancy_findings(a);
    expect_findings(a);
    file_findings(a);
    deferred_findings(a);
    captured_findings(a);
}
