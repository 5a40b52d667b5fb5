/*
 * comm.h - the communicator table (comm.c): one entry per live
 * communicator of either backend, its identity (the same on every member)
 * and its sequence counters.  Lookup is lock-free (the hot path);
 * registration takes a mutex.
 */
#ifndef CCS_COMM_H
#define CCS_COMM_H

#include "attributes.h"
#include "trace_format.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One step's collectives on a communicator, as the hot path leaves them at
 * the first collective of the next step (ccs_comm_step_turn). */
struct ccs_comm_turn {
    _Atomic uint32_t step;  /* the step (ccs_step at issue) */
    _Atomic uint64_t seq0;  /* seq of its first collective here; 0: none */
    _Atomic uint64_t kinds; /* bit K: a collective of kind K issued in it (turn[0]'s: in KINDS) */
};

struct ccs_comm {
    /* Line-aligned: every field a call reads or writes (handle, id, size,
     * backend, seq, p2p, hash, step_at, kinds) is on the entry's first cache line. */
    _Alignas(64) _Atomic uintptr_t handle; /* local handle; 0 = free slot, 1 = tombstone */
    uint64_t id;              /* identity, the same on every member */
    /* Sequence counters.  Relaxed load+store, not an atomic RMW: a correct
     * program never issues two collectives on one communicator at once
     * (MPI and NCCL both forbid it), so no update can be lost.  The same
     * holds for hash, step_at and kinds. */
    _Atomic uint64_t seq;     /* next collective sequence number (from 1) */
    _Atomic uint64_t p2p;     /* point-to-point calls so far */
    /* Running hash (ccs_running_hash) of the fingerprint words of the
     * collectives issued so far; each record also carries it through its
     * own call, so that desync's thread reads a (seq, hash) pair from the
     * newest record instead of hashing every record (docs/desync.md). */
    _Atomic uint64_t hash;
    int32_t rank, size;       /* this process's rank; member count */
    uint16_t backend;         /* enum ccs_backend */
    uint16_t how;             /* enum ccs_kind of the creating call */
    _Atomic uint32_t step_at; /* step of the last collective issued (UINT32_MAX: none yet) */
    _Atomic uint64_t kinds;   /* bit K: a collective of kind K issued in step step_at */
    /* Off the hot path's line. */
    uint64_t parent;          /* parent's identity, 0 when none */
    int32_t color;            /* split color or -1 */
    uint64_t t_created;       /* ticks */
    _Atomic uint64_t children;/* communicators created from this one so far */
    int agreed;               /* 1 when every member derives the same id */
    int32_t remote_size;      /* MPI intercommunicator: the remote group's size (the length of
                                 its collectives' per-peer arrays); 0 for any other */
    uint8_t nonblocking;      /* NCCL: made with config.blocking = 0 (or split from one) */
    void *feature[2];         /* per-communicator state of later features */
    /* The last three steps with collectives here, newest first (turn[0] is
     * step_at's, its kinds live in KINDS), written by ccs_comm_step_turn
     * between two changes of turn_gen (odd while writing), so that a reader
     * can tell a consistent copy (ccs_comm_turns). */
    _Atomic uint32_t turn_gen;
    struct ccs_comm_turn turn[3];
};

_Static_assert(offsetof(struct ccs_comm, parent) <= 64,
               "the fields of a communicator entry every call uses share one cache line");

/* Hot path, at the first collective of a new step STEP on C (seq SEQ):
 * shifts C's turns.  Cold, out of line. */
CCS_HIDDEN void ccs_comm_step_turn(struct ccs_comm *c, uint32_t step, uint64_t seq) __attribute__((cold, noinline));

/* A consistent copy of C's turns into OUT (3, newest first, OUT[0].kinds
 * the live kinds of the current step).  Any thread; retries while the hot
 * path is inside ccs_comm_step_turn, and after 1000 tries gives all zeros
 * (seq0 0: no turn known; readers then keep what they counted). */
struct ccs_comm_turns {
    uint32_t step[3];
    uint64_t seq0[3];
    uint64_t kinds[3];
};
CCS_HIDDEN void ccs_comm_turns(struct ccs_comm *c, struct ccs_comm_turns *out);

/* In a forked child: a communicator whose turns another thread of the
 * parent was writing at the fork (turn_gen odd, and no thread left to
 * finish) gets no turns and an even turn_gen, so that readers see "none
 * known" instead of giving up on it, or reading half a turn, for good. */
CCS_HIDDEN void ccs_comm_forked(void);

#define CCS_COMM_SLOT_BITS 12
#define CCS_COMM_SLOTS (1u << CCS_COMM_SLOT_BITS)

/* Hot path: the live entry for HANDLE, or NULL.  Lock-free. */
CCS_HIDDEN struct ccs_comm *ccs_comm_lookup(int backend, uintptr_t handle);
/* Describes torch.distributed group ID (this process its member RANK of
 * SIZE) for the trace, once: a COMM chunk of backend torch.distributed,
 * for the records of ccs_record_foreign.  Not in the table: nothing is
 * sequenced on it.  0, or -1 when it cannot be described (bad values, too
 * many groups). */
CCS_HIDDEN int ccs_comm_define_group(uint64_t id, int rank, int size);

/* Registers a new communicator (slow path, takes a mutex).  Returns the
 * entry, or NULL when the table is full (logged once; calls on it are then
 * forwarded unrecorded). */
CCS_HIDDEN struct ccs_comm *ccs_comm_register(int backend, uintptr_t handle, uint64_t id, uint64_t parent,
                                              int rank, int size, int how, int color);
/* The same for an MPI intercommunicator whose remote group has REMOTE_SIZE
 * (> 0) members, set before the entry is published; an intercommunicator
 * is never agreed (its calls are counted, not compared).  REMOTE_SIZE 0 is
 * ccs_comm_register. */
CCS_HIDDEN struct ccs_comm *ccs_comm_register_inter(int backend, uintptr_t handle, uint64_t id, uint64_t parent,
                                                    int rank, int size, int remote_size, int how, int color);

/* Sets the rank and size of C once known (a communicator registered before
 * it was ready: nonblocking, or created inside a group).  Slow path. */
CCS_HIDDEN void ccs_comm_set_rank(struct ccs_comm *c, int rank, int size);
/* Retires an entry (its handle may be reused for a new communicator),
 * keeping its final counts for ccs_comm_final. */
CCS_HIDDEN void ccs_comm_retire(struct ccs_comm *c);
/* The exact final counts of communicator ID, retired by ccs_comm_retire:
 * *SEQ, the collectives issued on it, and *HASH, their running hash.  For
 * a reader that sees the entry gone only later (desync's collector).
 * Returns 0, or -1 when it was not retired or more than 1024 communicators
 * were retired since (its counts are then not known). */
CCS_HIDDEN int ccs_comm_final(uint64_t id, uint64_t *seq, uint64_t *hash);

/* Identity of the N-th child of PARENT (N counted per parent on every member
 * alike), of the given creating call and color/discriminator. */
CCS_HIDDEN uint64_t ccs_comm_child_id(struct ccs_comm *parent, int how, int64_t discriminator);

/* For a handle the shim never saw created: registers it with a local-only
 * identity (agreed = 0) and logs that once.  Slow path. */
CCS_HIDDEN struct ccs_comm *ccs_comm_adopt(int backend, uintptr_t handle, int rank, int size);
/* The same for an MPI intercommunicator (REMOTE_SIZE as above). */
CCS_HIDDEN struct ccs_comm *ccs_comm_adopt_inter(int backend, uintptr_t handle, int rank, int size, int remote_size);

/* Visits every live entry (for the writer and the features). */
CCS_HIDDEN void ccs_comm_foreach(void (*fn)(struct ccs_comm *, void *), void *arg);

/* Copies up to MAX communicator definitions, the FROM-th registered onwards,
 * into OUT (for the trace writer, which keeps its own cursor).  Returns how many. */
CCS_HIDDEN size_t ccs_comm_defs(size_t from, struct ccs_trace_comm *out, size_t max);

#endif
