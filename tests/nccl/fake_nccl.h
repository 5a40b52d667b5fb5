/*
 * fake_nccl.h - internals of the test-only host NCCL (libnccl.so.2 built in
 * tests/nccl).  It implements a subset of nccl.h over HOST memory between
 * processes of one machine, so the NCCL interception path can be tested end
 * to end without a GPU.  Not a product: small, synchronous, bounded waits.
 *
 * Each communicator is one POSIX shared-memory segment named after the
 * ncclUniqueId (mode 0600, unlinked as soon as every member has mapped it):
 *
 *   header | pair rings' counters | per-rank slots | pair rings' bytes
 *
 * Collectives: every rank copies its contribution into its slot, a barrier,
 * every rank computes its result from all slots (in rank order, so every
 * rank gets bit-identical results), a barrier.  Send/recv: a byte ring per
 * ordered pair of ranks (single producer, single consumer).  Waits use a
 * futex on a counter in the segment and give up with ncclSystemError after
 * FAKENCCL_TIMEOUT seconds (default 60).
 */
#ifndef FAKE_NCCL_H
#define FAKE_NCCL_H

#include <nccl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FN_MAX_RANKS 16
#define FN_SLOT_BYTES (1u << 20) /* largest contribution of one rank to a collective */
#define FN_RING_BYTES (1u << 16) /* bytes in flight per ordered pair */
#define FN_MAX_OPS 32            /* PreMulSum operators per communicator */
#define FN_NAME_MAX 64

struct fn_hdr {
    _Atomic uint32_t count;  /* barrier arrivals */
    _Atomic uint32_t gen;    /* barrier generation (futex word) */
    _Atomic uint32_t p2p_ev; /* bumped on every ring change (futex word) */
    _Atomic int32_t nranks;  /* set by the first member to map it */
};

struct fn_ring {
    _Atomic uint64_t head; /* bytes written by the sender */
    _Atomic uint64_t tail; /* bytes consumed by the receiver */
    char pad[48];
};

struct fn_redop {
    int used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    unsigned char scalar[8]; /* host-immediate scalar */
    const void *ptr;         /* ncclScalarDevice: read at each use */
};

struct ncclComm {
    char name[FN_NAME_MAX];
    int rank, nranks;
    unsigned splits; /* ncclCommSplit calls so far (names the children) */
    void *base;
    size_t len;
    struct fn_hdr *hdr;
    struct fn_ring *rings; /* nranks * nranks, [from * nranks + to] */
    unsigned char *slots;  /* nranks * FN_SLOT_BYTES */
    unsigned char *ring_data;
    struct fn_redop ops[FN_MAX_OPS];
    _Atomic int async_err; /* ncclCommGetAsyncError: sticky error of the worker */
    double ready_at;       /* nonblocking (config.blocking = 0): in progress until then */
};

/* fake_nccl_shm.c */
/* Maps (creating if needed) the segment NAME for NRANKS members as RANK.
 * Returns ncclSuccess or an error (message set). */
ncclResult_t fn_attach(struct ncclComm *c, const char *name, int nranks, int rank);
void fn_detach(struct ncclComm *c);
ncclResult_t fn_barrier(struct ncclComm *c);
/* Waits while *WORD == OLD (bounded); ncclSystemError on timeout. */
ncclResult_t fn_wait_change(_Atomic uint32_t *word, uint32_t old, int short_wait);
/* Set by ncclCommAbort: every wait of this process fails from then on. */
extern _Atomic int fn_aborted;
void fn_wake(_Atomic uint32_t *word);
/* Seconds before a wait gives up. */
double fn_timeout(void);
void fn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *fn_last_error(void);
unsigned char *fn_slot(struct ncclComm *c, int rank);

#endif
