/*
 * tr_opts.c - parses and checks ccshim-trainer's options (see tr_opts.h and
 * docs/trainer.md).
 */
#include "tr_opts.h"

#include "ccshim.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "ccshim-trainer";

static const char *const loss_names[] = {"mnrl", "mnrl-gather", "siglip-ring", "siglip-gather"};
static const char *const inject_names[] = {"skip-minibatch", "extra-allreduce", "wrong-count", "extra-minibatch"};

const char *tr_loss_name(enum tr_loss l)
{
    return loss_names[l];
}
const char *tr_inject_name(enum tr_inject_kind k)
{
    return inject_names[k];
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTION]...\n"
            "Reference GradCache contrastive trainer with DDP-style gradient buckets.\n\n"
            "Data and model:\n"
            "  --batch B              global batch, sharded over the ranks (default 256)\n"
            "  --local-batch b        per-rank batch instead (global = b x world size)\n"
            "  --mini-batch m         GradCache mini-batch (default 32)\n"
            "  --columns C            anchor, positive and C-2 hard negatives (default 2)\n"
            "  --dim-in N, --dim-hidden N, --dim-out N   encoder sizes (32, 64, 16)\n"
            "  --seed S               data and initial parameters (default 1)\n"
            "  --steps N              optimizer steps (default 3)\n"
            "  --precision double|single\n"
            "Loss:\n"
            "  --loss mnrl            InfoNCE, negatives local to the rank (default)\n"
            "  --loss mnrl-gather     InfoNCE over embeddings all-gathered from every rank\n"
            "  --no-compensation      mnrl-gather without the x W backward (the bug)\n"
            "  --loss siglip-ring     SigLIP sigmoid loss, negatives passed around a ring\n"
            "  --loss siglip-gather   SigLIP sigmoid loss, negatives all-gathered\n"
            "  --scale S              MNRL similarity scale (default 20)\n"
            "Gradient synchronisation:\n"
            "  --sync per-minibatch   reduce every bucket after every mini-batch backward\n"
            "                         (DDP without no_sync; default)\n"
            "  --sync per-step        one reduction per bucket per step (the fix)\n"
            "  --bucket-cap-mb X      DDP bucket cap in MiB (default 25)\n"
            "  --buckets N            exactly N buckets (contiguous slices of the gradient)\n"
            "  --out-of-place         all-reduce into a second fixed buffer per bucket\n"
            "  --rebuild-buckets[=N]  after the first backward, replace the buckets by new ones at\n"
            "                         new addresses (N equal slices, default the same layout), as\n"
            "                         DDP rebuilds its buckets at its second grad-enabled forward\n"
            "  --p2p sendrecv|send-recv   ring exchange primitive (default send-recv)\n"
            "Optimizer:\n"
            "  --optimizer sgd|adam   (default sgd, momentum 0.9)\n"
            "  --lr X, --momentum X\n"
            "Checks and output:\n"
            "  --check                compare step 0's gradient with a one-process reference\n"
            "  --dump-grad FILE       rank 0 writes the last gradient and final parameters\n"
            "  --print-all-ranks      every rank prints its per-step line\n"
            "  --no-step-marks        do not call ccshim_step_mark (a job that marks no steps)\n"
            "  --inject KIND:RANK:STEP  skip-minibatch, extra-minibatch, extra-allreduce or wrong-count\n"
            "NCCL binary (ccshim-trainer-nccl) only:\n"
            "  --device cuda|host     host: host buffers and no CUDA call (test NCCL fakes)\n"
            "  --nccl-id-file PATH    where rank 0 publishes the ncclUniqueId\n"
            "  --help, --version\n",
            prog);
}

static int bad(const char *opt, const char *val, const char *expected)
{
    fprintf(stderr, "%s: invalid %s '%s' (expected %s)\n", prog, opt, val, expected);
    return -1;
}

static int parse_long(const char *opt, const char *s, long lo, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo) {
        char want[64];
        snprintf(want, sizeof want, "an integer >= %ld", lo);
        return bad(opt, s, want);
    }
    *out = v;
    return 0;
}

static int parse_double(const char *opt, const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo)) {
        char want[64];
        snprintf(want, sizeof want, "a number >= %g", lo);
        return bad(opt, s, want);
    }
    *out = v;
    return 0;
}

/* The index of S in NAMES[0..N), or -1 after a message listing them ("a, b or c"). */
static int pick(const char *opt, const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    char expected[256] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof expected; i++)
        len += (size_t)snprintf(expected + len, sizeof expected - len, "%s%s",
                                i == 0       ? ""
                                : i == n - 1 ? " or "
                                             : ", ",
                                names[i]);
    bad(opt, s, expected);
    return -1;
}

static int parse_inject(struct tr_opts *o, const char *s)
{
    if (o->n_inject == TR_MAX_INJECT)
        return bad("--inject", s, "at most 16 injections");
    char kind[32];
    int rank;
    long step;
    char tail;
    if (sscanf(s, "%31[a-z-]:%d:%ld%c", kind, &rank, &step, &tail) != 3 || rank < 0 || step < 0)
        return bad("--inject", s, "KIND:RANK:STEP with RANK, STEP >= 0");
    int k = pick("--inject kind", kind, inject_names, 4);
    if (k < 0)
        return -1;
    o->inject[o->n_inject++] = (struct tr_inject){.kind = (enum tr_inject_kind)k, .rank = rank, .step = step};
    return 0;
}

/* ---- the options: one row each, parsed by the function of its kind */

/* How a row's value is read and where it goes. */
enum opt_kind {
    OPT_INT,    /* an integer in [min, max] (max 0: no upper bound) into an int */
    OPT_LONG,   /* an integer >= min into a long */
    OPT_SEED,   /* an integer >= min into the uint64_t seed */
    OPT_NUMBER, /* a number >= min, and above (> 0) or below (< 1) as the row says, into a double */
    OPT_CHOICE, /* one of the row's names; its index into an int or an enum */
    OPT_FLAG,   /* no value: stores the row's flag value into an int */
    OPT_TEXT,   /* the value itself, kept as a pointer into argv */
    OPT_OWN,    /* the row's own function */
};

/* The one-sided checks of OPT_NUMBER beyond >= min. */
enum number_bound { NUMBER_ANY, NUMBER_ABOVE_ZERO, NUMBER_BELOW_ONE };

struct opt_row;
/* Returns 0, 1 when the program should stop with status 0 (--help,
 * --version), or -1 after printing the error. */
typedef int (*opt_parser)(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary);

struct opt_row {
    const char *name; /* without the dashes */
    int has_arg;      /* no_argument, required_argument or optional_argument */
    enum opt_kind kind;
    size_t offset;          /* of the field in struct tr_opts */
    long min, max;          /* OPT_INT, OPT_LONG, OPT_SEED (min) */
    const char *range_name; /* OPT_INT: the name in the out-of-range message, when not the option's */
    double number_min;      /* OPT_NUMBER */
    enum number_bound bound;
    const char *bound_expected; /* OPT_NUMBER: what the message says is expected beyond the bound */
    const char *const *names;   /* OPT_CHOICE */
    int nnames;
    int flag_value;     /* OPT_FLAG */
    const char *no_mpi; /* NCCL binary only: what the MPI binary says instead */
    opt_parser own;     /* OPT_OWN */
};

/* Where ROW's value goes in O. */
static void *field_of(struct tr_opts *o, const struct opt_row *row)
{
    return (char *)o + row->offset;
}

/* Choice fields hold an int or an enum of int's size (all enums here have no negative value). */
_Static_assert(sizeof(enum tr_loss) == sizeof(int) && sizeof(enum tr_sync) == sizeof(int) &&
                   sizeof(enum tr_optim) == sizeof(int),
               "choice fields are int-sized");

static const char *const precision_names[] = {"double", "single"};
static const char *const sync_names[] = {"per-minibatch", "per-step"};
static const char *const p2p_names[] = {"send-recv", "sendrecv"};
static const char *const optimizer_names[] = {"sgd", "adam"};
static const char *const device_names[] = {"cuda", "host"};

static int parse_int_option(const struct opt_row *row, struct tr_opts *o, const char *arg, const char *opt)
{
    long v;
    if (parse_long(opt, arg, row->min, &v))
        return -1;
    if (row->max && v > row->max) {
        char range[64];
        snprintf(range, sizeof range, "%ld..%ld", row->min, row->max);
        return bad(row->range_name ? row->range_name : opt, arg, range);
    }
    *(int *)field_of(o, row) = (int)v;
    return 0;
}

static int parse_number_option(const struct opt_row *row, struct tr_opts *o, const char *arg, const char *opt)
{
    double v;
    if (parse_double(opt, arg, row->number_min, &v))
        return -1;
    if ((row->bound == NUMBER_ABOVE_ZERO && v <= 0) || (row->bound == NUMBER_BELOW_ONE && v >= 1))
        return bad(opt, arg, row->bound_expected);
    *(double *)field_of(o, row) = v;
    return 0;
}

/* Parses ARG (NULL when the option has none) as ROW says. */
static int parse_row(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    char opt[48];
    snprintf(opt, sizeof opt, "--%s", row->name);
    if (row->no_mpi && !nccl_binary)
        return bad(opt, arg, row->no_mpi);
    long v;
    int k;
    switch (row->kind) {
    case OPT_INT:
        return parse_int_option(row, o, arg, opt);
    case OPT_LONG:
        return parse_long(opt, arg, row->min, field_of(o, row));
    case OPT_SEED:
        if (parse_long(opt, arg, row->min, &v))
            return -1;
        *(uint64_t *)field_of(o, row) = (uint64_t)v;
        return 0;
    case OPT_NUMBER:
        return parse_number_option(row, o, arg, opt);
    case OPT_CHOICE:
        if ((k = pick(opt, arg, row->names, row->nnames)) < 0)
            return -1;
        *(int *)field_of(o, row) = k;
        return 0;
    case OPT_FLAG:
        *(int *)field_of(o, row) = row->flag_value;
        return 0;
    case OPT_TEXT:
        *(const char **)field_of(o, row) = arg;
        return 0;
    case OPT_OWN:
        return row->own(row, o, arg, nccl_binary);
    }
    return -1;
}

/* --loss: "siglip" is short for siglip-ring. */
static int parse_loss(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    (void)row, (void)nccl_binary;
    int k = pick("--loss", !strcmp(arg, "siglip") ? "siglip-ring" : arg, loss_names, 4);
    if (k < 0)
        return -1;
    o->loss = (enum tr_loss)k;
    return 0;
}

/* --rebuild-buckets[=N]. */
static int parse_rebuild(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    (void)row, (void)nccl_binary;
    long v;
    o->rebuild = 1;
    if (arg &&
        (parse_long("--rebuild-buckets", arg, 1, &v) || (v > 4096 && bad("--rebuild-buckets", arg, "1..4096"))))
        return -1;
    o->rebuild_buckets = arg ? (int)v : 0;
    return 0;
}

static int parse_inject_option(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    (void)row, (void)nccl_binary;
    return parse_inject(o, arg);
}

/* --backend: accepted when it names this binary's backend. */
static int check_backend(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    (void)row, (void)o;
    if (strcmp(arg, nccl_binary ? "nccl" : "mpi"))
        return bad("--backend", arg,
                   nccl_binary ? "nccl (this is the NCCL binary; use ccshim-trainer for MPI)"
                               : "mpi (use ccshim-trainer-nccl for NCCL)");
    return 0;
}

static int print_help(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    (void)row, (void)o, (void)arg, (void)nccl_binary;
    usage(stdout);
    return 1;
}

static int print_version(const struct opt_row *row, struct tr_opts *o, const char *arg, int nccl_binary)
{
    (void)row, (void)o, (void)arg, (void)nccl_binary;
    printf("%s (ccshim) %d.%d.%d\n", prog, CCSHIM_VERSION_MAJOR, CCSHIM_VERSION_MINOR, CCSHIM_VERSION_PATCH);
    return 1;
}

#define REQ required_argument
static const struct opt_row opt_rows[] = {
    {"batch", REQ, OPT_LONG, offsetof(struct tr_opts, batch), .min = 1},
    {"local-batch", REQ, OPT_LONG, offsetof(struct tr_opts, local_batch), .min = 1},
    {"mini-batch", REQ, OPT_LONG, offsetof(struct tr_opts, mini_batch), .min = 1},
    {"columns", REQ, OPT_INT, offsetof(struct tr_opts, columns), .min = 2, .max = 64},
    {"dim-in", REQ, OPT_INT, offsetof(struct tr_opts, din), .min = 1, .max = 65536, .range_name = "dimension"},
    {"dim-hidden", REQ, OPT_INT, offsetof(struct tr_opts, dhid), .min = 1, .max = 65536, .range_name = "dimension"},
    {"dim-out", REQ, OPT_INT, offsetof(struct tr_opts, dout), .min = 1, .max = 65536, .range_name = "dimension"},
    {"seed", REQ, OPT_SEED, offsetof(struct tr_opts, seed), .min = 0},
    {"steps", REQ, OPT_LONG, offsetof(struct tr_opts, steps), .min = 1},
    {"precision", REQ, OPT_CHOICE, offsetof(struct tr_opts, single), .names = precision_names, .nnames = 2},
    {"loss", REQ, OPT_OWN, .own = parse_loss},
    {"no-compensation", no_argument, OPT_FLAG, offsetof(struct tr_opts, compensation), .flag_value = 0},
    {"scale", REQ, OPT_NUMBER, offsetof(struct tr_opts, scale), .number_min = 0},
    {"sync", REQ, OPT_CHOICE, offsetof(struct tr_opts, sync), .names = sync_names, .nnames = 2},
    {"bucket-cap-mb", REQ, OPT_NUMBER, offsetof(struct tr_opts, bucket_cap_mb), .number_min = 0,
     .bound = NUMBER_ABOVE_ZERO, .bound_expected = "a size in MiB > 0"},
    {"buckets", REQ, OPT_INT, offsetof(struct tr_opts, buckets), .min = 1, .max = 4096},
    {"out-of-place", no_argument, OPT_FLAG, offsetof(struct tr_opts, out_of_place), .flag_value = 1},
    {"rebuild-buckets", optional_argument, OPT_OWN, .own = parse_rebuild},
    {"p2p", REQ, OPT_CHOICE, offsetof(struct tr_opts, p2p_sendrecv), .names = p2p_names, .nnames = 2},
    {"optimizer", REQ, OPT_CHOICE, offsetof(struct tr_opts, optimizer), .names = optimizer_names, .nnames = 2},
    {"lr", REQ, OPT_NUMBER, offsetof(struct tr_opts, lr), .number_min = 0},
    {"momentum", REQ, OPT_NUMBER, offsetof(struct tr_opts, momentum), .number_min = 0, .bound = NUMBER_BELOW_ONE,
     .bound_expected = "a number in [0, 1)"},
    {"check", no_argument, OPT_FLAG, offsetof(struct tr_opts, check), .flag_value = 1},
    {"dump-grad", REQ, OPT_TEXT, offsetof(struct tr_opts, dump_grad), .no_mpi = NULL},
    {"print-all-ranks", no_argument, OPT_FLAG, offsetof(struct tr_opts, print_all), .flag_value = 1},
    {"no-step-marks", no_argument, OPT_FLAG, offsetof(struct tr_opts, no_step_marks), .flag_value = 1},
    {"inject", REQ, OPT_OWN, .own = parse_inject_option},
    {"device", REQ, OPT_CHOICE, offsetof(struct tr_opts, device_host), .names = device_names, .nnames = 2,
     .no_mpi = "no --device: only ccshim-trainer-nccl has devices"},
    {"nccl-id-file", REQ, OPT_TEXT, offsetof(struct tr_opts, nccl_id_file),
     .no_mpi = "no --nccl-id-file: only ccshim-trainer-nccl uses NCCL"},
    {"backend", REQ, OPT_OWN, .own = check_backend},
    {"help", no_argument, OPT_OWN, .own = print_help},
    {"version", no_argument, OPT_OWN, .own = print_version},
};
#undef REQ
#define N_OPT_ROWS (sizeof opt_rows / sizeof opt_rows[0])

static const struct tr_opts defaults = {.loss = TR_LOSS_MNRL,
                                        .sync = TR_SYNC_PER_MINIBATCH,
                                        .optimizer = TR_OPT_SGD,
                                        .batch = 0,
                                        .mini_batch = 32,
                                        .columns = 2,
                                        .steps = 3,
                                        .seed = 1,
                                        .lr = 0.01,
                                        .momentum = 0.9,
                                        .scale = 20.0,
                                        .t_init = 2.302585092994046 /* log 10 */,
                                        .b_init = -10.0,
                                        .din = 32,
                                        .dhid = 64,
                                        .dout = 16,
                                        .bucket_cap_mb = 25.0,
                                        .compensation = 1};

/* What the options say together, once all are read. */
static int check_combination(struct tr_opts *o)
{
    if (o->batch && o->local_batch) {
        fprintf(stderr, "%s: give --batch or --local-batch, not both\n", prog);
        return -1;
    }
    if (!o->batch && !o->local_batch)
        o->batch = 256;
    if (o->loss != TR_LOSS_MNRL_GATHER && !o->compensation) {
        fprintf(stderr, "%s: --no-compensation applies to --loss mnrl-gather only (loss is %s)\n", prog,
                loss_names[o->loss]);
        return -1;
    }
    return 0;
}

int tr_opts_parse(struct tr_opts *o, int argc, char **argv, int nccl_binary)
{
    /* getopt's table from the rows: the value returned is the row's index + 256. */
    static struct option long_options[N_OPT_ROWS + 1];
    for (size_t i = 0; i < N_OPT_ROWS; i++)
        long_options[i] = (struct option){opt_rows[i].name, opt_rows[i].has_arg, NULL, 256 + (int)i};
    if (nccl_binary)
        prog = "ccshim-trainer-nccl";
    *o = defaults;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        if (c < 256 || (size_t)(c - 256) >= N_OPT_ROWS) {
            fprintf(stderr, "%s: unknown or incomplete option '%s' (try --help)\n", prog, argv[optind - 1]);
            return -1;
        }
        int rc = parse_row(&opt_rows[c - 256], o, optarg, nccl_binary);
        if (rc)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", prog, argv[optind]);
        return -1;
    }
    return check_combination(o);
}

int tr_opts_resolve(struct tr_opts *o, int world, int print)
{
    if (o->local_batch) {
        o->batch = o->local_batch * world;
    } else if (o->batch % world) {
        if (print)
            fprintf(stderr, "%s: --batch %ld is not divisible by the world size %d (expected a multiple of %d)\n",
                    prog, o->batch, world, world);
        return -1;
    } else {
        o->local_batch = o->batch / world;
    }
    if (o->mini_batch > o->local_batch) {
        if (print)
            fprintf(stderr, "%s: --mini-batch %ld is larger than the per-rank batch %ld (expected 1..%ld)\n", prog,
                    o->mini_batch, o->local_batch, o->local_batch);
        return -1;
    }
    for (int i = 0; i < o->n_inject; i++)
        if (o->inject[i].rank >= world) {
            if (print)
                fprintf(stderr, "%s: --inject %s:%d:%ld names rank %d, but the world has %d ranks (0..%d)\n", prog,
                        inject_names[o->inject[i].kind], o->inject[i].rank, o->inject[i].step, o->inject[i].rank,
                        world, world - 1);
            return -1;
        }
    return 0;
}
