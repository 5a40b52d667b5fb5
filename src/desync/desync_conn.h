/*
 * desync_conn.h - one connection of the TCP side channel (docs/desync.md,
 * "Transport"): the bytes on the wire, not what they mean.  A non-blocking
 * socket with bounded input and output buffers, frames checked from their
 * header before they are buffered, the handshake that authenticates both
 * ends, and every frame after it sealed both ways.  The coordinator
 * (desync_coord.c) and the client (desync_client.c) hold connections and
 * give the frames their meaning.
 *
 * Handshake (desync_auth.h; no key travels, the client proves first):
 *   client -> HELLO(nonce_c, job, MAC(TICKET, nonce_c, 0, fields))
 *   coord  -> WELCOME(nonce_s)                     (the ticket verified)
 *   client -> HELLO(nonce_c, MAC(CLIENT, nonce_c, nonce_s, fields))
 *   coord  -> WELCOME(nonce_s, MAC(COORD, nonce_c, nonce_s, fields))
 * Only then does the coordinator accept statuses; only a coordinator that
 * proved the key can post verdicts.
 */
#ifndef CCS_DESYNC_CONN_H
#define CCS_DESYNC_CONN_H

#include "desync_auth.h"
#include "desync_proto.h"
#include <stddef.h>
#include <stdint.h>

#define CCS_DSX_BYTEORDER 0x01020304u
#define CCS_DSX_HANDSHAKE_MS 5000 /* to complete the handshake */

enum ccs_dsx_conn_state {
    CCS_DSX_C_DROP = -1,      /* (coordinator) a queue failed: drop it at the next look */
    CCS_DSX_C_CONNECTING = 1, /* no HELLO answered yet */
    CCS_DSX_C_HELLO = 2,      /* the ticket verified: the client's proof (coordinator), the
                                 coordinator's proof (client) awaited */
    CCS_DSX_C_AUTHED = 3,     /* handshake done: frames sealed both ways */
};

struct ccs_dsx_conn {
    int fd, state; /* state: enum ccs_dsx_conn_state */
    unsigned char *in, *out;
    size_t inlen, incap, outlen, outcap, outoff;
    size_t inoff; /* in[inoff, inlen): received, not yet consumed */
    unsigned char nonce_c[CCS_DSX_NONCE], nonce_s[CCS_DSX_NONCE]; /* the client's, the coordinator's */
    uint64_t t_open;                                              /* ms, for the handshake deadline */
    uint64_t t_rx;                                                /* ms: the last whole frame received */
    uint64_t bytes_in, bytes_out;
    char host[CCS_DSX_HOST];
    char peer[64];
    int32_t peer_rank; /* the client's own rank and pid (HELLO) */
    uint32_t peer_pid;
    int sealed;                  /* authenticated: frames sealed both ways */
    struct ccs_dsx_session sess; /* their keys and counters */
    struct ccs_dsx_key key;      /* (coordinator) the key of the rank the peer claims */
    int ticketed;                /* (coordinator) its first HELLO proved the key: a member */
    int prio;                    /* (coordinator) admitted as a member, outside the slots of unknown peers */
    int said_bye;                /* (coordinator) BYE queued to it */
    size_t cur_wire;             /* bytes on the wire of the frame ccs_dsx_conn_next_frame returned */
    /* (root) its place in the tree (desync_tree_root.c): enum ccs_dsx_tree_role, its group, the
     * registration of the relay it was last sent to, the lowest rank it reports (a relay's
     * coordinator: INT32_MAX unless a rank of it went into the last fold, desync_tree_relay.c) */
    int tree;
    uint32_t group;
    uint64_t sent_gen;
    int32_t lowest;
};

/* A root's connection in the tree (struct ccs_dsx_conn's tree). */
enum ccs_dsx_tree_role {
    CCS_DSX_T_LEADER = 0,    /* a host's leader reporting to the root */
    CCS_DSX_T_APPOINTED = 1, /* told to relay its group, not yet listening */
    CCS_DSX_T_RELAY = 2,     /* its group's relay (RELAY_AT heard) */
    CCS_DSX_T_MOVED = 3,     /* told to report through its group's relay (GO sent) */
    CCS_DSX_T_NORELAY = 4,   /* a leader that could not relay: never appointed again */
};

/* Closes the socket, frees the buffers, and leaves C empty (fd -1). */
void ccs_dsx_conn_close(struct ccs_dsx_conn *c);

/* Grows *B (capacity *CAP) to hold NEED bytes.  0, or -1 out of memory. */
int ccs_dsx_grow(unsigned char **b, size_t *cap, size_t need);

/* Queues one frame of TYPE with payload P (N bytes), sealed after the
 * handshake.  0, or -1 when the peer has not read 16 MiB (drop it) or out
 * of memory. */
int ccs_dsx_conn_queue(struct ccs_dsx_conn *c, uint16_t type, const void *p, size_t n);

/* Sends what the socket takes now.  0, or -1 when the connection broke. */
int ccs_dsx_conn_flush(struct ccs_dsx_conn *c);

/* Reads what is there (before the handshake completes, only as much as
 * its frames need).  0, or -1 on end of stream or error. */
int ccs_dsx_conn_fill(struct ccs_dsx_conn *c);

/* The next whole frame buffered: 1 with its header (*F, its length without
 * the tag) and *PAYLOAD (opened), 0 when none yet, -1 when malformed, out
 * of place before the handshake, or not authentic (WHY). */
int ccs_dsx_conn_next_frame(struct ccs_dsx_conn *c, struct ccs_dsx_frame *f, const unsigned char **payload,
                            char *why, size_t whylen);

/* Drops the frame ccs_dsx_conn_next_frame returned from the input. */
void ccs_dsx_conn_consume(struct ccs_dsx_conn *c);

/* The poll(2) events C waits for: input, and output while some is queued. */
short ccs_dsx_conn_events(const struct ccs_dsx_conn *c);

/* Makes socket FD non-blocking, without Nagle's delay. */
void ccs_dsx_socket_nonblock(int fd);

/* ---- the handshake */

/* Client: starts it on the new (connecting) socket FD: resets C and queues
 * the first HELLO with a fresh nonce, the job's tag JOB and the ticket
 * (KEY).  0, or -1. */
int ccs_dsx_conn_hello(struct ccs_dsx_conn *c, int fd, const struct ccs_dsx_key *key, int32_t wsize, int32_t rank,
                       const char *hostname, const unsigned char job[CCS_DSX_JOBTAG]);

/* Client: a WELCOME of the coordinator (frame F, payload P).  The first:
 * answered with the client's proof, 0.  The second: when the coordinator
 * proved KEY, C is sealed, 1.  -1 when the frame is not a WELCOME of this
 * job (WHY); -2 when the coordinator's proof does not verify (the caller
 * names the coordinator in WHY). */
int ccs_dsx_conn_welcome(struct ccs_dsx_conn *c, const struct ccs_dsx_key *key, int32_t wsize, int32_t rank,
                         const char *hostname, const unsigned char job[CCS_DSX_JOBTAG], const struct ccs_dsx_frame *f,
                         const unsigned char *p, char *why, size_t whylen);

/* Coordinator: the key of the rank RANK a peer claims to be (NULL: none). */
typedef const struct ccs_dsx_key *(*ccs_dsx_key_fn)(int32_t rank, void *arg);

/* Coordinator: a client's HELLO (frame F, payload P) for the job of WSIZE
 * ranks and tag JOB.  0: the first, its ticket verified with KEY_FN's key
 * for the rank it claims, answered with the coordinator's nonce; 1: the
 * second, proving that key: answered with the coordinator's proof, C is
 * sealed and its peer_rank, peer_pid and host are the proven ones; -1:
 * refused (WHY). */
int ccs_dsx_conn_on_hello(struct ccs_dsx_conn *c, ccs_dsx_key_fn key_fn, void *arg, int32_t wsize,
                          const unsigned char job[CCS_DSX_JOBTAG], const struct ccs_dsx_frame *f,
                          const unsigned char *p, char *why, size_t whylen);

#endif
