/*
 * desync_agg.h - the tree's fold (docs/desync.md, "The tree"): what a
 * relay sends the root for its group of hosts instead of every rank's
 * status, its wire form, and the root's comparison of the folds.
 *
 * Per communicator that spans more than the group: how many of the
 * group's ranks publish it, the range of their completed and issued seqs,
 * how many are blocked in the group's most common blocked operation and
 * for how long, and the running hashes grouped per seq (how many members
 * hold each).  A rank that differs from the fold (another hash at a kept
 * seq, blocked elsewhere or in another operation, not blocked while the
 * group has waited long, at a step boundary, not alive...) is *listed*: its
 * status travels whole beside the fold, for the existing rules.  A healthy
 * group lists no one, so its frame does not grow with its ranks.
 *
 * Pure logic (no I/O, no clock, no allocation in the fold): the unit tests,
 * the fuzz target and the simulation drive the code a relay and the root
 * would run.  Not yet called by a job: the relay role and the root's
 * handling of AGG frames are not built (the tree is off).
 */
#ifndef CCS_DESYNC_AGG_H
#define CCS_DESYNC_AGG_H

#include "desync_proto.h"
#include <stddef.h>
#include <stdint.h>

#define CCS_DSX_AGG_MAXCOMM 64      /* communicators folded per frame; a rank with others is listed */
#define CCS_DSX_AGG_HASHES 4        /* (seq, hash) groups kept per communicator */
#define CCS_DSX_AGG_CAND 16         /* distinct (seq, hash) pairs counted per communicator while folding */
#define CCS_DSX_AGG_BCAND 8         /* distinct blocked operations counted per communicator while folding */
#define CCS_DSX_AGG_MAX_RELAYS 1024 /* folds the root keeps (131,072 ranks: 128 relays) */

/* How many members hold HASH at SEQ. */
struct ccs_dsx_agg_hash {
    uint64_t seq, hash;
    uint32_t n, pad;
};

/* One communicator's fold (on the wire as is: 192 bytes). */
struct ccs_dsx_agg_comm {
    uint64_t id;
    int32_t size;     /* the communicator's size */
    uint32_t members; /* ranks of the group that publish it, listed ones included */
    uint64_t done_min, done_max, issued_min, issued_max;
    /* NBLOCKED members blocked at BLOCK_SEQ in the operation of fingerprint
     * BLOCK_FP (the group's most common), the longest for BLOCK_MS, the
     * newest for BLOCK_MS_MIN; all 0 when NBLOCKED is 0. */
    uint64_t block_seq, block_fp;
    uint32_t nblocked, block_ms, block_ms_min;
    uint32_t nhash;  /* valid entries of hash, in increasing seq order */
    uint32_t listed; /* members of it listed */
    uint32_t odd;    /* ... of which because they differ from the fold (not for being asked about) */
    /* Members not listed that are blocked in the fold's operation: when
     * it is every member not listed, the root knows each of them issued
     * BLOCK_SEQ (its blocked rule counts them without their statuses). */
    uint32_t rest_blocked;
    uint32_t pad;
    struct ccs_dsx_agg_hash hash[CCS_DSX_AGG_HASHES];
};

/* The head of an AGG frame's payload (40 bytes); then NCOMM folds in
 * increasing id order, then NLISTED statuses as a STATUS frame encodes
 * them. */
struct ccs_dsx_agg_head {
    uint32_t group;  /* the group's index (docs/desync.md: hosts [g G, (g + 1) G)) */
    uint32_t nhosts; /* hosts whose leaders the relay serves now */
    uint32_t nranks; /* statuses folded */
    uint32_t ncomm, nlisted;
    uint32_t pad;
    uint64_t frame; /* the relay's frames so far */
    uint64_t pad2;
};

/* A fold and the relay's working tables (about 53 KB: make it once). */
struct ccs_dsx_agg {
    struct ccs_dsx_agg_head head;
    struct ccs_dsx_agg_comm comm[CCS_DSX_AGG_MAXCOMM];
    /* Working tables of the fold, per entry of comm. */
    struct {
        struct ccs_dsx_agg_hash h[CCS_DSX_AGG_CAND];
        uint32_t nh;
        struct {
            uint64_t seq, fp;
            uint32_t n, ms;
        } b[CCS_DSX_AGG_BCAND];
        uint32_t nb;
    } w[CCS_DSX_AGG_MAXCOMM];
};

/* Folds the N statuses ST of a group (NULL entries: nothing known) into
 * A: communicators with members outside the group (fewer members here than
 * its size) are folded; indexes into ST of the ranks listed go to LISTED
 * (room for N), their count to A->head.nlisted.  LIST_MS: a group blocked
 * this long in a communicator lists its members not blocked there (the
 * root's blocked rule needs them; half the block threshold).  No
 * allocation. */
void ccs_dsx_agg_fold(const struct ccs_dsx_status *const *st, size_t n, uint32_t list_ms, struct ccs_dsx_agg *a,
                      uint32_t *listed);

/* Narrowing: for each folded communicator the root asked about (WANT(id,
 * ARG) nonzero: a DETAIL), lists too (appends to LISTED, A->head.nlisted
 * counting) one reference member beside the odd ones: its records against
 * theirs (the MISMATCH rule's), its wait beside theirs (the blocked
 * rule's, the other waiting members counted by REST_BLOCKED).  MARK[r] (N
 * bytes) says why rank r is listed: 0 not, CCS_DSX_AGG_ODD or _REF. */
#define CCS_DSX_AGG_ODD 1
#define CCS_DSX_AGG_REF 2
void ccs_dsx_agg_list_asked(struct ccs_dsx_agg *a, const struct ccs_dsx_status *const *st, size_t n,
                            uint32_t *listed, uint8_t *mark, int (*want)(uint64_t, void *), void *arg);

/* Bytes of the encoded AGG payload of A with the statuses ST[LISTED[i]]. */
size_t ccs_dsx_agg_encoded_size(const struct ccs_dsx_agg *a, const struct ccs_dsx_status *const *st,
                                const uint32_t *listed);

/* Encodes A and its listed statuses into BUF (CAP bytes), each status's
 * history as ccs_dsx_encode_status keeps it with KEEP_HIST and ARG (NULL:
 * all).  Returns the bytes written, or 0 when CAP is too small. */
size_t ccs_dsx_agg_encode(const struct ccs_dsx_agg *a, const struct ccs_dsx_status *const *st,
                          const uint32_t *listed, int (*keep_hist)(uint64_t, void *), void *arg, unsigned char *buf,
                          size_t cap);

/* Decodes the head and the folds of an AGG payload (BUF, LEN bytes) into
 * A, checked as below; *OFF: where its listed statuses start.  0, or -1
 * with WHY. */
int ccs_dsx_agg_decode_folds(const unsigned char *buf, size_t len, int32_t wsize, struct ccs_dsx_agg *a,
                             size_t *off, char *why, size_t whylen);

/* Decodes an AGG payload (BUF, LEN bytes, all of it) of a job of WSIZE
 * ranks into A (its head and folds) and up to CAP statuses into LISTED,
 * checking every field (the folds' counts and ranges against each other,
 * ids in increasing order, the statuses as ccs_dsx_decode_status does).
 * 0, or -1 with WHY. */
int ccs_dsx_agg_decode(const unsigned char *buf, size_t len, int32_t wsize, struct ccs_dsx_agg *a,
                       struct ccs_dsx_status *listed, size_t cap, char *why, size_t whylen);

/* The root's look at one communicator over the folds of every group. */
struct ccs_dsx_agg_cmp {
    uint64_t members; /* members accounted for: the folds' (listed included) */
    int32_t size;     /* the largest size a fold gives it */
    /* Hashes: the lowest seq two folds hold with different hashes (0: they
     * agree wherever they overlap), the hash most members hold there and
     * how many, and the folds whose hash there is another (indexes into
     * the folds, the first CCS_DSX_AGG_DIFFER). */
    uint64_t differ_seq, majority_hash;
    uint64_t majority_n;
    uint32_t ndiffer;
    uint32_t differ[8];
    /* Blocked: every member accounted for, and every one not listed is
     * blocked in the same operation (BLOCK_SEQ) for at least the given
     * threshold: the existing blocked rule should look at the listed ranks
     * and a representative per group. */
    int blocked_all;
    uint64_t block_seq;
    uint64_t listed;
};
#define CCS_DSX_AGG_DIFFER 8

/* Compares communicator COMM over the NF folds F.  BLOCK_MS: the block
 * threshold.  Fills OUT; 1 when some fold holds COMM, else 0. */
int ccs_dsx_agg_compare(const struct ccs_dsx_agg *const *f, size_t nf, uint64_t comm, uint32_t block_ms,
                        struct ccs_dsx_agg_cmp *out);

/* The members of COMM (SIZE) not listed, over the NF folds F, when each
 * of them is known blocked in its group's operation and they number
 * UNSEEN, and the folds with DIRECT members in the root's view that no
 * fold holds (leaders reporting to the root: not yet sent to their relay,
 * or back from one) account for
 * every member: the lowest seq they are blocked at (each has issued it);
 * 0 when not so (a group missing, a member not listed that is not blocked
 * so, or another count: a listed status out of the root's view). */
uint64_t ccs_dsx_agg_unseen(const struct ccs_dsx_agg *const *f, size_t nf, uint64_t comm, int32_t size,
                            uint64_t unseen, uint64_t direct);

#endif
