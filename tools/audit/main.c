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

int main(int argc, char **argv)
{
    enum {
        OPT_JSON = 256,
        OPT_TSV,
        OPT_TSVREC,
        OPT_CHROME,
        OPT_CHROME_STEPS,
        OPT_HTML,
        OPT_EXPECT,
        OPT_NOSYM,
        OPT_HELP,
        OPT_VERSION
    };
    static const struct option opts[] = {
        {"json", no_argument, 0, OPT_JSON},
        {"tsv", no_argument, 0, OPT_TSV},
        {"tsv-records", no_argument, 0, OPT_TSVREC},
        {"chrome-trace", required_argument, 0, OPT_CHROME},
        {"chrome-steps", required_argument, 0, OPT_CHROME_STEPS},
        {"html", required_argument, 0, OPT_HTML},
        {"expect", required_argument, 0, OPT_EXPECT},
        {"no-symbols", no_argument, 0, OPT_NOSYM},
        {"help", no_argument, 0, OPT_HELP},
        {"version", no_argument, 0, OPT_VERSION},
        {0, 0, 0, 0},
    };
    struct audit a;
    int json = 0, tsv = 0, symbols = 1, c;
    const char *chrome = NULL, *html = NULL;
    audit_init(&a);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            json = 1;
            break;
        case OPT_TSV:
            tsv = 1;
            break;
        case OPT_TSVREC:
            a.tsv_records = 1;
            break;
        case OPT_CHROME:
            chrome = optarg;
            break;
        case OPT_HTML:
            html = optarg;
            break;
        case OPT_CHROME_STEPS: {
            unsigned lo, hi;
            int n = 0;
            if (sscanf(optarg, "%u-%u%n", &lo, &hi, &n) == 2 && optarg[n] == 0 && lo <= hi) {
                a.chrome_first = lo;
                a.chrome_last = hi;
            } else if (sscanf(optarg, "%u%n", &lo, &n) == 1 && optarg[n] == 0) {
                a.chrome_first = a.chrome_last = lo;
            } else {
                fprintf(stderr, "ccshim-audit: --chrome-steps '%s': expected a step or a range A-B\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_NOSYM:
            symbols = 0;
            break;
        case OPT_EXPECT: {
            char err[256];
            struct audit_expect *n = realloc(a.expects, (a.nexpects + 1) * sizeof *n);
            if (!n)
                return 2;
            a.expects = n;
            if (audit_expect_parse(optarg, &a.expects[a.nexpects], err, sizeof err) != 0) {
                fprintf(stderr, "ccshim-audit: %s\n", err);
                return 2;
            }
            a.nexpects++;
            break;
        }
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
    if (json + tsv + a.tsv_records > 1) {
        fputs("ccshim-audit: --json, --tsv and --tsv-records exclude each other\n", stderr);
        return 2;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (audit_collect(&a, argv + optind, argc - optind) != 0 && a.nfiles == 0) {
        audit_free(&a);
        return 2;
    }
    if (a.nfiles == 0 && a.nreports == 0) {
        fprintf(stderr, "ccshim-audit: no *.cctrace files in %s%s\n", argv[optind],
                argc - optind > 1 ? " ..." : "");
        audit_free(&a);
        return 2;
    }
    audit_sort_files(&a);
    if (chrome) {
        a.chrome = chrome_open(chrome);
        if (!a.chrome) {
            fprintf(stderr, "ccshim-audit: %s: cannot write the Chrome trace\n", chrome);
            audit_free(&a);
            return 2;
        }
        chrome_set_t0(a.chrome, a.t0_realtime_ns);
    }
    a.want_patterns = !a.tsv_records && !tsv;
    a.tsv_records_out = stdout;
    if (a.tsv_records)
        printf("#rank\tseq\tcomm\tkind\tcount\tdtype\top\troot\tfingerprint\tstep\tflags\tsite\tbuf\n");
    audit_find_steps(&a);
    size_t nread = audit_read_all(&a);
    int rc = 0;
    if (a.chrome && chrome_close(a.chrome) != 0) {
        fprintf(stderr, "ccshim-audit: %s: write failed\n", chrome);
        rc = 2;
    }
    a.chrome = NULL;
    if (nread == 0 && a.nfiles > 0) {
        fprintf(stderr, "ccshim-audit: none of the %zu trace file%s could be read\n", a.nfiles,
                a.nfiles == 1 ? "" : "s");
        rc = 2;
    }
    if (!a.tsv_records) {
        int failed = audit_expect_check(&a);
        if (symbols)
            audit_symbolize(&a, 20);
        audit_findings(&a);
        if (json)
            out_json(&a, stdout);
        else if (tsv)
            out_tsv(&a, stdout);
        else
            out_table(&a, stdout);
        if (html && out_html(&a, html) != 0) {
            fprintf(stderr, "ccshim-audit: %s: cannot write the HTML report\n", html);
            rc = 2;
        }
        if (failed && rc == 0) {
            fprintf(stderr, "ccshim-audit: %d --expect rule%s exceeded\n", failed, failed == 1 ? "" : "s");
            for (size_t i = 0; i < a.nexpects; i++)
                if (a.expects[i].violations)
                    fprintf(stderr, "ccshim-audit:   %s: %llu time%s, worst %llu in step %u on rank %d\n",
                            a.expects[i].text, (unsigned long long)a.expects[i].violations,
                            a.expects[i].violations == 1 ? "" : "s", (unsigned long long)a.expects[i].worst,
                            a.expects[i].worst_step, (int)a.expects[i].worst_rank);
            rc = 1;
        }
    }
    if (fflush(stdout) != 0)
        rc = 2;
    audit_free(&a);
    return rc;
}
