/*
 * desync_tcp.h - the TCP side channel across hosts: a coordinator (a thread
 * in rank 0's process, desync_coord.c) and one client per host (in the
 * host's leader rank, desync_client.c), which forwards the statuses of every
 * rank of its host in one connection (desync_conn.c) and posts the
 * coordinator's verdicts into the host's shared memory.  Objects, not
 * globals: the scale simulation runs many clients and one coordinator in
 * one process.
 */
#ifndef CCS_DESYNC_TCP_H
#define CCS_DESYNC_TCP_H

#include "desync_proto.h"
#include "desync_rules.h"
#include <stddef.h>
#include <stdint.h>

struct ccs_dsx_coord;

/* How the side channel authenticates (desync_auth.h): a shared SECRET, or
 * (SECRET NULL) an X25519 key exchange: this side's pair PK/SK, and the
 * other side's public keys PEERS (the coordinator: every rank's, [wsize];
 * a client: the coordinator's).  JOB: the job's tag, in every handshake. */
struct ccs_dsx_cred {
    const char *secret;
    unsigned char job[CCS_DSX_JOBTAG];
    unsigned char pk[CCS_DSX_PKBYTES], sk[CCS_DSX_PKBYTES];
    const unsigned char *peers;
};

/* PORT for a coordinator and its clients: the port is keyed by the secret
 * (ccs_dsx_auth_port's candidates, tried in turn), not given. */
#define CCS_DSX_PORT_KEYED 65536

/* Starts a coordinator listening on HOST:PORT (HOST NULL or "": all
 * addresses; PORT 0: any free port; CCS_DSX_PORT_KEYED: the first of the
 * candidates keyed by SECRET that is free) for a job of WSIZE ranks authenticated
 * by SECRET, evaluating the rules every PERIOD_MS with thresholds T.  Writes
 * the port it got to *PORT_OUT.  NULL with WHY on failure. */
struct ccs_dsx_coord *ccs_dsx_coord_start(const char *host, int port, int32_t wsize, const char *secret,
                                          const struct ccs_dsx_thresholds *t, int period_ms, int *port_out,
                                          char *why, size_t whylen);
/* The same with credentials (the other takes SECRET and a job tag of zero). */
struct ccs_dsx_coord *ccs_dsx_coord_start_cred(const char *host, int port, int32_t wsize,
                                               const struct ccs_dsx_cred *cred, const struct ccs_dsx_thresholds *t,
                                               int period_ms, int *port_out, char *why, size_t whylen);
/* The tree (docs/desync.md, "The tree"): from now on the coordinator K
 * groups the hosts by their lowest rank into groups of RELAY_RANKS ranks
 * (0: no tree; at most CCS_DSX_AGG_MAX_RELAYS groups, larger ones
 * otherwise), appoints the leader of each group's lowest host that
 * reports to it as the group's relay, and sends the group's other leaders
 * there (group 0's too: the root receives folds only). */
void ccs_dsx_coord_tree(struct ccs_dsx_coord *k, uint32_t relay_ranks);

/* A relay's coordinator (desync_tree_relay.c) in a host leader's process:
 * what it hands up. */
struct ccs_dsx_relay_hooks {
    /* A verdict of its rules (a communicator inside its group): 0 when on
     * its way to the root, -1 when it cannot be sent (then it goes to the
     * group's leaders and this host directly). */
    int (*verdict)(const struct ccs_dsx_verdict *v, void *arg);
    /* Agreement values its leaders sent (whole struct ccs_dsx_agree, N
     * bytes), for the root, which folds them. */
    void (*agree)(const void *p, size_t n, void *arg);
    /* A frame it sends its group's leaders (DETAIL: probes, records asked
     * for; VERDICT when it could not go up), for this host too. */
    void (*local)(uint16_t type, const void *p, size_t n, void *arg);
};
/* Starts a relay's coordinator listening on HOST:PORT (PORT 0: any free
 * port) for the leaders of a job of WSIZE ranks and tag JOB holding KEY
 * (given by the root), judging communicators inside its group with T
 * every PERIOD_MS; no thread: ccs_dsx_coord_pump runs it.  NULL with WHY. */
struct ccs_dsx_coord *ccs_dsx_coord_start_relay(const char *host, int port, int32_t wsize,
                                                const unsigned char key[CCS_DSX_KEYBYTES],
                                                const unsigned char job[CCS_DSX_JOBTAG],
                                                const struct ccs_dsx_thresholds *t, int period_ms,
                                                const struct ccs_dsx_relay_hooks *hooks, void *arg, int *port_out,
                                                char *why, size_t whylen);
/* The key a relay authenticates new leaders with (the root gave another). */
void ccs_dsx_coord_rekey(struct ccs_dsx_coord *k, const unsigned char key[CCS_DSX_KEYBYTES]);
/* One turn of a relay's coordinator, never blocking: this host's statuses
 * LOCAL[0..NLOCAL) taken in, its leaders served, its rules run when due;
 * the statuses its group's fold is made of (this host's and the
 * reachable leaders' ranks) into OUT (room for CAP); returns how many. */
size_t ccs_dsx_coord_pump(struct ccs_dsx_coord *k, const struct ccs_dsx_status *const *local, size_t nlocal,
                          const struct ccs_dsx_status **out, size_t cap);
/* A frame of the root's (VERDICT, DETAIL, AGREE, BYE) passed down to the
 * relay's leaders. */
void ccs_dsx_coord_forward(struct ccs_dsx_coord *k, uint16_t type, const void *p, size_t n);
/* Leaders whose ranks the last ccs_dsx_coord_pump gave (the hosts of the
 * group's fold beside this one). */
unsigned ccs_dsx_coord_leaders(const struct ccs_dsx_coord *k);

/* Figures for the simulation: CPU seconds of the coordinator thread,
 * verdicts sent, statuses received, bytes received, clients connected,
 * refused handshakes. */
struct ccs_dsx_coord_stats {
    double cpu_s;
    uint64_t verdicts, statuses, bytes_in, bytes_out, evals;
    int clients, refused;
    int refused_ticketless; /* ... of which never showed a member's ticket */
    double eval_ms_max;
    uint64_t bytes_held; /* memory the coordinator holds (tables, buffers) */
};
void ccs_dsx_coord_stats(struct ccs_dsx_coord *c, struct ccs_dsx_coord_stats *out);
/* The final exchange, when the coordinator's own process exits: waits up
 * to TIMEOUT_MS until every rank has said it finalizes or exits (or is
 * dead), evaluates the rules a last time (a fault in a short job is still
 * reported), and says BYE to every host, which then closes its connection
 * without a warning.  Returns 1 when every rank had finished, 0 on timeout. */
int ccs_dsx_coord_finish(struct ccs_dsx_coord *c, int timeout_ms);
void ccs_dsx_coord_stop(struct ccs_dsx_coord *c);

struct ccs_dsx_client;

struct ccs_dsx_client_cb {
    void (*verdict)(const struct ccs_dsx_verdict *v, void *arg);
    void (*agreed)(const struct ccs_dsx_agree *a, void *arg);
    void *arg;
    /* The coordinator asks for the records of (COMM, SEQ) (may be NULL). */
    void (*want)(uint64_t comm, uint64_t seq, void *arg);
    /* The coordinator said BYE: every rank finished (may be NULL). */
    void (*bye)(void *arg);
    /* The root asks this host's leader to relay group GROUP with KEY
     * (docs/desync.md, "The tree"): listen, and say where in *AT (host
     * announced, "" for the address the root sees; port).  0, or -1 when
     * it cannot (the root is told, and never asks it again).  NULL: never
     * a relay. */
    int (*relay)(uint32_t group, const unsigned char key[CCS_DSX_KEYBYTES], struct ccs_dsx_relay_at *at,
                 void *arg);
    /* A relay's: a frame of the root's (VERDICT, DETAIL, AGREE, BYE) for
     * its group's leaders (may be NULL). */
    void (*down)(uint16_t type, const void *p, size_t n, void *arg);
};

/* A client of the coordinator at HOST:PORT for this host (HOSTNAME), run
 * by world rank RANK (its own process: DEAD when the connection closes). */
struct ccs_dsx_client *ccs_dsx_client_new(const char *host, int port, int32_t wsize, int32_t rank,
                                          const char *secret, const char *hostname,
                                          const struct ccs_dsx_client_cb *cb);
struct ccs_dsx_client *ccs_dsx_client_new_cred(const char *host, int port, int32_t wsize, int32_t rank,
                                               const struct ccs_dsx_cred *cred, const char *hostname,
                                               const struct ccs_dsx_client_cb *cb);

/* One period: (re)connects if need be, sends the statuses of this host's
 * ranks (ST[0..N)) that changed and the new agreement values, and handles
 * what the coordinator sent.  Never blocks longer than TIMEOUT_MS.
 * Returns 0, or -1 when the coordinator refused us or is unreachable
 * (WHY; the caller says so once and keeps trying). */
int ccs_dsx_client_tick(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n,
                        const struct ccs_dsx_agree *ag, size_t nag, int timeout_ms, char *why, size_t whylen);
/* Sends the records of COMM with the statuses for the next 2 s (records
 * that differ on this host: the coordinator must see them). */
void ccs_dsx_client_detail(struct ccs_dsx_client *cl, uint64_t comm);

/* A DETAIL frame's payload P (N bytes: a communicator, and a seq or a
 * probe's), as from the coordinator: the communicator's records sent for
 * 2 s (not for a probe), and the want callback for a seq.  A relay hands
 * its own requests to its own host this way. */
void ccs_dsx_client_on_detail(struct ccs_dsx_client *cl, const void *p, size_t n);

/* Makes CL the relay of group GROUP (NHOSTS hosts): each tick is then
 * given every rank of the group, and every 100 ms one AGG frame goes to
 * the root, the group's fold with the ranks that differ (LIST_MS: a group
 * blocked this long lists those not blocked with it) and the members of
 * the communicators the root asked about (docs/desync.md, "The tree").
 * (In a job the root appoints the relays, ccs_dsx_coord_tree;
 * tests/desync/desync_sim makes its own.)  0, or -1 out of memory. */
int ccs_dsx_client_relay(struct ccs_dsx_client *cl, uint32_t group, uint32_t nhosts, uint32_t list_ms);

/* Queues a frame of TYPE to the root (a relay's verdicts and its leaders'
 * agreement values).  0, or -1 when not connected or it cannot be queued. */
int ccs_dsx_client_send(struct ccs_dsx_client *cl, uint16_t type, const void *p, size_t n);
/* The local address of the link to the coordinator (where a relay
 * listens: the interface its leaders reach too).  0, or -1. */
int ccs_dsx_client_local_addr(struct ccs_dsx_client *cl, char *buf, size_t n);

/* 1 once the handshake succeeded. */
int ccs_dsx_client_connected(struct ccs_dsx_client *cl);
uint64_t ccs_dsx_client_bytes_out(struct ccs_dsx_client *cl);
void ccs_dsx_client_free(struct ccs_dsx_client *cl);

#endif
