/*
 * desync_coord.c - the coordinator of the TCP side channel (docs/desync.md,
 * "Transport"): a thread in rank 0's process that accepts one connection
 * per host (desync_conn.c), keeps the statuses of every rank of the job,
 * applies the rules to the whole job, broadcasts their verdicts, searches
 * for the first seq where a communicator's members differ, and folds
 * agreement values.  Non-blocking sockets and poll(2); every frame is
 * checked (desync_proto.c) before use; a peer that fails the handshake or
 * sends anything malformed is dropped.
 *
 * What an unauthenticated peer can make the coordinator spend is bounded:
 * at most MAX_UNAUTH connections awaiting the handshake (more wait in the
 * kernel's backlog, which costs no descriptor), CCS_DSX_HANDSHAKE_MS to
 * complete it, its frames checked from their header and bounded buffers
 * (desync_conn.c), a pause in accepting when descriptors run out, and one
 * log line per REFUSED_LOG_MS about refused peers.
 *
 * Admission is fair to the job's leaders: a leader's first HELLO carries a
 * ticket (desync_auth.h) checked at once, which moves it out of the slots
 * of unknown peers (up to MAX_TICKETED such); a peer that has shown no
 * ticket after SILENT_MS loses its slot when others wait in the backlog.  A
 * flood of idle connections is drained at MAX_UNAUTH per SILENT_MS, and a
 * leader's connection waits behind it for at most that long.
 */
#include "desync_conn.h"
#include "desync_fold.h"
#include "desync_search.h"
#include "desync_tcp.h"
#include "log.h"
#include "ccs_kinds.h"
#include "clock.h"
#include "thread.h"
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
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
    int32_t wsize;
    struct ccs_dsx_key key;           /* shared-secret mode */
    unsigned char job[CCS_DSX_JOBTAG];
    int kx;                           /* key exchange: per-rank keys from PEERS */
    unsigned char pk[CCS_DSX_PKBYTES], sk[CCS_DSX_PKBYTES];
    unsigned char *peers;             /* [wsize][32] every rank's public key */
    struct ccs_dsx_key *rkeys;        /* [wsize] derived when a rank first shows up */
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
    struct ccs_dsx_folds *folds; /* agreements (desync_fold.c) */
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
};

static void broadcast(struct ccs_dsx_coord *k, uint16_t type, const void *p, size_t n)
{
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd >= 0 && k->cl[i].state == CCS_DSX_C_AUTHED &&
            ccs_dsx_conn_queue(&k->cl[i], type, p, n) != 0)
            k->cl[i].state = CCS_DSX_C_DROP; /* dropped below */
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

#define NRECENT 8

static void coord_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    broadcast(k, CCS_DSX_M_VERDICT, v, sizeof *v);
    if (k->recent)
        k->recent[k->nrecent++ % NRECENT] = *v;
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

/* Logs refused peers (PEER, refused for WHY, TICKETED when it had shown a
 * valid member's ticket): the first at once, then one line per
 * REFUSED_LOG_MS with how many since, per reason (FLUSH 1: only that
 * summary, when due; 2: now, at stop).  Before, the summary named the last
 * peer's reason alone ("no member's ticket within 100 ms" when every
 * refused peer had shown one). */
static void refused_log(struct ccs_dsx_coord *k, const char *peer, const char *why, int ticketed, int flush)
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
        k->refused_noticket += !ticketed;
        int j = 0;
        while (j < REFUSED_KINDS && k->refused_kind[j].n &&
               !(k->refused_kind[j].ticketed == ticketed && strcmp(k->refused_kind[j].why, why) == 0))
            j++;
        if (j == REFUSED_KINDS) {
            k->refused_other++;
        } else {
            if (!k->refused_kind[j].n) {
                k->refused_kind[j].ticketed = ticketed;
                snprintf(k->refused_kind[j].why, sizeof k->refused_kind[j].why, "%s", why);
            }
            k->refused_kind[j].n++;
            snprintf(k->refused_kind[j].peer, sizeof k->refused_kind[j].peer, "%s", peer);
        }
    }
    if (!k->refused_unlogged || (k->refused_log_ms && now - k->refused_log_ms < REFUSED_LOG_MS))
        return;
    if (k->refused_unlogged == 1 && k->refused_kind[0].n == 1) {
        ccs_log(CCS_LOG_WARN, "desync coordinator: refused a peer from %s %s a member's ticket: %s",
                k->refused_kind[0].peer, k->refused_kind[0].ticketed ? "with" : "without", k->refused_kind[0].why);
    } else {
        char kinds[1024];
        size_t o = 0;
        for (int j = 0; j < REFUSED_KINDS && k->refused_kind[j].n && o < sizeof kinds; j++)
            o += (size_t)snprintf(kinds + o, sizeof kinds - o, "%s%u %s a member's ticket: %s (the last from %s)",
                                  j ? "; " : "", k->refused_kind[j].n,
                                  k->refused_kind[j].ticketed ? "with" : "without", k->refused_kind[j].why,
                                  k->refused_kind[j].peer);
        if (k->refused_other && o < sizeof kinds)
            snprintf(kinds + o, sizeof kinds - o, "; %u for other reasons", k->refused_other);
        ccs_log(CCS_LOG_WARN,
                "desync coordinator: refused %u peers in the last %llu s (%u without a member's ticket): %s",
                k->refused_unlogged,
                (unsigned long long)(k->refused_log_ms ? (now - k->refused_log_ms + 500) / 1000 : 0),
                k->refused_noticket, kinds);
    }
    k->refused_unlogged = 0;
    k->refused_noticket = 0;
    k->refused_other = 0;
    memset(k->refused_kind, 0, sizeof k->refused_kind);
    k->refused_log_ms = now;
}

static void drop_client(struct ccs_dsx_coord *k, size_t i, const char *why);
/* drop_client's WHY for a link dropped for its silence. */
static const char STALLED[] = "stalled";

/* Wipes the coordinator's secret key and the keys derived from it. */
static void sodium_memzero_keys(struct ccs_dsx_coord *k)
{
    struct ccs_dsx_key sk;
    memcpy(sk.k, k->sk, sizeof sk.k);
    ccs_dsx_auth_wipe(&sk);
    memset(k->sk, 0, sizeof k->sk);
    for (int32_t r = 0; k->rkeys && r < k->wsize; r++)
        ccs_dsx_auth_wipe(&k->rkeys[r]);
}

/* The unknown peer's connection awaiting the handshake the longest, or -1. */
static long oldest_unauth(struct ccs_dsx_coord *k)
{
    long best = -1;
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd >= 0 && !k->cl[i].sealed && !k->cl[i].prio &&
            (best < 0 || k->cl[i].t_open < k->cl[(size_t)best].t_open))
            best = (long)i;
    return best;
}

/* Room to accept one more connection (evicting the unknown peer waiting
 * the longest when it showed no ticket for SILENT_MS)?  1 or 0. */
static int make_room(struct ccs_dsx_coord *k, uint64_t now, int evict)
{
    if (k->nunauth < MAX_UNAUTH)
        return 1;
    long o = oldest_unauth(k);
    if (o < 0 || now < k->cl[o].t_open + SILENT_MS)
        return 0;
    if (evict)
        drop_client(k, (size_t)o, "no member's ticket within 100 ms while other peers wait for a slot");
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
        /* (Finished members too: they linger until BYE and answer; a
         * MISMATCH in a job's last calls needs their records.) */
        if (!x || k->owner[r] < 0 || (size_t)k->owner[r] >= k->ncl || x->life == CCS_DSX_DIED)
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
        if ((!ask || ask[i]) && k->cl[i].fd >= 0 && k->cl[i].state == CCS_DSX_C_AUTHED &&
            ccs_dsx_conn_queue(&k->cl[i], CCS_DSX_M_DETAIL, p, sizeof p) != 0)
            k->cl[i].state = CCS_DSX_C_DROP; /* dropped below */
    free(ask);
}

static void send_probe(uint64_t comm, uint64_t seq, void *arg)
{
    uint64_t p[2] = {comm, seq | CCS_DSX_PROBE_BIT};
    broadcast(arg, CCS_DSX_M_DETAIL, p, sizeof p);
}

/* One pass of the search over every communicator in view. */
static void coord_probe(struct ccs_dsx_coord *k, uint64_t now)
{
    struct ccs_dsx_search_out out = {.probe = send_probe, .want = coord_want, .arg = k};
    ccs_dsx_search_pass(k->srch, k->wsize, (const struct ccs_dsx_status *const *)k->st, k->dead, k->seen, now,
                        &out);
    k->pass_ms = now;
}

static void drop_client(struct ccs_dsx_coord *k, size_t i, const char *why)
{
    int stalled = why == STALLED;
    if (stalled)
        why = "no frame within the heartbeat period (a stalled link); closed so that stale statuses are not taken "
              "for news";
    struct ccs_dsx_conn *c = &k->cl[i];
    if (!c->sealed) {
        if (c->prio)
            k->nprio--;
        else
            k->nunauth--;
        pthread_mutex_lock(&k->lock);
        k->stats.refused_ticketless += !c->ticketed;
        pthread_mutex_unlock(&k->lock);
        refused_log(k, c->peer, why ? why : "closed before the handshake", c->ticketed, 0);
    } else if (why && strcmp(why, "connection closed") != 0) {
        /* A leader that keeps failing the same way (a buggy peer, a flaky
         * link) is said once a minute, not at each reconnection. */
        uint64_t now = ccs_clock_mono_ms();
        if (!k->dropped_log_ms || now - k->dropped_log_ms >= 60000) {
            ccs_log(CCS_LOG_WARN,
                    "desync coordinator: dropped the leader of host '%s' (%s): %s; its ranks are unreachable "
                    "until it reconnects%s",
                    c->host, c->peer, why, k->dropped_unlogged ? " (more drops since the last line)" : "");
            k->dropped_log_ms = now;
            k->dropped_unlogged = 0;
        } else {
            k->dropped_unlogged++;
        }
    }
    /* Its ranks are unreachable, not dead: a connection closes for many
     * reasons (a reset, a dropped or altered frame, a stall) and the leader
     * reconnects.  Their statuses and records are kept; a rank is dead only
     * when its own host says so (its pid gone, seen by the host's leader). */
    /* Unreachable since the last word heard from the leader, not since
     * the drop: a link dropped for silence went silent a heartbeat before
     * (the verdict said "no word for 10.1 s" after 20 s of silence). */
    uint64_t now = ccs_clock_mono_ms(), last = c->sealed && c->t_rx ? c->t_rx : now;
    for (int32_t r = 0; r < k->wsize; r++) {
        if (k->owner[r] != (int)i)
            continue;
        k->owner[r] = -1;
        if (k->st[r] && k->st[r]->life == CCS_DSX_ALIVE && !k->unreach_ms[r]) {
            k->unreach_ms[r] = last < now ? last : now;
            k->unreach_silent[r] = (uint8_t)stalled;
        }
    }
    k->closed_in += c->bytes_in;
    k->closed_out += c->bytes_out;
    ccs_dsx_conn_close(c);
}

static void fold_agree(struct ccs_dsx_coord *k, int32_t peer, const char *host, const struct ccs_dsx_agree *a)
{
    struct ccs_dsx_agree res;
    uint64_t now = ccs_clock_mono_ms();
    int rc = ccs_dsx_folds_add(k->folds, a, k->wsize, peer, now, &res);
    if (rc == 1) {
        broadcast(k, CCS_DSX_M_AGREE, &res, sizeof res);
    } else if (rc < 0) { /* said at once, then once per REFUSED_LOG_MS with the count */
        k->folds_refused++;
        if (k->folds_log_ms && now - k->folds_log_ms < REFUSED_LOG_MS)
            return;
        CCS_LOG(WARN,
                "desync coordinator: the leader of host '%.64s' (rank %d) opened more agreements than its share "
                "(%d pending, of %d in all) or the table is full: %llu new ones refused%s; their ranks time out "
                "and go on without them",
                host, peer, CCS_DSX_FOLDS_PER_PEER, CCS_DSX_FOLDS_PENDING, (unsigned long long)k->folds_refused,
                k->folds_log_ms ? " in the last 5 s" : "");
        k->folds_log_ms = now;
        k->folds_refused = 0;
    }
}

/* Stores rank R's status, just decoded into k->scratch, from client I:
 * with only the entries in use (most ranks use one or two communicators:
 * the table of a 4096-rank job stays small), and the records the rank sent
 * before if it sent none now. */
static void store_status(struct ccs_dsx_coord *k, size_t i)
{
    struct ccs_dsx_status *in = k->scratch;
    int32_t r = in->wrank;
    size_t need = offsetof(struct ccs_dsx_status, comm) + in->ncomm * sizeof(struct ccs_dsx_comm);
    if (!k->st[r] || k->stsize[r] < need) {
        struct ccs_dsx_status *ns = realloc(k->st[r], need);
        if (!ns)
            return;
        if (!k->st[r])
            ns->ncomm = 0;
        k->st[r] = ns;
        k->stsize[r] = need;
    }
    uint64_t now = ccs_clock_mono_ms();
    if (in->beat != k->beat[r] || !k->beat_ms[r]) {
        k->beat[r] = in->beat;
        k->beat_ms[r] = now;
    }
    const struct ccs_dsx_status *old = k->st[r];
    for (uint32_t e = 0; e < in->ncomm; e++) {
        struct ccs_dsx_comm *ne = &in->comm[e];
        if (ne->nhist)
            continue;
        for (uint32_t q = 0; q < old->ncomm && q < CCS_DSX_MAXCOMM; q++)
            if (old->comm[q].id == ne->id && old->comm[q].nhist &&
                old->comm[q].hist[old->comm[q].nhist - 1].seq <= ne->issued) {
                ne->nhist = old->comm[q].nhist;
                memcpy(ne->hist, old->comm[q].hist, sizeof ne->hist);
            }
    }
    memcpy(k->st[r], in, need);
    k->owner[r] = (int)i;
    k->dead[r] = 0;
    k->unreach_ms[r] = 0;
    k->unreach_silent[r] = 0;
    k->stats.statuses++;
}

/* A STATUS frame (P, LEN bytes) from client I: a count, then the statuses
 * of its host's ranks.  0, or -1 when malformed (WHY). */
static int on_statuses(struct ccs_dsx_coord *k, size_t i, const unsigned char *p, uint32_t len, char *why, size_t n)
{
    uint32_t cnt;
    if (len < 4) {
        snprintf(why, n, "STATUS frame of %u bytes", len);
        return -1;
    }
    memcpy(&cnt, p, 4);
    size_t o = 4;
    for (uint32_t j = 0; j < cnt; j++) {
        size_t used = ccs_dsx_decode_status(p + o, len - o, k->wsize, k->scratch, why, n);
        if (!used)
            return -1;
        o += used;
        store_status(k, i);
    }
    if (o != len) {
        snprintf(why, n, "STATUS frame has %zu bytes after its %u statuses", len - o, cnt);
        return -1;
    }
    return 0;
}

/* An AGREE frame: whole agreement values, each folded.  0 or -1 (WHY). */
static int on_agree(struct ccs_dsx_coord *k, const struct ccs_dsx_conn *c, const unsigned char *p, uint32_t len,
                    char *why, size_t n)
{
    if (len % sizeof(struct ccs_dsx_agree)) {
        snprintf(why, n, "AGREE frame of %u bytes is not a whole number of values", len);
        return -1;
    }
    if (len / sizeof(struct ccs_dsx_agree) > CCS_DSX_AGREE_PER_FRAME) { /* each frame's work bounded */
        snprintf(why, n, "AGREE frame of %zu values (at most %d)", len / sizeof(struct ccs_dsx_agree),
                 CCS_DSX_AGREE_PER_FRAME);
        return -1;
    }
    for (size_t o = 0; o < len; o += sizeof(struct ccs_dsx_agree)) {
        struct ccs_dsx_agree a;
        memcpy(&a, p + o, sizeof a);
        fold_agree(k, c->peer_rank, c->host, &a);
    }
    return 0;
}

/* The key rank R's leader proves: the job's (shared secret), or the one
 * from the key exchange with R's public key, derived once. */
static const struct ccs_dsx_key *key_of_rank(int32_t r, void *arg)
{
    struct ccs_dsx_coord *k = arg;
    if (!k->kx)
        return &k->key;
    if (r < 0 || r >= k->wsize)
        return NULL;
    if (!k->rkey_ok[r]) {
        if (ccs_dsx_auth_key_kx(k->pk, k->sk, k->peers + (size_t)r * CCS_DSX_PKBYTES, 1, k->job, &k->rkeys[r]) != 0)
            return NULL;
        k->rkey_ok[r] = 1;
    }
    return &k->rkeys[r];
}

/* Handles the buffered frames of client I; -1 to drop it (WHY). */
static int coord_frames(struct ccs_dsx_coord *k, size_t i, char *why, size_t n)
{
    struct ccs_dsx_conn *c = &k->cl[i];
    struct ccs_dsx_frame f;
    const unsigned char *p;
    int rc;
    while ((rc = ccs_dsx_conn_next_frame(c, &f, &p, why, n)) == 1) {
        if (!c->sealed) {
            int hs = ccs_dsx_conn_on_hello(c, key_of_rank, k, k->wsize, k->job, &f, p, why, n);
            if (hs < 0)
                return -1;
            if (hs == 0 && k->nprio < MAX_TICKETED) { /* a member's ticket: out of the unknown peers' slots */
                c->prio = 1;
                k->nunauth--;
                k->nprio++;
            }
            if (hs == 1) { /* authenticated */
                if (c->prio)
                    k->nprio--;
                else
                    k->nunauth--;
                c->prio = 0;
                unsigned nr = k->nrecent < NRECENT ? k->nrecent : NRECENT;
                for (unsigned j = 0; k->recent && j < nr; j++)
                    if (ccs_dsx_conn_queue(c, CCS_DSX_M_VERDICT, &k->recent[(k->nrecent - nr + j) % NRECENT],
                                           sizeof *k->recent) != 0)
                        c->state = CCS_DSX_C_DROP;
                pthread_mutex_lock(&k->lock);
                k->stats.clients++;
                pthread_mutex_unlock(&k->lock);
            }
        } else if (f.type == CCS_DSX_M_STATUS) {
            if (on_statuses(k, i, p, f.length, why, n) != 0)
                return -1;
        } else if (f.type == CCS_DSX_M_AGREE) {
            if (on_agree(k, c, p, f.length, why, n) != 0)
                return -1;
        } else {
            snprintf(why, n, "unexpected frame type %u from a client", f.type);
            return -1;
        }
        ccs_dsx_conn_consume(c);
    }
    return rc < 0 ? -1 : 0;
}

/* The grace before anything is said about an unreachable rank: its
 * leader reconnects well within it after a reset (200 ms backoff). */
static uint64_t grace_ms(const struct ccs_dsx_coord *k)
{
    return k->t.heartbeat_ms > k->t.block_ms ? k->t.heartbeat_ms : k->t.block_ms;
}

/* The silence after which unreachable rank R may be named, counted from
 * the last word heard from it: the grace when its connection closed, twice
 * that when its host only fell silent (a process stopped a while, a link
 * that stalls: 12 to 18 s of it, with the default heartbeat, must pass
 * without a verdict, and the link is dropped a heartbeat into it). */
static uint64_t silence_ms(const struct ccs_dsx_coord *k, int32_t r)
{
    return k->unreach_silent[r] ? 2 * grace_ms(k) : grace_ms(k);
}

/* Unreachable ranks the rest of a communicator hangs on: every reachable
 * member of comm COMM (of SIZE) blocked at one seq for the grace period,
 * the others unreachable for as long.  A DESYNC naming them unreachable
 * (not dead: nothing says their process is gone). */
static void unreachable_verdict(struct ccs_dsx_coord *k, uint64_t comm, int32_t size, uint64_t now)
{
    uint64_t g = grace_ms(k), seq = 0;
    int32_t *wait = malloc((size_t)size * sizeof *wait), *lost = malloc((size_t)size * sizeof *lost);
    size_t nw = 0, nl = 0, seen_members = 0;
    const struct ccs_dsx_comm *wop = NULL;
    uint32_t wms = UINT32_MAX;
    int ok = wait && lost;
    struct ccs_dsx_verdict *v = ok ? calloc(1, sizeof *v) : NULL;
    ok = v != NULL;
    for (int32_t r = 0; ok && r < k->wsize; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        if (!x)
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM && ok; q++) {
            const struct ccs_dsx_comm *e = &x->comm[q];
            if (e->id != comm)
                continue;
            seen_members++;
            if (k->unreach_ms[r] && x->life == CCS_DSX_ALIVE) {
                ok = now - k->unreach_ms[r] >= silence_ms(k, r) && nl < (size_t)size;
                if (ok)
                    lost[nl++] = r;
            } else if (x->life == CCS_DSX_ALIVE && e->state == CCS_DSX_BLOCKED && e->blocked_ms >= g &&
                       (!wop || e->blocked.seq == seq) && nw < (size_t)size) {
                seq = e->blocked.seq;
                wop = wop ? wop : e;
                wms = e->blocked_ms < wms ? e->blocked_ms : wms;
                wait[nw++] = r;
            } else {
                ok = 0; /* a member that is not hanging on them: no verdict */
            }
        }
    }
    if (ok && nw && nl && seen_members == (size_t)size && ccs_dsx_seen_add(k->seen, CCS_DSX_DESYNC, comm, seq)) {
        char rw[256], ops[160], lt[400] = "";
        size_t o = 0;
        ccs_ranks_str(wait, nw, rw, sizeof rw);
        ccs_dsx_op_str(&wop->blocked, ops, sizeof ops);
        for (size_t j = 0; j < nl && j < 4 && o + 8 < sizeof lt; j++) {
            const struct ccs_dsx_status *x = k->st[lost[j]];
            uint64_t at = 0;
            for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++)
                if (x->comm[q].id == comm)
                    at = x->comm[q].issued;
            int w = snprintf(lt + o, sizeof lt - o,
                             "; rank %d unreachable (host '%.40s': no word from its leader for %.1f s; last seen "
                             "at seq %llu; not known to be dead)",
                             lost[j], x->host, (now - k->unreach_ms[lost[j]]) / 1000.0, (unsigned long long)at);
            o += w > 0 ? (size_t)w : 0;
        }
        v->cls = CCS_DSX_DESYNC;
        v->comm = comm;
        v->seq = seq;
        v->comm_size = size;
        snprintf(v->line, sizeof v->line, "comm=%#llx size=%d seq=%llu: rank%s %s blocked in %s at seq %llu for %.1f s%s",
                 (unsigned long long)comm, size, (unsigned long long)seq, nw > 1 ? "s" : "", rw, ops,
                 (unsigned long long)seq, wms / 1000.0, lt);
        for (size_t j = 0; j < nl + nw && v->nparty < CCS_DSX_PARTIES; j++) {
            int32_t r = j < nl ? lost[j] : wait[j - nl];
            const struct ccs_dsx_status *x = k->st[r];
            struct ccs_dsx_party *p = &v->party[v->nparty++];
            p->wrank = r;
            p->role = j < nl ? CCS_DSX_R_BEHIND : CCS_DSX_R_WAITING;
            p->life = x->life;
            p->pid = x->pid;
            memcpy(p->host, x->host, sizeof p->host);
            for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++)
                if (x->comm[q].id == comm)
                    p->c = x->comm[q];
        }
        coord_verdict(v, k);
    }
    free(wait), free(lost), free(v);
}

/* Each communicator of a rank unreachable past the grace, once per pass
 * (a whole network blip leaves every host unreachable: the communicators,
 * not the ranks, are what is judged). */
#define MAX_LOST_COMMS 64
static void rule_unreachable(struct ccs_dsx_coord *k, uint64_t now)
{
    uint64_t ids[MAX_LOST_COMMS];
    int32_t sizes[MAX_LOST_COMMS];
    size_t n = 0;
    for (int32_t r = 0; r < k->wsize; r++) {
        const struct ccs_dsx_status *x = k->st[r];
        if (!x || !k->unreach_ms[r] || x->life != CCS_DSX_ALIVE || now - k->unreach_ms[r] < silence_ms(k, r))
            continue;
        for (uint32_t q = 0; q < x->ncomm && q < CCS_DSX_MAXCOMM; q++) {
            const struct ccs_dsx_comm *e = &x->comm[q];
            size_t j = 0;
            while (j < n && ids[j] != e->id)
                j++;
            if (j == n && n < MAX_LOST_COMMS && e->size > 1 && e->size <= k->wsize) {
                ids[n] = e->id;
                sizes[n++] = e->size;
            }
        }
    }
    for (size_t j = 0; j < n; j++)
        unreachable_verdict(k, ids[j], sizes[j], now);
}

static void coord_eval(struct ccs_dsx_coord *k)
{
    uint64_t now = ccs_clock_mono_ms();
    for (int32_t r = 0; r < k->wsize; r++) {
        /* A status that stopped coming (a stalled link) is unreachable too. */
        if (k->st[r] && k->st[r]->life == CCS_DSX_ALIVE && k->beat_ms[r] && !k->unreach_ms[r] &&
            now - k->beat_ms[r] > (uint64_t)k->t.heartbeat_ms) {
            k->unreach_ms[r] = k->beat_ms[r]; /* its last word */
            k->unreach_silent[r] = 1;
        }
        /* Unreachable ranks count as computing (nothing known of them), and
         * so does a rank whose status stopped changing for longer than four
         * of its republications (every rank republishes at least every
         * 500 ms): a stalled link delivers old statuses late, and an old
         * "blocked at seq 4" beside a fresh "blocked at seq 5" is no hang. */
        uint64_t stale_ms = 2000 + 4 * (uint64_t)k->t.mismatch_wait_ms;
        int stale = k->beat_ms[r] && now - k->beat_ms[r] > stale_ms;
        k->view[r] = (k->unreach_ms[r] || stale) && k->st[r] && k->st[r]->life == CCS_DSX_ALIVE ? NULL : k->st[r];
    }
    struct ccs_dsx_view v = {.wsize = k->wsize, .st = k->view, .dead = k->dead, .now_ms = now};
    struct ccs_dsx_sink s = {.verdict = coord_verdict, .detail = coord_detail, .want = coord_want, .arg = k};
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ccs_dsx_rules_run(&v, &k->t, k->seen, &s);
    rule_unreachable(k, now);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    size_t held = sizeof *k + (size_t)k->wsize * (sizeof *k->st + sizeof *k->stsize + sizeof *k->view + 1 +
                                                  2 * sizeof *k->beat + sizeof *k->owner);
    for (int32_t r = 0; r < k->wsize; r++)
        held += k->st[r] ? k->stsize[r] : 0;
    for (size_t i = 0; i < k->ncl; i++)
        held += sizeof k->cl[i] + k->cl[i].incap + k->cl[i].outcap;
    held += ccs_dsx_folds_bytes(k->folds);
    pthread_mutex_lock(&k->lock);
    k->stats.bytes_held = held;
    k->stats.evals++;
    if (ms > k->stats.eval_ms_max)
        k->stats.eval_ms_max = ms;
    pthread_mutex_unlock(&k->lock);
}

/* A slot in k->cl for a new connection (a closed one, or a new one at the
 * end), or NULL when out of memory. */
static struct ccs_dsx_conn *conn_slot(struct ccs_dsx_coord *k)
{
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd < 0)
            return &k->cl[i];
    if (k->ncl == k->capcl) {
        size_t nc = k->capcl ? k->capcl * 2 : 16;
        struct ccs_dsx_conn *ncl = realloc(k->cl, nc * sizeof *ncl);
        if (!ncl)
            return NULL;
        k->cl = ncl;
        k->capcl = nc;
    }
    return &k->cl[k->ncl++];
}

/* Accepts the connections waiting in the backlog while there is room for
 * them (the rest wait there).  Out of descriptors: leave the backlog to the
 * kernel for ACCEPT_PAUSE_MS rather than spin on EMFILE. */
static void accept_waiting(struct ccs_dsx_coord *k)
{
    while (make_room(k, ccs_clock_mono_ms(), 1)) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(k->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                k->accept_after = ccs_clock_mono_ms() + ACCEPT_PAUSE_MS;
                refused_log(k, "?", "out of file descriptors; accepting again in 250 ms", 0, 0);
            }
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break;
        }
        char host[64] = "?", serv[16];
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV);
        ccs_dsx_socket_nonblock(fd);
        struct ccs_dsx_conn *c = conn_slot(k);
        if (!c) {
            close(fd);
            continue;
        }
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->state = CCS_DSX_C_CONNECTING;
        c->t_open = ccs_clock_mono_ms();
        k->nunauth++;
        snprintf(c->peer, sizeof c->peer, "%s", host);
    }
}

/* Reads, handles and answers the first NPF connections after poll(2) (PF
 * from index 1); drops those that closed, broke or misbehaved. */
static void serve_clients(struct ccs_dsx_coord *k, const struct pollfd *pf, size_t npf)
{
    for (size_t i = 0; i < npf; i++) {
        struct ccs_dsx_conn *c = &k->cl[i];
        if (c->fd < 0 || pf[i + 1].fd != c->fd)
            continue;
        char why[256] = "connection closed";
        int bad = 0;
        if (pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
            bad = ccs_dsx_conn_fill(c) != 0;
        if (coord_frames(k, i, why, sizeof why) != 0)
            bad = 2;
        if (c->state == CCS_DSX_C_DROP || ccs_dsx_conn_flush(c) != 0)
            bad = bad ? bad : 1;
        if (bad)
            drop_client(k, i, bad == 2 || !c->sealed ? why : NULL);
    }
}

/* Sends what is queued; drops the connections that cannot take it (and,
 * with HANDSHAKE_DUE, those that did not complete the handshake in time). */
static void flush_all(struct ccs_dsx_coord *k, uint64_t now, int handshake_due)
{
    for (size_t i = 0; i < k->ncl; i++) {
        struct ccs_dsx_conn *c = &k->cl[i];
        uint64_t rx = c->t_rx > c->t_open ? c->t_rx : c->t_open;
        if (handshake_due && c->fd >= 0 && !c->sealed && now > c->t_open + CCS_DSX_HANDSHAKE_MS)
            drop_client(k, i, "no handshake within 5 s");
        else if (handshake_due && c->fd >= 0 && c->sealed && now - rx > (uint64_t)k->t.heartbeat_ms)
            /* A stalled link (a leader sends at least once a second):
             * closed, so that what it buffered meanwhile never arrives
             * late and is taken for news; the leader reconnects and sends
             * its ranks' statuses afresh. */
            drop_client(k, i, STALLED);
        else if (c->fd >= 0 && (c->state == CCS_DSX_C_DROP || ccs_dsx_conn_flush(c) != 0))
            drop_client(k, i, NULL);
    }
}

/* BYE to every authenticated host that was not yet told. */
static void say_bye(struct ccs_dsx_coord *k)
{
    for (size_t i = 0; i < k->ncl; i++) {
        struct ccs_dsx_conn *c = &k->cl[i];
        if (c->fd < 0 || c->state != CCS_DSX_C_AUTHED || c->said_bye)
            continue;
        c->said_bye = 1;
        if (ccs_dsx_conn_queue(c, CCS_DSX_M_BYE, NULL, 0) != 0)
            c->state = CCS_DSX_C_DROP; /* dropped below */
        else
            ccs_dsx_conn_flush(c);
    }
}

/* The final exchange (ccs_dsx_coord_finish): once every rank has finished
 * (exited, finalizing or dead) or the deadline passed, BYE to every host.
 * Also to a host whose link is made after that, until this process exits:
 * a rank that took its host's link over from a leader that left first,
 * while every rank was finishing, would otherwise find the connection
 * closed without a word and warn of a failure at the job's normal end. */
static void final_exchange(struct ccs_dsx_coord *k, uint64_t now)
{
    if (!atomic_load(&k->finishing))
        return;
    if (atomic_load(&k->finished)) {
        say_bye(k);
        return;
    }
    if (!k->finish_by)
        k->finish_by = now + (uint64_t)atomic_load(&k->finishing);
    int all = 1;
    for (int32_t r = 0; r < k->wsize && all; r++)
        all = k->dead[r] || (k->st[r] && k->st[r]->life != CCS_DSX_ALIVE);
    if (all && !k->all_finished_ms)
        k->all_finished_ms = now;
    /* Every rank finished: BYE once no search is under way, judged by a
     * pass that saw their last statuses (a MISMATCH in a job's last calls
     * is still found: the ranks linger and answer until BYE), or
     * CCS_DSX_EXIT_SEARCH_MS later, when the ranks stop lingering. */
    int settled = all && k->pass_ms > k->all_finished_ms && ccs_dsx_search_settled(k->srch, k->pass_ms);
    /* Nor while records asked for a MISMATCH not yet reported are on their
     * way (for as long as the rules wait for them): the ranks that hold
     * them leave at BYE. */
    for (int i = 0; i < 16 && settled; i++)
        settled = !(k->want_ms[i] && now - k->want_ms[i] < k->t.record_wait_ms + 200 &&
                    !ccs_dsx_seen_has(k->seen, CCS_DSX_MISMATCH, k->want_id[i], 0));
    if ((all && (settled || now >= k->all_finished_ms + CCS_DSX_EXIT_SEARCH_MS)) || now >= k->finish_by) {
        say_bye(k);
        atomic_store(&k->finished, all ? 1 : 2);
    }
}

/* How long poll(2) may wait at NOW: until the next evaluation or probe,
 * the end of an accept pause, or (no room for a new peer) 20 ms, when a
 * slot may be evicted. */
static int poll_timeout(const struct ccs_dsx_coord *k, uint64_t now, uint64_t next_eval, int room)
{
    uint64_t wake = next_eval < k->probe_next ? next_eval : k->probe_next;
    int to = wake > now ? (int)(wake - now) : 0;
    if (now < k->accept_after && (int)(k->accept_after - now) < to)
        to = (int)(k->accept_after - now);
    if (!room && to > 20)
        to = 20;
    return to;
}

static void *coord_main(void *arg)
{
    struct ccs_dsx_coord *k = arg; /* (started with every signal blocked: ccs_thread_start_joinable) */
    /* Below the job's threads, as the ranks' detection threads: a flood of
     * handshakes takes its turn in the job's gaps. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    prctl(PR_SET_NAME, "ccs-coord", 0, 0, 0); /* top -H, /proc/PID/task/TID/comm */
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
        int room = make_room(k, now, 0);
        pf[0] = (struct pollfd){.fd = now >= k->accept_after && room ? k->lfd : -1, .events = POLLIN};
        size_t npf = k->ncl;
        for (size_t i = 0; i < npf; i++)
            pf[i + 1] = (struct pollfd){.fd = k->cl[i].fd, .events = ccs_dsx_conn_events(&k->cl[i])};
        poll(pf, npf + 1, poll_timeout(k, now, next_eval, room));
        if (pf[0].revents & POLLIN)
            accept_waiting(k);
        serve_clients(k, pf, npf);
        now = ccs_clock_mono_ms();
        if (now >= k->probe_next) {
            coord_probe(k, now);
            k->probe_next = now + CCS_DSX_PROBE_TICK_MS;
            final_exchange(k, now); /* (once finishing: BYE as soon as the search settles) */
            flush_all(k, now, 0);
        }
        if (now >= next_eval) {
            coord_eval(k);
            count_io(k);
            final_exchange(k, now);
            flush_all(k, now, 1);
            refused_log(k, NULL, NULL, 0, 1);
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
    struct ccs_dsx_cred cred = {.secret = secret};
    return ccs_dsx_coord_start_cred(host, port, wsize, &cred, t, period_ms, port_out, why, n);
}

/* Listens on HOST:PORT (k->lfd): 0, or the errno with WHY. */
static int listen_on(struct ccs_dsx_coord *k, const char *host, int port, char *why, size_t n)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int e = getaddrinfo(host && *host ? host : NULL, ps, &hints, &ai);
    if (e != 0) {
        snprintf(why, n, "cannot resolve '%s': %s", host ? host : "", gai_strerror(e));
        return EINVAL;
    }
    k->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (k->lfd >= 0)
        setsockopt(k->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (k->lfd < 0 || bind(k->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(k->lfd, 1024) != 0) {
        e = errno;
        snprintf(why, n, "cannot listen on %s:%d: %s", host && *host ? host : "*", port, strerror(e));
        freeaddrinfo(ai);
        if (k->lfd >= 0)
            close(k->lfd);
        k->lfd = -1;
        return e ? e : EINVAL;
    }
    freeaddrinfo(ai);
    return 0;
}

struct ccs_dsx_coord *ccs_dsx_coord_start_cred(const char *host, int port, int32_t wsize,
                                               const struct ccs_dsx_cred *cred, const struct ccs_dsx_thresholds *t,
                                               int period_ms, int *port_out, char *why, size_t n)
{
    struct ccs_dsx_coord *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    k->wsize = wsize;
    k->lfd = -1;
    memcpy(k->job, cred->job, sizeof k->job);
    if (cred->secret) {
        if (ccs_dsx_auth_key_job(cred->secret, cred->job, &k->key, why, n) != 0) {
            free(k);
            return NULL;
        }
    } else {
        k->kx = 1;
        memcpy(k->pk, cred->pk, sizeof k->pk);
        memcpy(k->sk, cred->sk, sizeof k->sk);
        k->peers = malloc((size_t)wsize * CCS_DSX_PKBYTES);
        k->rkeys = calloc((size_t)wsize, sizeof *k->rkeys);
        k->rkey_ok = calloc((size_t)wsize, 1);
        if (!cred->peers || !k->peers || !k->rkeys || !k->rkey_ok) {
            snprintf(why, n, "out of memory for %d public keys", wsize);
            free(k->peers), free(k->rkeys), free(k->rkey_ok), free(k);
            return NULL;
        }
        memcpy(k->peers, cred->peers, (size_t)wsize * CCS_DSX_PKBYTES);
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
    k->unreach_ms = calloc((size_t)wsize, sizeof *k->unreach_ms);
    k->unreach_silent = calloc((size_t)wsize, 1);
    k->recent = calloc(NRECENT, sizeof *k->recent);
    k->owner = malloc((size_t)wsize * sizeof *k->owner);
    k->seen = ccs_dsx_seen_new();
    k->folds = ccs_dsx_folds_new();
    k->scratch = malloc(sizeof *k->scratch);
    if (!k->st || !k->stsize || !k->view || !k->dead || !k->beat || !k->beat_ms || !k->unreach_ms || !k->unreach_silent || !k->recent || !k->owner || !k->seen ||
        !k->folds || !k->scratch) {
        snprintf(why, n, "out of memory for %d ranks", wsize);
        goto fail;
    }
    for (int32_t r = 0; r < wsize; r++)
        k->owner[r] = -1;
    if (port == CCS_DSX_PORT_KEYED && !cred->secret) {
        snprintf(why, n, "a port keyed by the secret needs CCSHIM_SECRET");
        goto fail;
    }
    int tries = port == CCS_DSX_PORT_KEYED ? CCS_DSX_PORT_TRIES : 1;
    char taken[CCS_DSX_PORT_TRIES * 7 + 1] = "";
    for (int i = 0; i < tries && k->lfd < 0; i++) {
        int p = port == CCS_DSX_PORT_KEYED ? ccs_dsx_auth_port(&k->key, (unsigned)i) : port;
        int e = listen_on(k, host, p, why, n);
        if (e == EADDRINUSE && port == CCS_DSX_PORT_KEYED)
            snprintf(taken + strlen(taken), sizeof taken - strlen(taken), "%s%d", i ? ", " : "", p);
        else if (e != 0)
            goto fail;
    }
    if (k->lfd < 0) {
        snprintf(why, n, "cannot listen on %s: the %d ports keyed by the secret (%s) are all in use",
                 host && *host ? host : "*", tries, taken);
        goto fail;
    }
    ccs_dsx_socket_nonblock(k->lfd);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(k->lfd, (struct sockaddr *)&sa, &sl);
    *port_out = ntohs(sa.sin_port);
    if (ccs_thread_start_joinable(coord_main, k, &k->th) != 0) {
        snprintf(why, n, "cannot start the coordinator thread");
        close(k->lfd);
        goto fail;
    }
    return k;
fail:
    free(k->st), free(k->stsize), free(k->view), free(k->dead), free(k->beat), free(k->beat_ms), free(k->owner),
        free(k->scratch), free(k->unreach_ms), free(k->unreach_silent), free(k->recent), free(k->peers), free(k->rkeys), free(k->rkey_ok);
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
    refused_log(k, NULL, NULL, 0, 2);
    for (size_t i = 0; i < k->ncl; i++)
        ccs_dsx_conn_close(&k->cl[i]);
    close(k->lfd);
    ccs_dsx_auth_wipe(&k->key);
    sodium_memzero_keys(k);
    for (int32_t r = 0; r < k->wsize; r++)
        free(k->st[r]);
    ccs_dsx_folds_free(k->folds);
    free(k->cl), free(k->st), free(k->stsize), free(k->view), free(k->dead), free(k->beat),
        free(k->beat_ms);
    free(k->owner), free(k->scratch), free(k->unreach_ms), free(k->unreach_silent), free(k->recent), free(k->peers), free(k->rkeys),
        free(k->rkey_ok);
    ccs_dsx_seen_free(k->seen);
    free(k);
}
