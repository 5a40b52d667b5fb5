/*
 * fuzz_dsx_client.c - libFuzzer target: a host's client of the TCP side
 * channel (src/desync/desync_client.c) receiving what a coordinator sends,
 * without sockets: the client's own source is compiled in here so that its
 * frame handling (client_frames: WELCOME and the handshake's proof,
 * VERDICT, DETAIL, AGREE, BYE) runs on the fuzzer's bytes as in the rank.
 *
 * Input: byte 0 picks the mode (bits 0-1) and the keys (bit 2: the rank's
 * from an X25519 key exchange with the coordinator, else the job's secret),
 * byte 1 the world size (1..64) and the client's rank; the rest is, by mode,
 *   0  raw bytes from a "coordinator" that knows no secret;
 *   1  an honest handshake, then raw bytes (injected: must not authenticate);
 *   2  an honest handshake, then frames [type][length, 2 bytes][payload]
 *      sealed with the session key: what a coordinator of the job can send;
 *   3  the coordinator's two WELCOMEs with fields from the input (sizeof
 *      WELCOME bytes, then a byte: 1 keeps the input's MAC in the second
 *      (forged), 2 its job tag), the second with a correct proof unless
 *      forged, then as in 2.
 * What reaches the callbacks must be what the client promises them: a
 * verdict that passes ccs_dsx_check_verdict, agreements of size within the
 * world and complete.
 */
#include "desync_client.c"
#include "fuzz_common.h"
#include "fuzz_dsx.h"
#include <fcntl.h>

/* A host name as the client holds it: CCS_DSX_HOST bytes (the handshake
 * copies that many). */
static const char FUZZ_HOST[CCS_DSX_HOST] = "fuzzhost";

static struct fuzz_keys fk;
static int devnull = -1;
static int kx; /* this input's keys: the key exchange's, else the secret's */

/* The coordinator's key for the rank R a peer claims. */
static const struct ccs_dsx_key *coord_key(int32_t r, void *arg)
{
    (void)arg;
    if (!kx)
        return &fk.secret;
    return r >= 0 && r < FUZZ_RANKS ? &fk.coord[r] : NULL;
}
static int32_t cur_wsize;

static void on_verdict(const struct ccs_dsx_verdict *v, void *arg)
{
    char why[256];
    struct ccs_dsx_verdict copy = *v;
    (void)arg;
    if (ccs_dsx_check_verdict(&copy, cur_wsize, why, sizeof why) != 0)
        abort();
}

static void on_agreed(const struct ccs_dsx_agree *a, void *arg)
{
    (void)arg;
    if (a->size <= 0 || a->size > cur_wsize || a->n != (uint32_t)a->size || a->min > a->max)
        abort();
}

static void on_want(uint64_t comm, uint64_t seq, void *arg)
{
    (void)comm, (void)seq, (void)arg;
}
static void on_bye(void *arg)
{
    (void)arg;
}

/* The client's reaction to what arrived; 1 while connected. */
static int serve(struct ccs_dsx_client *cl)
{
    char why[256];
    if (cl->c.fd < 0)
        return 0;
    if (client_frames(cl, why, sizeof why) != 0) {
        client_drop(cl, ccs_clock_mono_ms());
        return 0;
    }
    return 1;
}

/* Raw bytes from the network, read as the client reads them (on_readable:
 * ccs_dsx_conn_fill, then the frames) until nothing more moves. */
static void raw(struct ccs_dsx_client *cl, struct fz *z)
{
    char why[256];
    int peer = fuzz_raw_peer(&cl->c, z->p, z->n);
    while (cl->c.fd >= 0) {
        uint64_t got = cl->c.bytes_in;
        size_t had = cl->c.inlen;
        if (on_readable(cl, why, sizeof why) != 0) {
            client_drop(cl, ccs_clock_mono_ms());
            break;
        }
        if (cl->bye || (cl->c.bytes_in == got && cl->c.inlen == had))
            break;
    }
    close(peer);
}

/* Queues W as a WELCOME on CO unsealed, as the coordinator sends its
 * WELCOMEs (the second just before it seals the connection). */
static void queue_welcome(struct ccs_dsx_conn *co, const struct ccs_dsx_hello *w)
{
    int sealed = co->sealed;
    co->outlen = co->outoff = 0; /* in place of the one the coordinator queued */
    co->sealed = 0;
    if (ccs_dsx_conn_queue(co, CCS_DSX_M_WELCOME, w, sizeof *w) != 0)
        abort();
    co->sealed = sealed;
}

/* The coordinator's side of the handshake, honest or with WELCOME fields
 * from the input (FIELDS).  0 once both ends are sealed, -1 when the
 * client refused. */
static int handshake(struct ccs_dsx_client *cl, struct ccs_dsx_conn *co, int fields, struct fz *z)
{
    char why[256];
    struct ccs_dsx_frame f;
    const unsigned char *p;
    struct ccs_dsx_hello w;
    uint8_t how = 0;
    fuzz_deliver(co, &cl->c);
    if (ccs_dsx_conn_next_frame(co, &f, &p, why, sizeof why) != 1 ||
        ccs_dsx_conn_on_hello(co, coord_key, NULL, cl->wsize, fk.job, &f, p, why, sizeof why) != 0)
        abort(); /* the client opens with a HELLO whose ticket verifies */
    ccs_dsx_conn_consume(co);
    if (fields) {
        fz_copy(z, &w, sizeof w);
        how = fz_u8(z);
        if (!(how & 2))
            memcpy(w.job, fk.job, sizeof w.job);
        memcpy(co->nonce_s, w.nonce, sizeof co->nonce_s);
        queue_welcome(co, &w);
    }
    fuzz_deliver(&cl->c, co);
    if (!serve(cl)) {
        if (!fields)
            abort(); /* an honest coordinator's WELCOME is answered */
        return -1;
    }
    if (cl->c.state != CCS_DSX_C_HELLO)
        abort(); /* a WELCOME is answered with the client's proof, or refused */
    fuzz_deliver(co, &cl->c);
    if (ccs_dsx_conn_next_frame(co, &f, &p, why, sizeof why) != 1 ||
        ccs_dsx_conn_on_hello(co, coord_key, NULL, cl->wsize, fk.job, &f, p, why, sizeof why) != 1)
        abort(); /* an honest client's proof verifies */
    ccs_dsx_conn_consume(co);
    if (fields) { /* the second WELCOME: the same fields, with the coordinator's proof unless forged */
        if (!(how & 1))
            ccs_dsx_auth_mac(&co->key, CCS_DSX_AUTH_COORD, co->nonce_c, co->nonce_s, &w, w.mac);
        queue_welcome(co, &w);
    }
    fuzz_deliver(&cl->c, co);
    if (!serve(cl)) {
        if (!fields)
            abort(); /* an honest coordinator's proof verifies */
        return -1;
    }
    if (!cl->c.sealed || (how & 1))
        abort(); /* a proof that verifies seals the client; one without the key is refused */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (devnull < 0) {
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
            abort();
        fuzz_keys_init(&fk);
    }
    struct fz z = {data, size};
    uint8_t m = fz_u8(&z), mode = m % 4, ws = fz_u8(&z);
    kx = (m >> 2) & 1;
    int32_t wsize = 1 + ws % 64, rank = (ws >> 6) % wsize;
    cur_wsize = wsize;
    struct ccs_dsx_client_cb cb = {.verdict = on_verdict, .agreed = on_agreed, .want = on_want, .bye = on_bye};
    struct ccs_dsx_cred cred = {.secret = kx ? NULL : FUZZ_SECRET, .peers = fk.cpk};
    memcpy(cred.job, fk.job, sizeof cred.job);
    memcpy(cred.pk, fk.pk[rank], sizeof cred.pk);
    memcpy(cred.sk, fk.sk[rank], sizeof cred.sk);
    struct ccs_dsx_client *cl = ccs_dsx_client_new_cred("127.0.0.1", 9, wsize, rank, &cred, FUZZ_HOST, &cb);
    if (!cl)
        abort();
    /* As client_connect leaves it: a socket, the first HELLO queued. */
    if (ccs_dsx_conn_hello(&cl->c, dup(devnull), &cl->key, wsize, rank, cl->hostname, cl->job) != 0)
        abort();
    struct ccs_dsx_conn co = {.fd = -1, .state = CCS_DSX_C_CONNECTING};
    if (mode == 0) {
        raw(cl, &z);
    } else if (handshake(cl, &co, mode == 3, &z) == 0) {
        if (mode == 1) {
            raw(cl, &z);
        } else {
            while (z.n && cl->c.fd >= 0) {
                uint8_t t = fz_u8(&z);
                uint16_t type = t & 0x80 ? t : (uint16_t)(1 + t % 7);
                size_t len = fz_u16(&z), got;
                const uint8_t *p = fz_bytes(&z, len, &got);
                if (ccs_dsx_conn_queue(&co, type, p, got) != 0)
                    abort();
                fuzz_deliver(&cl->c, &co);
                if (!serve(cl))
                    break;
            }
        }
    }
    free(co.in);
    free(co.out);
    ccs_dsx_client_free(cl);
    return 0;
}
