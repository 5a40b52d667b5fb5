/*
 * findings.c - turns the aggregates into findings, each with evidence and a
 * suggested action: redundant reductions, ranks that disagree, desync
 * reports present, coalescing at work, traces cut short or unreadable.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
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
            snprintf(f->evidence + o, sizeof f->evidence - (size_t)o, "%u step%s affected (%u to %u)", nsteps,
                     nsteps > 1 ? "s" : "", first, last);
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
        struct audit_finding *f = add(a, FIND_REDUNDANT, marked ? 1 : 0);
        if (!f)
            break;
        fill_redundancy(a, f, &r, comm, marked);
    }
    free(v);
}

static void deferred_findings(struct audit *a)
{
    uint64_t deferred = 0, real = 0, helper = 0;
    uint32_t hlo = UINT32_MAX, hhi = 0;
    for (size_t i = 0; i < a->cells.cap; i++) {
        struct audit_cell *c = hmap_slot(&a->cells, i);
        if (!c || !is_reduction(c->k.kind))
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
                     fl->status == FILE_REFUSED ? "Read it with a ccshim-audit of the same or a newer version "
                                                  "as the job's ccshim, or remove it from the directory."
                                                : "The calls before the damage are counted; the rest of "
                                                  "this rank is missing.");
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

static void report_findings(struct audit *a)
{
    if (!a->nreports)
        return;
    size_t nf = 0;
    for (size_t i = 0; i < a->nreports; i++)
        nf += (size_t)a->reports[i].flight;
    struct audit_finding *f = add(a, FIND_REPORTS, 2);
    if (!f)
        return;
    snprintf(f->title, sizeof f->title, "%zu desync report%s and %zu flight-recorder dump%s found",
             a->nreports - nf, a->nreports - nf == 1 ? "" : "s", nf, nf == 1 ? "" : "s");
    size_t o = 0;
    for (size_t i = 0; i < a->nreports && o < sizeof f->evidence - 1; i++) {
        const char *p = a->reports[i].path, *b = strrchr(p, '/');
        o += (size_t)snprintf(f->evidence + o, sizeof f->evidence - o, "%s%s (%" PRIu64 " bytes)%s%s",
                              o ? "; " : "", b ? b + 1 : p, a->reports[i].size,
                              a->reports[i].summary[0] ? ": " : "", a->reports[i].summary);
    }
    snprintf(f->action, sizeof f->action,
             "The runtime saw ranks fall out of step: read the reports (they name the ranks and the calls), "
             "and the flight dumps for each rank's last calls.");
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

/* What ccshim could not see, where a trace says it (META uncovered=,
 * uncovered.c): a job whose collectives go through gloo recorded none (or
 * only those through MPI), and must not read as an all-clear. */
static void uncovered_findings(struct audit *a)
{
    uint64_t records = 0;
    size_t files = 0, noted = 0;
    const char *what = NULL;
    int32_t first = -1, last = -1;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_REFUSED)
            continue;
        files++;
        records += x->records;
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
    snprintf(f->evidence, sizeof f->evidence, "%zu trace%s, %" PRIu64 " collective and point-to-point record%s, %u "
             "step%s; %s",
             files, files == 1 ? "" : "s", records, records == 1 ? "" : "s", a->max_step + 1, a->max_step ? "s" : "",
             ranks);
    snprintf(f->action, sizeof f->action,
             "ccshim intercepts MPI (mpi4py, torch's mpi backend) and NCCL (torch's nccl backend). Nothing here "
             "says the ranks agreed: on the CPU, reduce DDP's buckets through MPI with a comm hook, or use the "
             "nccl backend on GPUs (docs/coalescing.md, \"CPU jobs\").");
}

void audit_findings(struct audit *a)
{
    uncovered_findings(a);
    mismatch_findings(a);
    report_findings(a);
    redundancy_findings(a);
    expect_findings(a);
    file_findings(a);
    deferred_findings(a);
    captured_findings(a);
}
