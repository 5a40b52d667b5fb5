/*
 * out_tsv.c - the tab-separated outputs, for shell tests: --tsv, one line
 * per (step, rank, comm, kind) after reading, --tsv-records, one line per
 * call as the traces stream past, and --tsv-time, the time in collectives
 * and wait per step and rank, rank, call site, and what coalescing saved.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>

void out_tsv(struct audit *a, FILE *f)
{
    size_t n;
    struct audit_cell **v = audit_sorted_cells(a, &n);
    fprintf(f, "#step\trank\tcomm\tkind\tcount\tbytes\tdeferred\ttime_ns\tbackend\n");
    for (size_t i = 0; i < n; i++) {
        const struct audit_cell *c = v[i];
        const struct audit_comm *ac = audit_comm_get(a, c->k.comm, 0);
        fprintf(f, "%u\t%d\t%016" PRIx64 "\t%s\t%" PRIu64 "\t%" PRIu64 "\t%u\t%" PRIu64 "\t%s\n", c->k.step,
                (int)c->k.rank, c->k.comm, ccs_kind_name(c->k.kind), c->count, c->bytes, c->k.deferred, c->time_ns,
                ccs_backend_name(ac ? ac->backend : CCS_BE_NONE));
    }
    free(v);
}

static int tsv_close(struct audit_sink *s)
{
    out_tsv(s->a, stdout);
    return 0;
}

const struct audit_sink_type audit_sink_tsv = {
    .option = "tsv",
    .help = "  --tsv                step rank comm kind count bytes deferred time_ns, tab-separated\n",
    .flags = AUDIT_SINK_STDOUT | AUDIT_SINK_REPORT,
    .close = tsv_close,
};

/* Site S's name as every output gives it, on one field (a tab or newline
 * in a name from a damaged file would split the line: replaced). */
static const char *tsv_site_name(const struct audit_site *s, char *buf, size_t n)
{
    audit_site_name(s, buf, n);
    for (char *p = buf; *p; p++)
        if (*p == '\t' || *p == '\n')
            *p = ' ';
    return buf;
}

static int records_open(struct audit_sink *s)
{
    (void)s;
    printf("#rank\tseq\tcomm\tkind\tcount\tdtype\top\troot\tfingerprint\tstep\tflags\tsite\tbuf\twhere\n");
    return 0;
}

/* One line per call (step marks are not calls). */
static void records_record(struct audit_sink *s, const struct audit_file *f, const struct ccs_record *r,
                           uint32_t step, uint32_t site)
{
    if (ccs_kind_class(r->kind) == CCS_CLASS_MARK)
        return;
    /* `site` is the trace's own site id; `where` names it as every output
     * does (a tab or newline in a name from a damaged file would split the
     * line: replaced). */
    char where[1024] = "-";
    if (site && site <= s->a->nsites)
        tsv_site_name(s->a->site_list[site - 1], where, sizeof where);
    char flags[128] = "";
    size_t o = 0;
#define CCS_X(e, b, name)                                                                                          \
    if (r->flags & (b))                                                                                            \
        o += snprintf(flags + o, sizeof flags - o, "%s%s", o ? "," : "", name);
    CCS_FLAG_LIST(CCS_X)
#undef CCS_X
    if (s->a->reading_inflight) /* the call had not returned when the process ended */
        o += snprintf(flags + o, sizeof flags - o, "%sin_progress", o ? "," : "");
    printf("%d\t%" PRIu64 "\t%016" PRIx64 "\t%s\t%" PRIu64 "\t%s\t%s\t%d\t%016" PRIx64 "\t%u\t%s\t%u\t%" PRIx64
           "\t%s\n",
           (int)f->rank, r->seq, r->comm, ccs_kind_name(r->kind), r->count, ccs_dtype_name(r->dtype),
           ccs_op_name(r->op), (int)r->root, r->fingerprint, step, o ? flags : "-", (unsigned)r->site, r->buf, where);
}

const struct audit_sink_type audit_sink_tsv_records = {
    .option = "tsv-records",
    .help = "  --tsv-records        one tab-separated line per record:\n"
            "                       rank seq comm kind count dtype op root fingerprint step flags site buf where\n"
            "                       (flags in_progress: a call that had not returned when its process ended)\n",
    .flags = AUDIT_SINK_STDOUT,
    .open = records_open,
    .record = records_record,
};

/* The most time first, as the table lists them. */
static int site_time_cmp(const void *x, const void *y)
{
    const struct audit_site *a = *(struct audit_site *const *)x, *b = *(struct audit_site *const *)y;
    if (a->time_ns != b->time_ns)
        return a->time_ns > b->time_ns ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* --tsv-time: the time of every step and rank, then every rank's totals,
 * every call site's (with the ranks' summed run time, of which the table
 * gives its shares) and what coalescing saved (as --json's time.coalescing:
 * "-" where nothing was measured, not claimed). */
static int time_close(struct audit_sink *s)
{
    struct audit *a = s->a;
    size_t n;
    struct audit_steptime **v = audit_sorted_steptimes(a, &n);
    printf("#step\trank\tcollectives_ns\twait_ns\n");
    for (size_t i = 0; v && i < n; i++)
        printf("%u\t%d\t%" PRIu64 "\t%" PRIu64 "\n", v[i]->k.step, (int)v[i]->k.rank, v[i]->time_ns, v[i]->wait_ns);
    free(v);
    printf("#total\trank\tcollectives_ns\twait_ns\trun_ns\n");
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status != FILE_REFUSED)
            printf("total\t%d\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", (int)x->rank, x->coll_ns, x->wait_ns,
                   x->t_last_ns);
    }
    uint64_t run_all = 0;
    for (size_t i = 0; i < a->nfiles; i++)
        if (a->files[i].status != FILE_REFUSED)
            run_all += a->files[i].t_last_ns;
    struct audit_site **sv = malloc((a->nsites + 1) * sizeof *sv);
    size_t nsv = 0;
    for (size_t i = 0; sv && i < a->nsites; i++)
        if (a->site_list[i]->time_ns)
            sv[nsv++] = a->site_list[i];
    if (sv)
        qsort(sv, nsv, sizeof *sv, site_time_cmp);
    printf("#site\tcollectives_ns\twait_ns\trun_ns\twhere\n");
    for (size_t i = 0; i < nsv; i++) {
        char where[1024];
        printf("site\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%s\n", sv[i]->time_ns, sv[i]->wait_ns, run_all,
               tsv_site_name(sv[i], where, sizeof where));
    }
    free(sv);
    printf("#coalescing\tdeferred\tmeasured\tsaved_ns\n");
    if (a->saved.measured)
        printf("coalescing\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", a->saved.deferred, a->saved.measured,
               a->saved.saved_ns);
    else
        printf("coalescing\t%" PRIu64 "\t0\t-\n", a->saved.deferred);
    return 0;
}

const struct audit_sink_type audit_sink_tsv_time = {
    .option = "tsv-time",
    .help =
        "  --tsv-time           time in collectives and wait (beyond the fastest rank's), tab-separated:\n"
        "                       step rank collectives_ns wait_ns; then total rank collectives_ns wait_ns run_ns;\n"
        "                       site collectives_ns wait_ns run_ns where; coalescing deferred measured saved_ns\n",
    .flags = AUDIT_SINK_STDOUT | AUDIT_SINK_REPORT,
    .close = time_close,
};
