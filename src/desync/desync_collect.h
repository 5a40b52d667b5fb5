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
