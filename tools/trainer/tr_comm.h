/*
 * tr_comm.h - the trainer's communication backend: MPI (tr_comm_mpi.c, in
 * ccshim-trainer) or NCCL (tr_comm_nccl.c, in ccshim-trainer-nccl, which
 * links no MPI).  The training code calls only these functions, and counts
 * what it issued here, by its own count, to print beside the shim's.
 *
 * All buffers are host memory.  The NCCL backend mirrors each host buffer it
 * is given in a device buffer of its own, found again by the host address,
 * so a bucket keeps one device address for every reduction, as DDP's do.
 */
#ifndef TR_COMM_H
#define TR_COMM_H

#include <stddef.h>
#include <stdint.h>

enum tr_dtype { TR_F64, TR_F32 };

struct tr_counts {
    uint64_t allreduce, allgather, send, recv;
};

struct tr_opts;
struct tr_comm;

/* What every backend's struct tr_comm begins with: the accessors below
 * (tr_comm.c) read it, so each backend defines only its own part. */
struct tr_comm_common {
    int rank, size;
    struct tr_counts counts; /* what the training code issued */
};

/* Starts the backend (MPI_Init, or the NCCL communicator).  Returns NULL
 * after printing why. */
struct tr_comm *tr_comm_init(int *argc, char ***argv, const struct tr_opts *o);
int tr_comm_rank(const struct tr_comm *c);
int tr_comm_size(const struct tr_comm *c);
const char *tr_comm_backend(const struct tr_comm *c);
struct tr_counts *tr_comm_counts(struct tr_comm *c);

/* Sum-all-reduce of COUNT values of BUF into BUF (in place) or, when RECV is
 * not NULL, from BUF into RECV.  Returns 0 or -1. */
int tr_comm_allreduce_sum(struct tr_comm *c, void *buf, void *recv, size_t count, enum tr_dtype dt);

/* RECV (size x COUNT values) receives every rank's SEND, in rank order. */
int tr_comm_allgather(struct tr_comm *c, const void *send, void *recv, size_t count, enum tr_dtype dt);

/* One ring shift: SEND goes to rank+1, RECV comes from rank-1 (mod size):
 * one send and one receive. */
int tr_comm_ring_shift(struct tr_comm *c, const void *send, void *recv, size_t count, enum tr_dtype dt);

/* Ends the backend.  Returns 0 or -1. */
int tr_comm_finalize(struct tr_comm *c);

/* Ends every rank now, with CODE (after a fatal error on one rank). */
void tr_comm_abort(struct tr_comm *c, int code);

#endif /* TR_COMM_H */
