/*
 * desync_rules.h - the detection rules (docs/desync.md, "What is detected"):
 * given what every rank last published, which verdicts hold.  Pure logic
 * (no I/O, no clock), so the unit tests and the scale simulation drive the
 * same code the ranks and the coordinator run.
 */
#ifndef CCS_DESYNC_RULES_H
#define CCS_DESYNC_RULES_H

#include "desync_proto.h"

/* What is known of the world at one instant. */
struct ccs_dsx_view {
    int32_t wsize;
    const struct ccs_dsx_status *const *st; /* [wsize]; NULL: nothing known of that rank */
    const uint8_t *dead;                    /* [wsize] or NULL; nonzero: process gone without exiting */
    uint64_t now_ms;                        /* for the suspicion timer only */
    /* Members of a communicator not in view but known elsewhere (the
     * tree's folds, docs/desync.md "The tree"; may be NULL): for COMM of
     * SIZE members, SEEN of them in view, the lowest seq every other one
     * is blocked at (each issued it), or 0 when not known. */
    uint64_t (*unseen)(uint64_t comm, int32_t size, size_t seen, void *arg);
    void *unseen_arg;
};

struct ccs_dsx_thresholds {
    uint32_t block_ms;         /* blocked this long with a blocked culprit: DESYNC */
    uint32_t straggler_ms;     /* blocked this long waiting for a running rank: STRAGGLER */
    uint32_t suspect_ms;       /* hashes differ without records this long: MISMATCH without detail */
    uint32_t heartbeat_ms;     /* (coordinator) no status from a live rank this long: dead */
    uint32_t mismatch_wait_ms; /* a MISMATCH waits this long for every member to reach its seq */
    uint32_t record_wait_ms;   /* ... and this long (if longer) for every member's record of it */
    int partial;               /* the view is one host's and a coordinator sees all: leave
                                  communicators with members elsewhere to it */
};

/* Verdicts already reported, so each is emitted once (and MISMATCH once per
 * communicator).  Opaque; grows as needed. */
struct ccs_dsx_seen;
struct ccs_dsx_seen *ccs_dsx_seen_new(void);
void ccs_dsx_seen_free(struct ccs_dsx_seen *s);
/* 1 when (CLS, COMM, SEQ) was seen (nothing recorded). */
int ccs_dsx_seen_has(const struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq);
/* 1 when (CLS, COMM, SEQ) was not seen before (and records it), else 0. */
int ccs_dsx_seen_add(struct ccs_dsx_seen *s, uint32_t cls, uint64_t comm, uint64_t seq);

struct ccs_dsx_sink {
    void (*verdict)(const struct ccs_dsx_verdict *v, void *arg);
    void (*detail)(uint64_t comm, void *arg); /* hashes differ: send me the records of COMM (may be NULL) */
    void *arg;
    /* Records differ at (COMM, SEQ) but some members' records of SEQ are
     * not in view: every member should publish its kept records around SEQ
     * (may be NULL). */
    void (*want)(uint64_t comm, uint64_t seq, void *arg);
};

/* Applies every rule to VIEW; emits each new verdict to SINK.  Returns the
 * number emitted, or -1 when out of memory. */
int ccs_dsx_rules_run(const struct ccs_dsx_view *view, const struct ccs_dsx_thresholds *t,
                      struct ccs_dsx_seen *seen, const struct ccs_dsx_sink *sink);

/* "allreduce(count=4, float32, sum)" */
void ccs_dsx_op_str(const struct ccs_dsx_op *op, char *buf, size_t n);

#endif
