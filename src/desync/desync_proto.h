/*
 * desync_proto.h - what ranks tell each other about their collectives
 * (docs/desync.md, "Protocol"): the per-rank status, the verdicts, and the
 * wire format of the TCP side channel.
 *
 * A status is what one rank publishes: per communicator its issued and
 * completed sequence numbers, a running hash of the fingerprints through the
 * completed one, two checkpoint hashes, whether it is blocked (and in which
 * operation), and its last operations.  In shared memory the whole struct is
 * published; over TCP the history is sent only when the coordinator asks for
 * it (hashes differ) or when the rank is blocked.
 *
 * Everything that arrives from a peer goes through ccs_dsx_decode_*, which
 * checks every length, count, range and string before anything uses it.
 */
#ifndef CCS_DESYNC_PROTO_H
#define CCS_DESYNC_PROTO_H

#include "ccs_kinds.h"
#include "fingerprint.h"
#include <stddef.h>
#include <stdint.h>

#define CCS_DSX_MAGIC 0x44534343u /* "CCSD" little-endian */
/* The protocol's version.  3: the client proves first, HELLO carries the
 * job tag; 4: steps and step boundaries; 5: ranks linger at exit for the
 * search (BYE), the host's own search; 6: a probe may carry
 * CCS_DSX_NARROW_BIT; 7: a status names its PID namespace (pidns_dev,
 * pidns_ino); 8: a status names the call ccshim does not intercept that the
 * rank is in (foreign, foreign_ms, foreign_size); 9: and its identity
 * (foreign_group, foreign_gseq, foreign_kind, foreign_prev). */
#define CCS_DSX_VERSION 10u
#define CCS_DSX_MAXCOMM 8     /* communicators published per rank */
#define CCS_DSX_HIST 32       /* operations kept per communicator */
#define CCS_DSX_SITE 96       /* symbolised call site, NUL-terminated */
#define CCS_DSX_HOST 64       /* host name, NUL-terminated */
#define CCS_DSX_CHECKPOINT 16 /* a checkpoint hash every this many seqs */
#define CCS_DSX_PARTIES 8     /* ranks detailed in one verdict */
#define CCS_DSX_LINE 640      /* the greppable line of a verdict */
#define CCS_DSX_MAX_RANKS (1 << 20)
#define CCS_DSX_MAX_FRAME (4u << 20)
#define CCS_DSX_MAX_SEQ (1ull << 48) /* any seq from a peer beyond this is refused */
#define CCS_DSX_NONCE 32    /* handshake nonce bytes */
#define CCS_DSX_MACBYTES 32 /* crypto_auth_BYTES (HMAC-SHA-512-256) */
#define CCS_DSX_KEYBYTES 32 /* crypto_auth_KEYBYTES */
#define CCS_DSX_JOBTAG 16   /* the job's tag (desync_auth.h) */
#define CCS_DSX_PKBYTES 32  /* crypto_kx_PUBLICKEYBYTES */

/* One operation as every member must agree on it. */
struct ccs_dsx_op {
    uint64_t seq;
    uint64_t fp; /* ccs_fingerprint */
    uint64_t count;
    uint32_t site; /* call-site id, local to the publishing process */
    int32_t root;
    uint32_t step;
    uint16_t kind;
    uint8_t dtype, op, flags, pad[3];
    uint32_t sig; /* ccs_record's sig (what ccs_sig_key compares) */
    uint32_t pysite; /* annotated (Python) site id, local to the publishing process, 0 none */
};

enum ccs_dsx_state { CCS_DSX_IDLE = 0, CCS_DSX_BLOCKED = 1, CCS_DSX_FREED = 2 };
/* CCS_DSX_DEVICE: NCCL completion tracked on the device (nccl_track.c):
 * issued counts work enqueued, dev_pending how much of it has not completed,
 * and BLOCKED means a rank that stopped enqueueing with work that does not
 * complete, at its last enqueued seq (the first uncompleted one lies in
 * (issued - dev_pending, issued]: events are rate limited). */
enum ccs_dsx_cflags {
    CCS_DSX_HASH_LOST = 1, /* retired: the hot path keeps the hash, so it is never lost (bit not reused) */
    CCS_DSX_PINNED = 2, /* hist: the operations around a seq the coordinator asked for, read back from the rings */
    CCS_DSX_PROBED = 4, /* cp_seq[1]/cp_hash[1]: the hash at a seq the coordinator asked for */
    CCS_DSX_DEVICE = 8,
    CCS_DSX_BOUNDARY = 16, /* the rank waits at the end of step (status boundary - 1) for this comm's members */
    CCS_DSX_FINAL = 32,    /* state FREED: issued is the exact count at the free (else only the last one seen) */
};
/* A wanted seq with this bit asks only for the hash there (a probe). */
#define CCS_DSX_PROBE_BIT (1ull << 63)
/* A probe with this bit too comes from a search narrowing an interval
 * (hashes that differ): every member keeps the communicator in its status
 * meanwhile, however many others it has (desync_collect.c, cmp_pick). */
#define CCS_DSX_NARROW_BIT (1ull << 62)

struct ccs_dsx_comm {
    uint64_t id;
    int32_t rank, size;
    uint64_t issued;    /* sequence numbers taken so far */
    uint64_t done;      /* last sequence folded into hash */
    uint64_t hash;      /* running hash through done */
    uint64_t cp_seq[2]; /* last two checkpoints (multiples of CCS_DSX_CHECKPOINT), 0 = none */
    uint64_t cp_hash[2];
    uint32_t state;      /* enum ccs_dsx_state */
    uint32_t blocked_ms; /* how long blocked, at publication */
    uint16_t nhist;      /* valid entries of hist */
    uint16_t flags;      /* enum ccs_dsx_cflags */
    uint16_t backend;
    uint16_t dev_pending; /* CCS_DSX_DEVICE: enqueued seqs not completed on the device (saturating) */
    /* Calls per step, from the records: STEP_CALLS in STEP_NOW (the step of
     * its newest completed call), PREV_CALLS in STEP_PREV (the step with
     * calls before that); *_KIND their kind when all alike, else
     * CCS_KIND_MAX.  The blocked call is not counted. */
    uint16_t step_kind, prev_kind;
    uint32_t step_now, step_calls;
    uint32_t step_prev, prev_calls;
    uint32_t pad2;
    struct ccs_dsx_op blocked; /* the operation blocked in (state BLOCKED) */
    char site_blocked[CCS_DSX_SITE];
    char site_last[CCS_DSX_SITE];
    struct ccs_dsx_op hist[CCS_DSX_HIST]; /* oldest first */
};

/* What a rank's process is doing, and the one word for it in verdict lines
 * and report blocks. */
#define CCS_DSX_LIFE_LIST(X)                                                                                       \
    X(ALIVE, 0, "alive")                                                                                           \
    X(FINALIZING, 1, "in MPI_Finalize")                                                                            \
    X(EXITED, 2, "exited")                                                                                         \
    X(DIED, 3, "died")
enum ccs_dsx_life {
#define CCS_X(e, n, s) CCS_DSX_##e = n,
    CCS_DSX_LIFE_LIST(CCS_X)
#undef CCS_X
};
const char *ccs_dsx_life_name(unsigned life);

struct ccs_dsx_status {
    uint32_t magic, version;
    int32_t wrank, wsize;
    uint32_t pid;
    uint32_t life; /* enum ccs_dsx_life */
    uint64_t beat; /* publications so far */
    uint32_t ncomm;
    uint32_t step;     /* the rank's step (ccshim_step_current) */
    uint32_t boundary; /* waiting at the end of step BOUNDARY - 1 (coalescing's completion), 0 = not */
    uint32_t units, units_prev; /* backward passes in STEP and in STEP - 1 (torch helper; 0 = not counted) */
    uint32_t flags;             /* CCS_DSX_ST_MARKS */
    /* Inside a collective ccshim does not intercept (a gloo call of
     * torch.distributed, said by the torch helper: ccshim_foreign_begin)
     * for FOREIGN_MS, 0 = not; FOREIGN_SIZE ranks in its group (0 =
     * unknown); FOREIGN names it ("torch.distributed.all_gather (gloo) at
     * trainer.py:12 in main"), "" when not in one. */
    uint32_t foreign_ms, foreign_size;
    /* The PID namespace PID is a number in (st_dev and st_ino of
     * /proc/self/ns/pid, read once at start; both 0 when unknown): a peer
     * looks PID up (kill(pid, 0)) only when its own namespace is the same;
     * otherwise (one container per rank) it goes by the heartbeat alone. */
    uint64_t pidns_dev, pidns_ino;
    /* The foreign call's identity (ccshim_foreign_call), all 0 when it has
     * none: FOREIGN_GROUP its process group (alike on every member),
     * FOREIGN_GSEQ its seq among the collectives on that group (from 1),
     * FOREIGN_KIND and FOREIGN_PREV the kind of this call and of the
     * group's call at FOREIGN_GSEQ - 1 (enum ccs_torch_call, ccs_kinds.h;
     * PREV NONE when unknown). */
    uint64_t foreign_group, foreign_gseq;
    uint16_t foreign_kind, foreign_prev;
    uint32_t foreign_pad; /* 0 */
    char host[CCS_DSX_HOST];
    char foreign[CCS_DSX_SITE];
    struct ccs_dsx_comm comm[CCS_DSX_MAXCOMM];
};

/* Status flags: the rank marks its steps (ccs_step_marking), so its step
 * 0 is a step, not the absence of marks. */
#define CCS_DSX_ST_MARKS 1u

/* Verdicts: the classes of ccs_kinds.h's CCS_VERDICT_LIST (their numbers
 * are this wire format's), expanded into the enum and its names. */
enum ccs_dsx_class {
#define CCS_X(e, n, ...) CCS_DSX_##e = n,
    CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
        CCS_DSX_CLASS_MAX = 5
};
#define CCS_X(e, n, s, ...) _Static_assert(n > 0 && n < CCS_DSX_CLASS_MAX, "verdict class " s ": number out of range");
CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
const char *ccs_dsx_class_name(unsigned cls);

/* Role of one rank in a verdict. */
enum ccs_dsx_role {
    CCS_DSX_R_WAITING = 1, /* blocked in the collective */
    CCS_DSX_R_BEHIND = 2,  /* has not reached it */
    CCS_DSX_R_AHEAD = 3,   /* blocked at a later seq */
    CCS_DSX_R_DIFFERS = 4, /* issued a different operation at that seq */
    CCS_DSX_R_AGREES = 5,  /* issued the majority's operation */
};

struct ccs_dsx_party {
    int32_t wrank;
    uint32_t role; /* enum ccs_dsx_role */
    uint32_t life; /* enum ccs_dsx_life */
    uint32_t pid;
    char host[CCS_DSX_HOST];
    uint64_t other_comm;        /* BEHIND and blocked elsewhere: that comm, else 0 */
    struct ccs_dsx_op other_op; /* ... and the operation there */
    struct ccs_dsx_comm c;      /* its entry for the verdict's comm */
};

struct ccs_dsx_verdict {
    uint32_t cls; /* enum ccs_dsx_class */
    uint32_t nparty;
    uint64_t comm;
    uint64_t seq;
    int32_t comm_size;
    uint32_t local; /* 1: from a host's own rules, shared through its memory (0 on the wire) */
    char line[CCS_DSX_LINE]; /* "comm=... ranks ... " after "ccshim CLASS " */
    struct ccs_dsx_party party[CCS_DSX_PARTIES];
};

/* ------------------------------------------------------------- wire format
 * Every frame: struct ccs_dsx_frame, then LENGTH payload bytes.
 *   HELLO   client -> coordinator: struct ccs_dsx_hello (twice: nonce and
 *           ticket, then its proof)
 *   WELCOME coordinator -> client: struct ccs_dsx_hello (twice: its nonce,
 *           then its proof)
 * (desync_auth.h has the handshake; before it completes only HELLO frames
 * of exactly sizeof(struct ccs_dsx_hello) bytes are accepted.)
 *   STATUS  client -> coordinator: uint32 count, then COUNT encoded statuses
 *   VERDICT coordinator -> client: one struct ccs_dsx_verdict (fixed size)
 *   DETAIL  coordinator -> client: uint64 comm id (send history for it)
 *   AGREE   both ways: struct ccs_dsx_agree
 *   BYE     coordinator -> client: no payload; every rank has finished
 *   AGG     relay -> root: a group's fold and the ranks it lists
 *           (desync_agg.h)
 *   RELAY   root -> a host's leader: relay group G (struct ccs_dsx_relay)
 *   RELAY_AT relay -> root: listening for its group's leaders at host:port
 *           (struct ccs_dsx_relay_at; port 0: it cannot relay)
 *   GO      root -> a host's leader: report through the relay of its group
 *           (struct ccs_dsx_go); also VERDICT relay -> root (a verdict of
 *           the relay's rules on a communicator inside its group)
 * Integers are little-endian (x86-64 and aarch64 both); HELLO carries the
 * byte-order word so a mismatched peer is refused, not misread. */
enum ccs_dsx_msg {
    CCS_DSX_M_HELLO = 1,
    CCS_DSX_M_WELCOME = 2,
    CCS_DSX_M_STATUS = 3,
    CCS_DSX_M_VERDICT = 4,
    CCS_DSX_M_DETAIL = 5,
    CCS_DSX_M_AGREE = 6,
    CCS_DSX_M_BYE = 7, /* coordinator -> client: every rank finished; the job's detection is over */
    CCS_DSX_M_AGG = 8, /* relay -> root: a group's fold (desync_agg.h) */
    CCS_DSX_M_RELAY = 9,    /* root -> leader: relay a group (docs/desync.md, "The tree") */
    CCS_DSX_M_RELAY_AT = 10, /* relay -> root: where it listens for its group's leaders */
    CCS_DSX_M_GO = 11,      /* root -> leader: report through the relay of its group */
};

/* The tree (docs/desync.md, "The tree"; desync_tree_root.c and
 * desync_tree_relay.c).  The root appoints a relay with a key of 256
 * random bits that it gives only over sealed links: the relay
 * authenticates its group's leaders with it, and they it. */
struct ccs_dsx_relay {
    uint32_t group, pad;
    unsigned char key[CCS_DSX_KEYBYTES];
};
struct ccs_dsx_relay_at {
    uint32_t group;
    int32_t port;                        /* 1..65535; 0: cannot relay */
    char host[64];                       /* the address announced; "": the one the root sees it from */
    unsigned char key[CCS_DSX_KEYBYTES]; /* the key it was given (told again when it reconnects) */
};
struct ccs_dsx_go {
    uint32_t group;
    int32_t port;
    int32_t relay_rank; /* the relay's world rank */
    uint32_t pad;
    char host[64];
    unsigned char key[CCS_DSX_KEYBYTES];
};
/* Checks a RELAY_AT or GO from a peer (strings terminated, ports and
 * ranks in range).  0, or -1 with WHY. */
int ccs_dsx_check_relay_at(struct ccs_dsx_relay_at *a, char *why, size_t whylen);
int ccs_dsx_check_go(struct ccs_dsx_go *g, int32_t wsize, char *why, size_t whylen);

struct ccs_dsx_frame {
    uint32_t magic;   /* CCS_DSX_MAGIC */
    uint16_t version; /* CCS_DSX_VERSION */
    uint16_t type;    /* enum ccs_dsx_msg */
    uint32_t length;  /* payload bytes, <= CCS_DSX_MAX_FRAME */
};

struct ccs_dsx_hello {
    uint32_t byteorder; /* 0x01020304 */
    int32_t wsize;      /* world size the sender believes in */
    char host[CCS_DSX_HOST];
    unsigned char nonce[CCS_DSX_NONCE];  /* random, fresh per connection */
    unsigned char mac[CCS_DSX_MACBYTES]; /* desync_auth.h: ticket, proof, or zero */
    int32_t rank;                        /* client: the world rank of its own process */
    uint32_t pid;                        /* client: its pid */
    unsigned char job[CCS_DSX_JOBTAG];   /* the job's tag: another job's leader is refused */
};

/* One agreement value (see ccs_desync_agree_u64). */
struct ccs_dsx_agree {
    uint64_t comm, key;
    uint64_t max, min;
    int32_t crank, size; /* sender's rank in comm; comm size */
    uint32_t n;          /* values folded into max/min (1 from a rank) */
    uint32_t pad;
};

/* Size of the encoded form of ST: the fixed part, each comm entry without
 * its history, then its NHIST operations. */
size_t ccs_dsx_encoded_size(const struct ccs_dsx_status *st);

/* Encodes ST into BUF (CAP bytes), keeping of each comm's history the
 * newest KEEP_HIST(comm id, ARG) operations (0: none; NULL: keep all).  Returns the bytes
 * written, or 0 when CAP is too small. */
size_t ccs_dsx_encode_status(const struct ccs_dsx_status *st, int (*keep_hist)(uint64_t, void *), void *arg,
                             unsigned char *buf, size_t cap);

/* Decodes one encoded status from BUF (LEN bytes available) into OUT,
 * checking everything (magic, version, ranks within WSIZE, counts, kinds,
 * states, strings).  Returns the bytes consumed, or 0 when malformed (then
 * WHY says what was wrong). */
size_t ccs_dsx_decode_status(const unsigned char *buf, size_t len, int32_t wsize, struct ccs_dsx_status *out,
                             char *why, size_t whylen);

/* Checks a verdict received whole (fixed size) in place: class, counts,
 * NUL-terminated strings, ranks within WSIZE.  0, or -1 with WHY. */
int ccs_dsx_check_verdict(struct ccs_dsx_verdict *v, int32_t wsize, char *why, size_t whylen);

/* Checks a frame header: magic, version, known type, length bound. */
int ccs_dsx_check_frame(const struct ccs_dsx_frame *f, char *why, size_t whylen);

/* Checks a status that came from shared memory (written by a local peer),
 * the same way as a decoded one.  0 or -1. */
int ccs_dsx_check_status(struct ccs_dsx_status *st, int32_t wsize, char *why, size_t whylen);

#endif
