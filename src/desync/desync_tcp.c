/*
 * desync_tcp.c - the TCP side channel (docs/desync.md, "Transport"): the
 * coordinator, a thread in rank 0's process, and the per-host client run by
 * the leader rank of each host.  Non-blocking sockets and poll(2); every
 * frame is checked (desync_proto.c) before use; a peer that fails the
 * handshake or sends anything malformed is dropped.
 *
 * Handshake (desync_auth.h; the secret never travels):
 *   client -> HELLO(nonce_c)                             (MAC zero)
 *   coord  -> WELCOME(nonce_s, MAC(COORD, nonce_c, nonce_s, fields))
 *   client -> HELLO(nonce_c, MAC(CLIENT, nonce_c, nonce_s, fields))
 * Only then does the coordinator accept statuses; only a coordinator that
 * proved the secret can post verdicts.
 *
 * What an unauthenticated peer can make the coordinator spend is bounded:
 * at most MAX_UNAUTH connections awaiting the handshake (more wait in the
 * kernel's backlog, which costs no descriptor; once all slots are taken the
 * oldest is evicted after EVICT_MS, a member needing one round trip, so a
 * start-up burst of leaders waits briefly and idle peers cannot hold the
 * slots), HANDSHAKE_MS to complete it, frames checked from their header
 * (only HELLO of its exact size) before anything is buffered, at most
 * PREAUTH_BUF bytes buffered, a pause in accepting when descriptors run
 * out, and one log line per REFUSED_LOG_MS about refused peers.
 */
#include "desync_tcp.h"
#include "desync_auth.h"
#include "log.h"
#include "shim.h"
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BYTEORDER 0x01020304u
#define MAX_OUT (16u << 20)    /* a peer that does not read: drop it */
#define FRAME_SPLIT (1u << 20) /* bytes of statuses per STATUS frame, about */
#define SEND_MS 100            /* progress of a rank is forwarded at most this often */
#define MAX_UNAUTH 32          /* connections awaiting the handshake */
#define HANDSHAKE_MS 5000      /* to complete it */
#define EVICT_MS 1000          /* ... or less when others wait for a slot */
#define PREAUTH_BUF (2 * (sizeof(struct ccs_dsx_frame) + sizeof(struct ccs_dsx_hello)))
#define ACCEPT_PAUSE_MS 250 /* no descriptors left: accept again after */
#define REFUSED_LOG_MS 5000 /* refused peers: one line per period */

/* ------------------------------------------------------------ connections */

enum { C_CONNECTING = 1, C_HELLO = 2, C_AUTHED = 3 };

struct conn {
    int fd, state;
    unsigned char *in, *out;
    size_t inlen, incap, outlen, outcap, outoff;
    unsigned char nonce_c[CCS_DSX_NONCE], nonce_s[CCS_DSX_NONCE]; /* the client's, the coordinator's */
    uint64_t t_open;                                              /* ms, for the handshake deadline */
    uint64_t bytes_in, bytes_out;
    char host[CCS_DSX_HOST];
    char peer[64];
    int32_t peer_rank; /* the client's own rank and pid (HELLO) */
    uint32_t peer_pid;
    int sealed;                  /* authenticated: frames sealed both ways */
    struct ccs_dsx_session sess; /* their keys and counters */
    size_t cur_wire;             /* bytes on the wire of the frame next_frame returned */
};

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static int reserve(unsigned char **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need)
        nc *= 2;
    unsigned char *nb = realloc(*b, nc);
    if (!nb)
        return -1;
    *b = nb;
    *cap = nc;
    return 0;
}

/* Queues one frame (sealed after the handshake: payload encrypted, then
 * the tag; the header, authenticated, says the length with the tag). */
static int queue(struct conn *c, uint16_t type, const void *a, size_t alen, const void *b, size_t blen)
{
    size_t tag = c->sealed ? CCS_DSX_TAGBYTES : 0;
    struct ccs_dsx_frame f = {
        .magic = CCS_DSX_MAGIC, .version = CCS_DSX_VERSION, .type = type, .length = (uint32_t)(alen + blen + tag)};
    size_t need = c->outlen + sizeof f + alen + blen + tag;
    if (need - c->outoff > MAX_OUT || reserve(&c->out, &c->outcap, need) != 0)
        return -1;
    unsigned char *h = c->out + c->outlen;
    memcpy(h, &f, sizeof f);
    if (alen)
        memcpy(h + sizeof f, a, alen);
    if (blen)
        memcpy(h + sizeof f + alen, b, blen);
    if (tag)
        ccs_dsx_auth_seal(&c->sess, h, sizeof f, h + sizeof f, alen + blen, h + sizeof f + alen + blen);
    c->outlen = need;
    return 0;
}

static int flush_out(struct conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            return -1;
        c->outoff += (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
    if (c->outoff == c->outlen)
        c->outoff = c->outlen = 0;
    return 0;
}

/* Reads what is there (before the handshake completes, at most
 * PREAUTH_BUF bytes buffered); -1 on end of stream or error. */
static int fill_in(struct conn *c)
{
    for (;;) {
        size_t room = 16384;
        if (!c->sealed) {
            if (c->inlen >= PREAUTH_BUF)
                return 0; /* the handshake's frames first */
            room = PREAUTH_BUF - c->inlen;
        }
        if (reserve(&c->in, &c->incap, c->inlen + room) != 0)
            return -1;
        ssize_t r = recv(c->fd, c->in + c->inlen, !c->sealed ? room : c->incap - c->inlen, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0)
            return -1;
        c->inlen += (size_t)r;
        c->bytes_in += (uint64_t)r;
        if (c->inlen > CCS_DSX_MAX_FRAME + sizeof(struct ccs_dsx_frame) + 65536)
            return 0; /* process before reading more */
    }
}

/* 1 and the frame when a whole one is buffered; 0 when not yet; -1 malformed. */
static int next_frame(struct conn *c, struct ccs_dsx_frame *f, const unsigned char **payload, char *why, size_t n)
{
    if (c->inlen < sizeof *f)
        return 0;
    memcpy(f, c->in, sizeof *f);
    if (ccs_dsx_check_frame(f, why, n) != 0)
        return -1;
    /* Before the handshake only its frames, of their exact size: checked
     * from the header, before anything more is buffered. */
    if (!c->sealed && ((f->type != CCS_DSX_M_HELLO && f->type != CCS_DSX_M_WELCOME) ||
                                 f->length != sizeof(struct ccs_dsx_hello))) {
        snprintf(why, n, "frame of type %u and %u bytes before the handshake (expected a HELLO of %zu bytes)",
                 f->type, f->length, sizeof(struct ccs_dsx_hello));
        return -1;
    }
    if (c->sealed && f->length < CCS_DSX_TAGBYTES) {
        snprintf(why, n, "sealed frame of %u bytes, shorter than its tag", f->length);
        return -1;
    }
    if (c->inlen < sizeof *f + f->length)
        return 0;
    c->cur_wire = sizeof *f + f->length;
    *payload = c->in + sizeof *f;
    if (c->sealed) {
        /* Altered, injected, replayed or reordered: refused here. */
        size_t len = f->length - CCS_DSX_TAGBYTES;
        if (ccs_dsx_auth_open(&c->sess, c->in, sizeof *f, c->in + sizeof *f, len, c->in + sizeof *f + len) != 0) {
            snprintf(why, n, "a frame of type %u does not authenticate (altered or injected on the way?)", f->type);
            return -1;
        }
        f->length = (uint32_t)len; /* what the caller reads */
    }
    return 1;
}

/* Drops the frame next_frame returned from the input buffer. */
static void consume(struct conn *c, const struct ccs_dsx_frame *f)
{
    (void)f;
    size_t n = c->cur_wire;
    memmove(c->in, c->in + n, c->inlen - n);
    c->inlen -= n;
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ------------------------------------------------------------ coordinator */

struct fold {
    uint64_t comm, key, max, min;
    int32_t size, n;
    uint64_t *bits;
    int done;
};

/* The search for the first seq where a communicator's members differ
 * (docs/desync.md, "Finding the seq"): probes ask every member for its
 * running hash through one seq (kept by the ranks for the last 4096
 * operations); the hashes agree through LO and differ at HI; halving the
 * interval ends with the records of (LO, LO + 32], which the rules compare. */
#define NSEARCH 8
#define PROBE_EVERY_MS 100 /* a new probe of a communicator whose hashes agree */
#define PROBE_TICK_MS 20   /* answers are looked at this often */
#define PROBE_GIVE_UP_MS 1000
struct search {
    uint64_t comm, lo, hi, probe, probe_ms, last_ms, seen_ms;
    int32_t size;
    /* this pass */
    int32_t n, answered, alive;
    uint64_t min_done, hash;
    int differ, lost;
};

struct ccs_dsx_coord {
    int lfd;
    int32_t wsize;
    struct ccs_dsx_key key;
    int nunauth;               /* connections awaiting the handshake */
    uint64_t accept_after;     /* ms: accept(2) paused until (EMFILE) */
    uint64_t refused_log_ms;   /* last line about refused peers */
    unsigned refused_unlogged; /* refused since */
    char refused_why[160], refused_peer[64];
    struct ccs_dsx_thresholds t;
    int period_ms;
    pthread_t th;
    atomic_int stop;
    struct conn *cl;
    int *owner; /* client index that reported each rank, -1 */
    size_t ncl, capcl;
    struct ccs_dsx_status **st;
    size_t *stsize; /* bytes allocated for st[r] */
    const struct ccs_dsx_status **view;
    uint8_t *dead;
    uint64_t *beat, *beat_ms;
    struct ccs_dsx_seen *seen;
    struct fold *folds;
    size_t nfolds, capfolds;
    uint64_t detail_ms[16], detail_id[16];
    uint64_t want_ms[16], want_id[16], want_seq[16];
    struct search srch[NSEARCH];
    uint64_t probe_next;
    pthread_mutex_t lock; /* stats */
    struct ccs_dsx_coord_stats stats;
    struct ccs_dsx_status *scratch;
    uint64_t closed_in, closed_out; /* bytes of connections closed */
    atomic_int finishing;           /* the process exits: BYE once every rank finished */
    atomic_int finished;            /* 1: all finished, 2: timed out; BYE sent */
    uint64_t finish_by;             /* (coordinator thread) deadline of the final exchange */
};

static void broadcast(struct ccs_dsx_coord *k, uint16_t type, const void *p, size_t n)
{
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd >= 0 && k->cl[i].state == C_AUTHED && queue(&k->cl[i], type, p, n, NULL, 0) != 0)
            k->cl[i].state = -1; /* dropped below */
}

static void count_io(struct ccs_dsx_coord *k)
{
    uint64_t in = 0, out = 0;
    for (size_t i = 0; i < k->ncl; i++)
        in += k->cl[i].bytes_in, out += k->cl[i].bytes_out;
    pthread_mutex_lock(&k->lock);
    k->stats.bytes_in = k->closed_in + in;
    k->stats.bytes_out = k->closed_out + out;
    pthread_mutex_unlock(&k->lock);
}

static void coord_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    broadcast(k, CCS_DSX_M_VERDICT, v, sizeof *v);
    k->stats.verdicts++;
}

static void coord_detail(uint64_t comm, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    uint64_t now = ccs_clock_mono_ms();
    for (int i = 0; i < 16; i++)
        if (k->detail_id[i] == comm && now - k->detail_ms[i] < 1000)
            return;
    int slot = 0;
    for (int i = 1; i < 16; i++)
        if (k->detail_ms[i] < k->detail_ms[slot])
            slot = i;
    k->detail_id[slot] = comm;
    k->detail_ms[slot] = now;
    broadcast(k, CCS_DSX_M_DETAIL, &comm, sizeof comm);
}

/* Logs refused peers: the first at once, then one line per
 * REFUSED_LOG_MS with how many since (FLUSH 1: only that summary, when due;
 * 2: now, at stop). */
static void refused_log(struct ccs_dsx_coord *k, const char *peer, const char *why, int flush)
{
    uint64_t now = ccs_clock_mono_ms();
    if (flush == 2)
        k->refused_log_ms = k->refused_log_ms && now - k->refused_log_ms < REFUSED_LOG_MS ? now - REFUSED_LOG_MS
                                                                                          : k->refused_log_ms;
    if (!flush) {
        pthread_mutex_lock(&k->lock);
        k->stats.refused++;
        pthread_mutex_unlock(&k->lock);
        k->refused_unlogged++;
        snprintf(k->refused_peer, sizeof k->refused_peer, "%s", peer);
        snprintf(k->refused_why, sizeof k->refused_why, "%s", why);
    }
    if (!k->refused_unlogged || (k->refused_log_ms && now - k->refused_log_ms < REFUSED_LOG_MS))
        return;
    if (k->refused_unlogged == 1)
        ccs_log(CCS_LOG_WARN, "desync coordinator: refused a peer from %s: %s", k->refused_peer, k->refused_why);
    else
        ccs_log(CCS_LOG_WARN, "desync coordinator: refused %u peers in the last %llu s (the last from %s: %s)",
                k->refused_unlogged,
                (unsigned long long)(k->refused_log_ms ? (now - k->refused_log_ms + 500) / 1000 : 0),
                k->refused_peer, k->refused_why);
    k->refused_unlogged = 0;
    k->refused_log_ms = now;
}

static void drop_client(struct ccs_dsx_coord *k, size_t i, const char *why);

/* The connection awaiting the handshake the longest, or -1. */
static long oldest_unauth(struct ccs_dsx_coord *k)
{
    long best = -1;
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd >= 0 && !k->cl[i].sealed &&
            (best < 0 || k->cl[i].t_open < k->cl[(size_t)best].t_open))
            best = (long)i;
    return best;
}

/* Room to accept one more connection (evicting the oldest waiting one when
 * it had EVICT_MS)?  1 or 0. */
static int make_room(struct ccs_dsx_coord *k, uint64_t now, int evict)
{
    if (k->nunauth < MAX_UNAUTH)
        return 1;
    long o = oldest_unauth(k);
    if (o < 0 || now < k->cl[o].t_open + EVICT_MS)
        return 0;
    if (evict)
        drop_client(k, (size_t)o, "no handshake within 1 s while other peers wait for a slot");
    return 1;
}

/* Records differ at (COMM, SEQ): every host's ranks publish what they kept
 * around SEQ (asked again at most every 300 ms while the rules wait). */
static void coord_want(uint64_t comm, uint64_t seq, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    uint64_t now = ccs_clock_mono_ms();
    for (int i = 0; i < 16; i++)
        if (k->want_id[i] == comm && k->want_seq[i] == seq && now - k->want_ms[i] < 300)
            return;
    int slot = 0;
    for (int i = 1; i < 16; i++)
        if (k->want_ms[i] < k->want_ms[slot])
            slot = i;
    k->want_id[slot] = comm;
    k->want_seq[slot] = seq;
    k->want_ms[slot] = now;
    /* Only the hosts of members whose record of SEQ is not here: at scale
     * one host holds the odd record and a few others are asked. */
    uint64_t p[2] = {comm, seq};
    uint8_t *ask = calloc(k->ncl ? k->ncl : 1, 1);
    for (int32_t r = 0; r < k->wsize; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        if (!x || k->owner[r] < 0 || (size_t)k->owner[r] >= k->ncl || x->life != CCS_DSX_ALIVE)
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++) {
            const struct ccs_dsx_comm *e = &x->comm[q];
            if (e->id != comm)
                continue;
            int have = e->state == CCS_DSX_BLOCKED && e->blocked.seq == seq;
            for (unsigned h = 0; h < e->nhist && !have; h++)
                have = e->hist[h].seq == seq;
            if (!have && ask)
                ask[k->owner[r]] = 1;
        }
    }
    for (size_t i = 0; i < k->ncl; i++)
        if ((!ask || ask[i]) && k->cl[i].fd >= 0 && k->cl[i].state == C_AUTHED &&
            queue(&k->cl[i], CCS_DSX_M_DETAIL, p, sizeof p, NULL, 0) != 0)
            k->cl[i].state = -1; /* dropped below */
    free(ask);
}

static struct search *search_of(struct ccs_dsx_coord *k, uint64_t comm, int32_t size, uint64_t now)
{
    struct search *free_slot = NULL;
    for (int i = 0; i < NSEARCH; i++) {
        if (k->srch[i].comm == comm)
            return &k->srch[i];
        if (!free_slot && (!k->srch[i].comm || now - k->srch[i].seen_ms > 10000))
            free_slot = &k->srch[i];
    }
    if (!free_slot || size < 2)
        return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->comm = comm;
    free_slot->size = size;
    return free_slot;
}

/* The hash RANK's entry E reports through SEQ: 1 and *H, else 0. */
static int hash_at(const struct ccs_dsx_comm *e, uint64_t seq, uint64_t *h)
{
    if (e->done == seq) {
        *h = e->hash;
        return 1;
    }
    for (int p = 0; p < 2; p++)
        if (e->cp_seq[p] == seq) {
            *h = e->cp_hash[p];
            return 1;
        }
    return 0;
}

static void send_probe(struct ccs_dsx_coord *k, uint64_t comm, uint64_t seq)
{
    uint64_t p[2] = {comm, seq | CCS_DSX_PROBE_BIT};
    broadcast(k, CCS_DSX_M_DETAIL, p, sizeof p);
}

/* One pass of the search over every communicator in view. */
static void coord_probe(struct ccs_dsx_coord *k, uint64_t now)
{
    for (int i = 0; i < NSEARCH; i++) {
        struct search *x = &k->srch[i];
        x->n = x->answered = x->alive = 0;
        x->min_done = UINT64_MAX;
        x->differ = x->lost = 0;
    }
    for (int32_t r = 0; r < k->wsize; r++) {
        const struct ccs_dsx_status *st = k->st[r];
        if (!st)
            continue;
        for (uint32_t q = 0; q < st->ncomm && q < CCS_DSX_MAXCOMM; q++) {
            const struct ccs_dsx_comm *e = &st->comm[q];
            if (e->size < 2 || ccs_dsx_seen_has(k->seen, CCS_DSX_MISMATCH, e->id, 0))
                continue;
            struct search *x = search_of(k, e->id, e->size, now);
            if (!x || x->size != e->size)
                continue;
            x->seen_ms = now;
            x->n++;
            x->alive += st->life == CCS_DSX_ALIVE && !k->dead[r] && e->state != CCS_DSX_FREED;
            x->lost |= (e->flags & CCS_DSX_HASH_LOST) != 0;
            x->min_done = e->done < x->min_done ? e->done : x->min_done;
            uint64_t h;
            if (x->probe && hash_at(e, x->probe, &h)) {
                if (x->answered++ == 0)
                    x->hash = h;
                else
                    x->differ |= h != x->hash;
            }
        }
    }
    for (int i = 0; i < NSEARCH; i++) {
        struct search *x = &k->srch[i];
        if (!x->comm || x->seen_ms != now)
            continue;
        if (x->lost || x->n != x->size || x->alive != x->size) {
            x->probe = 0; /* members gone, unknown or without comparable hashes: the rules judge */
            continue;
        }
        if (x->probe && (x->differ || x->answered == x->size)) {
            if (x->differ)
                x->hi = x->probe;
            else
                x->lo = x->probe;
            x->probe = 0;
        } else if (x->probe && now - x->probe_ms > PROBE_GIVE_UP_MS) {
            x->probe = 0;
        }
        if (x->probe)
            continue;
        if (x->hi && x->hi <= x->lo)
            x->hi = 0; /* (stale) */
        uint64_t p = 0;
        if (x->hi && x->hi - x->lo <= CCS_DSX_HIST) {
            /* Found within a history's length: the records of (lo, lo + 32]. */
            if (now - x->last_ms >= 300) {
                coord_want(x->comm, x->lo + CCS_DSX_HIST / 2, k);
                x->last_ms = now;
            }
            continue;
        } else if (x->hi) {
            p = x->lo + (x->hi - x->lo) / 2;
        } else if (now - x->last_ms >= PROBE_EVERY_MS && x->min_done > x->lo && x->min_done != UINT64_MAX) {
            p = x->min_done;
        }
        if (p) {
            x->probe = p;
            x->probe_ms = x->last_ms = now;
            send_probe(k, x->comm, p);
        }
    }
}

static void drop_client(struct ccs_dsx_coord *k, size_t i, const char *why)
{
    struct conn *c = &k->cl[i];
    if (!c->sealed) {
        k->nunauth--;
        refused_log(k, c->peer, why ? why : "closed before the handshake", 0);
    } else if (why && strcmp(why, "connection closed") != 0) {
        ccs_log(CCS_LOG_WARN, "desync coordinator: dropped the leader of host '%s' (%s): %s", c->host, c->peer, why);
    }
    /* Its ranks: a rank that was alive when the connection closed died
     * (the leader's own process) or is no longer heard of (the others). */
    for (int32_t r = 0; r < k->wsize; r++) {
        if (k->owner[r] != (int)i)
            continue;
        k->owner[r] = -1;
        if (k->st[r] && k->st[r]->life == CCS_DSX_ALIVE) {
            if (r == c->peer_rank && k->st[r]->pid == c->peer_pid)
                k->dead[r] = 1; /* the client's own process went away */
            else {
                free(k->st[r]);
                k->st[r] = NULL;
                k->stsize[r] = 0;
            }
        }
    }
    k->closed_in += c->bytes_in;
    k->closed_out += c->bytes_out;
    conn_close(c);
}

static void fold_agree(struct ccs_dsx_coord *k, const struct ccs_dsx_agree *a)
{
    if (a->size <= 0 || a->size > k->wsize || a->crank < 0 || a->crank >= a->size || a->n != 1)
        return;
    struct fold *f = NULL;
    for (size_t i = 0; i < k->nfolds; i++)
        if (k->folds[i].comm == a->comm && k->folds[i].key == a->key)
            f = &k->folds[i];
    if (!f) {
        if (k->nfolds == k->capfolds) {
            /* Keep the table small: forget the oldest finished folds. */
            size_t w = 0;
            for (size_t i = 0; i < k->nfolds; i++) {
                if (k->folds[i].done && k->nfolds > 256 && i < k->nfolds / 2) {
                    free(k->folds[i].bits);
                    continue;
                }
                k->folds[w++] = k->folds[i];
            }
            k->nfolds = w;
            if (k->nfolds == k->capfolds) {
                size_t nc = k->capfolds ? k->capfolds * 2 : 64;
                struct fold *nf = realloc(k->folds, nc * sizeof *nf);
                if (!nf)
                    return;
                k->folds = nf;
                k->capfolds = nc;
            }
        }
        f = &k->folds[k->nfolds];
        memset(f, 0, sizeof *f);
        f->bits = calloc(((size_t)a->size + 63) / 64, 8);
        if (!f->bits)
            return;
        k->nfolds++;
        f->comm = a->comm;
        f->key = a->key;
        f->size = a->size;
        f->min = UINT64_MAX;
    }
    if (f->done || a->size != f->size || (f->bits[a->crank / 64] >> (a->crank % 64) & 1))
        return;
    f->bits[a->crank / 64] |= 1ull << (a->crank % 64);
    f->n++;
    f->max = a->max > f->max ? a->max : f->max;
    f->min = a->min < f->min ? a->min : f->min;
    if (f->n == f->size) {
        f->done = 1;
        struct ccs_dsx_agree res = {.comm = f->comm,
                                    .key = f->key,
                                    .max = f->max,
                                    .min = f->min,
                                    .crank = 0,
                                    .size = f->size,
                                    .n = (uint32_t)f->n};
        broadcast(k, CCS_DSX_M_AGREE, &res, sizeof res);
    }
}

/* Handles the buffered frames of client I; -1 to drop it (WHY). */
static int coord_frames(struct ccs_dsx_coord *k, size_t i, char *why, size_t n)
{
    struct conn *c = &k->cl[i];
    struct ccs_dsx_frame f;
    const unsigned char *p;
    int rc;
    while ((rc = next_frame(c, &f, &p, why, n)) == 1) {
        if (!c->sealed) {
            struct ccs_dsx_hello h;
            if (f.type != CCS_DSX_M_HELLO || f.length != sizeof h) {
                snprintf(why, n, "expected a HELLO of %zu bytes, got type %u of %u bytes", sizeof h, f.type,
                         f.length);
                return -1;
            }
            memcpy(&h, p, sizeof h);
            if (h.byteorder != BYTEORDER || h.wsize != k->wsize) {
                snprintf(why, n, "peer byte order %#x / world size %d does not match %#x / %d", h.byteorder,
                         h.wsize, BYTEORDER, k->wsize);
                return -1;
            }
            if (c->state == C_CONNECTING) { /* first HELLO: prove ourselves, send our nonce */
                memcpy(c->nonce_c, h.nonce, sizeof c->nonce_c);
                ccs_dsx_auth_nonce(c->nonce_s);
                struct ccs_dsx_hello w = {.byteorder = BYTEORDER, .wsize = k->wsize, .rank = -1};
                memcpy(w.nonce, c->nonce_s, sizeof w.nonce);
                memcpy(w.host, "coordinator", 12);
                ccs_dsx_auth_mac(&k->key, CCS_DSX_AUTH_COORD, c->nonce_c, c->nonce_s, &w, w.mac);
                if (queue(c, CCS_DSX_M_WELCOME, &w, sizeof w, NULL, 0) != 0)
                    return -1;
                c->state = C_HELLO;
            } else if (memcmp(h.nonce, c->nonce_c, sizeof h.nonce) != 0 ||
                       ccs_dsx_auth_verify(&k->key, CCS_DSX_AUTH_CLIENT, c->nonce_c, c->nonce_s, &h) != 0) {
                snprintf(why, n,
                         "handshake MAC does not verify (wrong CCSHIM_SECRET, or not a member of this job)");
                return -1;
            } else if (h.rank < 0 || h.rank >= k->wsize || h.host[CCS_DSX_HOST - 1] != 0) {
                snprintf(why, n, "authenticated peer sent rank %d of %d", h.rank, k->wsize);
                return -1;
            } else { /* authenticated: its rank, pid and host are the MAC's */
                c->peer_rank = h.rank;
                c->peer_pid = h.pid;
                memcpy(c->host, h.host, sizeof c->host);
                c->state = C_AUTHED;
                ccs_dsx_auth_session(&k->key, CCS_DSX_AUTH_COORD, c->nonce_c, c->nonce_s, &c->sess);
                c->sealed = 1; /* every frame from now on, both ways */
                k->nunauth--;
                pthread_mutex_lock(&k->lock);
                k->stats.clients++;
                pthread_mutex_unlock(&k->lock);
            }
        } else if (f.type == CCS_DSX_M_STATUS) {
            uint32_t cnt;
            if (f.length < 4) {
                snprintf(why, n, "STATUS frame of %u bytes", f.length);
                return -1;
            }
            memcpy(&cnt, p, 4);
            size_t o = 4;
            for (uint32_t j = 0; j < cnt; j++) {
                size_t used = ccs_dsx_decode_status(p + o, f.length - o, k->wsize, k->scratch, why, n);
                if (!used)
                    return -1;
                o += used;
                int32_t r = k->scratch->wrank;
                /* Stored with only the entries in use (most ranks use one or
                 * two communicators): the table of a 4096-rank job stays small. */
                size_t need =
                    offsetof(struct ccs_dsx_status, comm) + k->scratch->ncomm * sizeof(struct ccs_dsx_comm);
                if (!k->st[r] || k->stsize[r] < need) {
                    struct ccs_dsx_status *ns = realloc(k->st[r], need);
                    if (!ns)
                        continue;
                    if (!k->st[r])
                        ns->ncomm = 0;
                    k->st[r] = ns;
                    k->stsize[r] = need;
                }
                uint64_t now = ccs_clock_mono_ms();
                if (k->scratch->beat != k->beat[r] || !k->beat_ms[r]) {
                    k->beat[r] = k->scratch->beat;
                    k->beat_ms[r] = now;
                }
                /* Keep the records the rank sent before if it sent none now. */
                for (uint32_t e = 0; e < k->scratch->ncomm; e++) {
                    struct ccs_dsx_comm *ne = &k->scratch->comm[e];
                    if (ne->nhist)
                        continue;
                    for (uint32_t q = 0; q < k->st[r]->ncomm && q < CCS_DSX_MAXCOMM; q++)
                        if (k->st[r]->comm[q].id == ne->id && k->st[r]->comm[q].nhist &&
                            k->st[r]->comm[q].hist[k->st[r]->comm[q].nhist - 1].seq <= ne->issued) {
                            ne->nhist = k->st[r]->comm[q].nhist;
                            memcpy(ne->hist, k->st[r]->comm[q].hist, sizeof ne->hist);
                        }
                }
                memcpy(k->st[r], k->scratch, need);
                k->owner[r] = (int)i;
                k->dead[r] = 0;
                k->stats.statuses++;
            }
            if (o != f.length) {
                snprintf(why, n, "STATUS frame has %zu bytes after its %u statuses", f.length - o, cnt);
                return -1;
            }
        } else if (f.type == CCS_DSX_M_AGREE) {
            if (f.length % sizeof(struct ccs_dsx_agree)) {
                snprintf(why, n, "AGREE frame of %u bytes is not a whole number of values", f.length);
                return -1;
            }
            for (size_t o = 0; o < f.length; o += sizeof(struct ccs_dsx_agree)) {
                struct ccs_dsx_agree a;
                memcpy(&a, p + o, sizeof a);
                fold_agree(k, &a);
            }
        } else {
            snprintf(why, n, "unexpected frame type %u from a client", f.type);
            return -1;
        }
        consume(c, &f);
    }
    return rc < 0 ? -1 : 0;
}

static void coord_eval(struct ccs_dsx_coord *k)
{
    uint64_t now = ccs_clock_mono_ms();
    for (int32_t r = 0; r < k->wsize; r++) {
        k->view[r] = k->st[r];
        if (k->st[r] && k->st[r]->life == CCS_DSX_ALIVE && k->beat_ms[r] &&
            now - k->beat_ms[r] > (uint64_t)k->t.heartbeat_ms)
            k->dead[r] = 1;
    }
    struct ccs_dsx_view v = {.wsize = k->wsize, .st = k->view, .dead = k->dead, .now_ms = now};
    struct ccs_dsx_sink s = {.verdict = coord_verdict, .detail = coord_detail, .want = coord_want, .arg = k};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ccs_dsx_rules_run(&v, &k->t, k->seen, &s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    size_t held = sizeof *k + (size_t)k->wsize * (sizeof *k->st + sizeof *k->stsize + sizeof *k->view + 1 +
                                                  2 * sizeof *k->beat + sizeof *k->owner);
    for (int32_t r = 0; r < k->wsize; r++)
        held += k->st[r] ? k->stsize[r] : 0;
    for (size_t i = 0; i < k->ncl; i++)
        held += sizeof k->cl[i] + k->cl[i].incap + k->cl[i].outcap;
    held += k->capfolds * sizeof *k->folds;
    pthread_mutex_lock(&k->lock);
    k->stats.bytes_held = held;
    k->stats.evals++;
    if (ms > k->stats.eval_ms_max)
        k->stats.eval_ms_max = ms;
    pthread_mutex_unlock(&k->lock);
}

static void *coord_main(void *arg)
{
    struct ccs_dsx_coord *k = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    uint64_t next_eval = ccs_clock_mono_ms() + (uint64_t)k->period_ms;
    struct pollfd *pf = NULL;
    size_t pfcap = 0;
    while (!atomic_load(&k->stop)) {
        if (pfcap < k->ncl + 1) {
            size_t nc = (k->ncl + 1) * 2;
            struct pollfd *np = realloc(pf, nc * sizeof *np);
            if (!np)
                break;
            pf = np;
            pfcap = nc;
        }
        uint64_t now = ccs_clock_mono_ms();
        /* Out of descriptors: leave the backlog to the kernel for a while
         * rather than spin on EMFILE. */
        int room = make_room(k, now, 0);
        pf[0] = (struct pollfd){.fd = now >= k->accept_after && room ? k->lfd : -1, .events = POLLIN};
        size_t npf = k->ncl;
        for (size_t i = 0; i < npf; i++)
            pf[i + 1] = (struct pollfd){
                .fd = k->cl[i].fd, .events = (short)(POLLIN | (k->cl[i].outlen > k->cl[i].outoff ? POLLOUT : 0))};
        uint64_t wake = next_eval < k->probe_next ? next_eval : k->probe_next;
        int to = wake > now ? (int)(wake - now) : 0;
        if (now < k->accept_after && (int)(k->accept_after - now) < to)
            to = (int)(k->accept_after - now);
        if (!room && to > 50)
            to = 50; /* a slot may be evicted soon */
        poll(pf, npf + 1, to);
        if (pf[0].revents & POLLIN) {
            for (;;) {
                if (!make_room(k, ccs_clock_mono_ms(), 1))
                    break; /* the rest wait in the backlog */
                struct sockaddr_storage ss;
                socklen_t sl = sizeof ss;
                int fd = accept4(k->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
                if (fd < 0) {
                    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                        k->accept_after = ccs_clock_mono_ms() + ACCEPT_PAUSE_MS;
                        refused_log(k, "?", "out of file descriptors; accepting again in 250 ms", 0);
                    }
                    if (errno == EINTR || errno == ECONNABORTED)
                        continue;
                    break;
                }
                char host[64] = "?", serv[16];
                getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                            NI_NUMERICHOST | NI_NUMERICSERV);
                nonblock(fd);
                size_t slot = k->ncl;
                for (size_t i = 0; i < k->ncl; i++)
                    if (k->cl[i].fd < 0) {
                        slot = i;
                        break;
                    }
                if (slot == k->ncl) {
                    if (k->ncl == k->capcl) {
                        size_t nc = k->capcl ? k->capcl * 2 : 16;
                        struct conn *ncl = realloc(k->cl, nc * sizeof *ncl);
                        if (!ncl) {
                            close(fd);
                            continue;
                        }
                        k->cl = ncl;
                        k->capcl = nc;
                    }
                    k->ncl++;
                }
                struct conn *c = &k->cl[slot];
                memset(c, 0, sizeof *c);
                c->fd = fd;
                c->state = C_CONNECTING;
                c->t_open = ccs_clock_mono_ms();
                k->nunauth++;
                snprintf(c->peer, sizeof c->peer, "%s", host);
            }
        }
        for (size_t i = 0; i < npf; i++) {
            struct conn *c = &k->cl[i];
            if (c->fd < 0 || pf[i + 1].fd != c->fd)
                continue;
            char why[256] = "connection closed";
            int bad = 0;
            if (pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
                bad = fill_in(c) != 0;
            if (coord_frames(k, i, why, sizeof why) != 0)
                bad = 2;
            if (c->state < 0 || flush_out(c) != 0)
                bad = bad ? bad : 1;
            if (bad)
                drop_client(k, i, bad == 2 || !c->sealed ? why : NULL);
        }
        now = ccs_clock_mono_ms();
        if (now >= k->probe_next) {
            coord_probe(k, now);
            k->probe_next = now + PROBE_TICK_MS;
            for (size_t i = 0; i < k->ncl; i++)
                if (k->cl[i].fd >= 0 && (k->cl[i].state < 0 || flush_out(&k->cl[i]) != 0))
                    drop_client(k, i, NULL);
        }
        if (now >= next_eval) {
            coord_eval(k);
            count_io(k);
            if (atomic_load(&k->finishing) && !atomic_load(&k->finished)) {
                if (!k->finish_by)
                    k->finish_by = now + (uint64_t)atomic_load(&k->finishing);
                int all = 1;
                for (int32_t r = 0; r < k->wsize && all; r++)
                    all = k->dead[r] || (k->st[r] && k->st[r]->life != CCS_DSX_ALIVE);
                if (all || now >= k->finish_by) {
                    broadcast(k, CCS_DSX_M_BYE, NULL, 0);
                    for (size_t i = 0; i < k->ncl; i++)
                        if (k->cl[i].fd >= 0)
                            flush_out(&k->cl[i]);
                    atomic_store(&k->finished, all ? 1 : 2);
                }
            }
            for (size_t i = 0; i < k->ncl; i++) {
                struct conn *c = &k->cl[i];
                if (c->fd >= 0 && !c->sealed && now > c->t_open + HANDSHAKE_MS)
                    drop_client(k, i, "no handshake within 5 s");
                else if (c->fd >= 0 && (c->state < 0 || flush_out(c) != 0))
                    drop_client(k, i, NULL);
            }
            refused_log(k, NULL, NULL, 1);
            next_eval = now + (uint64_t)k->period_ms;
        }
    }
    free(pf);
    return NULL;
}

struct ccs_dsx_coord *ccs_dsx_coord_start(const char *host, int port, int32_t wsize, const char *secret,
                                          const struct ccs_dsx_thresholds *t, int period_ms, int *port_out,
                                          char *why, size_t n)
{
    struct ccs_dsx_coord *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    k->wsize = wsize;
    k->lfd = -1;
    if (ccs_dsx_auth_key(secret, &k->key, why, n) != 0) {
        free(k);
        return NULL;
    }
    k->t = *t;
    k->period_ms = period_ms < 10 ? 10 : period_ms;
    pthread_mutex_init(&k->lock, NULL);
    k->st = calloc((size_t)wsize, sizeof *k->st);
    k->stsize = calloc((size_t)wsize, sizeof *k->stsize);
    k->view = calloc((size_t)wsize, sizeof *k->view);
    k->dead = calloc((size_t)wsize, 1);
    k->beat = calloc((size_t)wsize, sizeof *k->beat);
    k->beat_ms = calloc((size_t)wsize, sizeof *k->beat_ms);
    k->owner = malloc((size_t)wsize * sizeof *k->owner);
    k->seen = ccs_dsx_seen_new();
    k->scratch = malloc(sizeof *k->scratch);
    if (!k->st || !k->stsize || !k->view || !k->dead || !k->beat || !k->beat_ms || !k->owner || !k->seen ||
        !k->scratch) {
        snprintf(why, n, "out of memory for %d ranks", wsize);
        goto fail;
    }
    for (int32_t r = 0; r < wsize; r++)
        k->owner[r] = -1;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int e = getaddrinfo(host && *host ? host : NULL, ps, &hints, &ai);
    if (e != 0) {
        snprintf(why, n, "cannot resolve '%s': %s", host ? host : "", gai_strerror(e));
        goto fail;
    }
    k->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (k->lfd >= 0)
        setsockopt(k->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (k->lfd < 0 || bind(k->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(k->lfd, 1024) != 0) {
        snprintf(why, n, "cannot listen on %s:%d: %s", host && *host ? host : "*", port, strerror(errno));
        freeaddrinfo(ai);
        if (k->lfd >= 0)
            close(k->lfd);
        goto fail;
    }
    freeaddrinfo(ai);
    nonblock(k->lfd);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(k->lfd, (struct sockaddr *)&sa, &sl);
    *port_out = ntohs(sa.sin_port);
    if (pthread_create(&k->th, NULL, coord_main, k) != 0) {
        snprintf(why, n, "cannot start the coordinator thread");
        close(k->lfd);
        goto fail;
    }
    return k;
fail:
    free(k->st), free(k->stsize), free(k->view), free(k->dead), free(k->beat), free(k->beat_ms), free(k->owner),
        free(k->scratch);
    ccs_dsx_seen_free(k->seen);
    free(k);
    return NULL;
}

void ccs_dsx_coord_stats(struct ccs_dsx_coord *k, struct ccs_dsx_coord_stats *out)
{
    pthread_mutex_lock(&k->lock);
    *out = k->stats;
    pthread_mutex_unlock(&k->lock);

    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(k->th, &cid) == 0 && clock_gettime(cid, &ts) == 0)
        out->cpu_s = ts.tv_sec + ts.tv_nsec / 1e9;
}

int ccs_dsx_coord_finish(struct ccs_dsx_coord *k, int timeout_ms)
{
    atomic_store(&k->finishing, timeout_ms > 1 ? timeout_ms : 1);
    /* The thread answers within an evaluation period after the deadline. */
    uint64_t give_up = ccs_clock_mono_ms() + (uint64_t)timeout_ms + 2u * (uint64_t)k->period_ms + 100u;
    while (!atomic_load(&k->finished) && ccs_clock_mono_ms() < give_up)
        ccs_sleep_ms(5);
    return atomic_load(&k->finished) == 1;
}

void ccs_dsx_coord_stop(struct ccs_dsx_coord *k)
{
    if (!k)
        return;
    atomic_store(&k->stop, 1);
    pthread_join(k->th, NULL);
    refused_log(k, NULL, NULL, 2);
    for (size_t i = 0; i < k->ncl; i++)
        conn_close(&k->cl[i]);
    close(k->lfd);
    ccs_dsx_auth_wipe(&k->key);
    for (int32_t r = 0; r < k->wsize; r++)
        free(k->st[r]);
    for (size_t i = 0; i < k->nfolds; i++)
        free(k->folds[i].bits);
    free(k->folds), free(k->cl), free(k->st), free(k->stsize), free(k->view), free(k->dead), free(k->beat),
        free(k->beat_ms);
    free(k->owner), free(k->scratch);
    ccs_dsx_seen_free(k->seen);
    free(k);
}

/* ------------------------------------------------------------ client */

struct ccs_dsx_client {
    char host[256], hostname[CCS_DSX_HOST];
    struct ccs_dsx_key key;
    int port;
    int32_t rank;
    int32_t wsize;
    struct ccs_dsx_client_cb cb;
    struct conn c;
    uint64_t retry_ms, backoff_ms;
    int refused;
    uint64_t *sent_hash, *sent_ms; /* per rank: what was last sent, when */
    uint64_t *sent_urgent;         /* per rank: signature of its states when last sent */
    uint64_t ag_hash;
    uint64_t detail_id[8], detail_until[8];
    unsigned char *buf;
    size_t bufcap;
    struct ccs_dsx_verdict *vbuf;
    uint64_t bytes_out_total;
    const struct ccs_dsx_status *cur; /* the status being encoded, */
    int fresh;                        /* ... with news the rules act on */
    int bye;                          /* the coordinator said BYE */
};

struct ccs_dsx_client *ccs_dsx_client_new(const char *host, int port, int32_t wsize, int32_t rank,
                                          const char *secret, const char *hostname,
                                          const struct ccs_dsx_client_cb *cb)
{
    struct ccs_dsx_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->rank = rank;
    snprintf(cl->host, sizeof cl->host, "%s", host);
    char why[128];
    if (ccs_dsx_auth_key(secret, &cl->key, why, sizeof why) != 0) {
        ccs_log(CCS_LOG_WARN, "desync: no TCP client: %s", why);
        free(cl);
        return NULL;
    }
    snprintf(cl->hostname, sizeof cl->hostname, "%s", hostname);
    cl->port = port;
    cl->wsize = wsize;
    cl->cb = *cb;
    cl->c.fd = -1;
    cl->sent_hash = calloc((size_t)wsize, sizeof *cl->sent_hash);
    cl->sent_ms = calloc((size_t)wsize, sizeof *cl->sent_ms);
    cl->sent_urgent = calloc((size_t)wsize, sizeof *cl->sent_urgent);
    cl->vbuf = malloc(sizeof *cl->vbuf);
    if (!cl->sent_hash || !cl->sent_ms || !cl->sent_urgent || !cl->vbuf) {
        ccs_dsx_client_free(cl);
        return NULL;
    }
    return cl;
}

int ccs_dsx_client_connected(struct ccs_dsx_client *cl)
{
    return cl->c.fd >= 0 && cl->c.state == C_AUTHED;
}
uint64_t ccs_dsx_client_bytes_out(struct ccs_dsx_client *cl)
{
    return cl->bytes_out_total + cl->c.bytes_out;
}

static void client_drop(struct ccs_dsx_client *cl, uint64_t now)
{
    cl->bytes_out_total += cl->c.bytes_out;
    conn_close(&cl->c);
    cl->backoff_ms = cl->backoff_ms ? (cl->backoff_ms * 2 > 5000 ? 5000 : cl->backoff_ms * 2) : 200;
    cl->retry_ms = now + cl->backoff_ms;
    memset(cl->sent_hash, 0, (size_t)cl->wsize * sizeof *cl->sent_hash);
    memset(cl->sent_ms, 0, (size_t)cl->wsize * sizeof *cl->sent_ms);
    memset(cl->sent_urgent, 0, (size_t)cl->wsize * sizeof *cl->sent_urgent);
    cl->ag_hash = 0;
}

static int client_connect(struct ccs_dsx_client *cl, char *why, size_t n)
{
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
    nonblock(fd);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        snprintf(why, n, "cannot connect to the coordinator at %s:%d: %s", cl->host, cl->port, strerror(errno));
        freeaddrinfo(ai);
        close(fd);
        return -1;
    }
    freeaddrinfo(ai);
    memset(&cl->c, 0, sizeof cl->c);
    cl->c.fd = fd;
    cl->c.state = C_CONNECTING;
    cl->c.t_open = ccs_clock_mono_ms();
    ccs_dsx_auth_nonce(cl->c.nonce_c);
    struct ccs_dsx_hello h = {
        .byteorder = BYTEORDER, .wsize = cl->wsize, .rank = cl->rank, .pid = (uint32_t)getpid()};
    memcpy(h.nonce, cl->c.nonce_c, sizeof h.nonce);
    memcpy(h.host, cl->hostname, sizeof h.host);
    return queue(&cl->c, CCS_DSX_M_HELLO, &h, sizeof h, NULL, 0);
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
    struct conn *c = &cl->c;
    struct ccs_dsx_frame f;
    const unsigned char *p;
    int rc;
    while ((rc = next_frame(c, &f, &p, why, n)) == 1) {
        if (c->state != C_AUTHED) {
            struct ccs_dsx_hello w;
            if (f.type != CCS_DSX_M_WELCOME || f.length != sizeof w) {
                snprintf(why, n, "coordinator sent type %u before the handshake", f.type);
                return -1;
            }
            memcpy(&w, p, sizeof w);
            if (w.byteorder != BYTEORDER || w.wsize != cl->wsize) {
                snprintf(why, n, "coordinator world size %d differs from %d", w.wsize, cl->wsize);
                return -1;
            }
            memcpy(c->nonce_s, w.nonce, sizeof c->nonce_s);
            if (ccs_dsx_auth_verify(&cl->key, CCS_DSX_AUTH_COORD, c->nonce_c, c->nonce_s, &w) != 0) {
                cl->refused = 1;
                snprintf(why, n,
                         "the coordinator at %s:%d does not know our CCSHIM_SECRET (its MAC does not verify)",
                         cl->host, cl->port);
                return -1;
            }
            struct ccs_dsx_hello h = {
                .byteorder = BYTEORDER, .wsize = cl->wsize, .rank = cl->rank, .pid = (uint32_t)getpid()};
            memcpy(h.nonce, c->nonce_c, sizeof h.nonce);
            memcpy(h.host, cl->hostname, sizeof h.host);
            h.host[CCS_DSX_HOST - 1] = 0;
            ccs_dsx_auth_mac(&cl->key, CCS_DSX_AUTH_CLIENT, c->nonce_c, c->nonce_s, &h, h.mac);
            if (queue(c, CCS_DSX_M_HELLO, &h, sizeof h, NULL, 0) != 0)
                return -1;
            ccs_dsx_auth_session(&cl->key, CCS_DSX_AUTH_CLIENT, c->nonce_c, c->nonce_s, &c->sess);
            c->sealed = 1; /* every frame after this HELLO, both ways */
            c->state = C_AUTHED;
            cl->backoff_ms = 0;
        } else if (f.type == CCS_DSX_M_VERDICT) {
            if (f.length != sizeof *cl->vbuf) {
                snprintf(why, n, "VERDICT of %u bytes, expected %zu", f.length, sizeof *cl->vbuf);
                return -1;
            }
            memcpy(cl->vbuf, p, sizeof *cl->vbuf);
            if (ccs_dsx_check_verdict(cl->vbuf, cl->wsize, why, n) != 0)
                return -1;
            if (cl->cb.verdict)
                cl->cb.verdict(cl->vbuf, cl->cb.arg);
        } else if (f.type == CCS_DSX_M_BYE && f.length == 0) {
            cl->bye = 1;
            if (cl->cb.bye)
                cl->cb.bye(cl->cb.arg);
        } else if (f.type == CCS_DSX_M_DETAIL && (f.length == 8 || f.length == 16)) {
            uint64_t id, seq = 0;
            memcpy(&id, p, 8);
            if (f.length == 16)
                memcpy(&seq, p + 8, 8);
            if (!(seq & CCS_DSX_PROBE_BIT)) /* a probe asks for a hash, not for records */
                ccs_dsx_client_detail(cl, id);
            if (seq && cl->cb.want)
                cl->cb.want(id, seq, cl->cb.arg);
        } else if (f.type == CCS_DSX_M_AGREE && f.length == sizeof(struct ccs_dsx_agree)) {
            struct ccs_dsx_agree a;
            memcpy(&a, p, sizeof a);
            if (a.size > 0 && a.size <= cl->wsize && a.n == (uint32_t)a.size && a.min <= a.max && cl->cb.agreed)
                cl->cb.agreed(&a, cl->cb.arg);
        } else {
            snprintf(why, n, "unexpected frame type %u (%u bytes) from the coordinator", f.type, f.length);
            return -1;
        }
        consume(c, &f);
    }
    return rc < 0 ? -1 : 0;
}

static int send_statuses(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n, uint64_t now)
{
    size_t need = 4;
    for (size_t i = 0; i < n; i++)
        need += ccs_dsx_encoded_size(st[i]);
    if (reserve(&cl->buf, &cl->bufcap, need) != 0)
        return -1;
    uint32_t cnt = 0;
    size_t o = 4;
    for (size_t i = 0; i < n; i++) {
        int32_t r = st[i]->wrank;
        if (r < 0 || r >= cl->wsize)
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
        /* A blocked rank's newest records go once, with the status that says
         * it is blocked there (the coordinator keeps them). */
        cl->cur = st[i];
        cl->fresh = u != cl->sent_urgent[r];
        size_t len = ccs_dsx_encode_status(st[i], keep_hist, cl, cl->buf + o, cl->bufcap - o);
        cl->cur = NULL;
        if (!len)
            continue;
        memcpy(cl->buf + o + offsetof(struct ccs_dsx_status, beat), &beat, 8);
        h = ccs_hash_bytes(cl->buf + o, len, 0) | 1;
        memcpy(cl->buf + o + offsetof(struct ccs_dsx_status, beat), &st[i]->beat, 8);
        uint64_t age = now - cl->sent_ms[r];
        if (u == cl->sent_urgent[r] && !(h != cl->sent_hash[r] && age >= SEND_MS) && age < 1000)
            continue;
        cl->sent_urgent[r] = u;
        cl->sent_hash[r] = h;
        cl->sent_ms[r] = now;
        o += len;
        cnt++;
        /* Frames stay well under the receiver's limit (CCS_DSX_MAX_FRAME). */
        if (o > FRAME_SPLIT) {
            memcpy(cl->buf, &cnt, 4);
            if (queue(&cl->c, CCS_DSX_M_STATUS, cl->buf, o, NULL, 0) != 0)
                return -1;
            o = 4;
            cnt = 0;
        }
    }
    if (!cnt)
        return 0;
    memcpy(cl->buf, &cnt, 4);
    return queue(&cl->c, CCS_DSX_M_STATUS, cl->buf, o, NULL, 0);
}

int ccs_dsx_client_tick(struct ccs_dsx_client *cl, const struct ccs_dsx_status *const *st, size_t n,
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
        if (now < cl->retry_ms)
            return cl->refused ? -1 : 0;
        if (client_connect(cl, why, wn) != 0) {
            client_drop(cl, now);
            return -1;
        }
    }
    if (cl->c.state != C_AUTHED && now > cl->c.t_open + HANDSHAKE_MS) {
        snprintf(why, wn, "no handshake with the coordinator at %s:%d within 5 s", cl->host, cl->port);
        client_drop(cl, now);
        return -1;
    }
    if (cl->c.state == C_AUTHED) {
        if (send_statuses(cl, st, n, now) != 0) {
            snprintf(why, wn, "cannot queue statuses (the coordinator does not read)");
            client_drop(cl, now);
            return -1;
        }
        uint64_t h = nag ? ccs_hash_bytes(ag, nag * sizeof *ag, 0) | 1 : 0;
        if (nag && h != cl->ag_hash) {
            if (queue(&cl->c, CCS_DSX_M_AGREE, ag, nag * sizeof *ag, NULL, 0) != 0) {
                client_drop(cl, now);
                return -1;
            }
            cl->ag_hash = h;
        }
    }
    struct pollfd pf = {.fd = cl->c.fd, .events = (short)(POLLIN | (cl->c.outlen > cl->c.outoff ? POLLOUT : 0))};
    int waited = 0;
    do {
        if (poll(&pf, 1, timeout_ms - waited > 0 ? 1 : 0) < 0 && errno != EINTR)
            break;
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            int eof = fill_in(&cl->c) != 0;
            int bad = client_frames(cl, why, wn) != 0;
            if (cl->bye) {
                client_drop(cl, now);
                return 0;
            }
            if (bad || eof) {
                if (eof && cl->c.state != C_AUTHED) {
                    cl->refused = 1;
                    snprintf(why, wn,
                             "the coordinator at %s:%d closed the connection during the handshake "
                             "(it refused our proof: is CCSHIM_SECRET the same on every rank?)",
                             cl->host, cl->port);
                } else if (eof) {
                    snprintf(why, wn, "the coordinator at %s:%d closed the connection", cl->host, cl->port);
                }
                client_drop(cl, now);
                return -1;
            }
        }
        if (flush_out(&cl->c) != 0) {
            snprintf(why, wn, "cannot reach the coordinator at %s:%d: %s", cl->host, cl->port, strerror(errno));
            client_drop(cl, now);
            return -1;
        }
        /* Authenticated just now: send this period's statuses at once. */
        if (cl->c.state == C_AUTHED && cl->c.outlen == 0 && waited == 0 && n && !cl->sent_ms[st[0]->wrank]) {
            if (send_statuses(cl, st, n, now) != 0) {
                client_drop(cl, now);
                return -1;
            }
            flush_out(&cl->c);
        }
        pf.events = (short)(POLLIN | (cl->c.outlen > cl->c.outoff ? POLLOUT : 0));
        waited++;
    } while (waited < timeout_ms && (cl->c.state != C_AUTHED || cl->c.outlen > cl->c.outoff));
    cl->refused = 0;
    return 0;
}

void ccs_dsx_client_free(struct ccs_dsx_client *cl)
{
    if (!cl)
        return;
    conn_close(&cl->c);
    ccs_dsx_auth_wipe(&cl->key);
    free(cl->sent_hash);
    free(cl->sent_ms);
    free(cl->sent_urgent);
    free(cl->buf);
    free(cl->vbuf);
    free(cl);
}
