/* test_tcp.c - the coordinator and the per-host client over loopback: the
 * handshake, a verdict reaching a client, a wrong secret refused (both
 * ways), the reflection attack and a replayed handshake refused without a
 * status or verdict, garbage dropped without harm, agreement folded across
 * hosts, unauthenticated connections bounded, BYE also to a link made
 * after the final exchange. */
#include "../test_clock.h"
#include "desync_auth.h"
#include "desync_fold.h"
#include "desync_proto.h"
#include "desync_tcp.h"
#include "ccs_config.h"
#include "log.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include "unit_main.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const struct ccs_dsx_thresholds thresholds = {
    .block_ms = 1000, .straggler_ms = 60000, .suspect_ms = 2000, .heartbeat_ms = 10000};

/* What a client was told: verdicts and agreements, the last of each; BYEs. */
struct client_events {
    int verdicts, agreed, byes;
    struct ccs_dsx_verdict v;
    struct ccs_dsx_agree a;
};

static void on_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    struct client_events *g = arg;
    g->v = *v;
    g->verdicts++;
}
static void on_agreed(const struct ccs_dsx_agree *a, void *arg)
{
    struct client_events *g = arg;
    g->a = *a;
    g->agreed++;
}
static void on_bye(void *arg)
{
    struct client_events *g = arg;
    g->byes++;
}

static void status(struct ccs_dsx_status *st, int r, int n, uint32_t life, int blocked)
{
    memset(st, 0, sizeof *st);
    st->magic = CCS_DSX_MAGIC;
    st->version = CCS_DSX_VERSION;
    st->wrank = r;
    st->wsize = n;
    st->pid = 4242 + (uint32_t)r;
    st->life = life;
    st->beat = 1;
    snprintf(st->host, sizeof st->host, "host%d", r);
    st->ncomm = 1;
    struct ccs_dsx_comm *c = &st->comm[0];
    c->id = 0xabc;
    c->rank = r;
    c->size = n;
    c->issued = c->done = 4;
    if (blocked) {
        c->state = CCS_DSX_BLOCKED;
        c->issued = 5;
        c->blocked.seq = 5;
        c->blocked.kind = CCS_KIND_ALLREDUCE;
        c->blocked.count = 4;
        c->blocked.dtype = CCS_DT_FLOAT32;
        c->blocked.op = CCS_OP_SUM;
        c->blocked.root = -1;
        c->blocked.fp = ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, 4, CCS_DT_FLOAT32, CCS_OP_SUM, -1);
        c->blocked_ms = 50;
    }
}

/* One period of the tests' loops: 20 ms. */
static void nap(void)
{
    sleep_ms(20);
}

/* Several of the coordinator's evaluation periods. */
static void settle(void)
{
    for (int i = 0; i < 10; i++)
        nap();
}

/* A coordinator for WSIZE ranks with SECRET on a free loopback port (into
 * *PORT); the test fails when it cannot start. */
static struct ccs_dsx_coord *start_coord(int wsize, const char *secret, const struct ccs_dsx_thresholds *t,
                                         int *port)
{
    char why[256] = "";
    *port = 0;
    struct ccs_dsx_coord *coord = ccs_dsx_coord_start("127.0.0.1", 0, wsize, secret, t, 20, port, why, sizeof why);
    ck_assert_msg(coord != NULL, "%s", why);
    return coord;
}

/* The client of RANK (of 2) on HOST, its verdicts, agreements and BYEs counted in EVENTS. */
static struct ccs_dsx_client *new_client(int port, int rank, const char *secret, const char *host,
                                         struct client_events *events)
{
    struct ccs_dsx_client_cb cb = {.verdict = on_verdict, .agreed = on_agreed, .bye = on_bye, .arg = events};
    return ccs_dsx_client_new("127.0.0.1", port, 2, rank, secret, host, &cb);
}

/* Ticks C with a blocked rank 0 until a tick fails, for at most 20 periods.
 * Returns the last tick's result (WHY says why it failed). */
static int tick_until_refused(struct ccs_dsx_client *c, char *why, size_t n)
{
    struct ccs_dsx_status s0;
    status(&s0, 0, 2, CCS_DSX_ALIVE, 1);
    const struct ccs_dsx_status *p0 = &s0;
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++) {
        rc = ccs_dsx_client_tick(c, &p0, 1, NULL, 0, 5, why, n);
        nap();
    }
    return rc;
}

/* A plain TCP connection to the coordinator's PORT, reads timing out after 3 s. */
static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Ticks C without statuses until it is connected, for at most 50 periods. */
static void wait_connected(struct ccs_dsx_client *c, char *why, size_t n)
{
    for (int i = 0; i < 50 && !ccs_dsx_client_connected(c); i++) {
        ccs_dsx_client_tick(c, NULL, 0, NULL, 0, 5, why, n);
        nap();
    }
}

START_TEST(verdict_reaches_the_clients)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "s3cret", &thresholds, &port);
    struct client_events g0 = {0}, g1 = {0};
    struct ccs_dsx_client *a = new_client(port, 0, "s3cret", "host0", &g0);
    struct ccs_dsx_client *b = new_client(port, 1, "s3cret", "host1", &g1);
    struct ccs_dsx_status s0, s1;
    status(&s0, 0, 2, CCS_DSX_ALIVE, 1);  /* blocked at seq 5 */
    status(&s1, 1, 2, CCS_DSX_EXITED, 0); /* exited at seq 4 */
    const struct ccs_dsx_status *p0 = &s0, *p1 = &s1;
    struct ccs_dsx_agree ag0 = {.comm = 0xabc, .key = 7, .max = 3, .min = 3, .crank = 0, .size = 2, .n = 1};
    struct ccs_dsx_agree ag1 = {.comm = 0xabc, .key = 7, .max = 9, .min = 9, .crank = 1, .size = 2, .n = 1};
    for (int i = 0; i < 100 && (g0.verdicts == 0 || g1.verdicts == 0 || !g0.agreed); i++) {
        ccs_dsx_client_tick(a, &p0, 1, &ag0, 1, 5, why, sizeof why);
        ccs_dsx_client_tick(b, &p1, 1, &ag1, 1, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(ccs_dsx_client_connected(a), 1);
    ck_assert_int_eq(g0.verdicts, 1);
    ck_assert_int_eq(g1.verdicts, 1);
    ck_assert_uint_eq(g0.v.cls, CCS_DSX_DESYNC);
    ck_assert_ptr_nonnull(strstr(g1.v.line, "rank 0 blocked in allreduce(count=4, float32, sum) at seq 5"));
    ck_assert_ptr_nonnull(strstr(g1.v.line, "rank 1 at seq 4 (1 behind, exited)"));
    ck_assert_int_eq(g0.agreed, 1);
    ck_assert_uint_eq(g0.a.max, 9);
    ck_assert_uint_eq(g0.a.min, 3);
    ck_assert_uint_eq(g0.a.n, 2);
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.clients, 2);
    ck_assert_int_eq(st.refused, 0);
    ccs_dsx_client_free(a);
    ccs_dsx_client_free(b);
    ccs_dsx_coord_stop(coord);
}
END_TEST

START_TEST(wrong_secret_is_refused)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    struct client_events g = {0};
    struct ccs_dsx_client *c = new_client(port, 0, "wrong", "host0", &g);
    ck_assert_int_eq(tick_until_refused(c, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "CCSHIM_SECRET") != NULL, "%s", why);
    ck_assert_int_eq(ccs_dsx_client_connected(c), 0);
    struct ccs_dsx_coord_stats st;
    for (int i = 0; i < 50; i++) {
        ccs_dsx_coord_stats(coord, &st);
        if (st.refused)
            break;
        nap();
    }
    ck_assert_int_eq(st.refused, 1);
    ck_assert_int_eq(st.clients, 0);
    ck_assert_uint_eq(st.statuses, 0);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
}
END_TEST

START_TEST(garbage_is_dropped)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    /* A peer that sends a frame header announcing 4 GB, then one that sends
     * a STATUS before the handshake. */
    for (int t = 0; t < 2; t++) {
        int fd = raw_connect(port);
        struct ccs_dsx_frame f = {.magic = CCS_DSX_MAGIC,
                                  .version = CCS_DSX_VERSION,
                                  .type = t ? CCS_DSX_M_STATUS : CCS_DSX_M_HELLO,
                                  .length = t ? 4 : 0xffffffffu};
        unsigned char buf[sizeof f + 4] = {0};
        memcpy(buf, &f, sizeof f);
        ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
        char c;
        ck_assert_int_eq(read(fd, &c, 1), 0); /* closed on us */
        close(fd);
    }
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.refused, 2);
    ck_assert_uint_eq(st.statuses, 0);
    /* Still serving. */
    struct client_events g = {0};
    struct ccs_dsx_client *c = new_client(port, 0, "right", "host0", &g);
    wait_connected(c, why, sizeof why);
    ck_assert_int_eq(ccs_dsx_client_connected(c), 1);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* ------------------------------------------------ attacks on the handshake */

static void send_frame(int fd, uint16_t type, const void *p, size_t n)
{
    struct ccs_dsx_frame f = {
        .magic = CCS_DSX_MAGIC, .version = CCS_DSX_VERSION, .type = type, .length = (uint32_t)n};
    unsigned char buf[sizeof f + 4096];
    ck_assert(n <= 4096);
    memcpy(buf, &f, sizeof f);
    memcpy(buf + sizeof f, p, n);
    ck_assert_int_eq(send(fd, buf, sizeof f + n, MSG_NOSIGNAL), (ssize_t)(sizeof f + n));
}

static void hello(struct ccs_dsx_hello *h, const unsigned char *nonce, const unsigned char *mac, int rank)
{
    memset(h, 0, sizeof *h);
    h->byteorder = 0x01020304u;
    h->wsize = 2;
    h->rank = rank;
    h->pid = 4242;
    snprintf(h->host, sizeof h->host, "host%d", rank);
    memcpy(h->nonce, nonce, CCS_DSX_NONCE);
    if (mac)
        memcpy(h->mac, mac, CCS_DSX_MACBYTES);
}

/* Reads one WELCOME into W; 0, or -1 when the peer closed instead. */
static int read_welcome(int fd, struct ccs_dsx_hello *w)
{
    unsigned char buf[sizeof(struct ccs_dsx_frame) + sizeof *w];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = recv(fd, buf + got, sizeof buf - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    struct ccs_dsx_frame f;
    memcpy(&f, buf, sizeof f);
    ck_assert_uint_eq(f.type, CCS_DSX_M_WELCOME);
    ck_assert_uint_eq(f.length, sizeof *w);
    memcpy(w, buf + sizeof f, sizeof *w);
    return 0;
}

/* 1 when the coordinator closed FD (within 3 s). */
static int closed_on_us(int fd)
{
    char c[256];
    for (;;) {
        ssize_t r = recv(fd, c, sizeof c, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return 1;
        if (r < 0)
            return 0;
    }
}

/* A blocked rank 0 and a forged status: what an impostor would send. */
static void send_forged_status(int fd)
{
    struct ccs_dsx_status st;
    status(&st, 1, 2, CCS_DSX_ALIVE, 1);
    st.comm[0].blocked.count = 999999;
    unsigned char buf[4096];
    uint32_t one = 1;
    memcpy(buf, &one, 4);
    size_t len = ccs_dsx_encode_status(&st, NULL, NULL, buf + 4, sizeof buf - 4);
    ck_assert_uint_gt(len, 0);
    send_frame(fd, CCS_DSX_M_STATUS, buf, len + 4);
}

static void no_status_no_verdict(struct ccs_dsx_coord *coord, int refused)
{
    struct ccs_dsx_coord_stats st;
    settle();
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.refused, refused);
    ck_assert_int_eq(st.clients, 0);
    ck_assert_uint_eq(st.statuses, 0);
    ck_assert_uint_eq(st.verdicts, 0);
}

/* The ticket of hello H (its nonce, no coordinator nonce yet) with KEY. */
static void ticket(const struct ccs_dsx_key *key, struct ccs_dsx_hello *h)
{
    static const unsigned char zero[CCS_DSX_NONCE];
    ccs_dsx_auth_mac(key, CCS_DSX_AUTH_TICKET, h->nonce, zero, h, h->mac);
}

/* A peer without the key gets nothing keyed back: a HELLO with a made-up
 * ticket is closed on at once, without a byte (no offline-guessing oracle:
 * the coordinator never MACs anything for a peer that has not proved the
 * key).  With the key, the first WELCOME carries only a nonce. */
START_TEST(no_oracle_before_the_client_proves)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    unsigned char nc[CCS_DSX_NONCE], fake[CCS_DSX_MACBYTES];
    ccs_dsx_auth_nonce(nc);
    ccs_dsx_auth_nonce(fake);
    struct ccs_dsx_hello h, w;
    int a = raw_connect(port);
    hello(&h, nc, fake, 1);
    send_frame(a, CCS_DSX_M_HELLO, &h, sizeof h);
    char byte;
    ck_assert_int_le(recv(a, &byte, 1, 0), 0); /* closed, nothing sent */
    close(a);
    struct ccs_dsx_key key;
    ck_assert_int_eq(ccs_dsx_auth_key("right", &key, why, sizeof why), 0);
    int b = raw_connect(port);
    hello(&h, nc, NULL, 1);
    ticket(&key, &h);
    send_frame(b, CCS_DSX_M_HELLO, &h, sizeof h);
    ck_assert_int_eq(read_welcome(b, &w), 0);
    static const unsigned char zero[CCS_DSX_MACBYTES];
    ck_assert(memcmp(w.mac, zero, sizeof zero) == 0);
    close(b);
    settle();
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.refused, 2);
    ck_assert_int_eq(st.clients, 0);
    ccs_dsx_auth_wipe(&key);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* The coordinator's proof is never a client's: a client proof made with
 * the coordinator's role tag (what a reflected proof would be) is refused,
 * and no status of that peer is accepted. */
START_TEST(reflection_is_refused)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    struct ccs_dsx_key key;
    ck_assert_int_eq(ccs_dsx_auth_key("right", &key, why, sizeof why), 0);
    unsigned char nc[CCS_DSX_NONCE];
    ccs_dsx_auth_nonce(nc);
    struct ccs_dsx_hello h, w;
    int a = raw_connect(port);
    hello(&h, nc, NULL, 1);
    ticket(&key, &h);
    send_frame(a, CCS_DSX_M_HELLO, &h, sizeof h);
    ck_assert_int_eq(read_welcome(a, &w), 0);
    hello(&h, nc, NULL, 1);
    ccs_dsx_auth_mac(&key, CCS_DSX_AUTH_COORD, nc, w.nonce, &h, h.mac);
    send_frame(a, CCS_DSX_M_HELLO, &h, sizeof h);
    send_forged_status(a);
    ck_assert_int_eq(closed_on_us(a), 1);
    close(a);
    no_status_no_verdict(coord, 1);
    ccs_dsx_auth_wipe(&key);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* A handshake recorded from a real member, replayed: its ticket still
 * buys admission, but the coordinator's nonce is new and the recorded
 * proof does not verify. */
START_TEST(replay_is_refused)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    struct ccs_dsx_key key;
    ck_assert_int_eq(ccs_dsx_auth_key("right", &key, why, sizeof why), 0);
    unsigned char nc[CCS_DSX_NONCE];
    ccs_dsx_auth_nonce(nc);
    struct ccs_dsx_hello h1, h2, w, w2;
    int a = raw_connect(port);
    hello(&h1, nc, NULL, 1);
    ticket(&key, &h1);
    send_frame(a, CCS_DSX_M_HELLO, &h1, sizeof h1);
    ck_assert_int_eq(read_welcome(a, &w), 0);
    hello(&h2, nc, NULL, 1);
    ccs_dsx_auth_mac(&key, CCS_DSX_AUTH_CLIENT, nc, w.nonce, &h2, h2.mac);
    send_frame(a, CCS_DSX_M_HELLO, &h2, sizeof h2);
    ck_assert_int_eq(read_welcome(a, &w2), 0); /* the coordinator's proof */
    ck_assert_int_eq(ccs_dsx_auth_verify(&key, CCS_DSX_AUTH_COORD, nc, w.nonce, &w2), 0);
    /* ... which is not a client's proof. */
    ck_assert_int_eq(ccs_dsx_auth_verify(&key, CCS_DSX_AUTH_CLIENT, nc, w.nonce, &w2), -1);
    struct ccs_dsx_coord_stats st;
    for (int i = 0; i < 50; i++) {
        ccs_dsx_coord_stats(coord, &st);
        if (st.clients)
            break;
        nap();
    }
    ck_assert_int_eq(st.clients, 1); /* the genuine handshake */
    close(a);
    int b = raw_connect(port);
    send_frame(b, CCS_DSX_M_HELLO, &h1, sizeof h1);
    struct ccs_dsx_hello w3;
    ck_assert_int_eq(read_welcome(b, &w3), 0);
    ck_assert(memcmp(w3.nonce, w.nonce, CCS_DSX_NONCE) != 0);
    send_frame(b, CCS_DSX_M_HELLO, &h2, sizeof h2);
    send_forged_status(b);
    ck_assert_int_eq(closed_on_us(b), 1);
    close(b);
    settle();
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.clients, 1);
    ck_assert_int_eq(st.refused, 1);
    ck_assert_uint_eq(st.statuses, 0);
    ck_assert_uint_eq(st.verdicts, 0);
    ccs_dsx_auth_wipe(&key);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* Two jobs with one secret (the same ~/.ccshim-secret): a leader of job B
 * is refused by job A's coordinator, naming the other job; A's own leader
 * gets in. */
START_TEST(two_jobs_with_one_secret_stay_apart)
{
    char why[256] = "";
    struct ccs_dsx_cred ca = {.secret = "one-secret-for-both-jobs-0123456789"}, cb = ca;
    ccs_dsx_auth_jobtag("slurm:1001|4", ca.job);
    ccs_dsx_auth_jobtag("slurm:1002|4", cb.job);
    int port = 0;
    struct ccs_dsx_coord *coord =
        ccs_dsx_coord_start_cred("127.0.0.1", 0, 2, &ca, &thresholds, 20, &port, why, sizeof why);
    ck_assert_msg(coord != NULL, "%s", why);
    struct client_events g = {0};
    struct ccs_dsx_client_cb cbs = {.verdict = on_verdict, .agreed = on_agreed, .arg = &g};
    struct ccs_dsx_client *b = ccs_dsx_client_new_cred("127.0.0.1", port, 2, 1, &cb, "host1", &cbs);
    ck_assert_int_eq(tick_until_refused(b, why, sizeof why), -1);
    ck_assert_int_eq(ccs_dsx_client_connected(b), 0);
    struct ccs_dsx_client *a = ccs_dsx_client_new_cred("127.0.0.1", port, 2, 0, &ca, "host0", &cbs);
    wait_connected(a, why, sizeof why);
    ck_assert_int_eq(ccs_dsx_client_connected(a), 1);
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.clients, 1);
    ck_assert_int_ge(st.refused, 1);
    ck_assert_uint_eq(st.statuses, 0);
    ccs_dsx_client_free(a);
    ccs_dsx_client_free(b);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* Under MPI only public keys cross MPI (every rank's X25519 public key, the
 * coordinator's, the job's tag).  A peer that holds all of them, as an
 * eavesdropper on the MPI traffic does, cannot authenticate as any rank;
 * the rank that holds its secret key can. */
START_TEST(mpi_traffic_gives_nothing_to_authenticate_with)
{
    char why[256] = "";
    unsigned char pks[2 * CCS_DSX_PKBYTES], sks[2][CCS_DSX_PKBYTES];
    struct ccs_dsx_cred coordc = {.secret = NULL};
    ck_assert_int_eq(ccs_dsx_auth_keypair(coordc.pk, coordc.sk), 0);
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(ccs_dsx_auth_keypair(pks + r * CCS_DSX_PKBYTES, sks[r]), 0);
    unsigned char rnd[CCS_DSX_NONCE];
    ccs_dsx_auth_nonce(rnd);
    memcpy(coordc.job, rnd, sizeof coordc.job); /* a random job tag, as rank 0 draws */
    coordc.peers = pks;
    int port = 0;
    struct ccs_dsx_coord *coord =
        ccs_dsx_coord_start_cred("127.0.0.1", 0, 2, &coordc, &thresholds, 20, &port, why, sizeof why);
    ck_assert_msg(coord != NULL, "%s", why);
    struct client_events g = {0};
    struct ccs_dsx_client_cb cbs = {.verdict = on_verdict, .agreed = on_agreed, .arg = &g};
    /* The eavesdropper: everything public, a key pair of its own, claiming
     * rank 1 (and, second, claiming rank 1 with rank 1's public key as its
     * "secret" key: public material only). */
    for (int t = 0; t < 2; t++) {
        struct ccs_dsx_cred eve = {.secret = NULL, .peers = coordc.pk};
        memcpy(eve.job, coordc.job, sizeof eve.job);
        ccs_dsx_auth_keypair(eve.pk, eve.sk);
        if (t)
            memcpy(eve.sk, pks + CCS_DSX_PKBYTES, CCS_DSX_PKBYTES);
        struct ccs_dsx_client *e = ccs_dsx_client_new_cred("127.0.0.1", port, 2, 1, &eve, "host1", &cbs);
        ck_assert_int_eq(tick_until_refused(e, why, sizeof why), -1);
        ck_assert_int_eq(ccs_dsx_client_connected(e), 0);
        ccs_dsx_client_free(e);
    }
    struct ccs_dsx_cred one = {.secret = NULL, .peers = coordc.pk};
    memcpy(one.job, coordc.job, sizeof one.job);
    memcpy(one.pk, pks + CCS_DSX_PKBYTES, CCS_DSX_PKBYTES);
    memcpy(one.sk, sks[1], CCS_DSX_PKBYTES);
    struct ccs_dsx_client *c = ccs_dsx_client_new_cred("127.0.0.1", port, 2, 1, &one, "host1", &cbs);
    wait_connected(c, why, sizeof why);
    ck_assert_int_eq(ccs_dsx_client_connected(c), 1);
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.clients, 1);
    ck_assert_int_eq(st.refused, 2);
    ck_assert_uint_eq(st.statuses, 0);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* A coordinator with the wrong secret (an impostor on the port) cannot
 * post a verdict to a member: its MAC does not verify. */
START_TEST(impostor_coordinator_is_refused)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "impostor", &thresholds, &port);
    struct client_events g = {0};
    struct ccs_dsx_client *c = new_client(port, 0, "right", "host0", &g);
    ck_assert_int_eq(tick_until_refused(c, why, sizeof why), -1);
    /* Our ticket does not verify there: it hangs up before proving anything. */
    ck_assert_msg(strstr(why, "CCSHIM_SECRET") != NULL, "%s", why);
    ck_assert_int_eq(ccs_dsx_client_connected(c), 0);
    ck_assert_int_eq(g.verdicts, 0);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* Unauthenticated peers: at most 32 wait for the handshake (the others in
 * the kernel's backlog), the oldest evicted after 1 s when others wait,
 * oversized HELLOs refused from their header; a member that comes after
 * them all still gets in, and the coordinator's memory stays small. */
START_TEST(unauthenticated_peers_are_bounded)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    enum { IDLE = 100, BIG = 10 };
    int fds[IDLE + BIG];
    for (int i = 0; i < IDLE; i++)
        fds[i] = raw_connect(port);
    for (int i = 0; i < BIG; i++) {
        fds[IDLE + i] = raw_connect(port);
        struct ccs_dsx_frame f = {
            .magic = CCS_DSX_MAGIC, .version = CCS_DSX_VERSION, .type = CCS_DSX_M_HELLO, .length = 4u << 20};
        ck_assert_int_eq(send(fds[IDLE + i], &f, sizeof f, MSG_NOSIGNAL), (ssize_t)sizeof f);
    }
    struct client_events g = {0};
    struct ccs_dsx_client *c = new_client(port, 0, "right", "host0", &g);
    struct ccs_dsx_coord_stats st;
    uint64_t held_max = 0;
    for (int i = 0; i < 500 && !ccs_dsx_client_connected(c); i++) {
        ccs_dsx_client_tick(c, NULL, 0, NULL, 0, 5, why, sizeof why);
        ccs_dsx_coord_stats(coord, &st);
        held_max = st.bytes_held > held_max ? st.bytes_held : held_max;
        nap();
    }
    ck_assert_int_eq(ccs_dsx_client_connected(c), 1);
    ccs_dsx_coord_stats(coord, &st);
    /* Of the 110 ahead of it, at most 32 can still be waiting. */
    ck_assert_int_ge(st.refused, IDLE + BIG - 32);
    ck_assert_int_eq(st.clients, 1);
    ck_assert_uint_lt(held_max, 1u << 20);
    for (int i = 0; i < BIG; i++) /* refused from the header, not read */
        ck_assert_int_eq(closed_on_us(fds[IDLE + i]), 1);
    ccs_dsx_client_free(c);
    for (int i = 0; i < IDLE + BIG; i++)
        close(fds[i]);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* An authenticated peer (buggy or hostile) sends a status blocked at seq
 * 2^64-1, again at every reconnection for 2 s: the coordinator refuses it
 * with one warning in all (not one per reconnection), stores nothing of
 * it, does not spin (its thread uses well under a core) and still serves
 * the other host, whose verdict comes through. */
START_TEST(huge_seq_from_a_peer_one_warning_no_hang)
{
    char log[128], why[256] = "";
    snprintf(log, sizeof log, "/tmp/ccshim-test-hugeseq-%d.log", (int)getpid());
    ccs_cfg.log = log;
    ccs_log_open();
    int port;
    struct ccs_dsx_coord *coord = start_coord(2, "s3cret", &thresholds, &port);
    struct client_events g0 = {0}, g1 = {0};
    struct ccs_dsx_client *a = new_client(port, 0, "s3cret", "host0", &g0);
    struct ccs_dsx_status bad;
    status(&bad, 0, 2, CCS_DSX_ALIVE, 1);
    bad.comm[0].issued = UINT64_MAX;
    bad.comm[0].blocked.seq = UINT64_MAX;
    const struct ccs_dsx_status *pb = &bad;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 100; i++) {
        ccs_dsx_client_tick(a, &pb, 1, NULL, 0, 5, why, sizeof why);
        nap();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_uint_eq(st.statuses, 0);
    ck_assert_int_ge(st.clients, 2); /* it did authenticate, and came back */
    double wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(st.cpu_s < 0.5 * wall, "coordinator thread used %.2f s of CPU in %.2f s", st.cpu_s, wall);
    /* The other host still gets through, and a verdict reaches it. */
    struct ccs_dsx_client *b = new_client(port, 1, "s3cret", "host1", &g1);
    struct ccs_dsx_status s0, s1;
    status(&s0, 0, 2, CCS_DSX_ALIVE, 1);
    status(&s1, 1, 2, CCS_DSX_EXITED, 0);
    const struct ccs_dsx_status *p0 = &s0, *p1 = &s1;
    for (int i = 0; i < 100 && g1.verdicts == 0; i++) {
        ccs_dsx_client_tick(a, &p0, 1, NULL, 0, 5, why, sizeof why);
        ccs_dsx_client_tick(b, &p1, 1, NULL, 0, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(g1.verdicts, 1);
    ccs_dsx_client_free(a);
    ccs_dsx_client_free(b);
    ccs_dsx_coord_stop(coord);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int warned = 0;
    while (fgets(line, sizeof line, f))
        warned += strstr(line, "dropped the leader of host 'host0'") != NULL &&
                  strstr(line, "sequence number beyond") != NULL;
    fclose(f);
    unlink(log);
    ck_assert_int_eq(warned, 1);
}
END_TEST

/* An authenticated leader floods AGREE values with new keys (87,040, in
 * frames of 1024): the coordinator keeps at most its share of pending
 * agreements, its thread stays light, and two other hosts' agreement still
 * completes; a frame of 1025 values drops the leader.  (Before: a linear
 * search per value over an unbounded table; one 4 MiB frame froze the
 * coordinator for about 8 s and made an honest handshake fail.) */
START_TEST(agree_flood_is_bounded)
{
    char log[128], why[256] = "";
    snprintf(log, sizeof log, "/tmp/ccshim-test-agreeflood-%d.log", (int)getpid());
    ccs_cfg.log = log;
    ccs_log_open();
    int port;
    struct ccs_dsx_coord *coord = start_coord(3, "s3cret", &thresholds, &port);
    struct client_events g0 = {0}, g1 = {0}, g2 = {0};
    struct ccs_dsx_client_cb cb0 = {.verdict = on_verdict, .agreed = on_agreed, .arg = &g0},
                             cb1 = {.verdict = on_verdict, .agreed = on_agreed, .arg = &g1},
                             cb2 = {.verdict = on_verdict, .agreed = on_agreed, .arg = &g2};
    struct ccs_dsx_client *a = ccs_dsx_client_new("127.0.0.1", port, 3, 0, "s3cret", "host0", &cb0);
    wait_connected(a, why, sizeof why);
    ck_assert_msg(ccs_dsx_client_connected(a), "%s", why);
    enum { PER = 1024, FRAMES = 85 };
    static struct ccs_dsx_agree flood[PER + 1];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int f = 0; f < FRAMES; f++) {
        for (int i = 0; i < PER; i++)
            flood[i] = (struct ccs_dsx_agree){
                .comm = 0xf100d, .key = (uint64_t)f * PER + (uint64_t)i, .max = 1, .min = 1, .crank = 0, .size = 3, .n = 1};
        ck_assert_int_eq(ccs_dsx_client_tick(a, NULL, 0, flood, PER, 5, why, sizeof why), 0);
        sleep_ms(2);
    }
    settle();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    double wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(st.cpu_s < 0.5 * wall, "coordinator thread used %.2f s of CPU in %.2f s", st.cpu_s, wall);
    /* Its share (512 agreements of 3 bits) and the table: well under 1 MiB. */
    ck_assert_msg(st.bytes_held < (1u << 20), "coordinator holds %llu bytes", (unsigned long long)st.bytes_held);
    /* Two other hosts agree on a value of their own, both hear the result. */
    struct ccs_dsx_client *b = ccs_dsx_client_new("127.0.0.1", port, 3, 1, "s3cret", "host1", &cb1);
    struct ccs_dsx_client *c = ccs_dsx_client_new("127.0.0.1", port, 3, 2, "s3cret", "host2", &cb2);
    struct ccs_dsx_agree vb = {.comm = 0xc0ffee, .key = 7, .max = 5, .min = 5, .crank = 1, .size = 2, .n = 1};
    struct ccs_dsx_agree vc = {.comm = 0xc0ffee, .key = 7, .max = 9, .min = 9, .crank = 0, .size = 2, .n = 1};
    for (int i = 0; i < 100 && (g1.agreed == 0 || g2.agreed == 0); i++) {
        ccs_dsx_client_tick(b, NULL, 0, &vb, 1, 5, why, sizeof why);
        ccs_dsx_client_tick(c, NULL, 0, &vc, 1, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(g1.agreed, 1);
    ck_assert_int_eq(g2.agreed, 1);
    ck_assert_uint_eq(g1.a.max, 9);
    ck_assert_uint_eq(g1.a.min, 5);
    /* One frame beyond the bound: the leader is dropped. */
    for (int i = 0; i <= PER; i++)
        flood[i] = (struct ccs_dsx_agree){.comm = 0xb16, .key = (uint64_t)i, .max = 1, .min = 1, .crank = 0, .size = 3, .n = 1};
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++) {
        rc = ccs_dsx_client_tick(a, NULL, 0, flood, i == 0 ? PER + 1 : 0, 5, why, sizeof why);
        nap();
    }
    ccs_dsx_client_free(a);
    ccs_dsx_client_free(b);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
    FILE *lf = fopen(log, "r");
    ck_assert_ptr_nonnull(lf);
    char line[1024];
    int share = 0, big = 0;
    while (fgets(line, sizeof line, lf)) {
        share += strstr(line, "the leader of host 'host0' (rank 0) opened more agreements than its share") != NULL;
        big += strstr(line, "AGREE frame of 1025 values (at most 1024)") != NULL;
    }
    fclose(lf);
    unlink(log);
    ck_assert_int_eq(share, 1);
    ck_assert_int_eq(big, 1);
}
END_TEST

/* ------------------------------------------------------ a man in the middle */

struct mitm {
    int lfd, port, to_port, flip;
    size_t c2s; /* bytes client -> coordinator */
    int saw_plain;
    unsigned char seen[65536];
    size_t nseen;
};

static void *mitm_main(void *arg)
{
    struct mitm *m = arg;
    int a = accept(m->lfd, NULL, NULL);
    int b = raw_connect(m->to_port);
    struct pollfd pf[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    const size_t hs = 2 * (sizeof(struct ccs_dsx_frame) + sizeof(struct ccs_dsx_hello));
    unsigned char buf[65536];
    for (int idle = 0; idle < 300;) {
        if (poll(pf, 2, 10) <= 0) {
            idle++;
            continue;
        }
        int from = pf[0].revents ? 0 : 1;
        ssize_t r = recv(pf[from].fd, buf, sizeof buf, 0);
        if (r <= 0)
            break;
        if (from == 0) {
            for (ssize_t i = 0; i < r; i++, m->c2s++) {
                if (m->c2s >= hs && m->nseen < sizeof m->seen)
                    m->seen[m->nseen++] = buf[i];
                /* Flip one bit of the first frame after the handshake, in a
                 * field no validation would catch (the status's beat). */
                if (m->flip &&
                    m->c2s == hs + sizeof(struct ccs_dsx_frame) + 4 + offsetof(struct ccs_dsx_status, beat))
                    buf[i] ^= 1;
            }
        }
        if (send(pf[!from].fd, buf, (size_t)r, MSG_NOSIGNAL) != r)
            break;
    }
    close(a);
    close(b);
    return NULL;
}

static int has(const unsigned char *b, size_t n, const char *s)
{
    size_t l = strlen(s);
    for (size_t i = 0; i + l <= n; i++)
        if (memcmp(b + i, s, l) == 0)
            return 1;
    return 0;
}

/* Between a member and the coordinator: the statuses after the handshake
 * are unreadable (no host name in the clear), and a frame altered on the way
 * is refused: no status of it accepted, the connection dropped. */
static void through_mitm(int flip)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    struct mitm m = {.to_port = port, .flip = flip};
    m.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    ck_assert_int_eq(bind(m.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(m.lfd, 4), 0);
    getsockname(m.lfd, (struct sockaddr *)&sa, &sl);
    pthread_t th;
    pthread_create(&th, NULL, mitm_main, &m);
    struct client_events g = {0};
    struct ccs_dsx_client *c = new_client(ntohs(sa.sin_port), 0, "right", "host0", &g);
    struct ccs_dsx_status s0;
    status(&s0, 0, 2, CCS_DSX_ALIVE, 0);
    const struct ccs_dsx_status *p0 = &s0;
    int failed = 0;
    for (int i = 0; i < 40; i++) {
        failed |= ccs_dsx_client_tick(c, &p0, 1, NULL, 0, 5, why, sizeof why) != 0;
        nap();
    }
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(coord, &st);
    ck_assert_int_eq(st.clients, 1); /* the handshake itself went through */
    if (flip) {
        ck_assert_uint_eq(st.statuses, 0);
        ck_assert_int_eq(failed, 1); /* the coordinator hung up */
    } else {
        ck_assert_uint_gt(st.statuses, 0);
    }
    ck_assert_uint_gt(m.nseen, 64);
    ck_assert_msg(!has(m.seen, m.nseen, "host0"), "a status crossed the wire in the clear");
    ccs_dsx_client_free(c);
    pthread_join(th, NULL);
    close(m.lfd);
    ccs_dsx_coord_stop(coord);
}

/* Finished agreements beyond the kept 1024 go, the oldest first, in one
 * pass: after 3000 agreements of one member each (each finished by its
 * value), between 1024 and 1280 are held, the newest 1000 among them (a
 * repeat of one is taken, 0) and the oldest gone (a repeat opens and
 * finishes it again, 1). */
START_TEST(finished_agreements_oldest_go)
{
    struct ccs_dsx_folds *t = ccs_dsx_folds_new();
    ck_assert_ptr_nonnull(t);
    struct ccs_dsx_agree res, a = {.comm = 7, .max = 1, .min = 1, .crank = 0, .size = 1, .n = 1};
    for (uint64_t k = 1; k <= 3000; k++) {
        a.key = k;
        ck_assert_int_eq(ccs_dsx_folds_add(t, &a, 4, 0, 1000 + k, &res), 1);
    }
    ck_assert_uint_ge(ccs_dsx_folds_count(t), 1024);
    ck_assert_uint_le(ccs_dsx_folds_count(t), 1280);
    ck_assert_uint_eq(ccs_dsx_folds_pending(t), 0);
    for (uint64_t k = 2001; k <= 3000; k++) {
        a.key = k;
        ck_assert_int_eq(ccs_dsx_folds_add(t, &a, 4, 0, 5000, &res), 0);
    }
    a.key = 1;
    ck_assert_int_eq(ccs_dsx_folds_add(t, &a, 4, 0, 5000, &res), 1);
    ccs_dsx_folds_free(t);
}
END_TEST

START_TEST(mitm_reads_nothing)
{
    through_mitm(0);
}
END_TEST

START_TEST(mitm_alteration_is_refused)
{
    through_mitm(1);
}
END_TEST

/* Out of descriptors (RLIMIT_NOFILE just above what is open): the
 * coordinator pauses accepting instead of spinning on EMFILE.  Its thread's
 * CPU over 2 s of a 60-connection flood stays under 10 % of a core. */
START_TEST(emfile_does_not_spin)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        int port = 0;
        char why[256];
        struct ccs_dsx_coord *coord =
            ccs_dsx_coord_start("127.0.0.1", 0, 2, "right", &thresholds, 20, &port, why, sizeof why);
        if (!coord)
            _exit(20);
        int top = 0;
        for (int fd = 0; fd < 1024; fd++)
            if (fcntl(fd, F_GETFD) >= 0)
                top = fd;
        struct rlimit rl = {.rlim_cur = (rlim_t)top + 11, .rlim_max = (rlim_t)top + 11};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(21);
        /* Fill every free descriptor, then give 8 back. */
        static int held[4096];
        int nheld = 0;
        while (nheld < 4096 && (held[nheld] = open("/dev/null", O_RDONLY)) >= 0)
            nheld++;
        if (nheld == 4096 || errno != EMFILE)
            _exit(24);
        for (int i = 0; i < 8 && nheld > 0; i++)
            close(held[--nheld]);
        if (write(pfd[1], &port, sizeof port) != (ssize_t)sizeof port)
            _exit(22);
        struct ccs_dsx_coord_stats a, b;
        usleep(500 * 1000); /* the flood arrives */
        ccs_dsx_coord_stats(coord, &a);
        usleep(2000 * 1000);
        ccs_dsx_coord_stats(coord, &b);
        double cpu = b.cpu_s - a.cpu_s;
        fprintf(stderr, "emfile: coordinator CPU %.3f s in 2 s, %d refused (limit %d)\n", cpu, b.refused, top + 11);
        _exit(cpu < 0.2 && b.refused > 0 ? 0 : 23);
    }
    close(pfd[1]);
    int port = 0;
    ck_assert_int_eq(read(pfd[0], &port, sizeof port), (ssize_t)sizeof port);
    close(pfd[0]);
    int fds[60];
    for (int i = 0; i < 60; i++)
        fds[i] = raw_connect(port);
    int st = 0;
    waitpid(pid, &st, 0);
    for (int i = 0; i < 60; i++)
        close(fds[i]);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit %d", WEXITSTATUS(st));
}
END_TEST

/* ---- the search for the first differing seq, and the final exchange ---- */

#define LOG 2000 /* operations every simulated rank has completed */
#define ODD 700  /* rank 1's count differs there */

/* One simulated host: two ranks with their whole logs, answering the
 * coordinator's probes and record requests as desync_collect.c does. */
struct host {
    struct client_events g; /* first: the verdict callbacks take the host as their got */
    struct ccs_dsx_status st[2];
    const struct ccs_dsx_status *p[2];
    struct ccs_dsx_op ops[2][LOG + 1];
    uint64_t hash[2][LOG + 1];
    int probes, wants;
};

static void host_init(struct host *h, int first)
{
    memset(h, 0, sizeof *h);
    for (int i = 0; i < 2; i++) {
        int r = first + i;
        status(&h->st[i], r, 4, CCS_DSX_ALIVE, 0);
        snprintf(h->st[i].host, sizeof h->st[i].host, "host%d", first / 2);
        struct ccs_dsx_comm *c = &h->st[i].comm[0];
        uint64_t x = 0;
        for (int q = 1; q <= LOG; q++) {
            uint64_t count = r == 1 && q == ODD ? 8 : 4;
            struct ccs_dsx_op *o = &h->ops[i][q];
            o->seq = (uint64_t)q;
            o->kind = CCS_KIND_ALLREDUCE;
            o->count = count;
            o->dtype = CCS_DT_FLOAT32;
            o->op = CCS_OP_SUM;
            o->root = -1;
            o->fp = ccs_fingerprint(CCS_KIND_ALLREDUCE, 0, count, CCS_DT_FLOAT32, CCS_OP_SUM, -1);
            x = ccs_hash_mix(x, o->fp);
            h->hash[i][q] = x;
        }
        c->issued = c->done = LOG;
        c->hash = h->hash[i][LOG];
        c->cp_seq[0] = LOG, c->cp_hash[0] = h->hash[i][LOG];
        c->cp_seq[1] = LOG - 16, c->cp_hash[1] = h->hash[i][LOG - 16];
        c->nhist = 0; /* the newest records would show nothing odd anyway */
        h->p[i] = &h->st[i];
    }
}

static void host_want(uint64_t comm, uint64_t seq, void *arg)
{
    struct host *h = arg;
    int probe = (seq & CCS_DSX_PROBE_BIT) != 0;
    seq &= ~(CCS_DSX_PROBE_BIT | CCS_DSX_NARROW_BIT); /* (a probe that narrows: kept in view, desync_collect.c) */
    if (comm != 0xabc || seq < 1 || seq > LOG)
        return;
    for (int i = 0; i < 2; i++) {
        struct ccs_dsx_comm *c = &h->st[i].comm[0];
        if (probe) {
            c->cp_seq[1] = seq;
            c->cp_hash[1] = h->hash[i][seq];
            c->flags |= CCS_DSX_PROBED;
        } else {
            uint64_t lo = seq > CCS_DSX_HIST / 2 ? seq - CCS_DSX_HIST / 2 + 1 : 1;
            unsigned n = 0;
            for (uint64_t q = lo; q < lo + CCS_DSX_HIST && q <= LOG; q++)
                c->hist[n++] = h->ops[i][q];
            c->nhist = (uint16_t)n;
            c->flags |= CCS_DSX_PINNED;
        }
    }
    probe ? h->probes++ : h->wants++;
}

static void host_bye(void *arg)
{
    struct host *h = arg;
    on_bye(&h->g);
}

START_TEST(search_finds_the_first_difference)
{
    /* The hashes differ at every seq the statuses show (2000, 1984) and no
     * record in view differs: only the probes can find seq 700. */
    static const struct ccs_dsx_thresholds t = {.block_ms = 1000,
                                                .straggler_ms = 60000,
                                                .suspect_ms = 20000,
                                                .heartbeat_ms = 10000,
                                                .mismatch_wait_ms = 40,
                                                .record_wait_ms = 700};
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(4, "s3cret", &t, &port);
    static struct host h[2];
    struct ccs_dsx_client *cl[2];
    for (int i = 0; i < 2; i++) {
        host_init(&h[i], 2 * i);
        struct ccs_dsx_client_cb cb = {
            .verdict = on_verdict, .agreed = on_agreed, .arg = &h[i], .want = host_want, .bye = host_bye};
        cl[i] = ccs_dsx_client_new("127.0.0.1", port, 4, 2 * i, "s3cret", i ? "host1" : "host0", &cb);
    }
    /* Bounded in client periods (20 s of them at most), not in
     * milliseconds: on 2 shared cores the coordinator's thread may wait for
     * a core, and that wait is not the search's (its time: make bench). */
    for (int it = 0; it < 1000 && (h[0].g.verdicts == 0 || h[1].g.verdicts == 0); it++) {
        for (int i = 0; i < 2; i++)
            ccs_dsx_client_tick(cl[i], h[i].p, 2, NULL, 0, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(h[0].g.verdicts, 1);
    ck_assert_int_eq(h[1].g.verdicts, 1);
    ck_assert_uint_eq(h[1].g.v.cls, CCS_DSX_MISMATCH);
    ck_assert_uint_eq(h[1].g.v.seq, ODD);
    ck_assert_msg(strstr(h[1].g.v.line, "seq=700: rank 1 issued allreduce(count=8, float32, sum) where ranks 0,2-3 "
                                        "issued allreduce(count=4, float32, sum)") != NULL,
                  "%s", h[1].g.v.line);
    ck_assert_int_ge(h[1].probes, 3); /* halving 2000 down to 32 takes several probes */
    ck_assert_int_ge(h[1].wants, 1);

    /* The final exchange: every rank exits; the coordinator judges, says BYE,
     * and the clients stop without an error. */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            h[i].st[j].life = CCS_DSX_EXITED;
    int done = 0;
    for (int it = 0; it < 100 && !done; it++) {
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(ccs_dsx_client_tick(cl[i], h[i].p, 2, NULL, 0, 5, why, sizeof why), 0);
        done = h[0].g.byes == 1 && h[1].g.byes == 1;
        if (it == 5)
            ck_assert_int_eq(ccs_dsx_coord_finish(coord, 2000), 1);
        nap();
    }
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(ccs_dsx_client_connected(cl[0]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ccs_dsx_client_tick(cl[i], h[i].p, 2, NULL, 0, 5, why, sizeof why), 0);
    for (int i = 0; i < 2; i++)
        ccs_dsx_client_free(cl[i]);
    ccs_dsx_coord_stop(coord);
}
END_TEST

START_TEST(bye_reaches_a_link_made_after_the_final_exchange)
{
    /* Two hosts, one rank each, both exited.  Host 1's leader leaves first
     * (its link closes), the coordinator's final exchange says BYE to host
     * 0, and only then does host 1's next link connect (a rank that took it
     * over while finishing).  It must be told BYE too, not find the
     * connection closed when the coordinator's process exits (twohost's
     * n-healthy warned of a closed connection under load). */
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(2, "s3cret", &thresholds, &port);
    struct client_events g0 = {0}, g1 = {0}, g2 = {0};
    struct ccs_dsx_client *a = new_client(port, 0, "s3cret", "host0", &g0);
    struct ccs_dsx_client *b = new_client(port, 1, "s3cret", "host1", &g1);
    struct ccs_dsx_status s0, s1;
    status(&s0, 0, 2, CCS_DSX_EXITED, 0);
    status(&s1, 1, 2, CCS_DSX_EXITED, 0);
    const struct ccs_dsx_status *p0 = &s0, *p1 = &s1;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(ccs_dsx_client_tick(a, &p0, 1, NULL, 0, 5, why, sizeof why), 0);
        ck_assert_int_eq(ccs_dsx_client_tick(b, &p1, 1, NULL, 0, 5, why, sizeof why), 0);
        nap();
    }
    ck_assert_int_eq(ccs_dsx_client_connected(b), 1);
    ccs_dsx_client_free(b); /* host 1's leader leaves */
    settle();
    /* Both ranks have exited: the final exchange ends at once. */
    ck_assert_int_eq(ccs_dsx_coord_finish(coord, 2000), 1);
    for (int i = 0; i < 50 && g0.byes == 0; i++) {
        ck_assert_int_eq(ccs_dsx_client_tick(a, &p0, 1, NULL, 0, 5, why, sizeof why), 0);
        nap();
    }
    ck_assert_int_eq(g0.byes, 1);
    /* Host 1's link again, after the BYE: told BYE as well, every tick 0. */
    struct ccs_dsx_client *c = new_client(port, 1, "s3cret", "host1", &g2);
    for (int i = 0; i < 100 && g2.byes == 0; i++) {
        ck_assert_msg(ccs_dsx_client_tick(c, &p1, 1, NULL, 0, 5, why, sizeof why) == 0, "%s", why);
        nap();
    }
    ck_assert_int_eq(g2.byes, 1);
    ck_assert_int_eq(g1.byes, 0); /* it had left before the final exchange */
    ck_assert_int_eq(g2.verdicts, 0);
    ck_assert_int_eq(g0.verdicts, 0);
    ccs_dsx_client_free(a);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* Waits (at most 3 s) until COORD has refused N peers. */
static void wait_refused(struct ccs_dsx_coord *coord, unsigned n)
{
    struct ccs_dsx_coord_stats st;
    for (int i = 0; i < 150; i++) {
        ccs_dsx_coord_stats(coord, &st);
        if ((unsigned)st.refused >= n)
            break;
        nap();
    }
    ck_assert_uint_eq((unsigned)st.refused, n);
}

/* The coordinator's lines about refused peers say what was refused and
 * why, per reason counted, with or without a member's ticket.  (Before,
 * the summary gave the last peer's reason alone: "no member's ticket
 * within 100 ms" when every refused peer had shown one.) */
START_TEST(refused_summary_counts_each_reason)
{
    char log[128], why[256] = "";
    snprintf(log, sizeof log, "/tmp/ccshim-test-refused-%d.log", (int)getpid());
    ccs_cfg.log = log;
    ccs_log_open();
    int port;
    struct ccs_dsx_coord *coord = start_coord(2, "right", &thresholds, &port);
    struct ccs_dsx_key key;
    ck_assert_int_eq(ccs_dsx_auth_key("right", &key, why, sizeof why), 0);
    unsigned char nc[CCS_DSX_NONCE], fake[CCS_DSX_MACBYTES];
    struct ccs_dsx_hello h;
    unsigned n = 0;
    /* Three made-up tickets (the first said at once), two valid tickets
     * that go away before their proof, one peer that shows nothing. */
    for (int i = 0; i < 6; i++) {
        ccs_dsx_auth_nonce(nc);
        ccs_dsx_auth_nonce(fake);
        int fd = raw_connect(port);
        if (i < 5) {
            hello(&h, nc, i < 3 ? fake : NULL, 1);
            if (i >= 3)
                ticket(&key, &h);
            send_frame(fd, CCS_DSX_M_HELLO, &h, sizeof h);
        }
        if (i < 3)
            ck_assert_int_eq(closed_on_us(fd), 1);
        else if (i < 5)
            ck_assert_int_eq(read_welcome(fd, &h), 0);
        close(fd);
        wait_refused(coord, ++n);
    }
    ccs_dsx_coord_stop(coord);
    ccs_dsx_auth_wipe(&key);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[2048], lines[4][2048];
    int nl = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "desync coordinator: refused") && nl < 4)
            snprintf(lines[nl++], sizeof lines[0], "%s", line);
    fclose(f);
    unlink(log);
    ck_assert_int_eq(nl, 2);
    ck_assert_msg(strstr(lines[0],
                         "warning: desync coordinator: refused a peer from 127.0.0.1 without a member's "
                         "ticket: its ticket does not verify (wrong CCSHIM_SECRET, or not a member of this "
                         "job)\n") != NULL,
                  "%s", lines[0]);
    ck_assert_msg(strstr(lines[1],
                         "warning: desync coordinator: refused 5 peers in the last 5 s (3 without a "
                         "member's ticket): 2 without a member's ticket: its ticket does not verify (wrong "
                         "CCSHIM_SECRET, or not a member of this job) (the last from 127.0.0.1); 2 with a "
                         "member's ticket: connection closed (the last from 127.0.0.1); 1 without a "
                         "member's ticket: connection closed (the last from 127.0.0.1)\n") != NULL,
                  "%s", lines[1]);
}
END_TEST

/* Binds loopback PORT without listening (a connection to it is refused):
 * the descriptor, or -1 when something else holds it already. */
static int take_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Without CCSHIM_COORD the coordinator's port is keyed by the secret
 * (MASTER_PORT + 1 was any local user's to take first): eight candidates in
 * 20000..32767, the same for the coordinator and its leaders, other for
 * another secret.  With the first two taken the coordinator listens on the
 * third, and a leader, trying them in turn, reaches it there. */
START_TEST(keyed_port_skips_taken_candidates)
{
    char secret[64], why[256] = "";
    snprintf(secret, sizeof secret, "keyed-%d-0123456789abcdef0123456789", (int)getpid());
    struct ccs_dsx_key key, other;
    ck_assert_int_eq(ccs_dsx_auth_key(secret, &key, why, sizeof why), 0);
    ck_assert_int_eq(ccs_dsx_auth_key("another-secret-0123456789abcdef0123", &other, why, sizeof why), 0);
    int cand[CCS_DSX_PORT_TRIES], differ = 0;
    for (unsigned i = 0; i < CCS_DSX_PORT_TRIES; i++) {
        cand[i] = ccs_dsx_auth_port(&key, i);
        ck_assert_int_ge(cand[i], 20000);
        ck_assert_int_le(cand[i], 32767);
        ck_assert_int_eq(cand[i], ccs_dsx_auth_port(&key, i));
        differ += cand[i] != ccs_dsx_auth_port(&other, i);
    }
    ck_assert_int_ge(differ, 7);
    int f0 = take_port(cand[0]), f1 = take_port(cand[1]);
    /* (Where another program holds one already, it is taken all the same.) */
    int expect = -1;
    for (int i = 2; i < CCS_DSX_PORT_TRIES && expect < 0; i++) {
        int fd = take_port(cand[i]);
        if (fd >= 0) {
            close(fd);
            expect = cand[i];
        }
    }
    int port = 0;
    struct ccs_dsx_coord *coord =
        ccs_dsx_coord_start("127.0.0.1", CCS_DSX_PORT_KEYED, 2, secret, &thresholds, 20, &port, why, sizeof why);
    ck_assert_msg(coord != NULL, "%s", why);
    ck_assert_int_eq(port, expect);
    struct client_events g = {0};
    struct ccs_dsx_client *c = new_client(CCS_DSX_PORT_KEYED, 0, secret, "host0", &g);
    int rc = 0;
    for (int i = 0; i < 50 && !ccs_dsx_client_connected(c); i++) {
        rc |= ccs_dsx_client_tick(c, NULL, 0, NULL, 0, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(ccs_dsx_client_connected(c), 1);
    ck_assert_msg(rc == 0, "a refused candidate was reported: %s", why); /* not news before a whole round */
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(coord);
    /* Every candidate taken: the coordinator says which, and cannot start. */
    int fds[CCS_DSX_PORT_TRIES];
    for (int i = 0; i < CCS_DSX_PORT_TRIES; i++)
        fds[i] = i < 2 ? -1 : take_port(cand[i]);
    coord =
        ccs_dsx_coord_start("127.0.0.1", CCS_DSX_PORT_KEYED, 2, secret, &thresholds, 20, &port, why, sizeof why);
    ck_assert_ptr_null(coord);
    ck_assert_msg(strstr(why, "cannot listen on 127.0.0.1: the 8 ports keyed by the secret (") &&
                      strstr(why, ") are all in use"),
                  "%s", why);
    for (int i = 0; i < CCS_DSX_PORT_TRIES; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (f0 >= 0)
        close(f0);
    if (f1 >= 0)
        close(f1);
}
END_TEST


/* ---- the tree (docs/desync.md, "The tree") in one process: per host a
 * client, and the relay's coordinator the root appoints, pumped in the
 * host's turn, as desync_host.c does. */
struct tree_host {
    struct ccs_dsx_client *cl;
    struct ccs_dsx_coord *relay;
    int port, group, appointed;
    const struct ccs_dsx_status *buf[4];
    struct client_events ev;
};
static struct tree_host th[4];

static int th_verdict_up(const struct ccs_dsx_verdict *v, void *arg)
{
    return ccs_dsx_client_send(((struct tree_host *)arg)->cl, CCS_DSX_M_VERDICT, v, sizeof *v);
}
static void th_agree_up(const void *p, size_t n, void *arg)
{
    (void)ccs_dsx_client_send(((struct tree_host *)arg)->cl, CCS_DSX_M_AGREE, p, n);
}
static void th_local(uint16_t type, const void *p, size_t n, void *arg)
{
    if (type == CCS_DSX_M_VERDICT && n == sizeof(struct ccs_dsx_verdict))
        on_verdict(p, &((struct tree_host *)arg)->ev);
}
static const struct ccs_dsx_relay_hooks th_hooks = {
    .verdict = th_verdict_up, .agree = th_agree_up, .local = th_local};

static void th_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    on_verdict(v, &((struct tree_host *)arg)->ev);
}
static int th_relay(uint32_t g, const unsigned char key[CCS_DSX_KEYBYTES], struct ccs_dsx_relay_at *at, void *arg)
{
    struct tree_host *h = arg;
    static const unsigned char job[CCS_DSX_JOBTAG]; /* (a secret's job of tag zero) */
    char why[256] = "";
    if (!h->relay)
        h->relay = ccs_dsx_coord_start_relay("127.0.0.1", 0, 4, key, job, &thresholds, 20, &th_hooks, h, &h->port,
                                             why, sizeof why);
    ck_assert_msg(h->relay != NULL, "%s", why);
    ck_assert_int_eq(ccs_dsx_client_relay(h->cl, g, 1, 500), 0);
    h->group = (int)g;
    h->appointed++;
    memset(at, 0, sizeof *at);
    at->group = g;
    at->port = h->port;
    return 0;
}
static void th_down(uint16_t type, const void *p, size_t n, void *arg)
{
    struct tree_host *h = arg;
    if (h->relay)
        ccs_dsx_coord_forward(h->relay, type, p, n);
}

/* One period of host R (one rank, status ST): a relay folds its group. */
static void th_tick(int r, const struct ccs_dsx_status *st)
{
    char why[256];
    struct tree_host *h = &th[r];
    const struct ccs_dsx_status *const *p = &st;
    size_t n = 1;
    if (h->relay) {
        n = ccs_dsx_coord_pump(h->relay, &st, 1, h->buf, 4);
        p = h->buf;
        ccs_dsx_client_relay(h->cl, (uint32_t)h->group, 1 + ccs_dsx_coord_leaders(h->relay), 500);
    }
    ccs_dsx_client_tick(h->cl, p, n, NULL, 0, 2, why, sizeof why);
}

/* Four hosts of one rank, groups of 2 ranks: the root appoints one relay
 * per group and sends the other leader there; a DESYNC (rank 1 exited,
 * the others blocked at the next seq) judged from the two folds reaches
 * every host once, whether through its relay or its own relay's link. */
START_TEST(tree_appoints_relays_and_a_verdict_reaches_every_host)
{
    int port;
    struct ccs_dsx_coord *coord = start_coord(4, "s3cret", &thresholds, &port);
    ccs_dsx_coord_tree(coord, 2);
    memset(th, 0, sizeof th);
    struct ccs_dsx_status s[4];
    for (int r = 0; r < 4; r++) {
        char name[16];
        snprintf(name, sizeof name, "host%d", r);
        struct ccs_dsx_client_cb cb = {.verdict = th_verdict, .relay = th_relay, .down = th_down, .arg = &th[r]};
        th[r].cl = ccs_dsx_client_new("127.0.0.1", port, 4, r, "s3cret", name, &cb);
        ck_assert_ptr_nonnull(th[r].cl);
        status(&s[r], r, 4, CCS_DSX_ALIVE, 0);
    }
    /* Healthy first, until both groups have a relay serving the other leader. */
    int ready = 0;
    for (int i = 0; i < 250 && !ready; i++) {
        for (int r = 0; r < 4; r++)
            th_tick(r, &s[r]);
        int served = 0;
        for (int r = 0; r < 4; r++)
            served += th[r].relay && ccs_dsx_coord_leaders(th[r].relay) == 1;
        ready = served == 2;
        nap();
    }
    ck_assert_msg(ready, "no relay serving its group's other leader within 5 s");
    ck_assert_int_eq((th[0].relay != NULL) + (th[1].relay != NULL), 1); /* one relay a group */
    ck_assert_int_eq((th[2].relay != NULL) + (th[3].relay != NULL), 1);
    for (int r = 0; r < 4; r++) {
        ck_assert_int_le(th[r].appointed, 1);
        ck_assert_int_eq(th[r].ev.verdicts, 0);
    }
    status(&s[0], 0, 4, CCS_DSX_ALIVE, 1);
    status(&s[1], 1, 4, CCS_DSX_EXITED, 0);
    status(&s[2], 2, 4, CCS_DSX_ALIVE, 1);
    status(&s[3], 3, 4, CCS_DSX_ALIVE, 1);
    int all = 0;
    for (int i = 0; i < 250 && !all; i++) {
        for (int r = 0; r < 4; r++) {
            if (s[r].comm[0].state == CCS_DSX_BLOCKED) /* blocked since, as a rank's collector says */
                s[r].comm[0].blocked_ms = 50 + 20u * (uint32_t)i, s[r].beat++;
            th_tick(r, &s[r]);
        }
        all = th[0].ev.verdicts && th[1].ev.verdicts && th[2].ev.verdicts && th[3].ev.verdicts;
        nap();
    }
    for (int i = 0; i < 10; i++) { /* (a second copy would come now) */
        for (int r = 0; r < 4; r++)
            th_tick(r, &s[r]);
        nap();
    }
    for (int r = 0; r < 4; r++) {
        ck_assert_msg(th[r].ev.verdicts == 1, "host %d: %d verdicts (hosts 0-3: %d %d %d %d; relays %d %d %d %d)", r,
                      th[r].ev.verdicts, th[0].ev.verdicts, th[1].ev.verdicts, th[2].ev.verdicts, th[3].ev.verdicts,
                      th[0].relay != NULL, th[1].relay != NULL, th[2].relay != NULL, th[3].relay != NULL);
        ck_assert_uint_eq(th[r].ev.v.cls, CCS_DSX_DESYNC);
        ck_assert_msg(strstr(th[r].ev.v.line, "rank 1 at seq 4 (1 behind, exited)") != NULL, "%s", th[r].ev.v.line);
    }
    for (int r = 0; r < 4; r++) {
        ccs_dsx_client_free(th[r].cl);
        if (th[r].relay)
            ccs_dsx_coord_stop(th[r].relay);
    }
    ccs_dsx_coord_stop(coord);
}
END_TEST

/* An authenticated member that says, unasked, that it relays group 1 at
 * an address of its own: the root sends no leader there (only a relay it
 * appointed, or one holding the key it gave); a VERDICT from a leader
 * that does not relay is refused with its connection, and reaches no one. */
START_TEST(unasked_relay_claim_sends_no_one)
{
    int port;
    char why[256] = "";
    struct ccs_dsx_coord *coord = start_coord(4, "s3cret", &thresholds, &port);
    ccs_dsx_coord_tree(coord, 2);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    struct client_events g2 = {0}, g3 = {0};
    struct ccs_dsx_client_cb cb2 = {.verdict = on_verdict, .arg = &g2}, cb3 = {.verdict = on_verdict, .arg = &g3};
    struct ccs_dsx_client *c2 = ccs_dsx_client_new("127.0.0.1", port, 4, 2, "s3cret", "host2", &cb2);
    struct ccs_dsx_client *c3 = ccs_dsx_client_new("127.0.0.1", port, 4, 3, "s3cret", "host3", &cb3);
    struct ccs_dsx_status s2, s3;
    status(&s2, 2, 4, CCS_DSX_ALIVE, 0);
    status(&s3, 3, 4, CCS_DSX_ALIVE, 0);
    const struct ccs_dsx_status *p2 = &s2, *p3 = &s3;
    /* Connected, no status sent yet: the root cannot have appointed it (it
     * appoints by a leader's lowest rank), so its claim is unasked. */
    wait_connected(c3, why, sizeof why);
    ck_assert_int_eq(ccs_dsx_client_connected(c3), 1);
    struct ccs_dsx_relay_at at = {.group = 1, .port = ntohs(sa.sin_port)};
    memset(at.key, 0x5a, sizeof at.key);
    ck_assert_int_eq(ccs_dsx_client_send(c3, CCS_DSX_M_RELAY_AT, &at, sizeof at), 0);
    for (int i = 0; i < 50; i++) { /* 1 s: the root's passes appoint (the leaders cannot relay: port 0) */
        ccs_dsx_client_tick(c2, &p2, 1, NULL, 0, 2, why, sizeof why);
        ccs_dsx_client_tick(c3, &p3, 1, NULL, 0, 2, why, sizeof why);
        nap();
    }
    ck_assert_int_lt(accept(lfd, NULL, NULL), 0); /* nobody was sent to the claimed address */
    ck_assert_int_eq(ccs_dsx_client_connected(c2), 1);
    ck_assert_int_eq(ccs_dsx_client_connected(c3), 1);
    /* A verdict from a leader that does not relay. */
    struct ccs_dsx_verdict *v = calloc(1, sizeof *v);
    v->cls = CCS_DSX_DESYNC;
    v->comm = 0xabc;
    v->seq = 5;
    v->comm_size = 4;
    snprintf(v->line, sizeof v->line, "forged");
    ck_assert_int_eq(ccs_dsx_client_send(c3, CCS_DSX_M_VERDICT, v, sizeof *v), 0);
    int lost = 0;
    for (int i = 0; i < 20; i++) {
        ccs_dsx_client_tick(c2, &p2, 1, NULL, 0, 2, why, sizeof why);
        ccs_dsx_client_tick(c3, &p3, 1, NULL, 0, 2, why, sizeof why);
        lost |= !ccs_dsx_client_connected(c3);
        nap();
    }
    ck_assert_int_eq(lost, 1);
    ck_assert_int_eq(g2.verdicts, 0);
    ck_assert_int_eq(g3.verdicts, 0);
    free(v);
    close(lfd);
    ccs_dsx_client_free(c2);
    ccs_dsx_client_free(c3);
    ccs_dsx_coord_stop(coord);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("desync_tcp");
    TCase *t = tcase_create("tcp");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, verdict_reaches_the_clients);
    tcase_add_test(t, wrong_secret_is_refused);
    tcase_add_test(t, garbage_is_dropped);
    tcase_add_test(t, reflection_is_refused);
    tcase_add_test(t, no_oracle_before_the_client_proves);
    tcase_add_test(t, two_jobs_with_one_secret_stay_apart);
    tcase_add_test(t, mpi_traffic_gives_nothing_to_authenticate_with);
    tcase_add_test(t, replay_is_refused);
    tcase_add_test(t, huge_seq_from_a_peer_one_warning_no_hang);
    tcase_add_test(t, agree_flood_is_bounded);
    tcase_add_test(t, finished_agreements_oldest_go);
    tcase_add_test(t, impostor_coordinator_is_refused);
    tcase_add_test(t, unauthenticated_peers_are_bounded);
    tcase_add_test(t, mitm_reads_nothing);
    tcase_add_test(t, mitm_alteration_is_refused);
    tcase_add_test(t, emfile_does_not_spin);
    tcase_add_test(t, search_finds_the_first_difference);
    tcase_add_test(t, bye_reaches_a_link_made_after_the_final_exchange);
    tcase_add_test(t, keyed_port_skips_taken_candidates);
    tcase_add_test(t, refused_summary_counts_each_reason);
    tcase_add_test(t, tree_appoints_relays_and_a_verdict_reaches_every_host);
    tcase_add_test(t, unasked_relay_claim_sends_no_one);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
