/*
 * tr_opts.c - parses and checks ccshim-trainer's options (see tr_opts.h and
 * docs/trainer.md).
 */
#include "tr_opts.h"

#include "ccshim.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "ccshim-trainer";

static const char *const loss_names[] = {"mnrl", "mnrl-gather", "siglip-ring", "siglip-gather"};
static const char *const inject_names[] = {"skip-minibatch", "extra-allreduce", "wrong-count"};

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
            "  --inject KIND:RANK:STEP  skip-minibatch, extra-allreduce or wrong-count\n"
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

static int pick(const char *opt, const char *s, const char *const *names, int n, int *out, const char *expected)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return bad(opt, s, expected);
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
    int k;
    if (pick("--inject kind", kind, inject_names, 3, &k, "skip-minibatch, extra-allreduce or wrong-count"))
        return -1;
    o->inject[o->n_inject++] = (struct tr_inject){.kind = (enum tr_inject_kind)k, .rank = rank, .step = step};
    return 0;
}

enum {
    O_BATCH = 256,
    O_LOCAL_BATCH,
    O_MINI,
    O_COLS,
    O_DIN,
    O_DHID,
    O_DOUT,
    O_SEED,
    O_STEPS,
    O_PREC,
    O_LOSS,
    O_NOCOMP,
    O_SCALE,
    O_SYNC,
    O_CAP,
    O_BUCKETS,
    O_OOP,
    O_REBUILD,
    O_P2P,
    O_OPT,
    O_LR,
    O_MOM,
    O_CHECK,
    O_DUMP,
    O_PALL,
    O_NOMARK,
    O_INJECT,
    O_DEVICE,
    O_IDFILE,
    O_BACKEND,
    O_HELP,
    O_VERSION
};

int tr_opts_parse(struct tr_opts *o, int argc, char **argv, int nccl_binary)
{
    static const struct option lo[] = {{"batch", 1, 0, O_BATCH},
                                       {"local-batch", 1, 0, O_LOCAL_BATCH},
                                       {"mini-batch", 1, 0, O_MINI},
                                       {"columns", 1, 0, O_COLS},
                                       {"dim-in", 1, 0, O_DIN},
                                       {"dim-hidden", 1, 0, O_DHID},
                                       {"dim-out", 1, 0, O_DOUT},
                                       {"seed", 1, 0, O_SEED},
                                       {"steps", 1, 0, O_STEPS},
                                       {"precision", 1, 0, O_PREC},
                                       {"loss", 1, 0, O_LOSS},
                                       {"no-compensation", 0, 0, O_NOCOMP},
                                       {"scale", 1, 0, O_SCALE},
                                       {"sync", 1, 0, O_SYNC},
                                       {"bucket-cap-mb", 1, 0, O_CAP},
                                       {"buckets", 1, 0, O_BUCKETS},
                                       {"out-of-place", 0, 0, O_OOP},
                                       {"rebuild-buckets", 2, 0, O_REBUILD},
                                       {"p2p", 1, 0, O_P2P},
                                       {"optimizer", 1, 0, O_OPT},
                                       {"lr", 1, 0, O_LR},
                                       {"momentum", 1, 0, O_MOM},
                                       {"check", 0, 0, O_CHECK},
                                       {"dump-grad", 1, 0, O_DUMP},
                                       {"print-all-ranks", 0, 0, O_PALL},
                                       {"no-step-marks", 0, 0, O_NOMARK},
                                       {"inject", 1, 0, O_INJECT},
                                       {"device", 1, 0, O_DEVICE},
                                       {"nccl-id-file", 1, 0, O_IDFILE},
                                       {"backend", 1, 0, O_BACKEND},
                                       {"help", 0, 0, O_HELP},
                                       {"version", 0, 0, O_VERSION},
                                       {0, 0, 0, 0}};
    if (nccl_binary)
        prog = "ccshim-trainer-nccl";
    *o = (struct tr_opts){.loss = TR_LOSS_MNRL,
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
    long v;
    int k;
    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, "", lo, NULL);
        if (c == -1)
            break;
        const char *a = optarg;
        switch (c) {
        case O_BATCH:
            if (parse_long("--batch", a, 1, &o->batch))
                return -1;
            break;
        case O_LOCAL_BATCH:
            if (parse_long("--local-batch", a, 1, &o->local_batch))
                return -1;
            break;
        case O_MINI:
            if (parse_long("--mini-batch", a, 1, &o->mini_batch))
                return -1;
            break;
        case O_COLS:
            if (parse_long("--columns", a, 2, &v) || (v > 64 && bad("--columns", a, "2..64")))
                return -1;
            o->columns = (int)v;
            break;
        case O_DIN:
        case O_DHID:
        case O_DOUT:
            if (parse_long(c == O_DIN    ? "--dim-in"
                           : c == O_DHID ? "--dim-hidden"
                                         : "--dim-out",
                           a, 1, &v) ||
                (v > 65536 && bad("dimension", a, "1..65536")))
                return -1;
            *(c == O_DIN ? &o->din : c == O_DHID ? &o->dhid : &o->dout) = (int)v;
            break;
        case O_SEED:
            if (parse_long("--seed", a, 0, &v))
                return -1;
            o->seed = (uint64_t)v;
            break;
        case O_STEPS:
            if (parse_long("--steps", a, 1, &o->steps))
                return -1;
            break;
        case O_PREC:
            if (pick("--precision", a, (const char *const[]){"double", "single"}, 2, &k, "double or single"))
                return -1;
            o->single = k;
            break;
        case O_LOSS:
            if (!strcmp(a, "siglip"))
                a = "siglip-ring";
            if (pick("--loss", a, loss_names, 4, &k, "mnrl, mnrl-gather, siglip-ring or siglip-gather"))
                return -1;
            o->loss = (enum tr_loss)k;
            break;
        case O_NOCOMP:
            o->compensation = 0;
            break;
        case O_SCALE:
            if (parse_double("--scale", a, 0, &o->scale))
                return -1;
            break;
        case O_SYNC:
            if (pick("--sync", a, (const char *const[]){"per-minibatch", "per-step"}, 2, &k,
                     "per-minibatch or per-step"))
                return -1;
            o->sync = (enum tr_sync)k;
            break;
        case O_CAP:
            if (parse_double("--bucket-cap-mb", a, 0, &o->bucket_cap_mb))
                return -1;
            if (o->bucket_cap_mb <= 0)
                return bad("--bucket-cap-mb", a, "a size in MiB > 0");
            break;
        case O_BUCKETS:
            if (parse_long("--buckets", a, 1, &v) || (v > 4096 && bad("--buckets", a, "1..4096")))
                return -1;
            o->buckets = (int)v;
            break;
        case O_OOP:
            o->out_of_place = 1;
            break;
        case O_REBUILD:
            o->rebuild = 1;
            if (a &&
                (parse_long("--rebuild-buckets", a, 1, &v) || (v > 4096 && bad("--rebuild-buckets", a, "1..4096"))))
                return -1;
            o->rebuild_buckets = a ? (int)v : 0;
            break;
        case O_P2P:
            if (pick("--p2p", a, (const char *const[]){"send-recv", "sendrecv"}, 2, &k, "send-recv or sendrecv"))
                return -1;
            o->p2p_sendrecv = k;
            break;
        case O_OPT:
            if (pick("--optimizer", a, (const char *const[]){"sgd", "adam"}, 2, &k, "sgd or adam"))
                return -1;
            o->optimizer = (enum tr_optim)k;
            break;
        case O_LR:
            if (parse_double("--lr", a, 0, &o->lr))
                return -1;
            break;
        case O_MOM:
            if (parse_double("--momentum", a, 0, &o->momentum))
                return -1;
            if (o->momentum >= 1)
                return bad("--momentum", a, "a number in [0, 1)");
            break;
        case O_CHECK:
            o->check = 1;
            break;
        case O_DUMP:
            o->dump_grad = a;
            break;
        case O_PALL:
            o->print_all = 1;
            break;
        case O_NOMARK:
            o->no_step_marks = 1;
            break;
        case O_INJECT:
            if (parse_inject(o, a))
                return -1;
            break;
        case O_DEVICE:
            if (!nccl_binary)
                return bad("--device", a, "no --device: only ccshim-trainer-nccl has devices");
            if (pick("--device", a, (const char *const[]){"cuda", "host"}, 2, &k, "cuda or host"))
                return -1;
            o->device_host = k;
            break;
        case O_IDFILE:
            if (!nccl_binary)
                return bad("--nccl-id-file", a, "no --nccl-id-file: only ccshim-trainer-nccl uses NCCL");
            o->nccl_id_file = a;
            break;
        case O_BACKEND:
            if (strcmp(a, nccl_binary ? "nccl" : "mpi"))
                return bad("--backend", a,
                           nccl_binary ? "nccl (this is the NCCL binary; use ccshim-trainer for MPI)"
                                       : "mpi (use ccshim-trainer-nccl for NCCL)");
            break;
        case O_HELP:
            usage(stdout);
            return 1;
        case O_VERSION:
            printf("%s (ccshim) %d.%d.%d\n", prog, CCSHIM_VERSION_MAJOR, CCSHIM_VERSION_MINOR,
                   CCSHIM_VERSION_PATCH);
            return 1;
        default:
            fprintf(stderr, "%s: unknown or incomplete option '%s' (try --help)\n", prog, argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", prog, argv[optind]);
        return -1;
    }
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
