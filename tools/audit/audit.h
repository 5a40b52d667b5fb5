/*
 * audit.h - ccshim-audit's model of a job: what the reader aggregates from
 * every rank's trace, and what the step inference, the pattern compressor,
 * the findings and the output formats read from it.
 *
 * Memory is bounded by the size of the answer, not of the traces: records
 * are folded into per-(step, rank, comm, kind) cells as they stream past;
 * only the reference rank keeps a capped token list for the call patterns.
 */
#ifndef CCS_AUDIT_H
#define CCS_AUDIT_H

#include "hmap.h"
#include "trace_format.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* --json's "version" (docs/audit.md, "--json"): 2 added the finding kind
 * step-structure, which a reader of version 1 does not know. */
#define AUDIT_JSON_VERSION 2

/* How the steps were found. */
enum audit_step_source { STEPS_NONE = 0, STEPS_MARKERS, STEPS_INFERRED };

enum audit_file_status { FILE_OK = 0, FILE_TRUNCATED, FILE_DAMAGED, FILE_REFUSED };

/* Step inference result (steps.c). */
struct audit_steps {
    int source;      /* enum audit_step_source */
    uint64_t period; /* calls per step when inferred */
    uint64_t head;   /* calls before the first whole step (setup; counted in step 0) */
    uint64_t tokens; /* calls examined */
};

struct audit_file {
    char *path;
    int status;  /* enum audit_file_status */
    char *error; /* the reader's message, or NULL */
    int32_t rank, size;
    uint32_t pid;
    char host[128], job[128], exe[512];
    char uncovered[40]; /* META uncovered=: communication ccshim did not see ("gloo"), or "" */
    uint64_t start_realtime_ns;
    uint64_t records;     /* records read */
    uint64_t collectives; /* of them, collectives (CCS_CLASS_COLL) */
    uint64_t
        torch_calls; /* of them, torch.distributed calls the torch helper counted (backend torch.distributed) */
    int has_end;
    struct ccs_trace_end end; /* valid when has_end */
    uint64_t coll_ns, wait_ns; /* time in its calls, and of it waiting (timing.c) */
    uint32_t last_step;
    struct audit_steps steps; /* how its own steps are counted (steps.c) */
    uint64_t t_last_ns; /* end of its last call */
    /* Calls that had not returned when the process ended (INFLIGHT chunk),
     * as read: t_dur is the time in them until then. */
    struct audit_inflight {
        struct ccs_record r;
        uint32_t step, site; /* effective step, global site index (0 none) */
    } *inflight;
    size_t ninflight;
    /* Its site ids -> global site indices (0 none), kept after reading:
     * a flight dump's call in progress names a site by the process's id. */
    uint32_t *site_map;
    size_t site_map_n;
};

/* (step, rank, comm, kind, deferred) -> totals. */
struct audit_cell {
    struct audit_cell_key {
        uint64_t comm;
        uint32_t step;
        int32_t rank;
        uint32_t kind;
        uint32_t deferred;
    } k;
    uint64_t count, bytes, time_ns;
};

/* (step, rank, comm) -> what the ranks must agree on. */
struct audit_seqsum {
    struct audit_seqsum_key {
        uint64_t comm;
        uint32_t step;
        int32_t rank;
    } k;
    uint64_t ncoll;     /* sequenced collectives */
    uint64_t fpsum;     /* order-free sum of hash(seq, fingerprint) */
    uint64_t first_seq; /* lowest sequence number in the step */
};

/* The most repeated buffer of a (step, comm) over all ranks, among one
 * set of reductions.  A buffer is an address with a count, a datatype and
 * an operation. */
struct audit_repeats {
    uint32_t max_k;           /* most real reductions of one buffer on one rank */
    uint32_t min_k;           /* fewest (over ranks with a repeated buffer) */
    uint32_t repeated_bufs;   /* buffers reduced more than once (max over ranks) */
    uint32_t ranks_repeating; /* ranks with a buffer reduced more than once */
    int32_t rank;             /* the rank of max_k */
    uint64_t bytes, count;    /* that buffer: bytes per reduction, elements */
    uint32_t kind, dtype, op;
    uint32_t site; /* global site index, 0 none */
};

/* (step, comm) -> per-step facts gathered across ranks. */
struct audit_stepcomm {
    struct audit_stepcomm_key {
        uint64_t comm;
        uint32_t step;
        uint32_t pad;
    } k;
    struct audit_repeats all;         /* over every reduction */
    struct audit_repeats coalescible; /* over those coalescing could defer (audit_coalescible) */
    char *pattern;                    /* compressed call pattern of the reference rank */
};

struct audit_comm {
    uint64_t id;
    uint64_t parent;
    int32_t size;
    uint16_t backend, how;
    int32_t color;
    uint32_t members_seen;
    int32_t *members; /* ranks that made sequenced calls on it, sorted (after reading) */
    size_t nmembers;
    /* Reference fingerprints by sequence number (from the first member read). */
    int32_t ref_rank;
    uint64_t *ref_fp;
    uint32_t *ref_step; /* the reference rank's step of each sequence number */
    uint64_t ref_len, ref_cap;
    int ref_capped;
};

/* (rank, comm) -> where the rank first departs from the reference. */
struct audit_rankcomm {
    struct audit_rankcomm_key {
        uint64_t comm;
        int32_t rank;
        uint32_t pad;
    } k;
    uint64_t first_diff; /* first sequence number whose fingerprint or step differs, 0 none */
    uint32_t first_diff_step;
    uint64_t max_seq; /* last sequence number seen */
    uint32_t max_seq_step;
};

/* A call site merged across ranks by its innermost frame. */
struct audit_site {
    struct audit_site_key {
        uint64_t hash; /* of module path and frame offsets */
    } k;
    uint32_t index;  /* 1-based position in audit.site_list */
    char *module;    /* path of frame 0's module, or NULL */
    uint64_t offset; /* frame 0 offset in it */
    char *symbol;    /* runtime's dladdr name of frame 0, or NULL */
    char *resolved;  /* "func at file:line (inlined f at file:line)" from the debug information, or NULL */
    /* Of resolved, the call's file and line apart (the outer line, in the
     * function not inlined), for OTF2's source code locations; NULL, 0 unknown. */
    char *src_file;
    uint32_t src_line;
    char *frames;    /* all frames, "sym+off;..." for the report */
    char *pysite;    /* annotated (Python) site, "file.py:318 in fn", or NULL: a site
                        with one is the native site as reached from that line */
    uint64_t count, bytes, deferred;
    uint32_t kinds_mask; /* bit per kind (kinds < 32) seen here */
    uint64_t time_ns, wait_ns; /* in its calls, all ranks; of it, waiting (timing.c) */
};

/* A desync report or flight-recorder dump found beside the traces. */
struct audit_report {
    char *path;
    int flight; /* 1 for *.flight */
    uint64_t size;
    char summary[1024]; /* a report: its verdict line, whole; a dump: its first record line */
    int32_t rank;       /* from the name's -rN, -1 when none */
    /* A flight dump's call in progress (a "(in progress)" line), when it has one. */
    int has_inflight;
    uint64_t inflight_comm, inflight_seq;
    char inflight_kind[32];
    uint32_t inflight_site; /* the process's site id (its trace's), 0 unknown */
};

/* One --expect rule: KIND<=N per SCOPE. */
enum expect_scope { EXPECT_COMM = 0, EXPECT_STEP, EXPECT_BUFFER };
struct audit_expect {
    char text[64];
    int kind; /* enum ccs_kind */
    uint64_t limit;
    int scope;
    uint64_t worst; /* largest value seen */
    uint32_t worst_step;
    int32_t worst_rank;
    uint64_t worst_comm;
    uint64_t violations;
};

/* Finding kinds (findings.c). */
enum finding_kind {
    FIND_REDUNDANT = 1, /* one buffer reduced k times per step */
    FIND_MISMATCH,      /* ranks' counts or fingerprints differ */
    FIND_REPORTS,       /* desync reports / flight dumps present */
    FIND_DEFERRED,      /* coalescing deferred reductions */
    FIND_TRUNCATED,     /* traces cut short */
    FIND_UNREADABLE,    /* files skipped */
    FIND_DROPPED,       /* records lost to ring overflow */
    FIND_EXPECT,        /* --expect rule exceeded */
    FIND_CAPTURED,      /* NCCL calls captured into CUDA graphs */
    FIND_NO_CALLS,      /* no collective recorded, in the run or on some ranks */
    FIND_DUPLICATE,     /* two traces of one rank of one job */
    FIND_HANG,          /* post-mortem: ranks stopped at different points of a communicator */
    FIND_UNCOVERED,     /* communication ccshim does not intercept (gloo) */
    FIND_STEPS,         /* the ranks' step structures differ */
};

struct audit_finding {
    int kind;
    int severity; /* 0 info, 1 warning, 2 error */
    char title[256];
    char evidence[2048];
    char action[512];
    /* machine-readable details */
    uint32_t step_first, step_last, steps;
    uint64_t k; /* FIND_REDUNDANT: reductions per buffer per step */
    uint64_t comm;
    int32_t ranks[16];
    int nranks;
    uint64_t first_seq;
};

/* (step, rank) -> time in collectives and waiting (timing.c). */
struct audit_steptime {
    struct audit_steptime_key {
        uint32_t step;
        int32_t rank;
    } k;
    uint64_t time_ns, wait_ns;
};

/* What coalescing saved (timing.c): measured only where the job made the
 * deferred calls' kind and size for real too. */
struct audit_saved {
    uint64_t deferred;       /* deferred calls */
    uint64_t measured;       /* of them, with real calls of the same comm, kind and size */
    uint64_t saved_ns;       /* their real calls' mean time each, less their own time */
};

struct audit_sink;

struct audit {
    /* options */
    int want_patterns;
    size_t max_tokens; /* cap on the reference rank's token list */
    size_t max_ref_fp; /* cap on reference fingerprints per comm */
    int symbolize; /* name sites from the modules' debug information (symbols.c) */
    struct audit_symbolizer *symbolizer;
    const char *job; /* --job: read only this job's traces, or NULL */
    /* inputs */
    struct audit_file *files;
    size_t nfiles;
    struct audit_report *reports;
    size_t nreports;
    uint64_t t0_realtime_ns; /* earliest start of any trace */
    /* aggregates */
    struct hmap cells;             /* struct audit_cell */
    struct hmap seqsums;           /* struct audit_seqsum */
    struct hmap stepcomms;         /* struct audit_stepcomm */
    struct hmap rankcomms;         /* struct audit_rankcomm */
    struct hmap sites;             /* struct audit_site */
    struct audit_site **site_list; /* by index - 1 */
    size_t nsites;
    struct audit_comm *comms;
    size_t ncomms, comms_cap;
    uint32_t max_step;
    uint64_t captured; /* records flagged captured (CUDA graph capture) */
    int32_t captured_rank_first, captured_rank_last;
    int ref_rank; /* rank whose patterns are shown */
    struct audit_steps steps;
    struct audit_expect *expects;
    size_t nexpects;
    struct audit_finding *findings;
    size_t nfindings;
    /* the outputs chosen (sinks.c), in the order of the command line */
    struct audit_sink *sinks;
    size_t nsinks;
    /* time (timing.c) */
    struct hmap seqtimes;  /* (comm, seq) -> the fastest rank's time, all ranks' sum */
    struct hmap steptimes; /* struct audit_steptime */
    struct hmap sizetimes; /* (comm, kind, bytes) -> real and deferred calls' times */
    int time_capped;       /* too many calls to hold every call's fastest time: wait partial */
    int timed;             /* records carry times (a trace directory was set: always) */
    int reading_inflight;  /* the record being read is a call in progress at the end (INFLIGHT) */
    struct audit_saved saved;
    /* the steps the Chrome trace shows (--chrome-steps) */
    uint32_t chrome_first, chrome_last;
};

/* ------------------------------------------------------------ aggregate.c */
void audit_init(struct audit *a);
void audit_free(struct audit *a);
/* Reads every file in A->files (already sorted by rank), folding records
 * into the aggregates; a file that cannot be read is marked and skipped.
 * Returns the number of files read at least in part. */
size_t audit_read_all(struct audit *a);
struct audit_comm *audit_comm_get(struct audit *a, uint64_t id, int create);
/* Effective step of the IDX-th call of a rank (markers or inference). */


/* --------------------------------------------------------------- timing.c */
/* Time and wait: each call as read (not step marks), then, once every file
 * is read, the wait of every step, rank and site (a rank's time in a call
 * beyond the fastest rank's for the same call, by communicator and seq). */
void audit_time_init(struct audit *a);
void audit_time_free(struct audit *a);
void audit_time_record(struct audit *a, struct audit_file *f, const struct ccs_record *r, uint32_t step,
                       uint32_t site);
void audit_time_finish(struct audit *a);
/* The (step, rank) times sorted by step then rank; caller frees; NULL when none. */
struct audit_steptime **audit_sorted_steptimes(const struct audit *a, size_t *n);
/* "12.3%" of PART in WHOLE, "-" when WHOLE is 0; returns BUF. */
const char *fmt_share(uint64_t part, uint64_t whole, char *buf, size_t n);

/* ---------------------------------------------------------------- files.c */
/* Collects *.cctrace files under each argument (a directory or a file) and
 * the desync reports and flight dumps in those directories.  Returns 0, -1
 * when an argument does not exist (message printed). */
int audit_collect(struct audit *a, char **args, int nargs);
/* Sorts files by rank (unknown ranks last), after a peek at the header and
 * the job id (META). */
void audit_sort_files(struct audit *a);
/* Keeps the traces (and the reports) of one job: A->job when set, else the
 * only job present.  Returns 0, or -1 after a message naming the jobs when
 * the traces are of several jobs and none was chosen, or none is of the one
 * chosen. */
int audit_select_job(struct audit *a);

/* ---------------------------------------------------------------- steps.c */
/* Infers the step period and head of a token stream (one id per call):
 * the smallest P such that TOK[H..N) repeats with period P at least twice,
 * with the shortest such H.  Returns 0 and fills PERIOD and HEAD, or -1 when
 * no period exists. */
int audit_infer_period(const uint32_t *tok, size_t n, uint64_t *period, uint64_t *head);
/* Decides how each trace's steps are counted (its FILES[i].steps): the
 * records' own step numbers when any trace has markers, else the period of
 * that trace's call stream.  Fills A->steps (the first readable trace's). */
void audit_find_steps(struct audit *a);
/* The step of record R, the IDX-th call of trace F (F->steps). */
uint32_t audit_step_of(const struct audit_file *f, const struct ccs_record *r, uint64_t idx);

/* -------------------------------------------------------------- pattern.c */
/* Compresses TOK[0..N) into "[a, b] x32, c" using LABEL(tok, arg) for each
 * token.  Returns a malloc'd string, or NULL when out of memory. */
char *audit_compress(const uint32_t *tok, size_t n, const char *(*label)(uint32_t, void *), void *arg);

/* ------------------------------------------------------------- findings.c */
void audit_findings(struct audit *a);
/* Ranks of step STEP on COMM whose (count, fingerprints) differ from the
 * majority: fills OUT (up to MAX) and returns how many differ. */
size_t audit_step_outliers(const struct audit *a, uint32_t step, uint64_t comm, int32_t *out, size_t max);

/* --------------------------------------------------------------- expect.c */
/* Parses "KIND<=N[/comm|/step|/buffer]".  Returns 0, -1 with a message. */
int audit_expect_parse(const char *s, struct audit_expect *e, char *err, size_t errlen);
/* Evaluates every rule; returns the number of rules exceeded. */
int audit_expect_check(struct audit *a);

/* -------------------------------------------------------------- symbols.c */
/* Names site S from its module's debug information (function, file:line of
 * the call, inlined helper) when A->symbolize is set, libdw loads and the
 * module's file is readable; the reader calls it as each site is first read,
 * so that the streaming outputs name sites as the reports do. */
void audit_site_resolve(struct audit *a, struct audit_site *s);
void audit_symbolizer_free(struct audit *a);
/* Best short name of a site: resolved, else dladdr symbol, else module+offset. */
const char *audit_site_name(const struct audit_site *s, char *buf, size_t n);
/* The file and line of site S's calls as the user wrote them: a Python
 * site's line, else the call's line from the debug information (for
 * inlined code, the line in the function that called the helper).  Returns
 * FILE (its name as the debug information or the Python line gives it,
 * cut to N) and sets *LINE; NULL when neither is known. */
const char *audit_site_source(const struct audit_site *s, char *file, size_t n, uint32_t *line);

/* ------------------------------------------------------------------ util.c */
/* "25.0 MiB" style; returns BUF. */
const char *fmt_bytes(uint64_t b, char *buf, size_t n);
const char *fmt_time(uint64_t ns, char *buf, size_t n);
/* Writes S as a JSON string literal (with quotes). */
void json_str(FILE *f, const char *s);
/* Writes S with HTML special characters escaped. */
void html_str(FILE *f, const char *s);
const char *kind_label(unsigned kind, int deferred, char *buf, size_t n);
/* The name of finding kind K (enum finding_kind) in JSON and HTML. */
const char *audit_finding_name(int k);
/* 1 for what coalescing can defer, and so what the audit may advise it for:
 * an all-reduce summing (SUM, AVG, PREMULSUM) floating-point data (float16,
 * bfloat16, float32, float64) of CCSHIM_COALESCE_MIN_BYTES' default or more
 * (read from the settings table, src/core/config_table.h). */
int audit_coalescible(unsigned kind, unsigned dtype, unsigned op, uint64_t bytes);
/* CCSHIM_COALESCE_MIN_BYTES' default (the settings table's). */
uint64_t audit_coalesce_min_bytes(void);
/* Sorted array of the cells (by step, rank, comm, kind, deferred); caller frees. */
struct audit_cell **audit_sorted_cells(const struct audit *a, size_t *n);
/* The call sites that made calls, most calls first, *N of them (free the array);
 * NULL when out of memory. */
struct audit_site **audit_sorted_sites(const struct audit *a, size_t *n);
struct audit_stepcomm **audit_sorted_stepcomms(const struct audit *a, size_t *n);

/* ------------------------------------------------------ sinks (sinks.c) */
/* An output of ccshim-audit.  The reader calls every chosen sink while the
 * traces stream past (rank_begin, comm, record, rank_end: each optional),
 * then closes it: right after reading, or, with AUDIT_SINK_REPORT, once the
 * rules, the call sites and the findings are known.  A new format is a file
 * defining one struct audit_sink_type and a line in sinks.c's list. */
enum audit_sink_flag {
    AUDIT_SINK_STDOUT = 1,   /* writes on stdout: one such sink at most; the table when none is chosen */
    AUDIT_SINK_REPORT = 2,   /* reads the findings and totals: closed after them */
    AUDIT_SINK_PATTERNS = 4, /* shows the reference rank's call patterns */
};

struct audit_sink_type {
    const char *option; /* long option choosing it (without "--"), NULL: the default table */
    const char *arg;    /* the name of its argument ("FILE"), NULL for none */
    const char *help;   /* its lines of the usage text */
    unsigned flags;     /* enum audit_sink_flag */
    /* An option with an argument that tunes it (NULL for none), read by
     * tune into A before any sink opens.  Returns 0, -1 after a message. */
    const char *tune_option;
    int (*tune)(struct audit *a, const char *arg);
    /* Before reading: A's files are sorted and A->t0_realtime_ns is known.
     * Returns 0, -1 after a message. */
    int (*open)(struct audit_sink *s);
    void (*rank_begin)(struct audit_sink *s, const struct audit_file *f);
    /* A communicator as the rank's trace describes it (each rank's trace
     * describes the communicators it made calls on). */
    void (*comm)(struct audit_sink *s, const struct audit_file *f, const struct ccs_trace_comm *c);
    /* Every record, step marks included: STEP is the call's effective step
     * (a mark's own number), SITE its global site index (0: none; always 0 for marks). */
    void (*record)(struct audit_sink *s, const struct audit_file *f, const struct ccs_record *r, uint32_t step,
                   uint32_t site);
    /* After the rank's last item: its META (host, job) has been read. */
    void (*rank_end)(struct audit_sink *s, const struct audit_file *f);
    /* Writes what is left and frees the state.  Returns 0, -1 after a message. */
    int (*close)(struct audit_sink *s);
    /* Frees the state of an opened sink without writing more (the run stopped early). */
    void (*discard)(struct audit_sink *s);
};

struct audit_sink {
    const struct audit_sink_type *type;
    const char *arg; /* the option's argument, or NULL */
    struct audit *a; /* the job being read */
    void *state;     /* the sink's own */
    int opened;
};

/* Every sink type, in the order of the usage text; NULL-terminated. */
extern const struct audit_sink_type *const audit_sink_types[];
extern const struct audit_sink_type audit_sink_table; /* the default */
/* Chooses a sink of type T writing to ARG (a second choice of the same type
 * replaces the first's argument).  Returns 0, -1 when out of memory. */
int audit_sink_add(struct audit *a, const struct audit_sink_type *t, const char *arg);
/* 1 when a chosen sink has FLAG. */
int audit_sinks_want(const struct audit *a, unsigned flag);
/* Opens every chosen sink in order; stops at the first failure.  Returns 0, -1. */
int audit_sinks_open(struct audit *a);
void audit_sinks_rank_begin(struct audit *a, const struct audit_file *f);
void audit_sinks_comm(struct audit *a, const struct audit_file *f, const struct ccs_trace_comm *c);
void audit_sinks_record(struct audit *a, const struct audit_file *f, const struct ccs_record *r, uint32_t step,
                        uint32_t site);
void audit_sinks_rank_end(struct audit *a, const struct audit_file *f);
/* Closes the open sinks that have (REPORT: do not have) AUDIT_SINK_REPORT.
 * Returns 0, -1 when one failed (each says so). */
int audit_sinks_close(struct audit *a, int report);
/* Discards the sinks still open and frees the list. */
void audit_sinks_free(struct audit *a);

/* The reports themselves, also called by the tests. */
void out_table(struct audit *a, FILE *f);
void out_json(struct audit *a, FILE *f);
void out_tsv(struct audit *a, FILE *f);
int out_html(struct audit *a, const char *path);

#endif
