/*
 * tracegen.h - test-only writer of synthetic ccshim traces, byte for byte in
 * the format of src/core/trace_format.h, shaped like a data-parallel training job:
 * per step, every gradient bucket all-reduced once per mini-batch (MICRO
 * times) or once per step, an 8-byte all-gather, a step marker.  Variants:
 * no markers, a rank that issues one extra call, traces cut short, and files
 * that are not valid traces; buckets of another datatype or operation, and a
 * call of another size at a bucket's address.
 */
#ifndef CCS_TRACEGEN_H
#define CCS_TRACEGEN_H

#include <stddef.h>
#include <stdint.h>

#define TG_MAX_BUCKETS 16

struct tg_opts {
    int ranks, steps;
    int nbuckets;
    uint64_t bucket_bytes[TG_MAX_BUCKETS];
    int micro;                    /* reductions of every bucket per step */
    int allgather;                /* one 8-byte all-gather per step */
    int deferred;                 /* all but the last reduction of a bucket flagged deferred */
    int deferred_from;            /* ... from this step on (before it, every reduction is real) */
    int markers;                  /* step markers */
    int unmarked_rank;            /* that rank marks no step (it never ended its step 0); -1 none */
    int micro_rank, micro_of;     /* that rank reduces every bucket MICRO_OF times per step; -1 none */
    int head;                     /* parameter broadcasts before the first step */
    int desync_rank, desync_step; /* that rank issues one extra all-reduce then; -1 none */
    int no_end_rank;              /* that rank's trace has no END chunk; -1 none */
    int silent_rank;              /* that rank records no call (-2: every rank); -1 none */
    int late_sites;               /* SITE chunks after the records that name them */
    int late_rank;                /* every bucket reduction of the others lasts late_ns longer
                                     (they wait for it); -1 none */
    uint64_t late_ns;
    int hang_rank;                /* the others end in one more bucket reduction (an INFLIGHT
                                     chunk), every rank killed by signal 15; -1 none */
    int cut_rank;                 /* that rank's file loses its last CUT_BYTES bytes; -1 none */
    long cut_bytes;
    uint64_t dropped; /* END chunk's dropped count */
    int reports;      /* also write a desync report and a flight dump */
    const char *job, *host;
    unsigned dtype, op;   /* of the bucket reductions: enum ccs_dtype, enum ccs_op (float32, sum) */
    uint64_t alias_bytes; /* once per step, one more all-reduce of this size at bucket 0's address; 0 none */
    int rebuild;          /* DDP's rebuild: step 0's first mini-batch reduces other (old) bucket buffers */
};

void tg_defaults(struct tg_opts *o);
/* Writes rank RANK's trace into DIR; its path into PATH.  Returns 0 or -1. */
int tg_write_rank(const char *dir, const struct tg_opts *o, int rank, char *path, size_t n);
/* Writes every rank (and the reports when asked).  Returns 0 or -1. */
int tg_write_job(const char *dir, const struct tg_opts *o);
/* Writes a broken file: KIND is not-a-trace, newer-version, other-byteorder,
 * truncated-header or damaged-chunk.  Returns 0, -1 for an unknown KIND. */
int tg_write_broken(const char *path, const char *kind);
/* Parses "25M", "9.7M", "4K", "100" into bytes.  Returns 0 or -1. */
int tg_parse_size(const char *s, uint64_t *out);
/* Bytes per element of the datatypes tracegen writes (0 for others). */
unsigned tg_dtype_size(unsigned dtype);

#endif
