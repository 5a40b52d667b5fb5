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
          "\n",
          f);
    for (size_t i = 0; audit_sink_types[i]; i++)
        if (audit_sink_types[i]->help)
            fputs(audit_sink_types[i]->help, f);
    fputs("  --expect KIND<=N[/comm|/step|/buffer]\n"
          "                       fail (exit 1) when a step has more than N real calls of KIND per\n"
          "                       communicator (default), per step over all communicators, or of one\n"
          "                       buffer; repeatable\n"
          "  --fail-on error|warn exit 3 when a finding of that severity or worse was made\n"
          "  --job ID             read only the traces of job ID (a directory holding several jobs'\n"
          "                       traces is refused without it)\n"
          "  --no-symbols         do not read the modules' debug information to name call sites\n"
          "  --help, --version\n"
          "Exit status: 0 done, 1 an --expect rule was exceeded, 2 usage error, no readable trace or\n"
          "traces of several jobs, 3 a finding at the --fail-on severity or worse.\n",
          f);
}

/* What the command line asks for beyond struct audit's own options. */
struct audit_request {
    int symbols;
    int fail_on; /* lowest severity that fails the run (1 warning, 2 error), -1 none */
};

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

enum { OPT_EXPECT = 256, OPT_NO_SYMBOLS, OPT_FAIL_ON, OPT_JOB, OPT_HELP, OPT_VERSION, OPT_SINK = 512 };
#define MAX_SINK_TYPES 32

/* The long options: the tool's own, then each sink type's (OPT_SINK + 2i
 * chooses type i, OPT_SINK + 2i + 1 tunes it).  Fills OPTS (room for
 * 2 * MAX_SINK_TYPES + 7). */
static void long_options(struct option *opts)
{
    static const struct option own[] = {
        {"expect", required_argument, 0, OPT_EXPECT},
        {"no-symbols", no_argument, 0, OPT_NO_SYMBOLS},
        {"fail-on", required_argument, 0, OPT_FAIL_ON},
        {"job", required_argument, 0, OPT_JOB},
        {"help", no_argument, 0, OPT_HELP},
        {"version", no_argument, 0, OPT_VERSION},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        opts[n++] = own[i];
    for (size_t i = 0; audit_sink_types[i] && i < MAX_SINK_TYPES; i++) {
        const struct audit_sink_type *t = audit_sink_types[i];
        if (t->option)
            opts[n++] =
                (struct option){t->option, t->arg ? required_argument : no_argument, 0, OPT_SINK + 2 * (int)i};
        if (t->tune_option)
            opts[n++] = (struct option){t->tune_option, required_argument, 0, OPT_SINK + 2 * (int)i + 1};
    }
    opts[n] = (struct option){0, 0, 0, 0};
}

/* At most one sink writes on stdout; the table when none was chosen.
 * Returns 0, 2 after the message. */
static int check_stdout_sinks(struct audit *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nsinks; i++)
        n += (a->sinks[i].type->flags & AUDIT_SINK_STDOUT) != 0;
    if (n > 1) {
        const char *names[MAX_SINK_TYPES];
        size_t k = 0;
        for (size_t i = 0; audit_sink_types[i] && k < MAX_SINK_TYPES; i++)
            if (audit_sink_types[i]->option && (audit_sink_types[i]->flags & AUDIT_SINK_STDOUT))
                names[k++] = audit_sink_types[i]->option;
        fputs("ccshim-audit: ", stderr);
        for (size_t j = 0; j < k; j++)
            fprintf(stderr, "%s--%s", j == 0 ? "" : j + 1 == k ? " and " : ", ", names[j]);
        fputs(" exclude each other\n", stderr);
        return 2;
    }
    if (n == 0 && audit_sink_add(a, &audit_sink_table, NULL) != 0)
        return 2;
    a->want_patterns = audit_sinks_want(a, AUDIT_SINK_PATTERNS);
    return 0;
}

/* Reads the options into A and REQ.  Returns -1 to go on with the
 * arguments from optind, else the exit status (help, version, usage error). */
static int parse_options(struct audit *a, struct audit_request *req, int argc, char **argv)
{
    struct option opts[2 * MAX_SINK_TYPES + 7];
    long_options(opts);
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c >= OPT_SINK) {
            const struct audit_sink_type *t = audit_sink_types[(c - OPT_SINK) / 2];
            if ((c - OPT_SINK) % 2 ? t->tune(a, optarg) != 0 : audit_sink_add(a, t, t->arg ? optarg : NULL) != 0)
                return 2;
            continue;
        }
        switch (c) {
        case OPT_NO_SYMBOLS:
            req->symbols = 0;
            break;
        case OPT_EXPECT:
            if (add_expect(a, optarg) != 0)
                return 2;
            break;
        case OPT_FAIL_ON:
            if (strcmp(optarg, "error") == 0)
                req->fail_on = 2;
            else if (strcmp(optarg, "warn") == 0 || strcmp(optarg, "warning") == 0)
                req->fail_on = 1;
            else {
                fprintf(stderr, "ccshim-audit: --fail-on %s: expected error or warn\n", optarg);
                return 2;
            }
            break;
        case OPT_JOB:
            if (!*optarg) {
                fprintf(stderr, "ccshim-audit: --job: expected a job id (as in the traces' names)\n");
                return 2;
            }
            a->job = optarg;
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
    if (check_stdout_sinks(a) != 0)
        return 2;
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Finds the traces and reports named by ARGS and opens the sinks.
 * Returns 0, or 2 after the message. */
static int open_inputs(struct audit *a, char **args, int nargs)
{
    if (audit_collect(a, args, nargs) != 0 && a->nfiles == 0)
        return 2;
    if (a->nfiles == 0 && a->nreports == 0) {
        fprintf(stderr, "ccshim-audit: no *.cctrace files in %s%s\n", args[0], nargs > 1 ? " ..." : "");
        return 2;
    }
    audit_sort_files(a);
    if (audit_select_job(a) != 0)
        return 2;
    return audit_sinks_open(a) == 0 ? 0 : 2;
}

/* Reads every trace (the streaming sinks write as it goes), then closes
 * the sinks that need no report.  Returns 0, or 2 when one of them failed
 * or nothing was readable. */
static int read_traces(struct audit *a)
{
    audit_find_steps(a);
    size_t nread = audit_read_all(a);
    int rc = 0;
    if (audit_sinks_close(a, 0) != 0)
        rc = 2;
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

/* Checks the rules, finds what to say and closes the sinks that report
 * it (the table, JSON or TSV, the HTML report).  Returns RC, 2 when one
 * failed, 1 when a rule was exceeded and nothing else failed, or 3 when a
 * finding at the --fail-on severity was made and nothing else failed. */
static int report(struct audit *a, const struct audit_request *req, int rc)
{
    int failed = audit_expect_check(a);
    audit_findings(a);
    if (audit_sinks_close(a, 1) != 0)
        rc = 2;
    if (failed && rc == 0) {
        print_expect_failures(a, failed);
        rc = 1;
    }
    if (req->fail_on > 0) {
        size_t n = 0;
        for (size_t i = 0; i < a->nfindings; i++)
            n += a->findings[i].severity >= req->fail_on;
        if (n) {
            fprintf(stderr, "ccshim-audit: %zu finding%s of severity %s or worse (--fail-on)\n", n,
                    n == 1 ? "" : "s", req->fail_on == 2 ? "error" : "warning");
            if (rc == 0)
                rc = 3;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct audit a;
    struct audit_request req = {.symbols = 1, .fail_on = -1};
    audit_init(&a);
    int rc = parse_options(&a, &req, argc, argv);
    if (rc < 0 && (rc = open_inputs(&a, argv + optind, argc - optind)) == 0) {
        a.symbolize = req.symbols;
        rc = read_traces(&a);
        /* --fail-on needs the findings even when no output shows them. */
        if (audit_sinks_want(&a, AUDIT_SINK_REPORT) || req.fail_on > 0)
            rc = report(&a, &req, rc);
        if (fflush(stdout) != 0)
            rc = 2;
    }
    audit_free(&a);
    return rc;
}
