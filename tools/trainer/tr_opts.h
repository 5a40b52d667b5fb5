/*
 * tr_opts.h - ccshim-trainer's command line.  tr_opts_parse checks
 * everything that does not depend on the world size; tr_opts_resolve, after
 * the backend started, the rest (batch divisible by the world size, the
 * mini-batch within the per-rank batch).  Both print the bad value and what
 * was expected; the caller exits with status 2.
 */
#ifndef TR_OPTS_H
#define TR_OPTS_H

#include <stdint.h>

enum tr_loss { TR_LOSS_MNRL, TR_LOSS_MNRL_GATHER, TR_LOSS_SIGLIP_RING, TR_LOSS_SIGLIP_GATHER };
enum tr_sync { TR_SYNC_PER_MINIBATCH, TR_SYNC_PER_STEP };
enum tr_optim { TR_OPT_SGD, TR_OPT_ADAM };
/* skip-minibatch: the rank replays one mini-batch fewer; extra-minibatch:
 * one more (its last again), each with its per-mini-batch reduction. */
enum tr_inject_kind { TR_INJ_SKIP_MINIBATCH, TR_INJ_EXTRA_ALLREDUCE, TR_INJ_WRONG_COUNT, TR_INJ_EXTRA_MINIBATCH };

#define TR_MAX_INJECT 16

struct tr_inject {
    enum tr_inject_kind kind;
    int rank;
    long step;
};

struct tr_opts {
    enum tr_loss loss;
    enum tr_sync sync;
    enum tr_optim optimizer;
    int single;       /* --precision single */
    long batch;       /* global batch (0: from local_batch) */
    long local_batch; /* per-rank batch (0: from batch) */
    long mini_batch;  /* m */
    int columns;      /* anchor, positive, hard negatives */
    long steps;
    uint64_t seed;
    double lr, momentum;
    double scale;          /* MNRL similarity scale */
    double t_init, b_init; /* SigLIP log-temperature and bias */
    int din, dhid, dout;
    int buckets; /* --buckets N (0: by cap) */
    double bucket_cap_mb;
    int compensation;    /* gathered InfoNCE: scale the backward by W */
    int out_of_place;    /* all-reduce into a second fixed buffer */
    int rebuild;         /* --rebuild-buckets: new bucket buffers after the first backward */
    int rebuild_buckets; /* --rebuild-buckets=N: N equal slices after it (0: the same layout) */
    int p2p_sendrecv;    /* ring with MPI_Sendrecv, not Send/Recv */
    int check;
    int print_all; /* every rank prints its per-step line */
    int no_step_marks; /* never call ccshim_step_mark */
    const char *dump_grad;
    int n_inject;
    struct tr_inject inject[TR_MAX_INJECT];
    /* NCCL binary only */
    int device_host; /* --device=host: no CUDA call at all */
    const char *nccl_id_file;
};

/* Fills O from ARGV.  Returns 0, 1 when --help/--version was printed, or -1
 * after printing the error. */
int tr_opts_parse(struct tr_opts *o, int argc, char **argv, int nccl_binary);

/* Derives batch/local_batch for WORLD ranks and checks them.  Returns 0 or -1
 * (message printed when PRINT). */
int tr_opts_resolve(struct tr_opts *o, int world, int print);

const char *tr_loss_name(enum tr_loss l);
const char *tr_inject_name(enum tr_inject_kind k);

#endif /* TR_OPTS_H */
