/*
 * desync_client.c - the client of the TCP side channel (docs/desync.md,
 * "Transport"), run by the leader rank of each host: one connection to the
 * coordinator (desync_conn.c) that forwards the statuses of every rank of
 * the host (what the rules act on at once, progress at most every SEND_MS,
 * an unchanged status once a second) and their agreement values, and hands
 * what the coordinator sends (verdicts, folded agreements, requests for
 * records, BYE) to the callbacks, which post it into the host's shared
 * memory.  Reconnects with a backoff; never blocks longer than asked.
 */
#include "desync_agg.h"
#include "desync_conn.h"
#include "desync_tcp.h"
#include "log.h"
#include "clock.h"
#include "fingerprint.h"
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define FRAME_SPLIT (1u << 20) /* bytes of statuses per STATUS frame, about */
#define SEND_MS 100            /* progress of a rank is forwarded at most this often */

struct ccs_dsx_client {
    char host[256], hostname[CCS_DSX_HOST];
    struct ccs_dsx_key key;
    unsigned char job[CCS_DSX_JOBTAG];
    int port;
    int keyed; /* the port is keyed by the secret: candidate CAND of ccs_dsx_auth_port's */
    unsigned cand;
    int32_t rank;
    int32_t wsize;
    struct ccs_dsx_client_cb cb;
    struct ccs_dsx_conn c;
    uint64_t retry_ms, backoff_ms;
    int refused;
    char refused_why[256]; /* why, while refused, until the next attempt */
    /* Per local rank, by its place in the statuses a tick is given (the
     * same each tick): what was last sent, when, and the signature of its
     * states then.  Sized to the host's ranks, not the world's: 16,384
     * leaders of a 131,072-rank job held 3 x 8 bytes x the world each. */
    struct sent {
        int32_t wrank;
        uint64_t hash, ms, urgent;
    } * sent;
    size_t nsent;
    uint64_t ag_hash;
    uint64_t detail_id[8], detail_until[8];
    unsigned char *buf;
    size_t bufcap;
    struct ccs_dsx_verdict *vbuf;
    uint64_t bytes_out_total;
    const struct ccs_dsx_status *cur; /* the status being encoded, */
    int fresh;                        /* ... with news the rules act on */
    int bye;                          /* the coordinator said BYE */
    uint64_t lost_ms;                 /* when an authenticated connection was lost (0: not lost) */
    uint64_t t_new;                   /* when the client was made */
    int ever;                         /* authenticated at least once */
    uint64_t said_ms;                 /* last "reconnected" line */
    /* Relay mode (ccs_dsx_client_relay): the fold, the ranks it lists, a
     * mark per rank, room for N ranks; when the last AGG frame went. */
    struct ccs_dsx_agg *agg;
    uint32_t *rlisted;
    uint8_t *rmark;
    size_t rcap;
    uint32_t list_ms;
    uint64_t agg_ms;
    /* The tree (docs/desync.md, "The tree"): the root's address and key,
     * kept while this leader reports through its group's relay (TO_RELAY,
     * at GO's address with GO's key; MOVING: told just now); RELAYING:
     * this leader relays, where AT says (said again on each new link). */
    char root_host[256];
    int root_port, root_keyed;
    unsigned root_cand;
    struct ccs_dsx_key root_key;
    int to_relay, moving, relaying;
    int rerouted; /* this tick: the link to the relay ended, back to the root (nothing to warn of) */
    struct ccs_dsx_go go;
    struct ccs_dsx_relay_at at;
    uint64_t tree_said_ms;
};

struct ccs_dsx_client *ccs_dsx_client_new(const char *host, int port, int32_t wsize, int32_t rank,
                                          const char *secret, const char *hostname,
                                          const struct ccs_dsx_client_cb *cb)
{
    struct ccs_dsx_cred cred = {.secret = secret};
    return ccs_dsx_client_new_cred(host, port, wsize, rank, &cred, hostname, cb);
}

struct ccs_dsx_client *ccs_dsx_client_new_cred(const char *host, int port, int32_t wsize, int32_t rank,
                                               const struct ccs_dsx_cred *cred, const char *hostname,
                                               const struct ccs_dsx_client_cb *cb)
{
    struct ccs_dsx_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->rank = rank;
    snprintf(cl->host, sizeof cl->host, "%s", host);
    memcpy(cl->job, cred->job, sizeof cl->job);
    char why[128] = "no coordinator public key";
    if (cred->secret
            ? ccs_dsx_auth_key_job(cred->secret, cred->job, &cl->key, why, sizeof why) != 0
            : !cred->peers || ccs_dsx_auth_key_kx(cred->pk, cred->sk, cred->peers, 0, cred->job, &cl->key) != 0) {
        ccs_log(CCS_LOG_WARN, "desync: no TCP client: %s", why);
        free(cl);
        return NULL;
    }
    snprintf(cl->hostname, sizeof cl->hostname, "%s", hostname);
    cl->keyed = port == CCS_DSX_PORT_KEYED && cred->secret;
    cl->port = cl->keyed ? ccs_dsx_auth_port(&cl->key, 0) : port;
    cl->wsize = wsize;
    cl->t_new = ccs_clock_mono_ms();
    cl->cb = *cb;
    cl->c.fd = -1;
    cl->vbuf = malloc(sizeof *cl->vbuf);
    if (!cl->vbuf) {
        ccs_dsx_client_free(cl);
        return NULL;
    }
    return cl;
}

int ccs_dsx_client_send(struct ccs_dsx_client *cl, uint16_t type, const void *p, size_t n)
{
    if (!ccs_dsx_client_connected(cl) || cl->to_relay)
        return -1;
    return ccs_dsx_conn_queue(&cl->c, type, p, n);
}

int ccs_dsx_client_local_addr(struct ccs_dsx_client *cl, char *buf, size_t n)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    if (cl->c.fd < 0 || getsockname(cl->c.fd, (struct sockaddr *)&sa, &sl) != 0 || sa.sin_family != AF_INET ||
        !inet_ntop(AF_INET, &sa.sin_addr, buf, (socklen_t)n))
        return -1;
    return 0;
}

int ccs_dsx_client_connected(struct ccs_dsx_client *cl)
{
    return cl->c.fd >= 0 && cl->c.state == CCS_DSX_C_AUTHED;
}
uint64_t ccs_dsx_client_bytes_out(struct ccs_dsx_client *cl)
{
    return cl->bytes_out_total + cl->c.bytes_out;
}

/* Reports to the root again (the link to the relay ended). */
static void back_to_root(struct ccs_dsx_client *cl, uint64_t now)
{
    int say = !cl->tree_said_ms || now - cl->tree_said_ms >= 60000;
    ccs_log(say ? CCS_LOG_INFO : CCS_LOG_DEBUG,
            "desync side channel: the link to the relay of group %u (rank %d at %s:%d) ended; host '%s' reports to "
            "the coordinator again",
            cl->go.group, cl->go.relay_rank, cl->host, cl->port, cl->hostname);
    cl->tree_said_ms = say ? now : cl->tree_said_ms;
    cl->rerouted = 1;
    snprintf(cl->host, sizeof cl->host, "%s", cl->root_host);
    cl->port = cl->root_port;
    cl->keyed = cl->root_keyed;
    cl->cand = cl->root_cand;
    cl->key = cl->root_key;
    cl->to_relay = 0;
}

/* Reports through the relay GO names from now on (the root said so). */
static void to_relay(struct ccs_dsx_client *cl)
{
    if (!cl->to_relay) {
        snprintf(cl->root_host, sizeof cl->root_host, "%s", cl->host);
        cl->root_port = cl->port;
        cl->root_keyed = cl->keyed;
        cl->root_cand = cl->cand;
        cl->root_key = cl->key;
    }
    snprintf(cl->host, sizeof cl->host, "%s", cl->go.host);
    cl->port = cl->go.port;
    cl->keyed = 0;
    memcpy(cl->key.k, cl->go.key, sizeof cl->key.k);
    ccs_dsx_auth_wipe((struct ccs_dsx_key *)cl->go.key);
    cl->to_relay = 1;
    ccs_log(CCS_LOG_INFO, "desync side channel: host '%s' reports through the relay of group %u (rank %d at %s:%d)",
            cl->hostname, cl->go.group, cl->go.relay_rank, cl->host, cl->port);
}

static void client_drop(struct ccs_dsx_client *cl, uint64_t now)
{
    if (cl->moving) { /* to the relay, as the root said: not a loss */
        cl->moving = 0;
        cl->bytes_out_total += cl->c.bytes_out;
        ccs_dsx_conn_close(&cl->c);
        to_relay(cl);
        cl->backoff_ms = 0;
        cl->retry_ms = now;
        if (cl->sent)
            memset(cl->sent, 0, cl->nsent * sizeof *cl->sent);
        cl->ag_hash = 0;
        return;
    }
    ccs_log(CCS_LOG_DEBUG, "desync side channel: connection %s; again in %llu ms",
            cl->c.state == CCS_DSX_C_AUTHED ? "lost" : "not established",
            (unsigned long long)(cl->backoff_ms ? (cl->backoff_ms * 2 > 5000 ? 5000 : cl->backoff_ms * 2) : 200));
    if (cl->c.state == CCS_DSX_C_AUTHED && !cl->lost_ms)
        cl->lost_ms = now; /* resumed on reconnection: statuses and records are the ranks' own */
    int authed = cl->c.state == CCS_DSX_C_AUTHED;
    cl->bytes_out_total += cl->c.bytes_out;
    ccs_dsx_conn_close(&cl->c);
    if (cl->keyed && !authed && !cl->bye) {
        /* Not the coordinator there (nothing listens, or another program,
         * where the port was taken when the coordinator started): the next
         * candidate at once, the backoff after a whole round. */
        cl->cand = (cl->cand + 1) % CCS_DSX_PORT_TRIES;
        cl->port = ccs_dsx_auth_port(&cl->key, cl->cand);
    }
    if (cl->keyed && !authed && !cl->bye && cl->cand != 0) {
        cl->retry_ms = now + 20;
        cl->refused = 0; /* (said after a whole round only: ccs_dsx_client_tick) */
    } else {
        cl->backoff_ms = cl->backoff_ms ? (cl->backoff_ms * 2 > 5000 ? 5000 : cl->backoff_ms * 2) : 200;
        cl->retry_ms = now + cl->backoff_ms;
    }
    if (cl->sent)
        memset(cl->sent, 0, cl->nsent * sizeof *cl->sent);
    cl->ag_hash = 0;
    cl->agg_ms = 0;
    if (cl->to_relay && !cl->bye) { /* the root at once: it sends us to a relay again if it has another */
        back_to_root(cl, now);
        cl->backoff_ms = 0;
        cl->retry_ms = now + 200;
    }
}

static int client_connect(struct ccs_dsx_client *cl, char *why, size_t n)
{
    ccs_log(CCS_LOG_DEBUG, "desync side channel: connecting to the coordinator at %s:%d", cl->host, cl->port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", cl->port);
    int e = getaddrinfo(cl->host, ps, &hints, &ai);
    if (e != 0) {
        snprintf(why, n, "cannot resolve coordinator '%s': %s", cl->host, gai_strerror(e));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        snprintf(why, n, "socket: %s", strerror(errno));
        return -1;
    }
    ccs_dsx_socket_nonblock(fd);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        int e = errno;
        snprintf(why, n, "cannot connect to the coordinator at %s:%d: %s", cl->host, cl->port, strerror(e));
        freeaddrinfo(ai);
        close(fd);
        errno = e; /* the caller tells a refusal at start-up from the rest */
        return -1;
    }
    freeaddrinfo(ai);
    return ccs_dsx_conn_hello(&cl->c, fd, &cl->key, cl->wsize, cl->rank, cl->hostname, cl->job);
}

void ccs_dsx_client_detail(struct ccs_dsx_client *cl, uint64_t comm)
{
    uint64_t until = ccs_clock_mono_ms() + 2000;
    int slot = 0;
    for (int i = 0; i < 8; i++) {
        if (cl->detail_id[i] == comm) {
            slot = i;
            break;
        }
        if (cl->detail_until[i] < cl->detail_until[slot])
            slot = i;
    }
    cl->detail_id[slot] = comm;
    cl->detail_until[slot] = until;
}

void ccs_dsx_client_on_detail(struct ccs_dsx_client *cl, const void *p, size_t n)
{
    uint64_t id, seq = 0;
    if (n != 8 && n != 16)
        return;
    memcpy(&id, p, 8);
    if (n == 16)
        memcpy(&seq, (const unsigned char *)p + 8, 8);
    if (!(seq & CCS_DSX_PROBE_BIT)) /* a probe asks for a hash, not for records */
        ccs_dsx_client_detail(cl, id);
    if (seq && cl->cb.want)
        cl->cb.want(id, seq, cl->cb.arg);
}

static int wants_detail(uint64_t comm, void *arg)
{
    struct ccs_dsx_client *cl = arg;
    uint64_t now = ccs_clock_mono_ms();
    for (int i = 0; i < 8; i++)
        if (cl->detail_id[i] == comm && now < cl->detail_until[i])
            return 1;
    return 0;
}

/* Records go with a status when asked for (all kept), and the newest few
 * for a communicator the rank is blocked in: the coordinator then compares
 * them with the others' (a rank blocked in a call the others completed
 * differently), at a few hundred bytes per blocked rank. */
#define BLOCKED_HIST 4
static int keep_hist(uint64_t comm, void *arg)
{
    struct ccs_dsx_client *cl = arg;
    if (wants_detail(comm, arg))
        return CCS_DSX_HIST;
    for (uint32_t k = 0; cl->cur && k < cl->cur->ncomm && k < CCS_DSX_MAXCOMM; k++)
        if (cl->cur->comm[k].id == comm && (cl->cur->comm[k].flags & CCS_DSX_PINNED))
            return CCS_DSX_HIST; /* the records asked for */
    for (uint32_t k = 0; cl->cur && cl->fresh && k < cl->cur->ncomm && k < CCS_DSX_MAXCOMM; k++)
        if (cl->cur->comm[k].id == comm && cl->cur->comm[k].state == CCS_DSX_BLOCKED)
            return BLOCKED_HIST;
    return 0;
}

static int client_frames(struct ccs_dsx_client *cl, char *why, size_t n)
{
    struct ccs_dsx_conn *c = &cl->c;
    struct ccs_dsx_frame f;
    const unsigned char *p;
    int rc;
    while ((rc = ccs_dsx_conn_next_frame(c, &f, &p, why, n)) == 1) {
        if (c->state != CCS_DSX_C_AUTHED) {
            int hs = ccs_dsx_conn_welcome(c, &cl->key, cl->wsize, cl->rank, cl->hostname, cl->job, &f, p, why, n);
            if (hs == -2) {
                cl->refused = 1;
                if (!strstr(why, "another job"))
                    snprintf(why, n,
                             "the coordinator at %s:%d does not know our CCSHIM_SECRET (its MAC does not verify)",
                             cl->host, cl->port);
            }
            if (hs < 0)
                return -1;
            if (hs == 1) {
                cl->backoff_ms = 0;
                cl->ever = 1;
                /* A relay says where it listens on each link to the root. */
                if (cl->relaying && !cl->to_relay &&
                    ccs_dsx_conn_queue(c, CCS_DSX_M_RELAY_AT, &cl->at, sizeof cl->at) != 0)
                    return -1;
                uint64_t now = ccs_clock_mono_ms();
                if (cl->lost_ms) { /* one line a minute at most; a flapping link is not news each time */
                    int say = !cl->said_ms || now - cl->said_ms >= 60000;
                    ccs_log(say ? CCS_LOG_INFO : CCS_LOG_DEBUG,
                            "desync side channel: reconnected to the coordinator at %s:%d after %.1f s", cl->host,
                            cl->port, (now - cl->lost_ms) / 1000.0);
                    cl->said_ms = say ? now : cl->said_ms;
                    cl->lost_ms = 0;
                }
            }
        } else if (f.type == CCS_DSX_M_VERDICT) {
            if (f.length != sizeof *cl->vbuf) {
                snprintf(why, n, "VERDICT of %u bytes, expected %zu", f.length, sizeof *cl->vbuf);
                return -1;
            }
            memcpy(cl->vbuf, p, sizeof *cl->vbuf);
            if (ccs_dsx_check_verdict(cl->vbuf, cl->wsize, why, n) != 0)
                return -1;
            cl->vbuf->local = 0; /* the coordinator's, whatever the frame says */
            if (cl->cb.verdict)
                cl->cb.verdict(cl->vbuf, cl->cb.arg);
            if (cl->cb.down)
                cl->cb.down(f.type, cl->vbuf, sizeof *cl->vbuf, cl->cb.arg);
        } else if (f.type == CCS_DSX_M_BYE && f.length == 0) {
            cl->bye = 1;
            if (cl->cb.bye)
                cl->cb.bye(cl->cb.arg);
            if (cl->cb.down)
                cl->cb.down(f.type, NULL, 0, cl->cb.arg);
        } else if (f.type == CCS_DSX_M_DETAIL && (f.length == 8 || f.length == 16)) {
            ccs_dsx_client_on_detail(cl, p, f.length);
            if (cl->cb.down)
                cl->cb.down(f.type, p, f.length, cl->cb.arg);
        } else if (f.type == CCS_DSX_M_AGREE && f.length == sizeof(struct ccs_dsx_agree)) {
            struct ccs_dsx_agree a;
            memcpy(&a, p, sizeof a);
            if (a.size > 0 && a.size <= cl->wsize && a.n == (uint32_t)a.size && a.min <= a.max && cl->cb.agreed)
                cl->cb.agreed(&a, cl->cb.arg);
            if (a.size > 0 && a.size <= cl->wsize && a.n == (uint32_t)a.size && a.min <= a.max && cl->cb.down)
                cl->cb.down(f.type, &a, sizeof a, cl->cb.arg);
        } else if (f.type == CCS_DSX_M_RELAY && f.length == sizeof(struct ccs_dsx_relay) && !cl->to_relay) {
            struct ccs_dsx_relay rl;
            memcpy(&rl, p, sizeof rl);
            struct ccs_dsx_relay_at at = {.group = rl.group};
            if (!cl->cb.relay || cl->cb.relay(rl.group, rl.key, &at, cl->cb.arg) != 0)
                at.port = 0; /* cannot: the root never asks again */
            memcpy(at.key, rl.key, sizeof at.key);
            ccs_dsx_auth_wipe((struct ccs_dsx_key *)rl.key);
            if (at.port) {
                cl->relaying = 1;
                cl->at = at;
            }
            int rc = ccs_dsx_conn_queue(c, CCS_DSX_M_RELAY_AT, &at, sizeof at);
            ccs_dsx_auth_wipe((struct ccs_dsx_key *)at.key);
            if (rc != 0)
                return -1;
        } else if (f.type == CCS_DSX_M_GO && f.length == sizeof(struct ccs_dsx_go) && !cl->to_relay) {
            memcpy(&cl->go, p, sizeof cl->go);
            if (ccs_dsx_check_go(&cl->go, cl->wsize, why, n) != 0)
                return -1;
            if (!cl->relaying) { /* (a relay relays its own host: it stays) */
                cl->moving = 1;
                ccs_dsx_conn_consume(c);
                return 0;
            }
        } else {
            snprintf(why, n, "unexpected frame type %u (%u bytes) from the coordinator", f.type, f.length);
            return -1;
        }
        ccs_dsx_conn_consume(c);
    }
    return rc < 0 ? -1 : 0;
}

/* What was sent of the Ith status given, rank R (reset when another rank
 * takes that place), or NULL when out of memory. */
static struct sent *sent_of(struct ccs_dsx_client *cl, size_t i, int32_t r)
{
    if (i >= cl->nsent) {
        size_t nn = i + 8;
        struct sent *ns = realloc(cl->sent, nn * sizeof *ns);
        if (!ns)
            return NULL;
        memset(ns + cl->nsent, 0, (nn - cl->nsent) * sizeof *ns);
        cl->sent = ns;
        cl->nsent = nn;
    }
    if (cl->sent[i].wrank != r || !cl->sent[i].ms)
        cl->sent[i] = (struct sent){.wrank = r};
    return &cl->sent[i];
}

static int send_statuses(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n, uint64_t now);

int ccs_dsx_client_relay(struct ccs_dsx_client *cl, uint32_t group, uint32_t nhosts, uint32_t list_ms)
{
    if (!cl->agg && !(cl->agg = calloc(1, sizeof *cl->agg)))
        return -1;
    cl->agg->head.group = group;
    cl->agg->head.nhosts = nhosts;
    cl->list_ms = list_ms;
    return 0;
}

/* Relay mode: the group's fold, every SEND_MS, in one AGG frame (listed
 * statuses beyond the frame's bound wait for the next period). */
static int send_agg(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n, uint64_t now)
{
    if (cl->agg_ms && now - cl->agg_ms < SEND_MS)
        return 0;
    if (n > cl->rcap) {
        uint32_t *nl = realloc(cl->rlisted, n * sizeof *nl);
        if (nl)
            cl->rlisted = nl;
        uint8_t *nm = realloc(cl->rmark, n);
        if (nm)
            cl->rmark = nm;
        if (!nl || !nm)
            return -1;
        cl->rcap = n;
    }
    struct ccs_dsx_agg *a = cl->agg;
    ccs_dsx_agg_fold(st, n, cl->list_ms, a, cl->rlisted);
    ccs_dsx_agg_list_asked(a, st, n, cl->rlisted, cl->rmark, wants_detail, cl);
    uint32_t all = a->head.nlisted, sent = 0;
    size_t need = sizeof a->head + a->head.ncomm * sizeof a->comm[0], lim = CCS_DSX_MAX_FRAME - 64;
    for (uint32_t i = 0; i < all; i++)
        need += ccs_dsx_encoded_size(st[cl->rlisted[i]]);
    if (ccs_dsx_grow(&cl->buf, &cl->bufcap, need < lim ? need : lim) != 0)
        return -1;
    a->head.frame++;
    cl->fresh = 1; /* a blocked rank's newest records with it */
    size_t o = sizeof a->head + a->head.ncomm * sizeof a->comm[0];
    memcpy(cl->buf + sizeof a->head, a->comm, a->head.ncomm * sizeof a->comm[0]);
    for (uint32_t i = 0; i < all; i++) {
        uint32_t r = cl->rlisted[i];
        if (o + ccs_dsx_encoded_size(st[r]) > lim)
            break; /* the rest in the next period */
        cl->cur = st[r];
        size_t w = ccs_dsx_encode_status(cl->cur, keep_hist, cl, cl->buf + o, cl->bufcap - o);
        cl->cur = NULL;
        if (!w)
            return -1;
        o += w;
        sent++;
    }
    a->head.nlisted = sent;
    memcpy(cl->buf, &a->head, sizeof a->head);
    cl->agg_ms = now;
    return ccs_dsx_conn_queue(&cl->c, CCS_DSX_M_AGG, cl->buf, o);
}

static int send_statuses(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n, uint64_t now)
{
    if (cl->agg)
        return send_agg(cl, st, n, now);
    size_t need = 4;
    for (size_t i = 0; i < n; i++)
        need += ccs_dsx_encoded_size(st[i]);
    if (ccs_dsx_grow(&cl->buf, &cl->bufcap, need) != 0 || (n && !sent_of(cl, n - 1, st[n - 1]->wrank)))
        return -1;
    uint32_t cnt = 0;
    size_t o = 4;
    for (size_t i = 0; i < n; i++) {
        int32_t r = st[i]->wrank;
        struct sent *sn = r >= 0 && r < cl->wsize ? sent_of(cl, i, r) : NULL;
        if (!sn)
            continue;
        /* What the rules act on at once (life, blocked or not, where, records
         * asked for) goes out now; mere progress every SEND_MS; an unchanged
         * status once a second, as a heartbeat. */
        uint64_t beat = 0, h, u = ccs_hash_mix(st[i]->life, st[i]->ncomm);
        for (uint32_t k = 0; k < st[i]->ncomm && k < CCS_DSX_MAXCOMM; k++) {
            const struct ccs_dsx_comm *e = &st[i]->comm[k];
            u = ccs_hash_mix(u, e->state == CCS_DSX_BLOCKED ? e->blocked.seq : e->state);
            u = ccs_hash_mix(u, (uint64_t)wants_detail(e->id, cl)); /* records asked for: send now */
            if ((e->flags & CCS_DSX_PINNED) && e->nhist)
                u = ccs_hash_mix(u, e->hist[0].seq); /* ... the records kept around a seq, */
            if (e->flags & CCS_DSX_PROBED)
                u = ccs_hash_mix(u, e->cp_seq[1]); /* ... and the answer to a probe */
        }
        uint64_t age = now - sn->ms;
        /* Nothing the rules act on and sent within SEND_MS: nothing to send
         * whatever its progress, so not encoded (a leader of many ranks
         * encoded and hashed every status every period). */
        if (u == sn->urgent && age < SEND_MS)
            continue;
        /* A blocked rank's newest records go once, with the status that says
         * it is blocked there (the coordinator keeps them). */
        cl->cur = st[i];
        cl->fresh = u != sn->urgent;
        size_t len = ccs_dsx_encode_status(st[i], keep_hist, cl, cl->buf + o, cl->bufcap - o);
        cl->cur = NULL;
        if (!len)
            continue;
        memcpy(cl->buf + o + offsetof(struct ccs_dsx_status, beat), &beat, 8);
        h = ccs_hash_bytes(cl->buf + o, len, 0) | 1;
        memcpy(cl->buf + o + offsetof(struct ccs_dsx_status, beat), &st[i]->beat, 8);
        if (u == sn->urgent && !(h != sn->hash && age >= SEND_MS) && age < 1000)
            continue;
        sn->urgent = u;
        sn->hash = h;
        sn->ms = now;
        o += len;
        cnt++;
        /* Frames stay well under the receiver's limit (CCS_DSX_MAX_FRAME). */
        if (o > FRAME_SPLIT) {
            memcpy(cl->buf, &cnt, 4);
            if (ccs_dsx_conn_queue(&cl->c, CCS_DSX_M_STATUS, cl->buf, o) != 0)
                return -1;
            o = 4;
            cnt = 0;
        }
    }
    if (!cnt)
        return 0;
    memcpy(cl->buf, &cnt, 4);
    return ccs_dsx_conn_queue(&cl->c, CCS_DSX_M_STATUS, cl->buf, o);
}

/* What came from the coordinator (read, handled): 0, 1 when it said BYE,
 * -1 when the connection ended or misbehaved (WHY). */
/* The connection was refused by the coordinator's host (nothing listens
 * there yet): 1 with WHY, else 0. */
static int connect_refused(struct ccs_dsx_client *cl, char *why, size_t wn)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (cl->c.state != CCS_DSX_C_CONNECTING || getsockopt(cl->c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || !err)
        return 0;
    snprintf(why, wn, "cannot connect to the coordinator at %s:%d: %s", cl->host, cl->port, strerror(err));
    return 1;
}

/* Not worth a warning: the coordinator is not listening yet at start-up
 * (rank 0 may start it a moment after the leaders), within 10 s of it. */
static int starting(const struct ccs_dsx_client *cl, uint64_t now)
{
    return !cl->ever && now - cl->t_new < 10000;
}

static int on_readable(struct ccs_dsx_client *cl, char *why, size_t wn)
{
    if (connect_refused(cl, why, wn))
        return -2;
    int eof = ccs_dsx_conn_fill(&cl->c) != 0;
    int bad = client_frames(cl, why, wn) != 0;
    if (cl->bye)
        return 1;
    if (!bad && !eof)
        return 0;
    if (eof && cl->c.state != CCS_DSX_C_AUTHED) {
        cl->refused = 1;
        snprintf(why, wn,
                 "the coordinator at %s:%d closed the connection during the handshake "
                 "(it refused our ticket or proof: is CCSHIM_SECRET the same on every rank, and are we of "
                 "its job?)",
                 cl->host, cl->port);
    } else if (eof) {
        snprintf(why, wn, "the coordinator at %s:%d closed the connection", cl->host, cl->port);
    }
    return -1;
}

/* Up to TIMEOUT_MS polls of 1 ms: sends what is queued and handles what
 * comes back, until the handshake is done and the output sent.  0 or -1
 * (WHY; the connection is dropped). */
static int exchange(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n, uint64_t now,
                    int timeout_ms, char *why, size_t wn)
{
    struct pollfd pf = {.fd = cl->c.fd, .events = ccs_dsx_conn_events(&cl->c)};
    int waited = 0;
    do {
        if (poll(&pf, 1, timeout_ms - waited > 0 ? 1 : 0) < 0 && errno != EINTR)
            break;
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            int rc = on_readable(cl, why, wn);
            if (cl->moving) { /* GO: to the relay next period */
                client_drop(cl, now);
                return 0;
            }
            if (rc != 0) {
                if (cl->refused)
                    snprintf(cl->refused_why, sizeof cl->refused_why, "%s", why);
                client_drop(cl, now);
                return rc > 0 || (rc == -2 && starting(cl, now)) ? 0 : -1;
            }
        }
        if (ccs_dsx_conn_flush(&cl->c) != 0) {
            int refused = errno == ECONNREFUSED && cl->c.state == CCS_DSX_C_CONNECTING;
            snprintf(why, wn, "cannot reach the coordinator at %s:%d: %s", cl->host, cl->port, strerror(errno));
            client_drop(cl, now);
            return refused && starting(cl, now) ? 0 : -1;
        }
        /* Authenticated just now: send this period's statuses at once. */
        if (cl->c.state == CCS_DSX_C_AUTHED && cl->c.outlen == 0 && waited == 0 && n &&
            (cl->agg ? !cl->agg_ms : !(cl->nsent && cl->sent[0].wrank == st[0]->wrank && cl->sent[0].ms))) {
            if (send_statuses(cl, st, n, now) != 0) {
                client_drop(cl, now);
                return -1;
            }
            ccs_dsx_conn_flush(&cl->c);
        }
        pf.events = ccs_dsx_conn_events(&cl->c);
        waited++;
    } while (waited < timeout_ms && (cl->c.state != CCS_DSX_C_AUTHED || cl->c.outlen > cl->c.outoff));
    cl->refused = 0;
    return 0;
}

static int tick_body(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n,
                     const struct ccs_dsx_agree *ag, size_t nag, int timeout_ms, char *why, size_t wn)
{
    uint64_t now = ccs_clock_mono_ms();
    if (cl->bye) {
        /* Every rank finished: nothing more to say, nothing to reconnect to. */
        if (cl->c.fd >= 0)
            client_drop(cl, now);
        return 0;
    }
    if (cl->c.fd < 0) {
        if (now < cl->retry_ms && cl->refused)
            snprintf(why, wn, "%s; again in %llu ms", cl->refused_why, (unsigned long long)(cl->retry_ms - now));
        if (now < cl->retry_ms)
            return cl->refused ? -1 : 0;
        if (client_connect(cl, why, wn) != 0) {
            int refused = errno == ECONNREFUSED;
            client_drop(cl, now);
            return refused && starting(cl, now) ? 0 : -1;
        }
    }
    if (cl->c.state != CCS_DSX_C_AUTHED && now > cl->c.t_open + CCS_DSX_HANDSHAKE_MS) {
        snprintf(why, wn, "no handshake with the coordinator at %s:%d within 5 s", cl->host, cl->port);
        client_drop(cl, now);
        return -1;
    }
    if (cl->c.state == CCS_DSX_C_AUTHED) {
        if (send_statuses(cl, st, n, now) != 0) {
            snprintf(why, wn, "cannot queue statuses (the coordinator does not read)");
            client_drop(cl, now);
            return -1;
        }
        uint64_t h = nag ? ccs_hash_bytes(ag, nag * sizeof *ag, 0) | 1 : 0;
        if (nag && h != cl->ag_hash) {
            if (ccs_dsx_conn_queue(&cl->c, CCS_DSX_M_AGREE, ag, nag * sizeof *ag) != 0) {
                client_drop(cl, now);
                return -1;
            }
            cl->ag_hash = h;
        }
    }
    return exchange(cl, st, n, now, timeout_ms, why, wn);
}

int ccs_dsx_client_tick(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n,
                        const struct ccs_dsx_agree *ag, size_t nag, int timeout_ms, char *why, size_t wn)
{
    cl->rerouted = 0;
    int rc = tick_body(cl, st, n, ag, nag, timeout_ms, why, wn);
    if (rc < 0 && cl->rerouted)
        return 0;
    /* A port keyed by the secret: a failure before the handshake at one
     * candidate is news only once every candidate failed in a round. */
    if (rc < 0 && cl->keyed && cl->c.fd < 0 && cl->cand != 0)
        return 0;
    return rc;
}

void ccs_dsx_client_free(struct ccs_dsx_client *cl)
{
    if (!cl)
        return;
    ccs_dsx_conn_close(&cl->c);
    ccs_dsx_auth_wipe(&cl->key);
    ccs_dsx_auth_wipe(&cl->root_key);
    free(cl->sent);
    free(cl->agg);
    free(cl->rlisted);
    free(cl->rmark);
    free(cl->buf);
    free(cl->vbuf);
    free(cl);
}
