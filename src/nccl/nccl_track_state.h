/*
 * nccl_track_state.h - what NCCL completion tracking's two halves share
 * (internal to src/nccl): the tracker on the hot path (nccl_track.c: the
 * driver's entry points, the stream table, the events it records) and the
 * poller (nccl_track_poll.c: event and stream queries, completion reports,
 * asynchronous errors, its own thread).  Every field says which side
 * writes it; nothing here is locked.
 */
#ifndef CCS_NCCL_TRACK_STATE_H
#define CCS_NCCL_TRACK_STATE_H

#include "attributes.h"
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

#define NSTREAM_BITS 6
#define NSTREAMS (1u << NSTREAM_BITS)
#define NEV 4

/* The driver's entry points (cuGetProcAddress, ccs_ntrack_init). */
struct ccs_ntrack_cu {
    CUresult (*event_create)(CUevent *, unsigned int);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_query)(CUevent);
    CUresult (*stream_query)(CUstream);
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*ctx_get)(CUcontext *);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
    CUresult (*exchange_mode)(CUstreamCaptureMode *);
};
extern CCS_HIDDEN struct ccs_ntrack_cu ccs_ntrack_cu;

/* The period: advanced by the poller, read by the tracker (one event per
 * stream per period). */
extern CCS_HIDDEN _Atomic uint64_t ccs_ntrack_period;

enum { SLOT_FREE, SLOT_CLAIMED, SLOT_READY };
enum { EV_FREE, EV_RECORDING, EV_RECORDED };

struct ccs_ntrack_stream {
    atomic_int state;
    uintptr_t handle;
    CUcontext ctx;
    _Atomic uint64_t ev_period; /* period of the last event (rate limit) */
    _Atomic uintptr_t last_comm;
    _Atomic uint64_t last_seq;
    atomic_int ev_ready; /* 1 events created, -1 could not */
    atomic_int retired;  /* its last communicator was destroyed: not queried */
    atomic_uint next;
    CUevent ev[NEV];
    atomic_int ev_state[NEV];
    uintptr_t tag_comm[NEV];
    uint64_t tag_seq[NEV];
    /* Background thread only: the (comm, seq) last seen, since when, and
     * the last one a stream query found complete. */
    uintptr_t seen_comm, tail_comm;
    uint64_t seen_seq, quiet_since, tail_seq;
};

/* Claimed by the tracker at a stream's first call, polled by the poller. */
extern CCS_HIDDEN struct ccs_ntrack_stream ccs_ntrack_streams[NSTREAMS];

/* What tracking did (the INFO line at exit): events and captured calls
 * counted by the tracker, the rest by the poller. */
struct ccs_ntrack_count {
    _Atomic uint64_t events, queries, done_reports, captured, async_errors, polls;
};
extern CCS_HIDDEN struct ccs_ntrack_count ccs_ntrack_count;

/* nccl_track_poll.c: the poller's own thread (started by ccs_ntrack_init). */
CCS_HIDDEN void *ccs_ntrack_own_poller(void *arg);

#endif
