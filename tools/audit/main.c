/*
 * main.c - ccshim-audit: reads every rank's trace of a job and explains its
 * collectives step by step (docs/audit.md).
 */
#include "audit.h"
#include "config.h"
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: ccshim-audit [options] DIR|FILE...\n"
          "Reads every *.cctrace in each DIR (and each FILE named) and prints, per step, rank and\n"
          "communicator, the count, bytes and time of each kind of call, a compressed call pattern,\n"
          "findings (redundant reductions, ranks that disagree, desync reports) and top call sites.\n"
          "\n"
          "  --json               one JSON document instead of the table (schema: docs/audit.md)\n"
          "  --tsv                step rank comm kind count bytes deferred time_ns, tab-separated\n"
          "  --tsv-records        one tab-separated line per record:\n"
          "                       rank seq comm kind count dtype op root fingerprint step flags site buf\n"
          "  --chrome-trace FILE  also write a Trace Event file for Perfetto / chrome://tracing\n"
          "  --chrome-steps A[-B] only steps A to B in the Chrome trace (it holds every call)\n"
          "  --html FILE          also write a self-contained HTML report\n"
          "  --expect KIND<=N[/comm|/step|/buffer]\n"
          "                       fail (exit 1) when a step has more than N real calls of KIND per\n"
          "                       communicator (default), per step over all communicators, or of one\n"
          "                       buffer; repeatable\n"
          "  --no-symbols         do not run addr2line on the top call sites\n"
          "  --help, --version\n"
          "Exit status: 0 done, 1 an --expect rule was exceeded, 2 usage error or no readable trace.\n",
          f);
}

/* What the command line asks for beyond struct audit's own options. */
struct audit_request {
    int json, tsv, symbols;
    const char *chrome; /* --chrome-trace FILE, or NULL */
    const char *html;   /* --html FILE, or NULL */
};

/* --chrome-steps A[-B].  Returns 0, -1 after the message. */
static int parse_chrome_steps(struct audit *a, const char *arg)
{
    unsigned lo, hi;
    int n = 0;
    if (sscanf(arg, "%u-%u%n", &lo, &hi, &n) == 2 && arg[n] == 0 && lo <= hi) {
        a->chrome_first = lo;
        a->chrome_last = hi;
    } else if (sscanf(arg, "%u%n", &lo, &n) == 1 && arg[n] == 0) {
        a->chrome_first = a->chrome_last = lo;
    } else {
        fprintf(stderr, "ccshim-audit: --chrome-steps '%s': expected a step or a range A-B\n", arg);
        return -1;
    }
    return 0;
}

/* --expect RULE, added to A's rules.  Returns 0, -1 (message printed when the rule is bad). */
static int add_expect(struct audit *a, const char *arg)
{
    char err[256];
    struct audit_expect *grown = realloc(a->expects, (a->nexpects + 1) * sizeof *grown);
    if (!grown)
        return -1;
    a->expects = grown;
    if (audit_expect_parse(arg, &a->expects[a->nexpects], err, sizeof err) != 0) {
        fprintf(stderr, "ccshim-audit: %s\n", err);
        return -1;
    }
    a->nexpects++;
    return 0;
}

/* Reads the options into A and REQ.  Returns -1 to go on with the
 * arguments from optind, else the exit status (help, version, usage error). */
static int parse_options(struct audit *a, struct audit_request *req, int argc, char **argv)
{
    enum {
        OPT_JSON = 256,
        OPT_TSV,
        OPT_TSV_RECORDS,
        OPT_CHROME,
        OPT_CHROME_STEPS,
        OPT_HTML,
        OPT_EXPECT,
        OPT_NO_SYMBOLS,
        OPT_HELP,
        OPT_VERSION
    };
    static const struct option opts[] = {
        {"json", no_argument, 0, OPT_JSON},
        {"tsv", no_argument, 0, OPT_TSV},
        {"tsv-records", no_argument, 0, OPT_TSV_RECORDS},
        {"chrome-trace", required_argument, 0, OPT_CHROME},
        {"chrome-steps", required_argument, 0, OPT_CHROME_STEPS},
        {"html", required_argument, 0, OPT_HTML},
        {"expect", required_argument, 0, OPT_EXPECT},
        {"no-symbols", no_argument, 0, OPT_NO_SYMBOLS},
        {"help", no_argument, 0, OPT_HELP},
        {"version", no_argument, 0, OPT_VERSION},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            req->json = 1;
            break;
        case OPT_TSV:
            req->tsv = 1;
            break;
        case OPT_TSV_RECORDS:
            a->tsv_records = 1;
            break;
        case OPT_CHROME:
            req->chrome = optarg;
            break;
        case OPT_HTML:
            req->html = optarg;
            break;
        case OPT_CHROME_STEPS:
            if (parse_chrome_steps(a, optarg) != 0)
                return 2;
            break;
        case OPT_NO_SYMBOLS:
            req->symbols = 0;
            break;
        case OPT_EXPECT:
            if (add_expect(a, optarg) != 0)
                return 2;
            break;
        case 'h':
        case OPT_HELP:
            usage(stdout);
            return 0;
        case OPT_VERSION:
            printf("ccshim-audit %s (trace format %u, JSON schema %d)\n", PACKAGE_VERSION, CCS_TRACE_VERSION,
                   AUDIT_JSON_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (req->json + req->tsv + a->tsv_records > 1) {
        fputs("ccshim-audit: --json, --tsv and --tsv-records exclude each other\n", stderr);
        return 2;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Finds the traces and reports named by ARGS and opens the Chrome trace.
 * Returns 0, or 2 after the message. */
static int open_inputs(struct audit *a, const struct audit_request *req, char **args, int nargs)
{
    if (audit_collect(a, args, nargs) != 0 && a->nfiles == 0)
        return 2;
    if (a->nfiles == 0 && a->nreports == 0) {
        fprintf(stderr, "ccshim-audit: no *.cctrace files in %s%s\n", args[0], nargs > 1 ? " ..." : "");
        return 2;
    }
    audit_sort_files(a);
    if (req->chrome) {
        a->chrome = chrome_open(req->chrome);
        if (!a->chrome) {
            fprintf(stderr, "ccshim-audit: %s: cannot write the Chrome trace\n", req->chrome);
            return 2;
        }
        chrome_set_t0(a->chrome, a->t0_realtime_ns);
    }
    return 0;
}

/* Reads every trace (--tsv-records and the Chrome trace stream out as it
 * goes).  Returns 0, or 2 when the Chrome trace failed or nothing was readable. */
static int read_traces(struct audit *a, const struct audit_request *req)
{
    a->want_patterns = !a->tsv_records && !req->tsv;
    a->tsv_records_out = stdout;
    if (a->tsv_records)
        printf("#rank\tseq\tcomm\tkind\tcount\tdtype\top\troot\tfingerprint\tstep\tflags\tsite\tbuf\n");
    audit_find_steps(a);
    size_t nread = audit_read_all(a);
    int rc = 0;
    if (a->chrome && chrome_close(a->chrome) != 0) {
        fprintf(stderr, "ccshim-audit: %s: write failed\n", req->chrome);
        rc = 2;
    }
    a->chrome = NULL;
    if (nread == 0 && a->nfiles > 0) {
        fprintf(stderr, "ccshim-audit: none of the %zu trace file%s could be read\n", a->nfiles,
                a->nfiles == 1 ? "" : "s");
        rc = 2;
    }
    return rc;
}

static void print_expect_failures(const struct audit *a, int failed)
{
    fprintf(stderr, "ccshim-audit: %d --expect rule%s exceeded\n", failed, failed == 1 ? "" : "s");
    for (size_t i = 0; i < a->nexpects; i++) {
        const struct audit_expect *e = &a->expects[i];
        if (e->violations)
            fprintf(stderr, "ccshim-audit:   %s: %llu time%s, worst %llu in step %u on rank %d\n", e->text,
                    (unsigned long long)e->violations, e->violations == 1 ? "" : "s", (unsigned long long)e->worst,
                    e->worst_step, (int)e->worst_rank);
    }
}

/* Checks the rules, finds what to say and writes the table, JSON or TSV,
 * and the HTML report.  Returns RC, 2 when the report failed, or 1 when a
 * rule was exceeded and nothing else failed. */
static int report(struct audit *a, const struct audit_request *req, int rc)
{
    int failed = audit_expect_check(a);
    if (req->symbols)
        audit_symbolize(a, 20);
    audit_findings(a);
    if (req->json)
        out_json(a, stdout);
    else if (req->tsv)
        out_tsv(a, stdout);
    else
        out_table(a, stdout);
    if (req->html && out_html(a, req->html) != 0) {
        fprintf(stderr, "ccshim-audit: %s: cannot write the HTML report\n", req->html);
        rc = 2;
    }
    if (failed && rc == 0) {
        print_expect_failures(a, failed);
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct audit a;
    struct audit_request req = {.symbols = 1};
    audit_init(&a);
    int rc = parse_options(&a, &req, argc, argv);
    if (rc < 0 && (rc = open_inputs(&a, &req, argv + optind, argc - optind)) == 0) {
        rc = read_traces(&a, &req);
        if (!a.tsv_records)
            rc = report(&a, &req, rc);
        if (fflush(stdout) != 0)
            rc = 2;
    }
    audit_free(&a);
    return rc;
}
