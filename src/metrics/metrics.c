/*
 * metrics.c - live metrics (docs/metrics.md): CCSHIM_METRICS=PATTERN names
 * a file that a background thread of this feature rewrites every
 * CCSHIM_METRICS_PERIOD_MS, and once more when the run ends, in the
 * Prometheus / OpenMetrics text format: what node_exporter's textfile
 * collector and other scrapers read while the job runs.
 *
 * It reads every ring through cursors of its own (the trace writer and the
 * desync collector have theirs), folds the records into counters by kind
 * and communicator, and writes the file beside it as PATTERN.tmp, then
 * renames it over PATTERN: a reader sees the old file or the new one, never
 * half of one.  Nothing here runs on the hot path.
 */
#include "ccs_config.h"
#include "ccs_kinds.h"
#include "ccshim.h"
#include "log.h"
#include "private_file.h"
#include "verdicts.h"
#include "registry.h"
#include "clock.h"
#include "process.h"
#include "ring.h"
#include "trace_format.h"
#include "thread.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SERIES_SLOTS 2048 /* (kind, comm) counters: a power of two */
#define MAX_CLASSES 8     /* verdict classes (those of CCS_VERDICT_LIST, and any a helper names) */
#define CHUNK 256         /* records copied per read */

/* One (kind, communicator) pair. */
struct series {
    uint64_t comm;
    uint16_t kind; /* 0: empty slot */
    uint8_t backend;
    uint64_t calls, bytes;
    uint64_t ticks; /* time inside the calls (their records' durations) */
};

/* Everything below but the verdict table belongs to the pass in progress
 * (pass_lock). */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ccs_ring_reader reader; /* ours, apart from the trace writer's and the detector's */
static struct series series[SERIES_SLOTS];
static uint64_t nseries, series_full; /* pairs counted; calls of pairs with no room left */
static uint64_t coalesced, real_reductions;
static uint64_t unread_rings;
static int stopped;      /* the run ended: the last file is written */
static int write_failed; /* said once */
static struct ccs_record chunk[CHUNK];

/* Verdicts by class, from the detector's thread. */
static struct {
    _Atomic(const char *) cls;
    _Atomic uint64_t n;
} verdicts[MAX_CLASSES];
_Static_assert(CCS_VERDICT_CLASSES < MAX_CLASSES, "room for the classes of CCS_VERDICT_LIST and more");

/* The counters of (KIND, COMM); NULL when the table is full. */
static struct series *series_of(unsigned kind, uint64_t comm, unsigned backend)
{
    uint64_t h = (comm ^ ((uint64_t)kind << 48)) * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < SERIES_SLOTS; i++) {
        struct series *s = &series[((h >> 40) + i) & (SERIES_SLOTS - 1)];
        if (s->kind == kind && s->comm == comm)
            return s;
        if (s->kind == 0) {
            if (nseries >= SERIES_SLOTS / 2) /* keep the probes short */
                return NULL;
            s->kind = (uint16_t)kind;
            s->comm = comm;
            s->backend = (uint8_t)backend;
            nseries++;
            return s;
        }
    }
    return NULL;
}

static void fold(const struct ccs_record *r)
{
    if (r->kind == 0 || ccs_kind_class(r->kind) != CCS_CLASS_COLL)
        return;
    struct series *s = series_of(r->kind, r->comm, r->backend);
    if (!s) {
        series_full++;
        return;
    }
    s->calls++;
    s->bytes += r->bytes;
    s->ticks += r->t_dur;
    if (r->flags & CCS_F_DEFERRED)
        coalesced++;
    else if (ccs_kind_reduces(r->kind))
        real_reductions++;
}

static int fold_chunk(void *ctx, struct ccs_record *recs, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        fold(&recs[i]);
    return 0;
}

/* Reads what every ring of this process recorded since the last pass. */
static void read_rings(void)
{
    unread_rings = ccs_ring_reader_pass(&reader, 0, chunk, CHUNK, fold_chunk, NULL);
}

static uint64_t records_lost(void)
{
    return ccs_ring_reader_lost(&reader) + series_full;
}

/* The verdict hook (registry.h): counts CLS in its slot, taken when new. */
static void on_verdict(const char *cls, uint64_t comm, uint64_t seq, const char *line)
{
    (void)comm, (void)seq, (void)line; /* counted per class only */
    for (size_t i = 0; i < MAX_CLASSES; i++) {
        const char *have = atomic_load(&verdicts[i].cls);
        if (!have) {
            const char *none = NULL;
            have = atomic_compare_exchange_strong(&verdicts[i].cls, &none, cls) ? cls : none;
        }
        if (strcmp(have, cls) == 0) {
            atomic_fetch_add(&verdicts[i].n, 1);
            return;
        }
    }
}

/* A label value: backslash, quote and newline escaped. */
static void label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

enum what { CALLS, BYTES, SECONDS };

static void write_series(FILE *f, const char *labels, enum what w)
{
    static const char *const name[] = {"ccshim_collectives_total", "ccshim_bytes_total",
                                       "ccshim_collective_seconds_total"};
    for (size_t i = 0; i < SERIES_SLOTS; i++) {
        const struct series *s = &series[i];
        if (!s->kind)
            continue;
        fprintf(f, "%s{%s,kind=\"%s\",comm=\"%016llx\",backend=\"%s\"} ", name[w], labels, ccs_kind_name(s->kind),
                (unsigned long long)s->comm, ccs_backend_name(s->backend));
        if (w == SECONDS)
            fprintf(f, "%.9f\n", (double)ccs_ticks_delta_ns(s->ticks) / 1e9);
        else
            fprintf(f, "%llu\n", (unsigned long long)(w == BYTES ? s->bytes : s->calls));
    }
}

static void write_verdicts(FILE *f, const char *rank)
{
    const char *const *classes = ccs_verdict_class;
    for (size_t c = 0; c < CCS_VERDICT_CLASSES; c++) {
        uint64_t n = 0;
        for (size_t i = 0; i < MAX_CLASSES; i++) {
            const char *cls = atomic_load(&verdicts[i].cls);
            if (cls && strcmp(cls, classes[c]) == 0)
                n = atomic_load(&verdicts[i].n);
        }
        fprintf(f, "ccshim_verdicts_total{%s,class=\"%s\"} %llu\n", rank, classes[c], (unsigned long long)n);
    }
    for (size_t i = 0; i < MAX_CLASSES; i++) { /* a class named after this was written */
        const char *cls = atomic_load(&verdicts[i].cls);
        int known = !cls;
        for (size_t c = 0; !known && c < CCS_VERDICT_CLASSES; c++)
            known = strcmp(cls, classes[c]) == 0;
        if (!known) {
            fprintf(f, "ccshim_verdicts_total{%s,class=\"", rank);
            label(f, cls);
            fprintf(f, "\"} %llu\n", (unsigned long long)atomic_load(&verdicts[i].n));
        }
    }
}

/* Seconds since the epoch now (the file's timestamps: a reader compares
 * them with its own clock, so a file its process no longer writes shows as
 * stale). */
static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The whole file into F.  Every sample carries the rank and the job's id
 * (ccshim_job: "job" is the label Prometheus gives the scrape job, and a
 * scrape renames a target's own "job" to "exported_job"): two jobs' files
 * on one node are two sets of series, which node_exporter's textfile
 * collector takes side by side (with the rank alone it drops both as
 * "collected before with the same name and label values"). */
static void write_metrics(FILE *f)
{
    char labels[512];
    FILE *lf = fmemopen(labels, sizeof labels, "w");
    if (lf) {
        fprintf(lf, "rank=\"%d\",ccshim_job=\"", ccs_world_rank());
        label(lf, ccs_job_id());
        fputc('"', lf);
        fputc(0, lf);
        fclose(lf);
    }
    labels[sizeof labels - 1] = 0;
    family(f, "ccshim_info", "gauge", "This process: rank, job, host, pid and ccshim version (value 1).");
    fprintf(f, "ccshim_info{%s,host=\"", labels);
    label(f, ccs_hostname());
    fprintf(f, "\",pid=\"%d\",version=\"%s\"} 1\n", (int)getpid(), ccshim_version());
    family(f, "ccshim_last_update_timestamp_seconds", "gauge",
           "When this file was last written (seconds since the epoch): older than a few periods, its process is gone.");
    fprintf(f, "ccshim_last_update_timestamp_seconds{%s} %.3f\n", labels, wall_now());
    family(f, "ccshim_collectives_total", "counter",
           "Collective calls by kind and communicator, those coalescing answered locally included.");
    write_series(f, labels, CALLS);
    family(f, "ccshim_bytes_total", "counter", "Bytes per rank of the collective calls by kind and communicator.");
    write_series(f, labels, BYTES);
    family(f, "ccshim_collective_seconds_total", "counter",
           "Seconds this rank spent inside collective calls, by kind and communicator (waiting for the others included).");
    write_series(f, labels, SECONDS);
    family(f, "ccshim_steps_total", "counter", "Step markers seen (optimizer steps).");
    fprintf(f, "ccshim_steps_total{%s} %u\n", labels, ccs_step_now());
    family(f, "ccshim_coalesced_total", "counter",
           "Reductions coalescing answered locally (deferred: never sent over the network).");
    fprintf(f, "ccshim_coalesced_total{%s} %llu\n", labels, (unsigned long long)coalesced);
    family(f, "ccshim_real_reductions_total", "counter",
           "Reductions (all-reduce, reduce, reduce-scatter, scan, exscan) that went to the network.");
    fprintf(f, "ccshim_real_reductions_total{%s} %llu\n", labels, (unsigned long long)real_reductions);
    family(f, "ccshim_verdicts_total", "counter", "Desync verdicts this rank saw, by class.");
    write_verdicts(f, labels);
    family(f, "ccshim_records_lost_total", "counter",
           "Call records these counts miss (overwritten in a full ring before they were read).");
    fprintf(f, "ccshim_records_lost_total{%s} %llu\n", labels, (unsigned long long)records_lost());
    family(f, "ccshim_unread_threads", "gauge",
           "Threads whose calls these counts leave out (past the first 1024).");
    fprintf(f, "ccshim_unread_threads{%s} %llu\n", labels, (unsigned long long)unread_rings);
    /* A time, not an age: an age written into the file stays at its last
     * value once the process stops writing, so "detection stalled" could
     * never be told from the file of a job that hangs or died. */
    uint64_t pass = 0; /* stays 0 where desync does not run (its feature is not registered) */
    (void)ccs_features_query("desync.last_pass_ms", &pass);
    family(f, "ccshim_desync_last_pass_timestamp_seconds", "gauge",
           "When the desync detector last judged the ranks (seconds since the epoch; 0: it has not run).");
    fprintf(f, "ccshim_desync_last_pass_timestamp_seconds{%s} %.3f\n", labels,
            pass ? wall_now() - (double)(ccs_clock_mono_ms() - pass) / 1e3 : 0.0);
}

/* Writes PATTERN's file through a temporary one and a rename.  Returns 0, -1
 * (said once). */
static int write_file(void)
{
    char path[4096], tmp[4096 + 8];
    if (ccs_expand_pattern(ccs_cfg.metrics, path, sizeof path) != 0) {
        ccs_log_once(&write_failed, CCS_LOG_WARN,
                     "CCSHIM_METRICS: '%.300s' expands to more than 4095 bytes; "
                     "no metrics are written",
                     ccs_cfg.metrics);
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = ccs_open_private(tmp, 0); /* never through a planted link */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        ccs_log_once(&write_failed, CCS_LOG_WARN,
                     "CCSHIM_METRICS: cannot write '%.300s': %s; trying again every period", tmp, strerror(errno));
        return -1;
    }
    write_metrics(f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        ccs_log_once(&write_failed, CCS_LOG_WARN,
                     "CCSHIM_METRICS: cannot write '%.300s': %s; trying again every period", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* One pass: read the rings, rewrite the file (once the rank is known, as
 * the pattern may name it, unless the run ends).  FINAL: the run ends. */
static void pass(int final)
{
    pthread_mutex_lock(&pass_lock);
    if (!stopped) {
        read_rings();
        if (final || ccs_world_rank() >= 0)
            write_file();
        if (final)
            stopped = 1;
    }
    pthread_mutex_unlock(&pass_lock);
}

static void *metrics_main(void *arg)
{
    (void)arg;
    for (;;) {
        ccs_sleep_ms(ccs_cfg.metrics_period_ms);
        pass(0);
    }
    return NULL;
}

static atomic_int start_once;

static int refused; /* a pattern that cannot give each rank its own file */

static int enabled(void)
{
    return ccs_cfg.metrics && *ccs_cfg.metrics && !refused;
}

/* The pattern must name the rank (%r): otherwise every rank of the job
 * writes one file in turn, each rename hiding the others' counts, and the
 * textfile collector would refuse the same series from two files anyway
 * (ccshim-run refuses such a pattern before launch). */
static int pattern_ok(void) { return ccs_pattern_names_rank(ccs_cfg.metrics); }

static void metrics_start(void)
{
    if (!enabled() || atomic_exchange(&start_once, 1))
        return;
    if (!pattern_ok()) {
        refused = 1;
        CCS_LOG(WARN,
                "CCSHIM_METRICS='%.300s' does not name the rank (%%r): every rank would write the same file; "
                "no metrics are written (expected a pattern such as /var/lib/node_exporter/textfile/"
                "ccshim-%%j-%%r.prom)",
                ccs_cfg.metrics);
        return;
    }
    if (ccs_thread_start(metrics_main, NULL, 256 * 1024, NULL) != 0)
        CCS_LOG(WARN, "CCSHIM_METRICS: cannot start the metrics thread; the file is written only at exit");
}

/* The run ends (MPI_Finalize, then exit): the file's last version, and at
 * the process's exit the file goes (a live view: a textfile collector
 * would otherwise serve a finished job's series for ever), unless
 * CCSHIM_METRICS_KEEP keeps its totals.  A process that ends by a signal
 * or MPI_Abort leaves its last version, stale by its timestamp. */
static void metrics_finish(int reason)
{
    if (!enabled() || !atomic_load(&start_once)) /* a process that recorded no call has no metrics */
        return;
    pass(reason == CCS_END_EXIT);
    char path[4096];
    if (reason == CCS_END_EXIT && !ccs_cfg.metrics_keep && ccs_expand_pattern(ccs_cfg.metrics, path, sizeof path) == 0)
        unlink(path);
}

/* The child counts its own calls, into a file of its own: only when the
 * pattern names the pid (else it would overwrite its parent's). */
static void metrics_fork_child(void)
{
    pthread_mutex_init(&pass_lock, NULL);
    ccs_ring_reader_at_end(&reader); /* the rings hold the parent's calls */
    memset(series, 0, sizeof series);
    nseries = series_full = coalesced = real_reductions = unread_rings = 0;
    for (size_t i = 0; i < MAX_CLASSES; i++) {
        atomic_store(&verdicts[i].cls, NULL);
        atomic_store(&verdicts[i].n, 0);
    }
    stopped = enabled() && !strstr(ccs_cfg.metrics, "%p");
    atomic_store(&start_once, stopped); /* the child's first call starts its own thread */
}

static const struct ccs_feature metrics = {
    .name = "live metrics",
    .first_call = metrics_start,
    .finish = metrics_finish,
    .fork_child = metrics_fork_child,
    .verdict = on_verdict,
};

__attribute__((constructor)) static void metrics_ctor(void)
{
    ccs_feature_register(&metrics);
}
