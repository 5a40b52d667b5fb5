/*
 * desync_coord.h - the coordinator's state, shared by its files (private):
 * desync_coord.c (statuses, evaluation, the search, the thread),
 * desync_coord_net.c (listening, admission, buffers, dropping a leader)
 * and desync_rule_unreachable.c (hosts cut off).
 */
#ifndef CCS_DESYNC_COORD_H
#define CCS_DESYNC_COORD_H

#include "desync_agg.h"
#include "desync_conn.h"
#include "desync_fold.h"
#include "desync_search.h"
#include "desync_tcp.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_UNAUTH 32       /* unknown peers' connections awaiting the handshake */
#define MAX_TICKETED 64     /* members' connections (a valid ticket) awaiting the rest of it */
#define SILENT_MS 100       /* an unknown peer without a ticket this long is evicted when others wait */
#define ACCEPT_PAUSE_MS 250 /* no descriptors left: accept again after */
#define REFUSED_LOG_MS 5000 /* refused peers: one line per period */
#define REFUSED_KINDS 4     /* reasons a summary line names one by one */

struct ccs_dsx_coord {
    int lfd;
    int epfd;         /* the listening socket and every connection (desync_coord_net.c) */
    int lfd_armed;    /* the listening socket is watched (there is room for a peer) */
    size_t slot_hint; /* where conn_slot looks first */
    int32_t wsize;
    struct ccs_dsx_key key; /* shared-secret mode */
    unsigned char job[CCS_DSX_JOBTAG];
    int kx; /* key exchange: per-rank keys from PEERS */
    unsigned char pk[CCS_DSX_PKBYTES], sk[CCS_DSX_PKBYTES];
    unsigned char *peers;      /* [wsize][32] every rank's public key */
    struct ccs_dsx_key *rkeys; /* [wsize] derived when a rank first shows up */
    uint8_t *rkey_ok;
    int nunauth;               /* unknown peers' connections awaiting the handshake */
    int nprio;                 /* members' connections (valid ticket) awaiting the rest of it */
    unsigned refused_noticket; /* refused since the last line, without a valid ticket */
    /* Refused since the last line, per reason (with or without a member's
     * ticket, and why), the last peer of each; beyond REFUSED_KINDS
     * reasons, counted in REFUSED_OTHER. */
    struct {
        unsigned n;
        int ticketed;
        char why[160], peer[64];
    } refused_kind[REFUSED_KINDS];
    unsigned refused_other;
    uint64_t accept_after;     /* ms: accept(2) paused until (EMFILE) */
    uint64_t refused_log_ms;   /* last line about refused peers */
    unsigned refused_unlogged; /* refused since */
    struct ccs_dsx_thresholds t;
    int period_ms;
    pthread_t th;
    atomic_int stop;
    struct ccs_dsx_conn *cl;
    int *owner; /* client index that reported each rank, -1 */
    size_t ncl, capcl;
    struct ccs_dsx_status **st;
    size_t *stsize; /* bytes allocated for st[r] */
    const struct ccs_dsx_status **view;
    uint8_t *dead;
    uint64_t *beat, *beat_ms;
    /* Per rank: ms since when its host's connection is lost (closed, reset,
     * a frame that failed its seal) or its status stalled past the
     * heartbeat; 0 while reachable.  Unreachable is not dead: its status
     * and records are kept for when its leader reconnects, and the rules
     * count it as computing meanwhile. */
    uint64_t *unreach_ms;
    /* Per rank, while unreachable: 1 when its host fell silent (a stalled
     * link, a stopped process: it may come back), 0 when its connection
     * closed (reset, refused, its process killed). */
    uint8_t *unreach_silent;
    /* The last verdicts broadcast, sent again to a leader that (re)connects
     * (its ranks ignore those they have): a verdict given while a host was
     * cut off still reaches it. */
    struct ccs_dsx_verdict *recent;
    unsigned nrecent;
    uint64_t dropped_log_ms; /* last warning about a dropped leader */
    unsigned dropped_unlogged;
    struct ccs_dsx_seen *seen;
    struct ccs_dsx_folds *folds;          /* agreements (desync_fold.c) */
    uint64_t folds_refused, folds_log_ms; /* new agreements refused since the last line about them */
    uint64_t detail_ms[16], detail_id[16];
    uint64_t want_ms[16], want_id[16], want_seq[16];
    struct ccs_dsx_search srch[CCS_DSX_NSEARCH]; /* desync_search.c */
    uint64_t probe_next;
    pthread_mutex_t lock; /* stats */
    struct ccs_dsx_coord_stats stats;
    struct ccs_dsx_status *scratch;
    uint64_t closed_in, closed_out; /* bytes of connections closed */
    atomic_int finishing;           /* the process exits: BYE once every rank finished */
    atomic_int finished;            /* 1: all finished, 2: timed out; BYE sent */
    uint64_t finish_by;             /* (coordinator thread) deadline of the final exchange */
    uint64_t all_finished_ms;       /* (coordinator thread) when every rank was first seen finished */
    uint64_t pass_ms;               /* (coordinator thread) the search's last pass */
    /* The tree (docs/desync.md, "The tree"; only the simulation's relays
     * send AGG frames so far): per connection its relay's last fold (NULL:
     * a host's leader), per rank the frame of the relay that listed it last
     * (a rank its relay no longer lists is out of view), and the
     * communicators a MISMATCH named (their hashes are not narrowed to
     * again). */
    struct ccs_dsx_agg **cfold;
    size_t capfold, nfold; /* nfold: folds held (at most CCS_DSX_AGG_MAX_RELAYS) */
    uint64_t *aggframe;
    uint64_t judged[16];
    unsigned njudged;
    /* The tree in a job (desync_tree_root.c): ranks a group holds (0: no
     * tree; set by ccs_dsx_coord_tree from another thread), each group's
     * relay, and per rank whether its status here is current (AWAY: its
     * host reports through a relay that does not list it, or moved there). */
    _Atomic uint32_t relay_ranks;
    uint32_t tree_ranks; /* (coordinator thread) relay_ranks as the groups were made */
    struct ccs_dsx_tree_group *groups;
    size_t ngroups;
    uint8_t *away;
    const struct ccs_dsx_status **search_st; /* the search's statuses (not the AWAY ones) */
    /* Relay mode (desync_tree_relay.c): a relay's coordinator, pumped by
     * its host leader's thread (no thread of its own): its group's leaders
     * authenticate with RKEY, its verdicts and their agreement values go
     * up through HOOKS. */
    const struct ccs_dsx_relay_hooks *hooks;
    void *hooks_arg;
    struct ccs_dsx_key rkey;
    int threaded;
    uint64_t next_eval;
};

/* A group of the tree at the root: the connection of its relay (-1: none)
 * and of the leader told to become it (-1), the relay's registration
 * (GEN, counted up at each), where it listens and its key. */
struct ccs_dsx_tree_group {
    int relay, appointed;
    uint64_t gen, appointed_ms;
    int32_t rank;
    int port;
    char host[64];
    struct ccs_dsx_key key;
};

#define NRECENT 8 /* verdicts sent again to a leader that (re)connects */

/* desync_coord.c */
/* Broadcasts verdict V (ARG: the coordinator) and keeps it for leaders
 * that reconnect. */
void ccs_dsx_coord_verdict(const struct ccs_dsx_verdict *v, void *arg);
/* Handles the buffered frames of connection I; -1 to drop it (WHY). */
int ccs_dsx_coord_frames(struct ccs_dsx_coord *k, size_t i, char *why, size_t n);

/* The coordinator's steps, shared with a relay's (desync_tree_relay.c)
 * and the fuzz target: its tables (0, or -1 with WHY), listening on HOST
 * at PORT or at the ports keyed by the secret (SECRET: there is one), a
 * pass of the rules, one of the search, the final exchange when due, and
 * giving back everything it holds. */
int ccs_dsx_coord_tables(struct ccs_dsx_coord *k, char *why, size_t n);
/* A coordinator of WSIZE ranks of job JOB judging with T every PERIOD_MS,
 * nothing made yet (NULL with WHY); then its tables, listening and epoll
 * set, the port it got into *PORT_OUT (0, or -1 with WHY: give it back
 * with ccs_dsx_coord_free). */
struct ccs_dsx_coord *ccs_dsx_coord_new(int32_t wsize, const unsigned char job[CCS_DSX_JOBTAG],
                                        const struct ccs_dsx_thresholds *t, int period_ms, char *why, size_t n);
int ccs_dsx_coord_open(struct ccs_dsx_coord *k, const char *host, int port, int secret, int *port_out, char *why,
                       size_t n);
int ccs_dsx_coord_listen_port(struct ccs_dsx_coord *k, const char *host, int port, int secret, char *why, size_t n);
void ccs_dsx_coord_eval(struct ccs_dsx_coord *k);
void ccs_dsx_coord_probe(struct ccs_dsx_coord *k, uint64_t now);
void ccs_dsx_coord_final_exchange(struct ccs_dsx_coord *k, uint64_t now);
void ccs_dsx_coord_free(struct ccs_dsx_coord *k);

/* desync_coord_net.c */
/* Queues a frame to every authenticated host (one that cannot take it is
 * dropped at the next flush). */
void ccs_dsx_coord_broadcast(struct ccs_dsx_coord *k, uint16_t type, const void *p, size_t n);
/* The bytes of every connection, open and closed, into the stats. */
void ccs_dsx_coord_count_io(struct ccs_dsx_coord *k);
/* Logs a refused peer, or (FLUSH 1) the summary when due, (2) now. */
void ccs_dsx_coord_refused_log(struct ccs_dsx_coord *k, const char *peer, const char *why, int ticketed, int flush);
/* Room for one more connection (EVICT: making it)?  1 or 0. */
int ccs_dsx_coord_make_room(struct ccs_dsx_coord *k, uint64_t now, int evict);
/* Closes connection I (WHY: logged, or ccs_dsx_coord_stalled, or NULL);
 * its ranks become unreachable, not dead. */
void ccs_dsx_coord_drop(struct ccs_dsx_coord *k, size_t i, const char *why);
extern const char ccs_dsx_coord_stalled[];
/* Accepts the connections waiting while there is room for them. */
void ccs_dsx_coord_accept(struct ccs_dsx_coord *k);
/* Sends what is queued; drops the connections that cannot take it (and,
 * with HANDSHAKE_DUE, the late handshakes and stalled links). */
void ccs_dsx_coord_flush_all(struct ccs_dsx_coord *k, uint64_t now, int handshake_due);
/* BYE to every authenticated host not yet told. */
void ccs_dsx_coord_say_bye(struct ccs_dsx_coord *k);
/* Listens on HOST:PORT (k->lfd): 0, or the errno with WHY. */
int ccs_dsx_coord_listen(struct ccs_dsx_coord *k, const char *host, int port, char *why, size_t n);
/* The epoll set of the listening socket (k->lfd): 0, or -1 with WHY. */
int ccs_dsx_coord_io_init(struct ccs_dsx_coord *k, char *why, size_t n);
/* Serves connection I, ready for EVENTS (EPOLLIN...): reads, handles its
 * frames (ccs_dsx_coord_frames), sends what is queued; drops it when it
 * closed, broke or misbehaved. */
void ccs_dsx_coord_serve(struct ccs_dsx_coord *k, size_t i, uint32_t events);
/* Waits up to TIMEOUT_MS, accepts (when ACCEPTING) and serves the
 * connections that are ready. */
void ccs_dsx_coord_io(struct ccs_dsx_coord *k, int timeout_ms, int accepting);

/* desync_tree_root.c: the root's side of the tree.  Each pass: groups
 * made, relays appointed, leaders sent to their relay (GO).  A RELAY_AT
 * or a VERDICT from connection I (0, or -1 with WHY).  Connection I is
 * being dropped: its group loses its relay (quietly for a leader that
 * moved to its relay: its ranks are the relay's now, not unreachable). */
void ccs_dsx_tree_pass(struct ccs_dsx_coord *k, uint64_t now);
int ccs_dsx_tree_on_relay_at(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why,
                             size_t n);
int ccs_dsx_tree_on_verdict(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why,
                            size_t n);
void ccs_dsx_tree_dropped(struct ccs_dsx_coord *k, size_t i);
/* desync_coord.c: rank R's status here is not current (AWAY): out of
 * every rule's view, and not kept, until a frame carries it again. */
void ccs_dsx_coord_away(struct ccs_dsx_coord *k, int32_t r);

/* desync_rule_unreachable.c */
/* DESYNC for each communicator whose other members hang on ranks whose
 * host has been silent past the grace (docs/desync.md, "A lost
 * connection is not a dead rank"). */
void ccs_dsx_rule_unreachable(struct ccs_dsx_coord *k, uint64_t now);

#endif
