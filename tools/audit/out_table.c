/*
 * out_table.c - the default terminal report (fits 100 columns): per step,
 * per communicator, one row per kind and group of ranks that made the same
 * calls; consecutive steps that look alike are printed once.  Then the
 * findings, the top call sites and the files.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 100

struct trow {
    uint64_t comm;
    uint32_t kind, deferred;
    uint64_t count, bytes, time;
    size_t nranks;
    char ranks[64];
    int outlier; /* holds a rank whose sequenced calls differ from the majority's (a rank-mismatch finding) */
    int odd;     /* not the majority of its (kind, deferred), and the difference is a finding's */
};

static int group_cmp(const void *x, const void *y)
{
    const struct audit_cell *a = *(struct audit_cell *const *)x, *b = *(struct audit_cell *const *)y;
#define CMP(f)                                                                                                     \
    if (a->f != b->f)                                                                                              \
        return a->f < b->f ? -1 : 1;
    CMP(k.step)
    CMP(k.comm) CMP(k.kind) CMP(k.deferred) CMP(count) CMP(bytes) CMP(k.rank)
#undef CMP
        return 0;
}

/* Rows of one step from V[*I..] (cells sorted by group_cmp); advances *I. */
static struct trow *step_rows(const struct audit *a, struct audit_cell **v, size_t n, size_t *i, size_t *nrows)
{
    uint32_t step = v[*i]->k.step;
    size_t cap = 16, nr = 0;
    struct trow *rows = malloc(cap * sizeof *rows);
    int32_t *ranks = malloc((a->nfiles + 1) * sizeof *ranks);
    if (!rows || !ranks) {
        free(rows);
        free(ranks);
        while (*i < n && v[*i]->k.step == step)
            (*i)++;
        *nrows = 0;
        return NULL;
    }
    /* The ranks of each communicator whose sequenced calls in this step
     * differ from the majority's: the rank-mismatch finding's. */
    int32_t *out = malloc((a->nfiles + 1) * sizeof *out);
    size_t nout = 0;
    uint64_t out_comm = 0;
    int have_out = 0;
    while (*i < n && v[*i]->k.step == step) {
        size_t j = *i, nk = 0;
        struct trow r;
        memset(&r, 0, sizeof r);
        r.comm = v[j]->k.comm;
        if (out && (!have_out || out_comm != r.comm)) {
            nout = audit_step_outliers(a, step, r.comm, out, a->nfiles + 1);
            if (nout > a->nfiles + 1)
                nout = a->nfiles + 1;
            out_comm = r.comm;
            have_out = 1;
        }
        r.kind = v[j]->k.kind;
        r.deferred = v[j]->k.deferred;
        r.count = v[j]->count;
        r.bytes = v[j]->bytes;
        while (j < n && v[j]->k.step == step && v[j]->k.comm == r.comm && v[j]->k.kind == r.kind &&
               v[j]->k.deferred == r.deferred && v[j]->count == r.count && v[j]->bytes == r.bytes) {
            r.time += v[j]->time_ns;
            if (nk < a->nfiles + 1)
                ranks[nk++] = v[j]->k.rank;
            for (size_t o = 0; o < nout; o++)
                r.outlier |= out[o] == v[j]->k.rank;
            j++;
        }
        /* ranks came sorted by rank within the group */
        r.nranks = j - *i;
        ccs_ranks_str(ranks, nk, r.ranks, sizeof r.ranks);
        if (nr == cap) {
            cap *= 2;
            struct trow *nrw = realloc(rows, cap * sizeof *nrw);
            if (!nrw)
                break;
            rows = nrw;
        }
        rows[nr++] = r;
        *i = j;
    }
    free(ranks);
    free(out);
    /* Within each (comm, kind, deferred), groups other than the largest are
     * odd, where ranks must agree (sequenced collectives: point-to-point
     * calls and the sizes of the v-collectives differ by design) and the
     * findings name the difference. */
    for (size_t s = 0; s < nr;) {
        size_t e = s, best = s;
        while (e < nr && rows[e].comm == rows[s].comm && rows[e].kind == rows[s].kind &&
               rows[e].deferred == rows[s].deferred) {
            if (rows[e].nranks > rows[best].nranks)
                best = e;
            e++;
        }
        for (size_t k = s; k < e; k++)
            rows[k].odd = e - s > 1 && k != best && ccs_kind_sequenced(rows[k].kind) && rows[k].outlier;
        s = e;
    }
    *nrows = nr;
    return rows;
}

/* Ranks (of those in the step) that have no row for a kind others call: shown
 * as an odd "(none)" row so a missing call is as visible as an extra one. */
static size_t comm_ranks(const struct trow *rows, size_t nr, uint64_t comm)
{
    size_t best = 0;
    for (size_t s = 0; s < nr;) {
        size_t e = s, total = 0;
        while (e < nr && rows[e].comm == rows[s].comm && rows[e].kind == rows[s].kind &&
               rows[e].deferred == rows[s].deferred)
            total += rows[e++].nranks;
        if (rows[s].comm == comm && total > best)
            best = total;
        s = e;
    }
    return best;
}

static uint64_t rows_sig(const struct trow *rows, size_t nr, const char *pat)
{
    uint64_t h = 0;
    for (size_t k = 0; k < nr; k++) {
        struct trow t = rows[k];
        t.time = 0;
        h = hmap_hash(&t, sizeof t) ^ (h * 31);
    }
    return h ^ (pat ? hmap_hash(pat, strlen(pat)) : 0);
}

/* Prints LEAD then TEXT, breaking lines only after BRK (" " for prose,
 * ", " for patterns, whose items contain spaces) and indenting by INDENT. */
static void wrap_at(FILE *f, const char *lead, const char *text, int indent, const char *brk)
{
    int col = fprintf(f, "%s", lead);
    const char *p = text;
    size_t bl = strlen(brk);
    while (*p) {
        const char *q = strstr(p, brk);
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (col + (int)l > WIDTH - 1 && col > indent) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        }
        col += fprintf(f, "%.*s", (int)l, p);
        p += l;
        if (!*p)
            break;
        p += bl;
        if (*p) /* the separator, without trailing spaces at a break */
            col += fprintf(f, "%.*s", (int)strcspn(brk, " "), brk);
        const char *nq = strstr(p, brk);
        size_t nl = nq ? (size_t)(nq - p) : strlen(p);
        if (col + 1 + (int)nl > WIDTH - 1 && col > indent) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (*p) {
            col += fprintf(f, "%s", brk + strcspn(brk, " "));
        }
    }
    fputc('\n', f);
}

static void wrap(FILE *f, const char *lead, const char *text, int indent)
{
    wrap_at(f, lead, text, indent, " ");
}

static const char *pattern_of(const struct audit *a, uint32_t step, uint64_t comm)
{
    struct audit_stepcomm_key k;
    memset(&k, 0, sizeof k);
    k.step = step;
    k.comm = comm;
    const struct audit_stepcomm *s = hmap_get((struct hmap *)&a->stepcomms, &k, 0);
    return s ? s->pattern : NULL;
}

static void print_step(const struct audit *a, FILE *f, uint32_t s0, uint32_t s1, const struct trow *rows, size_t nr,
                       const uint64_t *times, unsigned nsteps)
{
    char b1[32], b2[32], kl[64];
    if (s0 == s1)
        fprintf(f, "\nstep %u\n", s0);
    else
        fprintf(f, "\nsteps %u-%u (%u steps alike; times are means per step)\n", s0, s1, nsteps);
    for (size_t k = 0; k < nr; k++) {
        if (k == 0 || rows[k].comm != rows[k - 1].comm) {
            const struct audit_comm *c = audit_comm_get((struct audit *)a, rows[k].comm, 0);
            if (rows[k].comm == 0)
                fprintf(f, "  no communicator (unsequenced calls)\n");
            else if (c && c->size > 0 && c->how == 0)
                /* Created by a call ccshim does not intercept: each rank counts its calls under an id of
                 * its own, so one rank's calls are all this id can show. */
                fprintf(f, "  comm %016" PRIx64 " (%s, %d ranks, not seen created: one rank's calls, under its own id)\n",
                        rows[k].comm, ccs_backend_name(c->backend), (int)c->size);
            else if (c && c->size > 0)
                fprintf(f, "  comm %016" PRIx64 " (%s, %d ranks)\n", rows[k].comm, ccs_backend_name(c->backend),
                        (int)c->size);
            else
                fprintf(f, "  comm %016" PRIx64 "\n", rows[k].comm);
            const char *pat = pattern_of(a, s0, rows[k].comm);
            if (pat) {
                char lead[64];
                snprintf(lead, sizeof lead, "    pattern (rank %d): ", (int)a->ref_rank);
                wrap_at(f, lead, pat, 8, ", ");
            }
            fprintf(f, "    %-24s %-18s %8s %12s %12s\n", "kind", "ranks", "calls", "bytes/rank", "time/rank");
        }
        const struct trow *r = &rows[k];
        uint64_t t = r->nranks && nsteps ? times[k] / r->nranks / nsteps : 0;
        fprintf(f, "  %s %-24s %-18s %8" PRIu64 " %12s %12s\n", r->odd ? "!" : " ",
                kind_label(r->kind, (int)r->deferred, kl, sizeof kl), r->ranks, r->count,
                fmt_bytes(r->bytes, b1, sizeof b1), fmt_time(t, b2, sizeof b2));
    }
    /* Ranks of a comm that made no call of a kind the others made. */
    for (size_t k = 0; k < nr; k++) {
        if (k && rows[k].comm == rows[k - 1].comm)
            continue;
        size_t want = comm_ranks(rows, nr, rows[k].comm);
        for (size_t j = k; j < nr && rows[j].comm == rows[k].comm; j++) {
            if (j > k && rows[j].kind == rows[j - 1].kind && rows[j].deferred == rows[j - 1].deferred)
                continue;
            size_t have = 0;
            int outliers = 0;
            for (size_t m = j; m < nr && rows[m].comm == rows[j].comm; m++)
                outliers |= rows[m].outlier;
            for (size_t m = j; m < nr && rows[m].comm == rows[j].comm && rows[m].kind == rows[j].kind &&
                               rows[m].deferred == rows[j].deferred;
                 m++)
                have += rows[m].nranks;
            /* As for the rows: only where ranks must agree and a finding says they do not. */
            if (have < want && ccs_kind_sequenced(rows[j].kind) && outliers)
                fprintf(f, "  ! %-24s %zu rank%s of comm %016" PRIx64 " made none\n",
                        kind_label(rows[j].kind, (int)rows[j].deferred, kl, sizeof kl), want - have,
                        want - have == 1 ? "" : "s", rows[j].comm);
        }
    }
}

static void print_steps(struct audit *a, FILE *f)
{
    size_t n;
    struct audit_cell **v = audit_sorted_cells(a, &n);
    if (!v)
        return;
    qsort(v, n, sizeof *v, group_cmp);
    struct trow *prev = NULL;
    size_t nprev = 0;
    uint64_t psig = 0, *times = NULL;
    uint32_t s0 = 0, s1 = 0;
    for (size_t i = 0; i < n;) {
        uint32_t step = v[i]->k.step;
        size_t nr;
        struct trow *rows = step_rows(a, v, n, &i, &nr);
        if (!rows)
            continue;
        const char *pat = nr ? pattern_of(a, step, rows[0].comm) : NULL;
        uint64_t sig = rows_sig(rows, nr, pat);
        if (prev && sig == psig && nr == nprev && step == s1 + 1) {
            for (size_t k = 0; k < nr; k++)
                times[k] += rows[k].time;
            s1 = step;
            free(rows);
            continue;
        }
        if (prev)
            print_step(a, f, s0, s1, prev, nprev, times, s1 - s0 + 1);
        free(prev);
        free(times);
        prev = rows;
        nprev = nr;
        psig = sig;
        s0 = s1 = step;
        times = malloc((nr + 1) * sizeof *times);
        for (size_t k = 0; times && k < nr; k++)
            times[k] = rows[k].time;
        if (!times) {
            free(prev);
            prev = NULL;
        }
    }
    if (prev)
        print_step(a, f, s0, s1, prev, nprev, times, s1 - s0 + 1);
    free(prev);
    free(times);
    free(v);
}

static void print_findings(struct audit *a, FILE *f)
{
    static const char *sev[] = {"info", "warning", "error"};
    fprintf(f, "\nfindings (%zu)\n", a->nfindings);
    if (!a->nfindings)
        fprintf(f,
                "  none: every rank made the same calls and no coalescible buffer (a floating-point sum of "
                "%d bytes or more) was reduced twice in a step\n",
                (int)audit_coalesce_min_bytes());
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct audit_finding *x = &a->findings[i];
        char lead[32];
        snprintf(lead, sizeof lead, "  %zu. [%s] ", i + 1, sev[x->severity]);
        wrap(f, lead, x->title, 6);
        wrap(f, "      evidence: ", x->evidence, 16);
        wrap(f, "      action:   ", x->action, 16);
    }
}

/* "func at /long/path/file.c:12 (inlined g at ../path/h.h:3)" ->
 * "func at file.c:12 (inlined g at h.h:3)", to fit the width. */
static void short_paths(char *nm)
{
    for (char *at = strstr(nm, " at "); at; at = strstr(at + 4, " at ")) {
        char *p = at + 4, *end = p + strcspn(p, ": "), *slash = NULL;
        for (char *q = p; q < end; q++)
            if (*q == '/')
                slash = q;
        if (slash)
            memmove(p, slash + 1, strlen(slash + 1) + 1);
    }
}

/* Calls made through mpi4py all come from its stripped module: where no
 * site carries a Python line (the run was not under `ccshim-run --python`),
 * one line says how to name the lines that made them. */
static void print_python_hint(struct audit_site **v, size_t nsites, FILE *f)
{
    uint64_t calls = 0;
    for (size_t i = 0; i < nsites; i++) {
        if (v[i]->pysite)
            return;
        if (v[i]->module && strstr(v[i]->module, "mpi4py/MPI."))
            calls += v[i]->count;
    }
    if (calls)
        fprintf(f,
                "    (%" PRIu64 " calls made through mpi4py, all at its module's sites: `ccshim-run --python`\n"
                "     names the Python line that made each; docs/python-sites.md)\n",
                calls);
}

static void print_sites(struct audit *a, FILE *f)
{
    if (!a->nsites)
        return;
    size_t nsites;
    struct audit_site **v = audit_sorted_sites(a, &nsites);
    if (!v || !nsites) { /* sites described, none with a call */
        free(v);
        return;
    }
    size_t n = nsites < 10 ? nsites : 10;
    fprintf(f, "\ntop call sites (all ranks, by calls)\n    %9s %10s %9s  %s\n", "calls", "bytes", "deferred",
            "site [kinds]");
    for (size_t i = 0; i < n; i++) {
        char b[32], nm[512], kinds[128] = "", line[700];
        size_t o = 0;
        for (unsigned k = 0; k < 32; k++)
            if (v[i]->kinds_mask & (1u << k))
                o += (size_t)snprintf(kinds + o, sizeof kinds - o, "%s%s", o ? "," : "", ccs_kind_name(k));
        audit_site_name(v[i], nm, sizeof nm);
        short_paths(nm);
        snprintf(line, sizeof line, "%.500s [%.120s]", nm, kinds);
        size_t avail = WIDTH - 1 - 36, len = strlen(line);
        if (len > avail) { /* keep both ends: the function and the kinds */
            size_t head = (avail - 3) / 2, tail;
            /* and a Python line whole, with the bar after it */
            const char *bar = v[i]->pysite ? strstr(line, " | ") : NULL;
            size_t want = bar ? (size_t)(bar - line) + 3 : 0, kl = strlen(kinds) + 3;
            if (want > head && want + 3 + kl <= avail)
                head = want;
            tail = avail - 3 - head;
            memmove(line + head + 3, line + len - tail, tail + 1);
            memcpy(line + head, "...", 3);
        }
        fprintf(f, "    %9" PRIu64 " %10s %9" PRIu64 "  %s\n", v[i]->count, fmt_bytes(v[i]->bytes, b, sizeof b),
                v[i]->deferred, line);
    }
    print_python_hint(v, nsites, f);
    free(v);
}

static void print_header(struct audit *a, FILE *f)
{
    size_t ok = 0, trunc = 0, bad = 0, killed = 0;
    const char *job = NULL, *host = NULL;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_OK && x->has_end && x->end.reason == CCS_END_SIGNAL)
            killed++; /* whole, but the process did not end by itself */
        else if (x->status == FILE_OK)
            ok++;
        else if (x->status == FILE_TRUNCATED)
            trunc++;
        else
            bad++;
        if (!job && x->job[0])
            job = x->job, host = x->host;
    }
    char head[600];
    int o = snprintf(head, sizeof head, "%zu trace%s (%zu complete, ", a->nfiles, a->nfiles == 1 ? "" : "s", ok);
    if (killed) { /* by which signals: the first rank's, and whether the others differ */
        int sig = 0, same = 1;
        for (size_t i = 0; i < a->nfiles; i++) {
            const struct audit_file *x = &a->files[i];
            if (x->status != FILE_OK || !x->has_end || x->end.reason != CCS_END_SIGNAL)
                continue;
            if (!sig)
                sig = x->end.signo;
            else if (sig != x->end.signo)
                same = 0;
        }
        if (same)
            o += snprintf(head + o, sizeof head - (size_t)o, "%zu killed by signal %d, ", killed, sig);
        else
            o += snprintf(head + o, sizeof head - (size_t)o, "%zu killed by signals, ", killed);
    }
    o += snprintf(head + o, sizeof head - (size_t)o, "%zu cut short, %zu unreadable)", trunc, bad);
    if (job && o > 0 && (size_t)o < sizeof head)
        snprintf(head + o, sizeof head - (size_t)o, ", job %.128s on %.128s%s", job, host, a->nfiles > 1 ? " ..." : "");
    fprintf(f, "ccshim-audit: %s\n", head); /* one line, whatever its length: scripts grep it */
    if (a->steps.source == STEPS_MARKERS)
        fprintf(f, "steps: from step markers, %u steps\n", a->max_step + 1);
    else if (a->steps.source == STEPS_INFERRED) {
        char t[256];
        snprintf(t, sizeof t,
                 "INFERRED (no step markers): the call stream repeats every %" PRIu64 " calls after %" PRIu64
                 " setup calls (counted in step 0); %u steps",
                 a->steps.period, a->steps.head, a->max_step + 1);
        wrap(f, "steps: ", t, 7);
    } else
        fprintf(f, "steps: no step markers and no repeating call pattern: everything is step 0\n");
    if (a->nreports)
        fprintf(f, "reports: %zu desync report/flight dump file%s beside the traces (see findings)\n", a->nreports,
                a->nreports == 1 ? "" : "s");
    fprintf(f, "rows marked ! are ranks whose calls differ from the majority's\n");
}

static int wait_cmp(const void *x, const void *y)
{
    const uint64_t *a = x, *b = y; /* {wait, time, step, slowest rank, its wait} */
    if (a[0] != b[0])
        return a[0] > b[0] ? -1 : 1;
    return a[2] < b[2] ? -1 : a[2] > b[2];
}

static int site_time_cmp(const void *x, const void *y)
{
    const struct audit_site *a = *(struct audit_site *const *)x, *b = *(struct audit_site *const *)y;
    if (a->time_ns != b->time_ns)
        return a->time_ns > b->time_ns ? -1 : 1;
    return a->index < b->index ? -1 : 1;
}

/* Time in collectives and wait: per rank, the steps with the most wait,
 * the call sites with the most time, what coalescing saved. */
static void print_time(struct audit *a, FILE *f)
{
    if (!a->timed)
        return;
    char t1[32], t2[32], t3[32], s1[16], s2[16];
    uint64_t run_all = 0;
    fprintf(f, "\ntime in collectives (wait: a rank's time in a call beyond the fastest rank's for the same "
               "call;\n  share: of the process's run time, from ccshim's start to the end of its last call)\n");
    fprintf(f, "    %6s %12s %14s %7s %12s %7s\n", "rank", "run time", "collectives", "share", "wait", "share");
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_REFUSED)
            continue;
        run_all += x->t_last_ns;
        fprintf(f, "    %6d %12s %14s %7s %12s %7s\n", (int)x->rank, fmt_time(x->t_last_ns, t1, sizeof t1),
                fmt_time(x->coll_ns, t2, sizeof t2), fmt_share(x->coll_ns, x->t_last_ns, s1, sizeof s1),
                fmt_time(x->wait_ns, t3, sizeof t3), fmt_share(x->wait_ns, x->t_last_ns, s2, sizeof s2));
    }
    if (a->time_capped)
        fprintf(f, "  (wait partial: more calls than the audit holds per communicator, 4194304)\n");
    /* Steps: the most wait first (all of them in --json and --tsv-time). */
    size_t n;
    struct audit_steptime **v = audit_sorted_steptimes(a, &n);
    uint64_t (*steps)[5] = v ? calloc(n + 1, sizeof *steps) : NULL;
    size_t ns = 0;
    for (size_t i = 0; steps && i < n; i++) {
        if (!ns || steps[ns - 1][2] != v[i]->k.step) {
            steps[ns][2] = v[i]->k.step;
            ns++;
        }
        uint64_t *s = steps[ns - 1];
        s[0] += v[i]->wait_ns;
        s[1] += v[i]->time_ns;
        if (v[i]->wait_ns > s[4]) { /* the first rank of the most */
            s[3] = (uint64_t)(uint32_t)v[i]->k.rank;
            s[4] = v[i]->wait_ns;
        }
    }
    if (ns) {
        qsort(steps, ns, sizeof *steps, wait_cmp);
        size_t show = ns < 5 ? ns : 5;
        fprintf(f, "  %s (of %zu; every step in --json and --tsv-time):\n",
                show > 1 ? "the steps with the most wait" : "the step with the most wait", ns);
        fprintf(f, "    %6s %14s %12s  %s\n", "step", "collectives", "wait", "rank waiting most");
        for (size_t i = 0; i < show; i++)
            fprintf(f, "    %6" PRIu64 " %14s %12s  rank %d, %s\n", steps[i][2], fmt_time(steps[i][1], t1, sizeof t1),
                    fmt_time(steps[i][0], t2, sizeof t2), (int)(int32_t)(uint32_t)steps[i][3],
                    fmt_time(steps[i][4], t3, sizeof t3));
    }
    free(steps);
    free(v);
    /* Call sites: the most time first. */
    struct audit_site **sv = malloc((a->nsites + 1) * sizeof *sv);
    size_t nsv = 0;
    for (size_t i = 0; sv && i < a->nsites; i++)
        if (a->site_list[i]->time_ns)
            sv[nsv++] = a->site_list[i];
    if (nsv) {
        qsort(sv, nsv, sizeof *sv, site_time_cmp);
        size_t show = nsv < 5 ? nsv : 5;
        fprintf(f, "  call sites, the most time first (all ranks; share of their run time):\n");
        fprintf(f, "    %12s %7s %12s %7s  %s\n", "collectives", "share", "wait", "share", "site");
        for (size_t i = 0; i < show; i++) {
            char nm[512], line[600];
            audit_site_name(sv[i], nm, sizeof nm);
            short_paths(nm);
            snprintf(line, sizeof line, "%.500s", nm);
            size_t avail = WIDTH - 1 - 47, len = strlen(line);
            char *inl = strstr(line, " (inlined ");
            if (len > avail && inl && (size_t)(inl - line) + 14 <= avail) {
                /* the call's own line whole, the inlined helper left out
                 * (both ends would keep the helper's line, not the call's) */
                memcpy(inl, " (inlined ...)", 15);
            } else if (len > avail) { /* keep both ends */
                size_t head = (avail - 3) / 2, tail = avail - 3 - head;
                memmove(line + head + 3, line + len - tail, tail + 1);
                memcpy(line + head, "...", 3);
            }
            fprintf(f, "    %12s %7s %12s %7s  %s\n", fmt_time(sv[i]->time_ns, t1, sizeof t1),
                    fmt_share(sv[i]->time_ns, run_all, s1, sizeof s1), fmt_time(sv[i]->wait_ns, t2, sizeof t2),
                    fmt_share(sv[i]->wait_ns, run_all, s2, sizeof s2), line);
        }
    }
    free(sv);
    if (a->saved.deferred) {
        char t[400];
        if (a->saved.measured)
            snprintf(t, sizeof t, "coalescing saved %s: %" PRIu64 " deferred reductions, each the mean time of the "
                     "same reduction made for real in this job, less its own%s",
                     fmt_time(a->saved.saved_ns, t1, sizeof t1), a->saved.measured,
                     a->saved.measured < a->saved.deferred ? " (the others: no real twin, not claimed)" : "");
        else
            snprintf(t, sizeof t, "coalescing deferred %" PRIu64 " reductions; the time saved is not claimed: this "
                     "job made none of them for real to measure it against", a->saved.deferred);
        wrap(f, "  ", t, 4);
    }
}

static void print_files(struct audit *a, FILE *f)
{
    size_t shown = 0;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_OK)
            continue;
        if (!shown++)
            fprintf(f, "\nfiles with problems\n");
        wrap(f, "  ", x->error ? x->error : x->path, 4);
    }
}

void out_table(struct audit *a, FILE *f)
{
    print_header(a, f);
    print_steps(a, f);
    print_time(a, f);
    print_findings(a, f);
    print_sites(a, f);
    print_files(a, f);
}

static int table_close(struct audit_sink *s)
{
    out_table(s->a, stdout);
    return 0;
}

/* The default: no option of its own. */
const struct audit_sink_type audit_sink_table = {
    .flags = AUDIT_SINK_STDOUT | AUDIT_SINK_REPORT | AUDIT_SINK_PATTERNS,
    .close = table_close,
};
