/*
 * out_chrome.c - --chrome-trace FILE: Trace Event format (JSON) that
 * Perfetto and chrome://tracing open.  One track per rank, one slice per
 * call, one enclosing slice per step.  Written while the traces stream
 * past, so it never holds the records.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct chrome_out {
    FILE *f;
    int first;
    int named;       /* process_name written */
    int64_t unknown; /* next track id for traces of unknown rank */
    uint64_t t0;     /* realtime ns of time 0 */
    int64_t tid;
    double off_us; /* this rank's start relative to t0 */
    int in_step;
    uint32_t step;
    uint64_t s_start, s_end; /* ns from the rank's start */
};

static int chrome_open(struct audit_sink *s)
{
    struct chrome_out *c = calloc(1, sizeof *c);
    if (c)
        c->f = fopen(s->arg, "w");
    if (!c || !c->f) {
        free(c);
        fprintf(stderr, "ccshim-audit: %s: cannot write the Chrome trace\n", s->arg);
        return -1;
    }
    c->first = 1;
    c->t0 = s->a->t0_realtime_ns;
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"ccshim-audit\"},\"traceEvents\":[\n", c->f);
    s->state = c;
    return 0;
}

static void sep(struct chrome_out *c)
{
    if (!c->first)
        fputs(",\n", c->f);
    c->first = 0;
}

static void chrome_rank_begin(struct audit_sink *s, const struct audit_file *f)
{
    struct chrome_out *c = s->state;
    if (!c->unknown)
        c->unknown = 1000000;
    c->tid = f->rank >= 0 ? f->rank : c->unknown++;
    c->off_us = f->start_realtime_ns >= c->t0 ? (double)(f->start_realtime_ns - c->t0) / 1e3 : 0;
    c->in_step = 0;
    if (!c->named) {
        c->named = 1;
        sep(c);
        fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"ccshim job\"}}", c->f);
    }
}

static void end_step(struct chrome_out *c)
{
    if (!c->in_step)
        return;
    sep(c);
    fprintf(
        c->f,
        "{\"name\":\"step %u\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%" PRId64
        ",\"args\":{\"step\":%u}}",
        c->step, c->off_us + (double)c->s_start / 1e3, (double)(c->s_end - c->s_start) / 1e3, c->tid, c->step);
    c->in_step = 0;
}

/* A step mark, or a call named by its site SITE (NULL: none). */
static void write_event(struct chrome_out *c, const struct ccs_record *r, uint32_t step, const char *site)
{
    double ts = c->off_us + (double)r->t_start / 1e3;
    if (r->kind == CCS_KIND_STEP) {
        sep(c);
        fprintf(c->f,
                "{\"name\":\"step "
                "mark\",\"cat\":\"step\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":1,\"tid\":%" PRId64
                ",\"args\":{\"new_step\":%u}}",
                ts, c->tid, r->step);
        return;
    }
    if (c->in_step && step != c->step)
        end_step(c);
    if (!c->in_step) {
        c->in_step = 1;
        c->step = step;
        c->s_start = r->t_start;
        c->s_end = r->t_start;
    }
    if (r->t_start < c->s_start)
        c->s_start = r->t_start;
    if (r->t_start + r->t_dur > c->s_end)
        c->s_end = r->t_start + r->t_dur;
    sep(c);
    fprintf(c->f,
            "{\"name\":\"%s%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%" PRId64
            ",\"args\":{\"seq\":%" PRIu64 ",\"comm\":\"%016" PRIx64 "\",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
            ",\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%d,\"step\":%u,\"deferred\":%s,\"site\":",
            ccs_kind_name(r->kind), (r->flags & CCS_F_DEFERRED) ? "(deferred)" : "", ccs_backend_name(r->backend),
            ts, (double)r->t_dur / 1e3, c->tid, r->seq, r->comm, r->bytes, r->count, ccs_dtype_name(r->dtype),
            ccs_op_name(r->op), (int)r->root, step, (r->flags & CCS_F_DEFERRED) ? "true" : "false");
    json_str(c->f, site ? site : "");
    if (r->backend == CCS_BE_TORCH) /* the torch helper's record: the function the job called */
        fprintf(c->f, ",\"torch_call\":\"%s\"", ccs_torch_call_name(r->sig));
    fputs("}}", c->f);
}

/* A step mark is shown with the steps it opens or closes; a call when its
 * step is in the range shown. */
static void chrome_record(struct audit_sink *s, const struct audit_file *f, const struct ccs_record *r,
                          uint32_t step, uint32_t site)
{
    (void)f;
    const struct audit *a = s->a;
    if (ccs_kind_class(r->kind) == CCS_CLASS_MARK) {
        if (r->step >= a->chrome_first && r->step - 1 <= a->chrome_last)
            write_event(s->state, r, r->step, NULL);
        return;
    }
    if (step < a->chrome_first || step > a->chrome_last)
        return;
    char name[256] = "";
    if (site && site <= a->nsites)
        audit_site_name(a->site_list[site - 1], name, sizeof name);
    write_event(s->state, r, step, name[0] ? name : NULL);
}

/* The track's name goes last: the host is known once META has been read. */
static void chrome_rank_end(struct audit_sink *s, const struct audit_file *f)
{
    struct chrome_out *c = s->state;
    end_step(c);
    sep(c);
    fprintf(c->f,
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%" PRId64 ",\"args\":{\"name\":", c->tid);
    char name[300];
    snprintf(name, sizeof name, "rank %d%s%.200s", (int)f->rank, f->host[0] ? " " : "", f->host);
    json_str(c->f, name);
    fputs("}}", c->f);
    sep(c);
    fprintf(c->f,
            "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%" PRId64
            ",\"args\":{\"sort_index\":%" PRId64 "}}",
            c->tid, c->tid);
}

static int chrome_close(struct audit_sink *s)
{
    struct chrome_out *c = s->state;
    fputs("\n]}\n", c->f);
    int rc = ferror(c->f) ? -1 : 0;
    if (fclose(c->f) != 0)
        rc = -1;
    free(c);
    s->state = NULL;
    if (rc != 0)
        fprintf(stderr, "ccshim-audit: %s: write failed\n", s->arg);
    return rc;
}

static void chrome_discard(struct audit_sink *s)
{
    struct chrome_out *c = s->state;
    fclose(c->f);
    free(c);
    s->state = NULL;
}

/* --chrome-steps A[-B].  Returns 0, -1 after the message. */
static int chrome_steps(struct audit *a, const char *arg)
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

const struct audit_sink_type audit_sink_chrome = {
    .option = "chrome-trace",
    .arg = "FILE",
    .help = "  --chrome-trace FILE  also write a Trace Event file for Perfetto / chrome://tracing\n"
            "  --chrome-steps A[-B] only steps A to B in the Chrome trace (it holds every call)\n",
    .tune_option = "chrome-steps",
    .tune = chrome_steps,
    .open = chrome_open,
    .rank_begin = chrome_rank_begin,
    .record = chrome_record,
    .rank_end = chrome_rank_end,
    .close = chrome_close,
    .discard = chrome_discard,
};
