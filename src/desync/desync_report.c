/*
 * desync_report.c - turns a verdict into what a person reads: one line to
 * grep ("ccshim DESYNC comm=..."), then a block of lines prefixed
 * "ccshim desync| " with the parties' last operations side by side and their
 * call sites, then this process's own stack (only a process can symbolise
 * its own addresses).  Diagnostic path: runs on the background thread.
 */
#include "private_file.h"
#include "desync_report.h"
#include "ccs_config.h"
#include "ccs_kinds.h"
#include "desync_rules.h"
#include "log.h"
#include "callsite.h"
#include "clock.h"
#include "process.h"
#include "pysite.h"
#include "record.h"
#include "ring.h"
#include "trace_format.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COLS 4  /* parties shown side by side */
#define CELL 40 /* width of one column */
#define ROWS 10 /* sequence numbers shown */

struct out {
    char *b;
    size_t cap, n;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
    if (o->n + 1 >= o->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->b + o->n, o->cap - o->n, fmt, ap);
    va_end(ap);
    if (w > 0)
        o->n += (size_t)w < o->cap - o->n ? (size_t)w : o->cap - o->n - 1;
}

static const char *role_name(uint32_t r)
{
    switch (r) {
    case CCS_DSX_R_WAITING:
        return "waiting";
    case CCS_DSX_R_BEHIND:
        return "behind";
    case CCS_DSX_R_AHEAD:
        return "ahead";
    case CCS_DSX_R_DIFFERS:
        return "differs";
    case CCS_DSX_R_AGREES:
        return "agrees";
    }
    return "?";
}

/* Compact form for a table cell: "allreduce 4 float32 sum". */
static void cell_op(const struct ccs_dsx_op *op, int blocked, char *buf, size_t n)
{
    int o = snprintf(buf, n, "%s", ccs_kind_name(op->kind));
    if (ccs_kind_class(op->kind) == CCS_CLASS_COLL && op->kind != CCS_KIND_BARRIER && o > 0 && (size_t)o < n) {
        o += snprintf(buf + o, n - (size_t)o, " %llu %s", (unsigned long long)op->count, ccs_dtype_name(op->dtype));
        if (op->op && (size_t)o < n)
            o += snprintf(buf + o, n - (size_t)o, " %s", ccs_op_name(op->op));
        if (op->root >= 0 && (size_t)o < n)
            o += snprintf(buf + o, n - (size_t)o, " r%d", op->root);
    }
    if ((op->flags & CCS_F_DEFERRED) && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, " def");
    if (op->step && (size_t)o < n)
        o += snprintf(buf + o, n - (size_t)o, " s%u", op->step);
    if (blocked && (size_t)o < n)
        snprintf(buf + o, n - (size_t)o, " [blocked]");
}


/* A party's call site as its process published it (module+offset, at most
 * CCS_DSX_SITE bytes), named here with function and file:line where this
 * process has the same module, into BUF: a path can be longer than the
 * published text, so the name is made where it is printed. */
static const char *site_named(const char *published, char *buf, size_t n)
{
    if (!published[0])
        return "?";
    return ccs_site_resymbolize(published, buf, n) == 0 ? buf : published;
}

static void cell(const struct ccs_dsx_party *p, uint64_t seq, char *buf, size_t n)
{
    const struct ccs_dsx_comm *c = &p->c;
    if (c->state == CCS_DSX_BLOCKED && c->blocked.seq == seq) {
        cell_op(&c->blocked, 1, buf, n);
        return;
    }
    for (unsigned h = 0; h < c->nhist && h < CCS_DSX_HIST; h++)
        if (c->hist[h].seq == seq) {
            cell_op(&c->hist[h], 0, buf, n);
            return;
        }
    snprintf(buf, n, "%s", seq > c->issued ? "-" : "(not kept)");
}

size_t ccs_dsx_format(const struct ccs_dsx_verdict *v, int32_t myrank, double at_ms, char *buf, size_t cap)
{
    return ccs_dsx_format_where(v, myrank, "", at_ms, buf, cap);
}

size_t ccs_dsx_where(const struct ccs_dsx_say *say, const char *trace_dir, const char *job, char *buf, size_t cap)
{
    struct out o = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    put(&o, " for host '%s'; ", say->host ? say->host : "?");
    if (say->full)
        put(&o, "full report below");
    else if (say->full_host && *say->full_host)
        put(&o, "full report: rank %d on host '%s'", say->full_rank, say->full_host);
    else
        put(&o, "full report: rank %d, on the coordinator's host", say->full_rank);
    if (trace_dir && *trace_dir)
        put(&o, "; each rank's: %s/ccshim-desync-%s-r<rank>.txt", trace_dir, job);
    put(&o, ";"); /* (then " wall=... at=...]") */
    return o.n;
}

size_t ccs_dsx_format_where(const struct ccs_dsx_verdict *v, int32_t myrank, const char *where, double at_ms,
                            char *buf, size_t cap)
{
    struct out o = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    put(&o, "ccshim %s %s [seen by rank %d%s at=%.3f]\n", ccs_dsx_class_name(v->cls), v->line, myrank,
        where ? where : "", at_ms);
    if (v->nparty == 0)
        return o.n;
    uint32_t np = v->nparty < CCS_DSX_PARTIES ? v->nparty : CCS_DSX_PARTIES;
    uint32_t ncol = np < COLS ? np : COLS;
    /* Rows: up to ROWS seqs ending at the last one any party reached. */
    uint64_t hi = v->seq, lo = UINT64_MAX;
    for (uint32_t i = 0; i < ncol; i++) {
        const struct ccs_dsx_comm *c = &v->party[i].c;
        if (c->state == CCS_DSX_BLOCKED && c->blocked.seq > hi)
            hi = c->blocked.seq;
        if (c->nhist && c->hist[0].seq < lo)
            lo = c->hist[0].seq;
    }
    if (lo == UINT64_MAX || lo > hi)
        lo = hi;
    if (hi - lo + 1 > ROWS)
        lo = hi - ROWS + 1;
    put(&o, "ccshim desync| comm %#llx: last operations side by side (world rank, comm rank, role, state)\n",
        (unsigned long long)v->comm);
    put(&o, "ccshim desync| %8s", "seq");
    for (uint32_t i = 0; i < ncol; i++) {
        const struct ccs_dsx_party *p = &v->party[i];
        char h[64];
        snprintf(h, sizeof h, "r%d c%d %s %s", p->wrank, p->c.rank, role_name(p->role), ccs_dsx_life_name(p->life));
        put(&o, " | %-*.*s", CELL, CELL, h);
    }
    put(&o, "\n");
    /* At most ROWS rows, counted: a seq near 2^64 must not wrap the loop. */
    for (uint64_t k = 0, s = lo; lo && k < ROWS && k <= hi - lo; k++, s++) {
        put(&o, "ccshim desync| %8llu", (unsigned long long)s);
        for (uint32_t i = 0; i < ncol; i++) {
            char c[80];
            cell(&v->party[i], s, c, sizeof c);
            put(&o, " | %-*.*s", CELL, CELL, c);
        }
        put(&o, "%s\n", s == v->seq ? "   <== seq of the verdict" : "");
    }
    put(&o, "ccshim desync| where each is (call sites symbolised by their own process):\n");
    for (uint32_t i = 0; i < np; i++) {
        const struct ccs_dsx_party *p = &v->party[i];
        const struct ccs_dsx_comm *c = &p->c;
        /* NCCL tracked on the device: what was enqueued and what completed there. */
        int dev = (c->flags & CCS_DSX_DEVICE) != 0;
        uint64_t done = dev ? c->issued - (c->dev_pending < c->issued ? c->dev_pending : c->issued) : c->done;
        put(&o, "ccshim desync|   rank %d (comm rank %d, pid %u on %s, %s, %s): %s %llu, completed %llu%s",
            p->wrank, c->rank, p->pid, p->host, role_name(p->role), ccs_dsx_life_name(p->life),
            dev ? "enqueued" : "issued", (unsigned long long)c->issued, (unsigned long long)done,
            dev ? " on the device" : "");
        char named[512];
        if (c->state == CCS_DSX_BLOCKED)
            put(&o, "; blocked %.1f s at seq %llu step %u in %s", c->blocked_ms / 1000.0,
                (unsigned long long)c->blocked.seq, c->blocked.step,
                site_named(c->site_blocked, named, sizeof named));
        else if (c->backend == CCS_BE_TORCH && c->site_blocked[0]) /* desync_rule_foreign.c's party */
            put(&o, "; in %s, the group's call %llu (not intercepted: no operations to show)", c->site_blocked,
                (unsigned long long)c->issued + 1);
        if (c->nhist)
            put(&o, "; last %s seq %llu step %u at %s", dev ? "enqueued" : "completed",
                (unsigned long long)c->hist[c->nhist - 1].seq, c->hist[c->nhist - 1].step,
                site_named(c->site_last, named, sizeof named));
        if (p->other_comm) {
            char os[128];
            ccs_dsx_op_str(&p->other_op, os, sizeof os);
            put(&o, "; blocked elsewhere: %s at seq %llu on comm %#llx", os, (unsigned long long)p->other_op.seq,
                (unsigned long long)p->other_comm);
        }
        put(&o, "\n");
    }
    return o.n;
}

/* This process's stack for the operation it is in (or last did) on COMM. */
static void own_stack(const struct ccs_dsx_verdict *v, struct out *o)
{
    int32_t me = ccs_world_rank();
    for (uint32_t i = 0; i < v->nparty && i < CCS_DSX_PARTIES; i++) {
        const struct ccs_dsx_party *p = &v->party[i];
        if (p->wrank != me || p->pid != (uint32_t)getpid())
            continue;
        const struct ccs_dsx_comm *c = &p->c;
        const struct ccs_dsx_op *op = c->state == CCS_DSX_BLOCKED ? &c->blocked
                                      : c->nhist                  ? &c->hist[c->nhist - 1]
                                                                  : NULL;
        /* The operation of the verdict itself when it is still in the history. */
        for (unsigned h = 0; h < c->nhist && h < CCS_DSX_HIST && op != &c->blocked; h++)
            if (c->hist[h].seq == v->seq)
                op = &c->hist[h];
        /* The Python line of this rank's own operation at the verdict's seq
         * (ids are this process's; the history carries them). */
        for (uint32_t h = 0; h < c->nhist && h < CCS_DSX_HIST; h++)
            if (c->hist[h].seq == v->seq && c->hist[h].seq != (op ? op->seq : 0) &&
                ccs_pysite_text(c->hist[h].pysite))
                put(o, "ccshim desync| python line of rank %d at seq %llu (the verdict's): %s\n", me,
                    (unsigned long long)v->seq, ccs_pysite_text(c->hist[h].pysite));
        void *pcs[CCS_MAX_STACK];
        uint32_t depth = 0;
        if (!op || ccs_site_get(op->site, pcs, &depth) != 0)
            return;
        put(o, "ccshim desync| stack of rank %d at seq %llu (%s):\n", me, (unsigned long long)op->seq,
            op == &c->blocked ? "blocked here" : op->seq == v->seq ? "issued here" : "last completed here");
        if (ccs_pysite_text(op->pysite)) /* the Python line (ccshim-run --torch) */
            put(o, "ccshim desync|   python: %s\n", ccs_pysite_text(op->pysite));
        for (uint32_t d = 0; d < depth; d++) {
            char s[256];
            ccs_site_symbolize_full(pcs[d], s, sizeof s);
            put(o, "ccshim desync|   #%u %s\n", d, s);
        }
        return;
    }
}

/* The job's id as the file names have it (JOB, N bytes). */
static void job_name(char *job, size_t n)
{
    snprintf(job, n, "%s", ccs_job_id());
    for (char *s = job; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '-' || *s == '_'))
            *s = '_';
}

static void file_name(char *out, size_t n, const char *what, const char *ext)
{
    char job[128];
    job_name(job, sizeof job);
    snprintf(out, n, "%s/ccshim-%s-%s-r%d.%s", ccs_cfg.trace_dir, what, job, ccs_world_rank(), ext);
}

static void write_file(const char *path, const char *text, size_t len, int append)
{
    int fd = ccs_open_private(path, append); /* never through a planted link; 0600 */
    if (fd < 0) {
        CCS_LOG(WARN, "cannot write '%s': %s", path, strerror(errno));
        return;
    }
    while (len) {
        ssize_t w = write(fd, text, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        text += w;
        len -= (size_t)w;
    }
    close(fd);
}


/* Wall-clock time now, "2026-12-03T10:38:08.127Z". */
static void wall_now(char *wall, size_t n)
{
    struct timespec ts;
    struct tm tm;
    snprintf(wall, n, "?");
    if (n > 8 && clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm))
        snprintf(wall + strftime(wall, n - 8, "%Y-%m-%dT%H:%M:%S", &tm), 8, ".%03uZ",
                 (unsigned)(ts.tv_nsec / 1000000) % 1000u);
}

/* "[seen by rank R at=...]" -> "[seen by rank R wall=WALL at=...]" in the
 * first line of BUF (N bytes, CAP bytes of room). */
static size_t add_wall(char *buf, size_t n, size_t cap, const char *wall)
{
    char ins[80];
    int k = snprintf(ins, sizeof ins, " wall=%s", wall);
    const char *nl = memchr(buf, '\n', n);
    size_t line = nl ? (size_t)(nl - buf) : n;
    char *at = NULL;
    for (char *p = buf; (p = strstr(p, " at=")) != NULL && p < buf + line; p++)
        at = p;
    if (!at || k <= 0 || n + (size_t)k + 1 > cap)
        return n;
    memmove(at + k, at, n - (size_t)(at - buf) + 1);
    memcpy(at, ins, (size_t)k);
    return n + (size_t)k;
}

/* "file:line" out of a symbolised site ("fn+0x3f2 at FILE:LINE (mod+0x15b2)",
 * or "... at FILE:LINE (inlined f at FILE:N) (mod+0x15b2)": the outermost
 * line, in the caller, as the audit names it), or the site as it is when
 * it names no line. */
static void site_line(const char *site, char *out, size_t n)
{
    const char *at = strstr(site, " at ");
    if (!at) {
        snprintf(out, n, "%s", site);
        return;
    }
    at += 4;
    size_t l = strcspn(at, " ");
    snprintf(out, n, "%.*s", (int)l, at);
}

size_t ccs_dsx_next_words(const struct ccs_dsx_verdict *v, const char *trace_dir, const char *job, char *buf,
                          size_t cap)
{
    struct out o = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    if (!ccs_verdict_stuck(v->cls))
        return 0;
    uint32_t np = v->nparty < CCS_DSX_PARTIES ? v->nparty : CCS_DSX_PARTIES;
    /* The call the job waits in: a waiting party's, blocked at the verdict's seq. */
    const struct ccs_dsx_party *w = NULL;
    int32_t in[CCS_DSX_PARTIES], out_r[CCS_DSX_PARTIES];
    size_t nin = 0, nout = 0;
    const char *out_life = NULL;
    uint64_t out_at = 0;
    for (uint32_t i = 0; i < np; i++) {
        const struct ccs_dsx_party *p = &v->party[i];
        if (p->role == CCS_DSX_R_WAITING && p->c.state == CCS_DSX_BLOCKED && p->c.blocked.seq == v->seq) {
            if (!w)
                w = p;
            in[nin++] = p->wrank;
        }
        /* Left out, not yet to come: it finished (MPI_Finalize, exit) at
         * an earlier seq, so it will never issue this one. */
        if (p->role == CCS_DSX_R_BEHIND && (p->life == CCS_DSX_FINALIZING || p->life == CCS_DSX_EXITED) &&
            p->c.issued < v->seq) {
            out_r[nout++] = p->wrank;
            out_life = p->life == CCS_DSX_EXITED ? "exited" : "went on to MPI_Finalize";
            out_at = p->c.issued;
        }
    }
    char op[160] = "", site[CCS_DSX_SITE * 4] = "", named[CCS_DSX_SITE * 4], where[CCS_DSX_SITE * 4] = "";
    if (w) {
        ccs_dsx_op_str(&w->c.blocked, op, sizeof op);
        site_line(site_named(w->c.site_blocked, named, sizeof named), site, sizeof site);
        snprintf(where, sizeof where, " at %s", site);
    }
    if (w && nout && nin) {
        char ro[256], ri[256];
        ccs_ranks_str(out_r, nout, ro, sizeof ro);
        ccs_ranks_str(in, nin, ri, sizeof ri);
        put(&o, "desync: rank%s %s left out %s%s (%s after seq %llu%s); rank%s %s %s in it\n", nout > 1 ? "s" : "",
            ro, op, where, out_life, (unsigned long long)out_at, nout > 1 ? ", the first of them" : "",
            nin > 1 ? "s" : "", ri, nin > 1 ? "are" : "is");
    }
    put(&o,
        "desync: this job will now wait in %s%s until the launcher's timeout; --on-desync abort "
        "(CCSHIM_ON_DESYNC=abort) ends it at once; ",
        w ? op : "its next collective on this communicator", where);
    if (trace_dir && *trace_dir)
        put(&o,
            "each rank's report: %s/ccshim-desync-%s-r<rank>.txt, its last calls: "
            "%s/ccshim-flight-%s-r<rank>.flight\n",
            trace_dir, job, trace_dir, job);
    else
        put(&o, "no report files (give --trace-dir DIR to keep each rank's report and last calls)\n");
    return o.n;
}

/* In warn mode the job now hangs as it would without ccshim: said once per
 * process, by the rank that reported the verdict in full, with what it
 * waits in, how to end it, and where the reports are. */
static void say_what_happens_next(const struct ccs_dsx_verdict *v)
{
    static atomic_int said;
    char job[128], words[2048];
    if (ccs_cfg.on_desync == CCS_ON_DESYNC_ABORT)
        return;
    job_name(job, sizeof job);
    if (!ccs_dsx_next_words(v, ccs_cfg.trace_dir, job, words, sizeof words) || atomic_exchange(&said, 1))
        return;
    for (char *line = words, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = 0;
        CCS_LOG(WARN, "%s", line);
    }
}

void ccs_dsx_report(const struct ccs_dsx_verdict *verdict, const struct ccs_dsx_say *say)
{
    size_t cap = 32768;
    char *buf = malloc(cap);
    struct ccs_dsx_verdict *v = malloc(sizeof *v);
    if (!buf || !v) {
        free(buf);
        free(v);
        return;
    }
    /* Monotonic (at=, for latencies on one host) and wall-clock time (to
     * match other logs), both taken when the verdict arrived. */
    double t_seen = ccs_clock_mono_ns() / 1e6;
    char wall[64], where[1024] = "", job[128];
    wall_now(wall, sizeof wall);
    job_name(job, sizeof job);
    /* The line a host's rank logs says for whom it speaks and where the
     * full report is; a rank that logs nothing keeps the plain line in its
     * file. */
    if (say->line || say->full)
        ccs_dsx_where(say, ccs_cfg.trace_dir, job, where, sizeof where);
    memcpy(v, verdict, sizeof *v);
    size_t n = add_wall(buf, ccs_dsx_format_where(v, ccs_world_rank(), where, t_seen, buf, cap), cap, wall);
    if (say->line && !say->full) {
        /* The line only, at once (naming frames below may take a while). */
        const char *nl = memchr(buf, '\n', n);
        ccs_log_raw(buf, nl ? (size_t)(nl - buf) + 1 : n);
    }
    struct out o = {buf, cap, n};
    own_stack(v, &o);
    if (say->full) {
        ccs_log_raw(buf, o.n);
        say_what_happens_next(v);
    }
    if (ccs_cfg.trace_dir && *ccs_cfg.trace_dir) {
        char path[4096];
        file_name(path, sizeof path, "desync", "txt");
        write_file(path, buf, o.n, 1);
        ccs_dsx_dump_flight((unsigned)ccs_cfg.desync_flight);
    }
    free(buf);
    free(v);
    CCS_LOG(DEBUG, "desync: report written in %.1f ms", ccs_clock_mono_ns() / 1e6 - t_seen);
}

int ccs_dsx_dump_flight(unsigned n)
{
    if (!ccs_cfg.trace_dir || !*ccs_cfg.trace_dir || n == 0)
        return -1;
    struct ccs_record *recs = malloc(n * sizeof *recs);
    size_t cap = 256 + (size_t)n * 200 * 4;
    char *buf = malloc(cap);
    if (!recs || !buf) {
        free(recs);
        free(buf);
        return -1;
    }
    struct out o = {buf, cap, 0};
    put(&o,
        "# ccshim flight recorder: job %s, rank %d of %d, pid %d on %s; last %u records per thread, oldest first\n",
        ccs_job_id(), ccs_world_rank(), ccs_world_size(), (int)getpid(), ccs_hostname(), n);
    put(&o, "# thread\tseq\tcomm\tkind\tcount\tdtype\top\troot\tflags\tstep\tsite\tt_start_ns\tdur_ns\n");
    for (struct ccs_ring *r = ccs_ring_first(); r; r = r->next) {
        if (r->pid != (uint32_t)getpid())
            continue;
        size_t k = ccs_ring_last(r, recs, n);
        for (size_t i = 0; i < k; i++) {
            const struct ccs_record *x = &recs[i];
            put(&o, "%u\t%llu\t%#llx\t%s\t%llu\t%s\t%s\t%d\t%#x\t%u\t%u\t%llu\t%llu\n", r->index,
                (unsigned long long)x->seq, (unsigned long long)x->comm, ccs_kind_name(x->kind),
                (unsigned long long)x->count, ccs_dtype_name(x->dtype), ccs_op_name(x->op), x->root, x->flags,
                x->step, x->site, (unsigned long long)ccs_ticks_to_ns(x->t_start),
                (unsigned long long)ccs_ticks_delta_ns(x->t_dur));
        }
        /* The call in progress, its columns whole (dur_ns: its time so far),
         * then "(in progress)": a process killed before its trace has the
         * call (an abort's SIGKILL) is still named blocked in it, at its
         * site, by ccshim-audit (the site ids are the trace's). */
        struct ccs_record *in = atomic_load(&r->inflight), x;
        if (in) {
            ccs_record_snapshot(in, &x);
            if (atomic_load(&r->inflight) == in) {
                uint64_t now = ccs_ticks();
                put(&o, "%u\t%llu\t%#llx\t%s\t%llu\t%s\t%s\t%d\t%#x\t%u\t%u\t%llu\t%llu\t(in progress)\n", r->index,
                    (unsigned long long)x.seq, (unsigned long long)x.comm, ccs_kind_name(x.kind),
                    (unsigned long long)x.count, ccs_dtype_name(x.dtype), ccs_op_name(x.op), x.root, x.flags, x.step,
                    x.site, (unsigned long long)ccs_ticks_to_ns(x.t_start),
                    (unsigned long long)ccs_ticks_delta_ns(now > x.t_start ? now - x.t_start : 0));
            }
        }
    }
    char path[4096];
    file_name(path, sizeof path, "flight", "flight");
    write_file(path, buf, o.n, 0);
    free(recs);
    free(buf);
    return 0;
}
