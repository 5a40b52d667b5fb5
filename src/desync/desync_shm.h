/*
 * desync_shm.h - the shared-memory side channel between the ranks of one
 * host: one segment per job, host and user (mode 0600), one slot per world
 * rank, each written by its rank only under a sequence lock.
 */
#ifndef CCS_DESYNC_SHM_H
#define CCS_DESYNC_SHM_H

#include "desync_proto.h"
#include <stddef.h>
#include <stdint.h>

struct ccs_dsx_shm;

/* The path of segment KEY for WSIZE ranks, into OUT. */
void ccs_dsx_shm_path(const char *key, int32_t wsize, char *out, size_t n);
/* 1 when segment KEY's name is there but not this user's private segment
 * (another user created it first). */
int ccs_dsx_shm_taken(const char *key, int32_t wsize);

/* Opens (creating if first) the segment KEY for WSIZE ranks and claims slot
 * MYRANK.  LOCAL_SIZE > 0: how many ranks of the job run on this host; the
 * last of them to attach removes the name (the mapping stays), so nothing is
 * left in /dev/shm even if ranks crash.  0 (unknown: CCSHIM_DESYNC_HOST):
 * the last rank out removes it; a segment of this user that no process
 * holds any more (its job killed) is removed by the next one opened on the
 * host.  NULL with WHY on failure. */
struct ccs_dsx_shm *ccs_dsx_shm_open(const char *key, int32_t wsize, int32_t myrank, int local_size, char *why,
                                     size_t whylen);

/* Publishes this rank's status (own slot). */
void ccs_dsx_shm_publish(struct ccs_dsx_shm *s, const struct ccs_dsx_status *st);

/* Copies rank R's status (its entries in use): 1 when a consistent, valid
 * status was read, 0 when the slot is empty or kept changing, -1 when it is
 * invalid (WHY).  GEN (may be NULL): the version of the caller's copy,
 * updated; 2 (nothing copied) when the slot has not changed since. */
int ccs_dsx_shm_read(struct ccs_dsx_shm *s, int32_t r, struct ccs_dsx_status *out, uint64_t *gen, char *why,
                     size_t whylen);

/* 1 when this process is the host's leader (the first to attach): it talks
 * to the coordinator over TCP for the whole host. */
int ccs_dsx_shm_is_leader(struct ccs_dsx_shm *s);

/* The world rank that leads the host, or -1 when none does.  The leader is
 * named by its rank, not its pid: ranks in PID namespaces of their own
 * (one container per rank) may all have the same pid. */
int32_t ccs_dsx_shm_leader(struct ccs_dsx_shm *s);
/* Becomes the leader in place of FROM (the rank ccs_dsx_shm_leader gave,
 * which the caller found gone, or -1 for none): 1 when this process leads
 * now.  A leader that exits resigns first. */
int ccs_dsx_shm_claim_leader(struct ccs_dsx_shm *s, int32_t from);
void ccs_dsx_shm_resign(struct ccs_dsx_shm *s);

/* Verdicts from the coordinator, posted by the leader for every local rank
 * (at a handover, two leaders at once are safe). */
void ccs_dsx_shm_post_verdict(struct ccs_dsx_shm *s, const struct ccs_dsx_verdict *v);
/* A reader's place in the verdicts: zeroed to start from the first. */
struct ccs_dsx_vcursor {
    uint64_t next;   /* the index of the next verdict to read */
    uint32_t stalls; /* calls that found it claimed but not yet written */
};
/* Calls (periods) a claimed verdict may stay unwritten before a reader
 * passes it by: its writer died in the middle. */
#define CCS_DSX_VERDICT_STALLS 50
/* The next whole, valid verdict at or after C into OUT: 1 and advances C,
 * or 0 when there is none yet.  Verdicts come in the order they were
 * claimed; one lapped (more than the segment keeps were posted since) or
 * invalid is passed by. */
int ccs_dsx_shm_next_verdict(struct ccs_dsx_shm *s, struct ccs_dsx_vcursor *c, struct ccs_dsx_verdict *out);

/* The rank of this host that logs verdict V: the one claimed first, by
 * whichever local rank saw V first, or PROPOSED, claimed now (*WON 1);
 * *SLOT (may be NULL) the claim's place.  -1 when the host's table of
 * claims is full (desync_claim.h).  The owner marks a claim seen when it
 * has the verdict; its maker asks whether it was. */
int32_t ccs_dsx_shm_claim_verdict(struct ccs_dsx_shm *s, const struct ccs_dsx_verdict *v, int32_t proposed,
                                  int *won, unsigned *slot);
void ccs_dsx_shm_claim_seen(struct ccs_dsx_shm *s, unsigned slot);
int ccs_dsx_shm_claim_was_seen(struct ccs_dsx_shm *s, unsigned slot);

/* Agreement values: a rank writes its own (CCS_DSX_SHM_NAGREE per rank);
 * anyone reads them.  Results folded by the coordinator are posted by the
 * leader, and on one host by the first member to see every value. */
void ccs_dsx_shm_agree_put(struct ccs_dsx_shm *s, const struct ccs_dsx_agree *a);
/* Agreement values kept per rank: one per agreement (communicator and key),
 * the oldest giving way to a new one. */
#define CCS_DSX_SHM_NAGREE 16
/* Copies rank R's agreement values (CCS_DSX_SHM_NAGREE places, an empty
 * one with comm 0) into OUT; returns how many places (0: none yet). */
int ccs_dsx_shm_agree_get(struct ccs_dsx_shm *s, int32_t r, struct ccs_dsx_agree *out);
/* Posts a completed agreement for the host's slower members (any process
 * of the host, several at once). */
void ccs_dsx_shm_post_agreed(struct ccs_dsx_shm *s, const struct ccs_dsx_agree *a);
/* The folded result for (COMM, KEY) if posted: 1, else 0. */
int ccs_dsx_shm_find_agreed(struct ccs_dsx_shm *s, uint64_t comm, uint64_t key, struct ccs_dsx_agree *out);

/* Records asked for: every local rank publishes its kept operations of
 * COMM around SEQ for the next 2 s (up to 16 requests and probes; a newer
 * one replaces the oldest); SEQ | CCS_DSX_PROBE_BIT asks for the hash
 * through SEQ only, for 1 s (a newer probe of COMM replaces it).
 * ccs_dsx_shm_wanted gives the earliest seq whose records are wanted for
 * COMM (PROBE 0) or the latest probe (PROBE 1), without CCS_DSX_PROBE_BIT
 * (with CCS_DSX_NARROW_BIT where the probe has it), or 0. */
void ccs_dsx_shm_want(struct ccs_dsx_shm *s, uint64_t comm, uint64_t seq, uint64_t now_ms);
uint64_t ccs_dsx_shm_wanted(struct ccs_dsx_shm *s, uint64_t comm, int probe, uint64_t now_ms);

/* The coordinator said BYE (every rank finished): no rank of this host
 * takes the lead or connects any more. */
void ccs_dsx_shm_set_bye(struct ccs_dsx_shm *s);
int ccs_dsx_shm_bye(struct ccs_dsx_shm *s);

/* The host's own search for the seq where a communicator's members differ
 * (no coordinator: desync_host.c, ccs_dsx_host_search): the rank running it stores the
 * time of each pass (monotonic ms) and whether no search is under way
 * then; ccs_dsx_shm_search gives the last (*PASS_MS) and 1 when settled.
 * An exiting rank lingers until a pass after its exit is settled. */
void ccs_dsx_shm_set_search(struct ccs_dsx_shm *s, uint64_t pass_ms, int settled);
int ccs_dsx_shm_search(struct ccs_dsx_shm *s, uint64_t *pass_ms);

/* This process's PID namespace (st_dev and st_ino of /proc/self/ns/pid),
 * read once, at the first call (ccs_dsx_shm_open makes it, at start): both
 * 0 when it cannot be read (no /proc). */
void ccs_dsx_pidns_self(uint64_t *dev, uint64_t *ino);

/* Whether the process that published ST (its pid and PID namespace) is
 * there: 1 yes, 0 gone, -1 unknown: it runs in another PID namespace, or
 * one of the two is not known, where its pid means nothing here (one
 * container per rank; the caller then goes by the status's heartbeat). */
int ccs_dsx_status_pid_alive(const struct ccs_dsx_status *st);

/* Processes that attached to the segment so far. */
int32_t ccs_dsx_shm_attached(struct ccs_dsx_shm *s);

/* Ranks whose slot was ever claimed (for the leader's scan). */
int32_t ccs_dsx_shm_wsize(struct ccs_dsx_shm *s);

/* This rank is leaving (process exit): removes the name when it was the
 * last attached rank; the mapping stays usable.  Idempotent. */
void ccs_dsx_shm_release(struct ccs_dsx_shm *s);

/* Releases and unmaps. */
void ccs_dsx_shm_close(struct ccs_dsx_shm *s);

#endif
