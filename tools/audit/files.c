/* files.c - finds the traces, desync reports and flight dumps to audit. */
#include "audit.h"
#include "trace_reader.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int add_file(struct audit *a, const char *path)
{
    struct audit_file *nf = realloc(a->files, (a->nfiles + 1) * sizeof *nf);
    if (!nf)
        return -1;
    a->files = nf;
    struct audit_file *f = &a->files[a->nfiles++];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    f->rank = -1;
    f->size = -1;
    return f->path ? 0 : -1;
}

/* The rank a report's or dump's name gives ("...-r3.txt"), -1 when none. */
static int32_t rank_of_name(const char *path)
{
    const char *b = strrchr(path, '/');
    int32_t rank = -1;
    for (const char *p = strstr(b ? b : path, "-r"); p; p = strstr(p + 1, "-r")) {
        char *end;
        if (p[2] < '0' || p[2] > '9')
            continue;
        long v = strtol(p + 2, &end, 10);
        if ((*end == '.' || *end == '-') && v <= INT32_MAX)
            rank = (int32_t)v; /* the last such part: "-r3.txt", "-node-r3-p42.flight" */
    }
    return rank;
}

/* A flight dump's line of its call in progress (desync_report.c writes it
 * tab-separated): the record's 13 columns then "(in progress)"; dumps of
 * earlier versions wrote "thread seq comm kind (in progress)". */
static void flight_line(struct audit_report *r, char *line)
{
    char *f[14];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, "\t", &save); t && n < 14; t = strtok_r(NULL, "\t", &save))
        f[n++] = t;
    if ((n != 5 && n != 14) || strcmp(f[n - 1], "(in progress)") != 0)
        return;
    r->has_inflight = 1;
    r->inflight_seq = strtoull(f[1], NULL, 10);
    r->inflight_comm = strtoull(f[2], NULL, 16);
    snprintf(r->inflight_kind, sizeof r->inflight_kind, "%s", f[3]);
    if (n == 14)
        r->inflight_site = (uint32_t)strtoul(f[10], NULL, 10);
}

/* What a report says, for the findings: a desync report's verdict line
 * whole (the "ccshim CLASS ..." line; the lines of detail after it are in
 * the file), a flight dump's call in progress. */
static void summarize_report(struct audit_report *r)
{
    FILE *fp = fopen(r->path, "rb");
    r->summary[0] = 0;
    r->rank = rank_of_name(r->path);
    if (!fp)
        return;
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
        size_t l = strcspn(line, "\r\n");
        line[l] = 0;
        for (size_t i = 0; i < l; i++)
            if ((unsigned char)line[i] < 0x20 && line[i] != '\t') {
                snprintf(r->summary, sizeof r->summary, "(binary data)");
                fclose(fp);
                return;
            }
        if (l == 0 || line[0] == '#')
            continue;
        if (r->flight) {
            flight_line(r, line);
            continue;
        }
        if (strncmp(line, "ccshim ", 7) == 0 && strncmp(line, "ccshim desync|", 14) != 0) {
            snprintf(r->summary, sizeof r->summary, "%.1000s", line + 7);
            break;
        }
        if (!r->summary[0])
            snprintf(r->summary, sizeof r->summary, "%.1000s", line); /* no verdict line: the first one */
    }
    fclose(fp);
}

static int add_report(struct audit *a, const char *path, int flight)
{
    struct audit_report *nr = realloc(a->reports, (a->nreports + 1) * sizeof *nr);
    struct stat st;
    if (!nr)
        return -1;
    a->reports = nr;
    struct audit_report *r = &a->reports[a->nreports++];
    memset(r, 0, sizeof *r);
    r->path = strdup(path);
    r->flight = flight;
    if (stat(path, &st) == 0)
        r->size = (uint64_t)st.st_size;
    summarize_report(r);
    return 0;
}

static int name_cmp(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static int scan_dir(struct audit *a, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "ccshim-audit: %s: cannot read directory: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (!ends_with(nm, CCS_TRACE_SUFFIX) && !ends_with(nm, ".flight") &&
            !(strncmp(nm, "ccshim-desync-", 14) == 0 && ends_with(nm, ".txt")))
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn)
            break;
        names = nn;
        names[n++] = strdup(nm);
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (ends_with(names[i], CCS_TRACE_SUFFIX))
            add_file(a, path);
        else
            add_report(a, path, ends_with(names[i], ".flight"));
        free(names[i]);
    }
    free(names);
    return 0;
}

/* DIR holds no trace of its own: a directory others may write to (/tmp)
 * gets a job's files in DIR/ccshim-UID-JOB (mode 0700, the runtime's
 * private_file.c): reads those of this user, and says so.  Several are
 * several jobs: audit_select_job's rule (--job) applies. */
static void scan_private_subdirs(struct audit *a, const char *dir)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "ccshim-%u-", (unsigned)geteuid());
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        char path[4096];
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || !e->d_name[strlen(prefix)])
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        /* Only this user's own directory (not a link someone planted). */
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn)
            break;
        names = nn;
        names[n++] = strdup(path);
    }
    closedir(d);
    if (!n) {
        free(names);
        return;
    }
    qsort(names, n, sizeof *names, name_cmp);
    if (n == 1)
        fprintf(stderr, "ccshim-audit: %s holds no trace of its own: reading %s (a job's files in a directory others "
                        "can write to)\n", dir, names[0]);
    else
        fprintf(stderr, "ccshim-audit: %s holds no trace of its own: reading its %zu subdirectories %s/%s* (one "
                        "per job, in a directory others can write to)\n", dir, n, dir, prefix);
    for (size_t i = 0; i < n; i++) {
        scan_dir(a, names[i]);
        free(names[i]);
    }
    free(names);
}

int audit_collect(struct audit *a, char **args, int nargs)
{
    int rc = 0;
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        if (stat(args[i], &st) != 0) {
            fprintf(stderr, "ccshim-audit: %s: %s\n", args[i], strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            size_t before = a->nfiles;
            if (scan_dir(a, args[i]) != 0)
                rc = -1;
            else if (a->nfiles == before)
                scan_private_subdirs(a, args[i]);
        } else if (ends_with(args[i], ".flight")) {
            add_report(a, args[i], 1);
        } else if (strstr(args[i], "ccshim-desync-") && ends_with(args[i], ".txt")) {
            add_report(a, args[i], 0);
        } else {
            add_file(a, args[i]); /* named explicitly: read whatever its name */
        }
    }
    return rc;
}

static int file_cmp(const void *x, const void *y)
{
    const struct audit_file *a = x, *b = y;
    unsigned ra = (unsigned)a->rank, rb = (unsigned)b->rank; /* -1 sorts last */
    if (ra != rb)
        return ra < rb ? -1 : 1;
    return strcmp(a->path, b->path);
}

void audit_sort_files(struct audit *a)
{
    for (size_t i = 0; i < a->nfiles; i++) {
        struct audit_file *f = &a->files[i];
        char err[512];
        struct ccs_trace_reader *r = ccs_trace_open(f->path, err, sizeof err);
        if (!r) {
            f->status = FILE_REFUSED;
            f->error = strdup(err);
            continue;
        }
        /* The job id is in the META chunk that follows the header. */
        struct ccs_item it;
        char e2[512];
        for (int k = 0; k < 4 && ccs_trace_next(r, &it, e2, sizeof e2) == 1; k++) {
            const char *job = ccs_trace_meta(r, "job");
            if (job) {
                snprintf(f->job, sizeof f->job, "%s", job);
                break;
            }
            if (it.type == CCS_ITEM_RECORD)
                break;
        }
        const struct ccs_trace_header *h = ccs_trace_hdr(r);
        f->rank = h->rank;
        f->size = h->size;
        f->pid = h->pid;
        f->start_realtime_ns = h->start_realtime_ns;
        if (a->t0_realtime_ns == 0 || h->start_realtime_ns < a->t0_realtime_ns)
            a->t0_realtime_ns = h->start_realtime_ns;
        ccs_trace_close(r);
    }
    qsort(a->files, a->nfiles, sizeof *a->files, file_cmp);
}

/* JOB as the runtime writes it in file names (docs/trace-format.md). */
static void name_form(const char *job, char *out, size_t n)
{
    snprintf(out, n, "%s", job);
    for (char *s = out; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '-' || *s == '_'))
            *s = '_';
}

/* 1 when the name of report R says JOB ("ccshim-desync-JOB-r0.txt",
 * "ccshim-flight-JOB-r0.flight"), or says none of the jobs JOBS (N): kept,
 * as nothing tells whose it is. */
static int report_of_job(const struct audit_report *r, const char *job, char (*jobs)[128], size_t n)
{
    const char *b = strrchr(r->path, '/');
    char nf[160], pat[170];
    b = b ? b + 1 : r->path;
    name_form(job, nf, sizeof nf);
    snprintf(pat, sizeof pat, "-%s-", nf);
    if (strstr(b, pat))
        return 1;
    for (size_t i = 0; i < n; i++) {
        name_form(jobs[i], nf, sizeof nf);
        snprintf(pat, sizeof pat, "-%s-", nf);
        if (strstr(b, pat))
            return 0;
    }
    return 1;
}

static int is_job(const struct audit_file *f, const char *job)
{
    char nf[160];
    name_form(f->job, nf, sizeof nf);
    return strcmp(f->job, job) == 0 || strcmp(nf, job) == 0;
}

int audit_select_job(struct audit *a)
{
    /* The distinct jobs of the readable traces, in the order met. */
    char jobs[8][128]; /* copies: the files move below */
    size_t njobs = 0, count[8] = {0}, more = 0;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *f = &a->files[i];
        if (f->status == FILE_REFUSED || !f->job[0])
            continue;
        size_t j = 0;
        while (j < njobs && strcmp(jobs[j], f->job) != 0)
            j++;
        if (j == njobs) {
            if (njobs == 8) {
                more++;
                continue;
            }
            snprintf(jobs[njobs++], sizeof jobs[0], "%s", f->job);
        }
        count[j]++;
    }
    char list[600];
    size_t o = 0;
    list[0] = 0;
    for (size_t j = 0; j < njobs && o < sizeof list; j++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s (%zu trace%s)", j ? ", " : "", jobs[j], count[j],
                              count[j] == 1 ? "" : "s");
    if (more && o < sizeof list)
        snprintf(list + o, sizeof list - o, ", and %zu traces of more jobs", more);
    if (!a->job) {
        if (njobs + (more > 0) <= 1)
            return 0;
        fprintf(stderr,
                "ccshim-audit: the traces are of %zu%s different jobs, which must not be counted together: %s; "
                "choose one with --job ID (or give one job's files)\n",
                njobs, more ? " or more" : "", list);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < a->nfiles; i++) {
        struct audit_file *f = &a->files[i];
        /* A file whose job is unknown (refused, or no META) cannot be told
         * apart: kept, so that it is reported as it would be alone. */
        if (!f->job[0] || is_job(f, a->job)) {
            a->files[kept++] = *f;
            continue;
        }
        free(f->path);
        free(f->error);
    }
    size_t dropped = a->nfiles - kept;
    a->nfiles = kept;
    int any = 0;
    for (size_t i = 0; i < a->nfiles; i++)
        any |= a->files[i].job[0] != 0;
    if (!any) {
        fprintf(stderr, "ccshim-audit: --job %s: no trace of that job here (jobs: %s)\n", a->job,
                njobs ? list : "none");
        return -1;
    }
    size_t rk = 0;
    for (size_t i = 0; i < a->nreports; i++) {
        if (report_of_job(&a->reports[i], a->job, jobs, njobs))
            a->reports[rk++] = a->reports[i];
        else
            free(a->reports[i].path);
    }
    if (dropped)
        fprintf(stderr, "ccshim-audit: --job %s: %zu trace%s of other jobs left out\n", a->job, dropped,
                dropped == 1 ? "" : "s");
    a->nreports = rk;
    return 0;
}
