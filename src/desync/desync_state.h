/*
 * desync_state.h - what desync detection's files share (private to
 * src/desync): the detector's one struct, CCS_DS, and the steps each file
 * offers the others.  The files, one job each:
 *
 *   desync.c          the state, and the period: publish this rank's status,
 *                     read the host's, apply the rules, forward to the
 *                     coordinator (the background thread)
 *   desync_verdict.c  what happens to a verdict: the classes' policy
 *                     (CCS_VERDICT_LIST), who reports in full, abort on
 *                     desync, the reporter at the job's priority
 *   desync_host.c     the host's own search (no coordinator) and the
 *                     coordinator's requests posted into shared memory
 *   desync_exit.c     the end of a rank: lingering at exit, the final
 *                     exchange, fork
 *   desync_begin.c    the hand-over from start-up (desync_start.c's plan),
 *                     the coordinator's start and its retries
 *   desync_agree.c    the agreement service (ccs_desync_agree_u64)
 */
#ifndef CCS_DESYNC_STATE_H
#define CCS_DESYNC_STATE_H

#include "attributes.h"
#include "desync_auth.h"
#include "desync_proto.h"
#include "desync_rules.h"
#include "desync_search.h"
#include "desync_shm.h"
#include "desync_tcp.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The detector's states (CCS_DS.state). */
enum { CCS_DSX_DET_OFF = -1, CCS_DSX_DET_IDLE = 0, CCS_DSX_DET_STARTING = 1, CCS_DSX_DET_RUNNING = 2 };

/* What the detector holds, from ccs_dsx_begin to the process's end:
 * one struct, defined in desync.c. */
struct ccs_dsx_ds {
    atomic_int state; /* CCS_DSX_DET_: OFF, IDLE, STARTING, RUNNING */
    int32_t world_size, world_rank;

    /* The host: its identity, its shared segment, this rank's link to the
     * coordinator when it leads the host (CLIENT), the coordinator itself
     * in rank 0 (COORD). */
    char hostkey[CCS_DSX_HOST];
    struct ccs_dsx_shm *shm;
    const struct ccs_dsx_cred *cred; /* start-up's (desync_start.c), for a rank that comes to lead */
    struct ccs_dsx_coord *coord;
    struct ccs_dsx_client *client;
    int tcp_mode;    /* a coordinator sees the whole job */
    int spans_hosts; /* the job's ranks run on more than one host */
    char coord_host_s[256];
    int coord_port_s;
    int leaving; /* this process is exiting: never take the lead */
    /* The tree (docs/desync.md, "The tree"): ranks a host holds, as the
     * coordinator's start-up knew it (its groups' size); the relay's
     * coordinator when the root appointed this host's leader (RELAY), the
     * group it relays, what it told the root, and room for its group's
     * statuses. */
    int per_host_hint;
    struct ccs_dsx_coord *relay;
    uint32_t relay_group;
    struct ccs_dsx_relay_at relay_at;
    const struct ccs_dsx_status **relay_buf;

    /* The period: this rank's status, and per world rank (the other ranks
     * of this host) our copy of its status, the slot's generation of that
     * copy, its heartbeat and when it last changed (ms); nonzero in
     * PRESUMED_DEAD when the heartbeat stopped. */
    struct ccs_dsx_status me;
    struct ccs_dsx_status scratch;
    struct ccs_dsx_status **peer_status;
    uint64_t *peer_gen, *peer_beat, *peer_beat_ms;
    uint8_t *presumed_dead;
    const struct ccs_dsx_status **view;  /* per world rank: the statuses known this period */
    const struct ccs_dsx_status **local; /* the same, packed: this host's ranks */
    struct ccs_dsx_seen *seen, *reported;
    struct ccs_dsx_vcursor vcursor;              /* the next verdict to read from shared memory */
    struct ccs_dsx_search srch[CCS_DSX_NSEARCH]; /* the host's own search, while this rank runs it */
    uint8_t *search_gone;                        /* per world rank: dead, or exited and gone (host_search) */
    uint64_t last_hash, last_pub, last_dbg;      /* own status last published (hash, ms); last debug line (ms) */
    struct ccs_dsx_agree *agree_buf;             /* the host's agreement values, forwarded by its leader */
    size_t agree_cap;
    pthread_mutex_t tick_lock;
    pthread_mutex_t agree_lock;
    pthread_t th;
    pthread_t reporter; /* reports at the job's priority (at_job_priority) */
    uint64_t started_ms;
    void (*_Atomic poll_fn)(uint64_t now_ms); /* ccs_desync_set_poll's */
    _Atomic uint64_t periods; /* periods the thread has run (the exit line: a stalled thread shows) */

    /* Verdicts.  One rank of each host logs a verdict's line, the one
     * claimed in the host's shared segment (desync_claim.h); one rank of
     * the job writes its whole diagnosis: for a verdict of this host's
     * rules that same rank, for one from the coordinator rank 0, where the
     * coordinator runs (every rank still writes its full view to the trace
     * directory).  LOCAL_REPORTER, set every tick: the lowest rank of the
     * host still running as this rank sees it, which it proposes. */
    int32_t local_reporter;
    atomic_int life;          /* enum ccs_dsx_life: alive, finalizing, exited */
    atomic_int report_busy;   /* this process is writing a report */
    atomic_int abort_pending; /* 1: end the job when due (abort_when_due); 2: ending it; 3: the abort
                                 function returned (NCCL's: the job's own calls now fail and it ends) */
    uint64_t abort_comm;
    uint64_t abort_armed_ms; /* monotonic ms of the verdict that armed it */
    uint64_t abort_due_ms;   /* not before (monotonic ms; see on_verdict) */
    uint64_t abort_cap_ms;   /* nor, waiting for this process's report, after */
    /* The communicator of the first verdict this process reported under
     * abort (0: none yet). */
    _Atomic uint64_t ending_comm;

    int invalid_logged, tcp_logged, off_logged, later_logged, hooks_done;
    int claims_full_logged; /* the host's claims full (desync_verdict.c), said once */
    /* The link to the coordinator failing while this rank exits: said once,
     * then counted (EXIT_LINK_MORE, the last reason) and summed up in one
     * line when the rank goes (a leader lingering against a coordinator
     * that refused it said so 78 times in 1.5 s). */
    int exit_link_said;
    unsigned exit_link_more;
    char exit_link_why[256];
    /* The launcher's ranks on this host identity (0: unknown), and whether
     * all of them were seen in its shared memory (or said not to be). */
    int local_size, local_checked;

    /* Rank 0 without MPI, while its coordinator could not listen (the port
     * taken): tried again every COORD_RETRY_MS (ccs_dsx_retry_coordinator). */
    struct {
        int on;
        char host[256];
        int port;
        int32_t wsize;
        const struct ccs_dsx_cred *cred;
        uint64_t since_ms, next_ms, said_ms;
        unsigned tries;
    } cretry;
};

extern CCS_HIDDEN struct ccs_dsx_ds ccs_ds;

/* desync.c: one period (under TICK_LOCK); the statuses of this host's ranks
 * into VIEW and LOCAL, returning how many; whether local rank R (its status
 * in view) is gone; the thresholds the rules apply; the background thread's
 * start (0, or -1). */
CCS_HIDDEN void ccs_dsx_tick(void);
CCS_HIDDEN size_t ccs_dsx_read_local_statuses(uint64_t now);
CCS_HIDDEN int ccs_dsx_peer_gone(int32_t r, uint64_t now);
CCS_HIDDEN struct ccs_dsx_thresholds ccs_dsx_thresholds_now(void);
CCS_HIDDEN int ccs_dsx_period_start(void);

/* desync_verdict.c: a verdict of this host's rules (a struct ccs_dsx_sink's
 * verdict; ARG unused), one read from shared memory (the coordinator's, or
 * a local rank's posted there); the abort when due (abort on desync); the
 * reporter thread's start (once per process) and its reset in a forked
 * child. */
CCS_HIDDEN void ccs_dsx_verdict_local(const struct ccs_dsx_verdict *v, void *arg);
CCS_HIDDEN void ccs_dsx_verdict_posted(const struct ccs_dsx_verdict *v);
CCS_HIDDEN void ccs_dsx_abort_when_due(void);
/* desync_verdict.c: verdicts this rank claimed for another local rank,
 * posted for it when it has not judged them in time (from the period). */
CCS_HIDDEN void ccs_dsx_verdict_held(uint64_t now);
CCS_HIDDEN void ccs_dsx_reporter_start(void);
CCS_HIDDEN void ccs_dsx_reporter_atfork(void);

/* desync_host.c: a pass of the host's own search (no coordinator); a
 * client to the coordinator at HOST:PORT whose callbacks post what it
 * receives into the host's shared memory (NULL when out of memory); the
 * seq the coordinator or the search asks this rank's records around
 * (desync_collect.c's hook). */
CCS_HIDDEN void ccs_dsx_host_search(uint64_t now);
CCS_HIDDEN struct ccs_dsx_client *ccs_dsx_host_client(const char *host, int port);
/* desync_host.c: this leader relays: a turn of its relay's coordinator,
 * the statuses of its group's fold into RELAY_BUF; returns how many. */
CCS_HIDDEN size_t ccs_dsx_relay_pump(size_t nlocal);
CCS_HIDDEN uint64_t ccs_dsx_wanted_seq(uint64_t comm, int probe, void *arg);

/* desync_exit.c: its hooks registered with the core (once). */
CCS_HIDDEN void ccs_dsx_exit_hooks(void);
/* desync_exit.c: the end of a pass over the ranks' statuses, which the
 * feature's query hook answers as "desync.last_pass_ms". */
CCS_HIDDEN void ccs_dsx_pass_note(void);

/* desync_begin.c: the coordinator that could not listen, tried again when
 * due (from the period). */
CCS_HIDDEN void ccs_dsx_coord_retry(uint64_t now);

/* desync_agree.c: the agreement values this host's ranks put into shared
 * memory, gathered for the leader to forward (into CCS_DS.agree_buf);
 * returns how many. */
CCS_HIDDEN size_t ccs_dsx_agree_gather(size_t nlocal);

#endif
