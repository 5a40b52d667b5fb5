/*
 * desync.h - early desync detection (docs/desync.md): the API the rest of
 * ccshim calls.  Everything here is slow path; the hot path (record.c) is
 * untouched: a background thread reads the rings and the comm table.
 *
 * Who calls what:
 *   - src/mpi/desync_mpi.c (ccs_desync_mpi_init, from mpi_setup.c right
 *     after MPI_Init): ccs_desync_start_mpi(); src/mpi/mpi_setup.c:
 *     ccs_desync_note_exit(CCS_DESYNC_FINALIZING) at the top of MPI_Finalize.
 *   - src/nccl/desync_nccl.c (ccs_desync_nccl_init, from nccl_comm.c at every
 *     communicator created): ccs_desync_set_poll() once, then
 *     ccs_desync_start(), which starts once the rank is known.
 *   - src/nccl/nccl_track_poll.c: ccs_desync_nccl_done() as work completes on the
 *     device, ccs_desync_active().
 *   - This library itself: ccs_desync_note_exit(CCS_DESYNC_EXITED) at exit.
 * Once running, the side channel offers ccs_desync_agree_u64 as the core's
 * agreement service (agree.h), which coalescing's auto uses; a verdict
 * under CCSHIM_ON_DESYNC=abort ends the job through the core's abort
 * service, which the MPI and NCCL backends fill in.
 *
 * Where each is defined: the two start-ups in desync_start.c, the
 * agreement in desync_agree.c, the end of a rank in desync_exit.c,
 * everything else in desync.c (the running detector; desync_state.h lists
 * its files).
 */
#ifndef CCS_DESYNC_H
#define CCS_DESYNC_H

#include "attributes.h"
#include "comm.h"
#include <stdint.h>

/* Starts the side channel and the background thread if CCSHIM_DESYNC is on
 * and the world rank and size are known (else it does nothing and may be
 * called again later).  Idempotent; slow path; never fails the job: when the
 * side channel cannot be set up it says so once and returns -1. */
CCS_HIDDEN int ccs_desync_start(void);

/* MPI jobs: called by every rank right after MPI_Init (a collective: every
 * rank calls both functions exactly once, whatever the settings).
 * ALLGATHER(mine, all, n, arg) gathers N bytes from every rank of the world
 * into ALL (rank order); BCAST(buf, n, arg) broadcasts N bytes from rank 0.
 * The ranks learn who shares their host (shared memory) and, when they span
 * hosts, rank 0 starts the coordinator and broadcasts its address and a
 * fresh secret.  Then as ccs_desync_start(). */
struct ccs_dsx_mpi_ops {
    int (*allgather)(const void *mine, void *all, int n, void *arg);
    int (*bcast)(void *buf, int n, void *arg);
    void *arg;
};
CCS_HIDDEN int ccs_desync_start_mpi(const struct ccs_dsx_mpi_ops *ops);

/* What the process is doing that the rules must know about. */
enum ccs_dsx_exit {
    CCS_DESYNC_FINALIZING = 1, /* inside MPI_Finalize: issues no more collectives */
    CCS_DESYNC_EXITED = 2,     /* process exit (atexit): issues no more collectives */
};
CCS_HIDDEN void ccs_desync_note_exit(int how);

/* Agreement across the members of C over the side channel: every member
 * calls it with the same KEY (unique per call on C, e.g. the step number)
 * and its value MINE; each gets the maximum and minimum of all values.
 * Blocks the caller (polling, 1 ms sleeps) up to TIMEOUT_MS.
 * Returns 0, or -1 when the side channel is off, C is not agreed across
 * ranks (local identity), or the timeout passed (then the outputs are untouched). */
CCS_HIDDEN int ccs_desync_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                                    uint64_t *agreed_min, int timeout_ms);

/* Registers FN(now_ms), called by the background thread at the start of
 * every period (NCCL completion tracking polls its CUDA events there). */
CCS_HIDDEN void ccs_desync_set_poll(void (*fn)(uint64_t now_ms));

/* 1 while the side channel is up (detection running). */
CCS_HIDDEN int ccs_desync_active(void);

/* NCCL: enqueued work on C up to sequence SEQ_DONE has completed on the
 * device (from CUDA events, or from enqueue progress without a GPU).  A
 * member whose enqueued seq is above its completed seq for longer than the
 * block threshold counts as blocked at SEQ_DONE + 1.  Relaxed store only. */
CCS_HIDDEN void ccs_desync_nccl_done(struct ccs_comm *c, uint64_t seq_done);

#endif
