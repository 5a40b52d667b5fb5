/* test_tcp.c - the coordinator and the per-host client over loopback: the
 * handshake, a verdict reaching a client, a wrong secret refused, garbage
 * dropped without harm, agreement folded across hosts. */
#include "desync_proto.h"
#include "desync_tcp.h"
#include "shim.h"
#include "unit_main.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const struct ccs_dsx_thresholds T = {
    .block_ms = 1000, .straggler_ms = 60000, .suspect_ms = 2000, .heartbeat_ms = 10000};

struct got {
    int verdicts, agreed;
    struct ccs_dsx_verdict v;
    struct ccs_dsx_agree a;
};

static void on_v(const struct ccs_dsx_verdict *v, void *arg)
{
    struct got *g = arg;
    g->v = *v;
    g->verdicts++;
}
static void on_a(const struct ccs_dsx_agree *a, void *arg)
{
    struct got *g = arg;
    g->a = *a;
    g->agreed++;
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

static void nap(void)
{
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(verdict_reaches_the_clients)
{
    int port = 0;
    char why[256];
    struct ccs_dsx_coord *k = ccs_dsx_coord_start("127.0.0.1", 0, 2, "s3cret", &T, 20, &port, why, sizeof why);
    ck_assert_msg(k != NULL, "%s", why);
    struct got g0 = {0}, g1 = {0};
    struct ccs_dsx_client_cb cb0 = {.verdict = on_v, .agreed = on_a, .arg = &g0},
                             cb1 = {.verdict = on_v, .agreed = on_a, .arg = &g1};
    struct ccs_dsx_client *a = ccs_dsx_client_new("127.0.0.1", port, 2, 0, "s3cret", "host0", &cb0);
    struct ccs_dsx_client *b = ccs_dsx_client_new("127.0.0.1", port, 2, 1, "s3cret", "host1", &cb1);
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
    ccs_dsx_coord_stats(k, &st);
    ck_assert_int_eq(st.clients, 2);
    ck_assert_int_eq(st.refused, 0);
    ccs_dsx_client_free(a);
    ccs_dsx_client_free(b);
    ccs_dsx_coord_stop(k);
}
END_TEST

START_TEST(wrong_secret_is_refused)
{
    int port = 0;
    char why[256] = "";
    struct ccs_dsx_coord *k = ccs_dsx_coord_start("127.0.0.1", 0, 2, "right", &T, 20, &port, why, sizeof why);
    ck_assert_ptr_nonnull(k);
    struct got g = {0};
    struct ccs_dsx_client_cb cb = {.verdict = on_v, .agreed = on_a, .arg = &g};
    struct ccs_dsx_client *c = ccs_dsx_client_new("127.0.0.1", port, 2, 0, "wrong", "host0", &cb);
    struct ccs_dsx_status s0;
    status(&s0, 0, 2, CCS_DSX_ALIVE, 1);
    const struct ccs_dsx_status *p0 = &s0;
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++) {
        rc = ccs_dsx_client_tick(c, &p0, 1, NULL, 0, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(why, "CCSHIM_SECRET") != NULL, "%s", why);
    ck_assert_int_eq(ccs_dsx_client_connected(c), 0);
    struct ccs_dsx_coord_stats st;
    for (int i = 0; i < 50; i++) {
        ccs_dsx_coord_stats(k, &st);
        if (st.refused)
            break;
        nap();
    }
    ck_assert_int_eq(st.refused, 1);
    ck_assert_int_eq(st.clients, 0);
    ck_assert_uint_eq(st.statuses, 0);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(k);
}
END_TEST

START_TEST(garbage_is_dropped)
{
    int port = 0;
    char why[256] = "";
    struct ccs_dsx_coord *k = ccs_dsx_coord_start("127.0.0.1", 0, 2, "right", &T, 20, &port, why, sizeof why);
    ck_assert_ptr_nonnull(k);
    /* A peer that sends a frame header announcing 4 GB, then one that sends
     * a STATUS before the handshake. */
    for (int t = 0; t < 2; t++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        struct ccs_dsx_frame f = {.magic = CCS_DSX_MAGIC,
                                  .version = CCS_DSX_VERSION,
                                  .type = t ? CCS_DSX_M_STATUS : CCS_DSX_M_HELLO,
                                  .length = t ? 4 : 0xffffffffu};
        unsigned char buf[sizeof f + 4] = {0};
        memcpy(buf, &f, sizeof f);
        ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
        char c;
        struct timeval tv = {2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ck_assert_int_eq(read(fd, &c, 1), 0); /* closed on us */
        close(fd);
    }
    struct ccs_dsx_coord_stats st;
    ccs_dsx_coord_stats(k, &st);
    ck_assert_int_eq(st.refused, 2);
    ck_assert_uint_eq(st.statuses, 0);
    /* Still serving. */
    struct got g = {0};
    struct ccs_dsx_client_cb cb = {.verdict = on_v, .agreed = on_a, .arg = &g};
    struct ccs_dsx_client *c = ccs_dsx_client_new("127.0.0.1", port, 2, 0, "right", "host0", &cb);
    for (int i = 0; i < 50 && !ccs_dsx_client_connected(c); i++) {
        ccs_dsx_client_tick(c, NULL, 0, NULL, 0, 5, why, sizeof why);
        nap();
    }
    ck_assert_int_eq(ccs_dsx_client_connected(c), 1);
    ccs_dsx_client_free(c);
    ccs_dsx_coord_stop(k);
}
END_TEST

/* ---- the search for the first differing seq, and the final exchange ---- */

#define LOG 2000 /* operations every simulated rank has completed */
#define ODD 700  /* rank 1's count differs there */

/* One simulated host: two ranks with their whole logs, answering the
 * coordinator's probes and record requests as desync_collect.c does. */
struct host {
    struct got g; /* first: the verdict callbacks take the host as their got */
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
    seq &= ~CCS_DSX_PROBE_BIT;
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
    h->g.agreed = -1; /* (marks the BYE) */
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
    int port = 0;
    char why[256];
    struct ccs_dsx_coord *k = ccs_dsx_coord_start("127.0.0.1", 0, 4, "s3cret", &t, 20, &port, why, sizeof why);
    ck_assert_msg(k != NULL, "%s", why);
    static struct host h[2];
    struct ccs_dsx_client *cl[2];
    for (int i = 0; i < 2; i++) {
        host_init(&h[i], 2 * i);
        struct ccs_dsx_client_cb cb = {
            .verdict = on_v, .agreed = on_a, .arg = &h[i], .want = host_want, .bye = host_bye};
        cl[i] = ccs_dsx_client_new("127.0.0.1", port, 4, 2 * i, "s3cret", i ? "host1" : "host0", &cb);
    }
    double t0 = (double)ccs_clock_mono_ns() / 1e6;
    for (int it = 0; it < 250 && (h[0].g.verdicts == 0 || h[1].g.verdicts == 0); it++) {
        for (int i = 0; i < 2; i++)
            ccs_dsx_client_tick(cl[i], h[i].p, 2, NULL, 0, 5, why, sizeof why);
        nap();
    }
    double ms = (double)ccs_clock_mono_ns() / 1e6 - t0;
    ck_assert_int_eq(h[0].g.verdicts, 1);
    ck_assert_int_eq(h[1].g.verdicts, 1);
    ck_assert_uint_eq(h[1].g.v.cls, CCS_DSX_MISMATCH);
    ck_assert_uint_eq(h[1].g.v.seq, ODD);
    ck_assert_msg(strstr(h[1].g.v.line, "seq=700: rank 1 issued allreduce(count=8, float32, sum) where ranks 0,2-3 "
                                        "issued allreduce(count=4, float32, sum)") != NULL,
                  "%s", h[1].g.v.line);
    ck_assert_int_ge(h[1].probes, 3); /* halving 2000 down to 32 takes several probes */
    ck_assert_int_ge(h[1].wants, 1);
    ck_assert_msg(ms < 3000, "found after %.0f ms", ms);

    /* The final exchange: every rank exits; the coordinator judges, says BYE,
     * and the clients stop without an error. */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            h[i].st[j].life = CCS_DSX_EXITED;
    int done = 0;
    for (int it = 0; it < 100 && !done; it++) {
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(ccs_dsx_client_tick(cl[i], h[i].p, 2, NULL, 0, 5, why, sizeof why), 0);
        done = h[0].g.agreed == -1 && h[1].g.agreed == -1;
        if (it == 5)
            ck_assert_int_eq(ccs_dsx_coord_finish(k, 2000), 1);
        nap();
    }
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(ccs_dsx_client_connected(cl[0]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ccs_dsx_client_tick(cl[i], h[i].p, 2, NULL, 0, 5, why, sizeof why), 0);
    for (int i = 0; i < 2; i++)
        ccs_dsx_client_free(cl[i]);
    ccs_dsx_coord_stop(k);
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
    tcase_add_test(t, search_finds_the_first_difference);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
