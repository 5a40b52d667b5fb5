/*
 * nccl_track.h - NCCL completion tracking with CUDA events (nccl_track.c,
 * docs/nccl.md "Completion on the device").
 *
 * On a GPU an NCCL call returns once its work is enqueued.  To know when
 * the work completes, ccshim records a CUDA event on the call's stream
 * after the call (at most about one per stream per desync period, from a
 * pool created off the hot path) and the desync background thread polls
 * the events; a stream whose last calls are not covered by an event is
 * asked with cuStreamQuery once it has been quiet for a period.
 * Completion reaches the desync rules through ccs_desync_nccl_done().
 *
 * ccshim never loads the CUDA driver: tracking starts only once
 * libcuda.so.1 is already in the process (dlopen RTLD_NOLOAD), and every
 * driver function comes from its cuGetProcAddress.  Nothing here runs while
 * a stream is being captured into a CUDA graph.
 */
#ifndef CCS_NCCL_TRACK_H
#define CCS_NCCL_TRACK_H

#include "attributes.h"
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>

/* 1 once the driver was found: graph capture is checked from then on, and
 * completion tracked unless CCSHIM_NCCL_COMPLETION=0. */
extern CCS_HIDDEN atomic_int ccs_ntrack_on;

/* Slow path: looks for an already loaded CUDA driver (idempotent, cheap
 * once found; called at communicator creation and by the poller). */
CCS_HIDDEN void ccs_ntrack_init(void);

/* Nonzero when STREAM is being captured into a CUDA graph (0 when the
 * driver is not loaded or cannot say).  One driver call. */
CCS_HIDDEN int ccs_ntrack_capturing_slow(cudaStream_t stream);
static inline int ccs_ntrack_capturing(cudaStream_t stream)
{
    if (CCS_LIKELY(!atomic_load_explicit(&ccs_ntrack_on, memory_order_relaxed)))
        return 0;
    return ccs_ntrack_capturing_slow(stream);
}

/* After an NCCL call's work on COMM (sequence SEQ there) was enqueued on
 * STREAM outside any group: notes it and, at most about once per stream per
 * period, records an event.  Inside a group the wrapper calls
 * ccs_ntrack_group_note instead and ccs_ntrack_group_end at the outermost
 * ncclGroupEnd (once per stream).  No lock, no allocation, no system call
 * (but the rate-limited cuEventRecord). */
CCS_HIDDEN void ccs_ntrack_enqueued_slow(ncclComm_t comm, uint64_t seq, cudaStream_t stream);
static inline void ccs_ntrack_enqueued(ncclComm_t comm, uint64_t seq, cudaStream_t stream)
{
    if (atomic_load_explicit(&ccs_ntrack_on, memory_order_relaxed) && seq)
        ccs_ntrack_enqueued_slow(comm, seq, stream);
}
CCS_HIDDEN void ccs_ntrack_group_note(ncclComm_t comm, uint64_t seq, cudaStream_t stream);

/* The wrapper's one call after the real one, when tracking is on: 1 when
 * STREAM is being captured (nothing tracked then), else notes the call as
 * ccs_ntrack_enqueued (IN_GROUP 0) or ccs_ntrack_group_note would, and 0. */
CCS_HIDDEN int ccs_ntrack_after(ncclComm_t comm, uint64_t seq, cudaStream_t stream, int in_group);
/* OK: the group's work was enqueued (else it is forgotten). */
CCS_HIDDEN void ccs_ntrack_group_end(int ok);

/* Before the real ncclCommDestroy/Abort/Finalize of COMM (after the entry
 * was retired): waits until the background thread is not using COMM. */
CCS_HIDDEN void ccs_ntrack_forget(ncclComm_t comm);

/* The poller: called by the desync background thread every period
 * (registered with ccs_desync_set_poll by ccs_desync_nccl_init). */
CCS_HIDDEN void ccs_ntrack_poll(uint64_t now_ms);

/* For tests and the summary: events recorded, completions reported. */
struct ccs_ntrack_stats {
    uint64_t events, queries, done_reports, captured, async_errors;
};
CCS_HIDDEN void ccs_ntrack_stats(struct ccs_ntrack_stats *out);

#endif
