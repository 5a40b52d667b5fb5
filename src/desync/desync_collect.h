/*
 * desync_collect.h - builds this rank's status from the core's rings and
 * comm table, off the hot path (the background thread only).
 */
#ifndef CCS_DESYNC_COLLECT_H
#define CCS_DESYNC_COLLECT_H

#include "desync_proto.h"

/* Reads what was published since the last call (records, in-flight calls,
 * sequence counters) and fills ST (every field but life and beat).  NOW_MS:
 * monotonic milliseconds.  Background thread only. */
void ccs_dsx_collect(struct ccs_dsx_status *st, uint64_t now_ms);

/* The last operation this rank completed on COMM at or before SEQ, from the
 * collector's history (for reports).  1 when found. */
int ccs_dsx_collect_find(uint64_t comm, uint64_t seq, struct ccs_dsx_op *out);

/* NCCL device completion (see ccs_desync_nccl_done). */
void ccs_dsx_collect_nccl_done(uint64_t comm, uint64_t seq_done);

/* NCCL tracked on the device (CCS_DSX_DEVICE), before the rules run: a
 * collective that completed on one member was enqueued by every member and
 * completes on all, so a member blocked with nothing enqueued beyond the
 * highest seq any member saw complete is not blocked (its own events are
 * rate limited and may just not have told it yet).
 * ST: the W statuses of the view (NULL where unknown), our own copies. */
void ccs_dsx_device_align(const struct ccs_dsx_status **st, int32_t w);

/* FN(COMM, 0, ARG): the seq whose records the coordinator asked for on
 * COMM, or 0.  While nonzero (and in a ring still), COMM's published
 * history is the operations around that seq, read back from the rings,
 * rather than the newest (flag PINNED).
 * FN(COMM, 1, ARG): the seq of a probe, or 0: the second checkpoint is then
 * the running hash through that seq (flag PROBED); with CCS_DSX_NARROW_BIT
 * (or records asked for) COMM is published before the others. */
void ccs_dsx_collect_want(uint64_t (*fn)(uint64_t comm, int probe, void *arg), void *arg);

/* Records the passes have copied out of the rings so far (a pass copies at
 * most 512 per ring, whatever the call rate). */
uint64_t ccs_dsx_collect_records_read(void);

/* After fork, in the child: forget everything. */
void ccs_dsx_collect_reset(void);

#endif
