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
    struct ccs_dsx_client_cb cb0 = {.verdict = on_v, .agreed = on_a, .arg = &g0}, cb1 = {.verdict = on_v, .agreed = on_a, .arg = &g1};
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

static Suite *suite(void)
{
    Suite *s = suite_create("desync_tcp");
    TCase *t = tcase_create("tcp");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, verdict_reaches_the_clients);
    tcase_add_test(t, wrong_secret_is_refused);
    tcase_add_test(t, garbage_is_dropped);
    suite_add_tcase(s, t);
    return s;
}

CCS_UNIT_MAIN(suite)
