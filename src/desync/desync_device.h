/*
 * desync_device.h - NCCL completion on the device, for desync
 * (desync_device.c): reported by the completion poller, read by the
 * collector, and aligned across the ranks of a view before the rules run.
 */
#ifndef CCS_DESYNC_DEVICE_H
#define CCS_DESYNC_DEVICE_H

#include "desync_proto.h"
#include <stdint.h>

/* NCCL device completion: work on COMM through SEQ_DONE completed (see
 * ccs_desync_nccl_done). */
void ccs_dsx_collect_nccl_done(uint64_t comm, uint64_t seq_done);

/* NCCL tracked on the device (CCS_DSX_DEVICE), before the rules run: a
 * collective that completed on one member was enqueued by every member and
 * completes on all, so a member blocked with nothing enqueued beyond the
 * highest seq any member saw complete is not blocked (its own events are
 * rate limited and may just not have told it yet).
 * ST: the W statuses of the view (NULL where unknown), our own copies. */
void ccs_dsx_device_align(const struct ccs_dsx_status **st, int32_t w);

/* 1 with the highest seq the device completed on COMM in *DONE, once it
 * reported any; else 0 (not an NCCL communicator, or none completed yet). */
int ccs_dsx_device_done(uint64_t comm, uint64_t *done);

#endif
