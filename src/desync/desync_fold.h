/*
 * desync_fold.h - the coordinator's agreements (desync_fold.c): every
 * member's value of one (communicator, key) folded into max and min, the
 * result once every member has given its own.  A table a peer can grow, so
 * bounded, and looked up by hash: one AGREE frame of 87,380 new keys froze
 * the coordinator for 8 s when it was a list searched per value.
 */
#ifndef CCS_DESYNC_FOLD_H
#define CCS_DESYNC_FOLD_H

#include "desync_proto.h"
#include <stddef.h>
#include <stdint.h>

/* Agreements not yet complete, at most; a new key beyond is refused until
 * older ones complete or go stale (a member that never gives its value:
 * its ranks time out and fail open, docs/desync.md). */
#define CCS_DSX_FOLDS_PENDING 4096
/* Pending agreements one peer (a host's leader, by its rank) may open,
 * at most: a peer that floods new keys fills its own share, not the
 * others'. */
#define CCS_DSX_FOLDS_PER_PEER 512
/* A pending agreement untouched this long may give its place. */
#define CCS_DSX_FOLD_STALE_MS 30000
/* Values one AGREE frame may carry: a host's ranks' agreements of a
 * period, with room to spare; a larger frame is a misbehaving peer. */
#define CCS_DSX_AGREE_PER_FRAME 1024

struct ccs_dsx_folds;

struct ccs_dsx_folds *ccs_dsx_folds_new(void);
void ccs_dsx_folds_free(struct ccs_dsx_folds *t);

/* Folds member value A (a world of WSIZE ranks), sent by PEER (the rank
 * its leader authenticated as, 0..WSIZE-1), at NOW (ms).  Returns 1 when A
 * completed its agreement (the result in *RES), 0 when it was taken (or
 * was out of range, or a repeat), -1 when it is refused: it would open a
 * new agreement beyond the peer's share or the table's bound. */
int ccs_dsx_folds_add(struct ccs_dsx_folds *t, const struct ccs_dsx_agree *a, int32_t wsize, int32_t peer,
                      uint64_t now, struct ccs_dsx_agree *res);

/* Agreements held (pending and finished ones kept), pending ones, and the
 * bytes held. */
size_t ccs_dsx_folds_count(const struct ccs_dsx_folds *t);
size_t ccs_dsx_folds_pending(const struct ccs_dsx_folds *t);
size_t ccs_dsx_folds_bytes(const struct ccs_dsx_folds *t);

#endif
