/*
 * desync_coord_net.c - the coordinator's connections (desync_coord.c gives
 * their frames a meaning): listening, admission of the job's leaders among
 * unknown peers, buffers, the verdicts and requests sent to every host,
 * and the leaders dropped.  One epoll set: a wake-up costs the connections
 * that have something to say, not all of them (with poll(2) every frame
 * from any of 2,048 hosts made the kernel look at all 2,048).
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
#include "desync_coord.h"
#include "log.h"
#include "clock.h"
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections the kernel completes before they are accepted (capped by
 * net.core.somaxconn, 4096 by default): the leaders of a large job connect
 * at once, and a SYN dropped for a full backlog is sent again only after a
 * second. */
#define LISTEN_BACKLOG 4096

void ccs_dsx_coord_broadcast(struct ccs_dsx_coord *k, uint16_t type, const void *p, size_t n)
{
    /* A relay's probes and requests for records: its own host's ranks
     * answer them too. */
    if (k->hooks && type != CCS_DSX_M_AGREE && type != CCS_DSX_M_BYE)
        k->hooks->local(type, p, n, k->hooks_arg);
    for (size_t i = 0; i < k->ncl; i++)
        if (k->cl[i].fd >= 0 && k->cl[i].state == CCS_DSX_C_AUTHED &&
            ccs_dsx_conn_queue(&k->cl[i], type, p, n) != 0)
            k->cl[i].state = CCS_DSX_C_DROP; /* dropped below */
}

void ccs_dsx_coord_count_io(struct ccs_dsx_coord *k)
{
    uint64_t in = 0, out = 0;
    for (size_t i = 0; i < k->ncl; i++)
        in += k->cl[i].bytes_in, out += k->cl[i].bytes_out;
    pthread_mutex_lock(&k->lock);
    k->stats.bytes_in = k->closed_in + in;
    k->stats.bytes_out = k->closed_out + out;
    pthread_mutex_unlock(&k->lock);
}

/* Logs refused peers (PEER, refused for WHY, TICKETED when it had shown a
 * valid member's ticket): the first at once, then one line per
 * REFUSED_LOG_MS with how many since, per reason (FLUSH 1: only that
 * summary, when due; 2: now, at stop).  Before, the summary named the last
 * peer's reason alone ("no member's ticket within 100 ms" when every
 * refused peer had shown one). */
void ccs_dsx_coord_refused_log(struct ccs_dsx_coord *k, const char *peer, const char *why, int ticketed, int flush)
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

/* ccs_dsx_coord_drop's WHY for a link dropped for its silence. */
const char ccs_dsx_coord_stalled[] = "stalled";

/* How long a peer in the unknown peers' slots keeps its slot while others
 * wait: SILENT_MS without a ticket; TICKETED_SILENT_MS with a member's
 * ticket shown while the members' slots were full, time to complete its
 * handshake where it is (evicted after 100 ms like the rest, the leaders
 * of a 16,384-rank job connecting at once came back after their backoff
 * again and again, told "no member's ticket": 4 to 27 s until all were in,
 * on the loaded test machine, against 1.5 s), and bounded, for a ticket
 * can be replayed by whoever saw one pass. */
#define TICKETED_SILENT_MS 1000

static uint64_t slot_ms(const struct ccs_dsx_conn *c)
{
    return c->ticketed ? TICKETED_SILENT_MS : SILENT_MS;
}

/* The peer in the unknown peers' slots that may be evicted at NOW and has
 * waited the longest, or -1. */
static long evictable(struct ccs_dsx_coord *k, uint64_t now)
{
    long best = -1;
    for (size_t i = 0; i < k->ncl; i++) {
        const struct ccs_dsx_conn *c = &k->cl[i];
        if (c->fd >= 0 && !c->sealed && !c->prio && now >= c->t_open + slot_ms(c) &&
            (best < 0 || c->t_open < k->cl[(size_t)best].t_open))
            best = (long)i;
    }
    return best;
}

/* Room to accept one more connection (evicting the peer in the unknown
 * peers' slots that has waited the longest past its time)?  1 or 0. */
int ccs_dsx_coord_make_room(struct ccs_dsx_coord *k, uint64_t now, int evict)
{
    if (k->nunauth < MAX_UNAUTH)
        return 1;
    long o = evictable(k, now);
    if (o < 0)
        return 0;
    if (evict)
        ccs_dsx_coord_drop(k, (size_t)o,
                           k->cl[o].ticketed
                               ? "no handshake within 1 s of a member's ticket while other peers wait for a slot"
                               : "no member's ticket within 100 ms while other peers wait for a slot");
    return 1;
}

void ccs_dsx_coord_drop(struct ccs_dsx_coord *k, size_t i, const char *why)
{
    int stalled = why == ccs_dsx_coord_stalled;
    if (stalled)
        why = "no frame within the heartbeat period (a stalled link); closed so that stale statuses are not taken "
              "for news";
    struct ccs_dsx_conn *c = &k->cl[i];
    if (c->sealed && !k->hooks)
        ccs_dsx_tree_dropped(k, i); /* (before its ranks are made unreachable below) */
    if (!c->sealed) {
        if (c->prio)
            k->nprio--;
        else
            k->nunauth--;
        pthread_mutex_lock(&k->lock);
        k->stats.refused_ticketless += !c->ticketed;
        pthread_mutex_unlock(&k->lock);
        ccs_dsx_coord_refused_log(k, c->peer, why ? why : "closed before the handshake", c->ticketed, 0);
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
    /* A relay lost: its fold goes with it (its group is then not
     * accounted for, so nothing about its communicators is judged from
     * folds until a relay of it is back; its listed ranks are unreachable
     * like a host's above). */
    if (i < k->capfold && k->cfold[i]) {
        free(k->cfold[i]);
        k->cfold[i] = NULL;
        k->nfold--;
    }
}

/* A slot in k->cl for a new connection (a closed one, or a new one at the
 * end), or NULL when out of memory. */
static struct ccs_dsx_conn *conn_slot(struct ccs_dsx_coord *k)
{
    /* From the last slot freed or taken on: a storm of 16,384 leaders
     * connecting looked through every slot for each. */
    for (size_t n = 0, i = k->slot_hint; n < k->ncl; n++, i = i + 1 < k->ncl ? i + 1 : 0)
        if (k->cl[i].fd < 0) {
            k->slot_hint = i;
            return &k->cl[i];
        }
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
void ccs_dsx_coord_accept(struct ccs_dsx_coord *k)
{
    while (ccs_dsx_coord_make_room(k, ccs_clock_mono_ms(), 1)) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(k->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                k->accept_after = ccs_clock_mono_ms() + ACCEPT_PAUSE_MS;
                ccs_dsx_coord_refused_log(k, "?", "out of file descriptors; accepting again in 250 ms", 0, 0);
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
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(c - k->cl)};
        if (k->epfd >= 0 && epoll_ctl(k->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
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

/* Sends what is queued; drops the connections that cannot take it (and,
 * with HANDSHAKE_DUE, those that did not complete the handshake in time). */
void ccs_dsx_coord_flush_all(struct ccs_dsx_coord *k, uint64_t now, int handshake_due)
{
    for (size_t i = 0; i < k->ncl; i++) {
        struct ccs_dsx_conn *c = &k->cl[i];
        uint64_t rx = c->t_rx > c->t_open ? c->t_rx : c->t_open;
        if (handshake_due && c->fd >= 0 && !c->sealed && now > c->t_open + CCS_DSX_HANDSHAKE_MS)
            ccs_dsx_coord_drop(k, i, "no handshake within 5 s");
        else if (handshake_due && c->fd >= 0 && c->sealed && now - rx > (uint64_t)k->t.heartbeat_ms)
            /* A stalled link (a leader sends at least once a second):
             * closed, so that what it buffered meanwhile never arrives
             * late and is taken for news; the leader reconnects and sends
             * its ranks' statuses afresh. */
            ccs_dsx_coord_drop(k, i, ccs_dsx_coord_stalled);
        else if (c->fd >= 0 && (c->state == CCS_DSX_C_DROP || ccs_dsx_conn_flush(c) != 0))
            ccs_dsx_coord_drop(k, i, NULL);
    }
}

/* BYE to every authenticated host that was not yet told. */
void ccs_dsx_coord_say_bye(struct ccs_dsx_coord *k)
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

/* Listens on HOST:PORT (k->lfd): 0, or the errno with WHY. */
int ccs_dsx_coord_listen(struct ccs_dsx_coord *k, const char *host, int port, char *why, size_t n)
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
    if (k->lfd < 0 || bind(k->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(k->lfd, LISTEN_BACKLOG) != 0) {
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

void ccs_dsx_coord_serve(struct ccs_dsx_coord *k, size_t i, uint32_t events)
{
    if (i >= k->ncl || k->cl[i].fd < 0)
        return; /* (dropped earlier in this batch) */
    struct ccs_dsx_conn *c = &k->cl[i];
    char why[256] = "connection closed";
    int bad = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        bad = ccs_dsx_conn_fill(c) != 0;
    if (ccs_dsx_coord_frames(k, i, why, sizeof why) != 0)
        bad = 2;
    if (c->state == CCS_DSX_C_DROP || ccs_dsx_conn_flush(c) != 0)
        bad = bad ? bad : 1;
    if (bad)
        ccs_dsx_coord_drop(k, i, bad == 2 || !c->sealed ? why : NULL);
}

#define IO_EVENTS 256 /* connections served per wake-up, at most */
#define LISTEN_TAG UINT64_MAX

void ccs_dsx_coord_io(struct ccs_dsx_coord *k, int timeout_ms, int accepting)
{
    if (accepting != k->lfd_armed) {
        struct epoll_event ev = {.events = accepting ? EPOLLIN : 0, .data.u64 = LISTEN_TAG};
        if (epoll_ctl(k->epfd, EPOLL_CTL_MOD, k->lfd, &ev) == 0)
            k->lfd_armed = accepting;
    }
    struct epoll_event ev[IO_EVENTS];
    int n = epoll_wait(k->epfd, ev, IO_EVENTS, timeout_ms);
    for (int j = 0; j < n; j++) {
        if (ev[j].data.u64 == LISTEN_TAG)
            ccs_dsx_coord_accept(k);
        else
            ccs_dsx_coord_serve(k, (size_t)ev[j].data.u64, ev[j].events);
    }
}

int ccs_dsx_coord_io_init(struct ccs_dsx_coord *k, char *why, size_t n)
{
    k->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = LISTEN_TAG};
    if (k->epfd < 0 || epoll_ctl(k->epfd, EPOLL_CTL_ADD, k->lfd, &ev) != 0) {
        snprintf(why, n, "cannot watch the listening socket: %s", strerror(errno));
        return -1;
    }
    k->lfd_armed = 1;
    return 0;
}
