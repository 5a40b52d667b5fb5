/*
 * desync_start.h - the hand-over from start-up (desync_start.c) to the
 * running detector (desync_begin.c, then desync.c).
 *
 * Start-up decides how this rank takes part (who shares its host, whether
 * the job spans hosts, the coordinator's address, the credentials and the
 * shared segment's name) and hands that over as a plan; desync_begin.c
 * opens the segment, connects the host's leader and starts the background
 * thread.  The functions below are desync_begin.c's, for start-up only:
 * the arrow goes from desync_start.c to the running detector, never back.
 */
#ifndef CCS_DESYNC_START_H
#define CCS_DESYNC_START_H

#include "attributes.h"
#include "desync_proto.h"
#include "desync_tcp.h"
#include <stddef.h>
#include <stdint.h>

/* What start-up decided. */
struct ccs_dsx_plan {
    char hostkey[CCS_DSX_HOST];      /* this host's identity (CCSHIM_DESYNC_HOST, else the host name) */
    char shm_key[600];               /* the shared segment's name: job, host, secret or tag, first communicator */
    int local_size;                  /* ranks of the job on this host; <= 0: unknown */
    int spans_hosts;                 /* the job's ranks run on more than one host */
    const char *coord_host;          /* the coordinator's address; NULL or empty: no TCP */
    int coord_port;                  /* <= 0: no TCP */
    const struct ccs_dsx_cred *cred; /* how the side channel authenticates; lives as long as the process */
};

/* Claims the start-up of detection for this call: 1 (the world rank and
 * size are taken), 0 when it is running already, -1 when it is off, the
 * world is not known yet (maybe later), or another call is starting it. */
CCS_HIDDEN int ccs_dsx_claim_start(void);

/* Starts the coordinator for WSIZE ranks on BIND_HOST:PORT (PORT 0: any)
 * with credentials CC.  Returns the port it listens on, or -1 with WHY. */
CCS_HIDDEN int ccs_dsx_start_coordinator(const char *bind_host, int port, int32_t wsize,
                                         const struct ccs_dsx_cred *cc, char *why, size_t n);
/* The tree's groups in ranks for a job of WSIZE ranks, PER_HOST a host
 * (0: unknown), as CCSHIM_DESYNC_TREE and _RELAY_RANKS say: 0 (no tree)
 * up to CCS_DSX_TREE_FROM - 1 ranks under auto; else RELAY_RANKS, or
 * about sqrt(WSIZE x PER_HOST). */
#define CCS_DSX_TREE_FROM 4097
CCS_HIDDEN uint32_t ccs_dsx_tree_ranks(int32_t wsize, int per_host);
/* The coordinator could not listen (WHY): says so (a warning) and tries
 * again every few seconds from the detection thread until it listens,
 * rather than leave detection across hosts off.  CC must outlive it. */
CCS_HIDDEN void ccs_dsx_retry_coordinator(const char *bind_host, int port, int32_t wsize,
                                          const struct ccs_dsx_cred *cc, const char *why);

/* After a successful claim: opens the shared segment, connects the host's
 * leader to the coordinator and starts the background thread as PLAN says.
 * Returns 0, or -1 after saying once why detection is off. */
CCS_HIDDEN int ccs_dsx_begin(const struct ccs_dsx_plan *plan);

/* Says once, at warning level, that detection is off and why (the job
 * runs on). */
CCS_HIDDEN void ccs_dsx_say_off(const char *why);

#endif
