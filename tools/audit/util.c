/* util.c - formatting helpers shared by ccshim-audit's outputs. */
#include "audit.h"
#include "ccs_kinds.h"
#include "config_table.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *fmt_bytes(uint64_t b, char *buf, size_t n)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (b < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", b);
        return buf;
    }
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}

const char *fmt_time(uint64_t ns, char *buf, size_t n)
{
    if (ns < 1000)
        snprintf(buf, n, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, n, "%.1f us", ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, n, "%.1f ms", ns / 1e6);
    else
        snprintf(buf, n, "%.2f s", ns / 1e9);
    return buf;
}

void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void html_str(FILE *f, const char *s)
{
    for (const char *p = s ? s : ""; *p; p++) {
        switch (*p) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*p, f);
        }
    }
}

const char *kind_label(unsigned kind, int deferred, char *buf, size_t n)
{
    /* 1: answered locally by ccshim; 2: the one real reduction of a step
     * whose others the torch helper made DDP skip (docs/coalescing.md). */
    snprintf(buf, n, "%s%s", ccs_kind_name(kind), deferred == 1 ? "(deferred)" : deferred == 2 ? "(helper)" : "");
    return buf;
}

/* CCSHIM_COALESCE_MIN_BYTES' default, from the one settings table. */
uint64_t audit_coalesce_min_bytes(void)
{
    static uint64_t v = UINT64_MAX;
    if (v == UINT64_MAX) {
#define CCS_X(field, name, type, def, help)                                                                            \
    if (strcmp(name, "CCSHIM_COALESCE_MIN_BYTES") == 0)                                                              \
        v = strtoull(def, NULL, 10);
        CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
    }
    return v;
}

int audit_coalescible(unsigned kind, unsigned dtype, unsigned op, uint64_t bytes)
{
    if (kind != CCS_KIND_ALLREDUCE || bytes < audit_coalesce_min_bytes())
        return 0;
    if (op != CCS_OP_SUM && op != CCS_OP_AVG && op != CCS_OP_PREMULSUM)
        return 0;
    return dtype == CCS_DT_FLOAT16 || dtype == CCS_DT_BFLOAT16 || dtype == CCS_DT_FLOAT32 ||
           dtype == CCS_DT_FLOAT64;
}

static int cell_cmp(const void *x, const void *y)
{
    const struct audit_cell *a = *(struct audit_cell *const *)x, *b = *(struct audit_cell *const *)y;
    if (a->k.step != b->k.step)
        return a->k.step < b->k.step ? -1 : 1;
    if (a->k.rank != b->k.rank)
        return a->k.rank < b->k.rank ? -1 : 1;
    if (a->k.comm != b->k.comm)
        return a->k.comm < b->k.comm ? -1 : 1;
    if (a->k.kind != b->k.kind)
        return a->k.kind < b->k.kind ? -1 : 1;
    return (int)a->k.deferred - (int)b->k.deferred;
}

struct audit_cell **audit_sorted_cells(const struct audit *a, size_t *n)
{
    return (struct audit_cell **)hmap_sorted(&a->cells, cell_cmp, n);
}

static int site_cmp(const void *x, const void *y)
{
    const struct audit_site *a = *(struct audit_site *const *)x, *b = *(struct audit_site *const *)y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->index < b->index ? -1 : 1;
}

struct audit_site **audit_sorted_sites(const struct audit *a, size_t *n)
{
    struct audit_site **v = malloc((a->nsites + 1) * sizeof *v);
    size_t k = 0;
    *n = 0;
    if (!v)
        return NULL;
    /* Sites that made no counted call (the step marker's) are not listed. */
    for (size_t i = 0; i < a->nsites; i++)
        if (a->site_list[i]->count)
            v[k++] = a->site_list[i];
    qsort(v, k, sizeof *v, site_cmp);
    *n = k;
    return v;
}

static int sc_cmp(const void *x, const void *y)
{
    const struct audit_stepcomm *a = *(struct audit_stepcomm *const *)x, *b = *(struct audit_stepcomm *const *)y;
    if (a->k.step != b->k.step)
        return a->k.step < b->k.step ? -1 : 1;
    return a->k.comm < b->k.comm ? -1 : a->k.comm > b->k.comm;
}

struct audit_stepcomm **audit_sorted_stepcomms(const struct audit *a, size_t *n)
{
    return (struct audit_stepcomm **)hmap_sorted(&a->stepcomms, sc_cmp, n);
}

const char *audit_finding_name(int k)
{
    switch (k) {
    case FIND_REDUNDANT:
        return "redundant-reduction";
    case FIND_MISMATCH:
        return "rank-mismatch";
    case FIND_REPORTS:
        return "desync-reports";
    case FIND_HANG:
        return "post-mortem";
    case FIND_DEFERRED:
        return "deferred-reductions";
    case FIND_TRUNCATED:
        return "truncated-trace";
    case FIND_UNREADABLE:
        return "unreadable-trace";
    case FIND_DROPPED:
        return "dropped-records";
    case FIND_EXPECT:
        return "expect-exceeded";
    case FIND_CAPTURED:
        return "captured-collectives";
    case FIND_NO_CALLS:
        return "no-collectives";
    case FIND_DUPLICATE:
        return "duplicate-rank";
    case FIND_UNCOVERED:
        return "not-intercepted";
    case FIND_STEPS:
        return "step-structure";
    }
    return "?";
}
