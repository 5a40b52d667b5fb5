/*
 * fuzz_dsx_coord.c - libFuzzer target: the coordinator of the TCP side
 * channel (src/desync/desync_coord.c) receiving what one client sends,
 * without sockets or threads: the coordinator's own source is compiled in
 * here so that its frame handling (ccs_dsx_coord_frames: the handshake, STATUS and
 * AGREE frames, store_status, fold_agree, dropping a peer) and its rules
 * pass (ccs_dsx_coord_eval, ccs_dsx_coord_probe) run on the fuzzer's bytes exactly as in
 * the coordinator thread.
 *
 * Input: byte 0 picks the mode (bits 0-1) and the keys (bit 2: each rank's
 * from an X25519 key exchange with the coordinator, else the job's secret),
 * byte 1 the world size (1..64) and the client's rank, byte 2 flags (1: a rules pass after every frame; 2: two
 * clients, mode 2 only; 4: the tree on, groups of 2 ranks: a rules pass appoints relays and sends leaders to
 * them, RELAY_AT and VERDICT frames are a relay's); the rest is, by mode,
 *   0  raw bytes from a peer that knows no secret (the handshake's checks);
 *   1  an honest handshake, then raw bytes (injected: must not authenticate);
 *   2  an honest handshake, then frames [type][length, 2 bytes][payload]
 *      sealed with the session key: what an authenticated member can send
 *      (with two clients, each frame after a byte naming the client, 0 or 1,
 *      or 0xff then a byte: that client's connection closes);
 *   3  a handshake whose HELLO fields come from the input (sizeof HELLO
 *      bytes, twice, then a byte: 1 keeps the input's nonce in the second,
 *      2 its MAC (forged), 4 its job tag in both, 8 the first's ticket
 *      (forged)); otherwise the first carries a correct ticket and the
 *      second a correct proof; then as in 2.
 * Whatever the coordinator sends back must be frames its clients accept:
 * authentic, and every VERDICT passing ccs_dsx_check_verdict.
 */
#include "desync_coord.c"
#include "fuzz_common.h"
#include "fuzz_dsx.h"
#include <fcntl.h>
#include <sys/epoll.h>

/* A host name as the client holds it: CCS_DSX_HOST bytes (the handshake
 * copies that many). */
static const char FUZZ_HOST[CCS_DSX_HOST] = "fuzzhost";

static struct fuzz_keys fk;
static int devnull = -1;
static int kx; /* this input's keys: the key exchange's, else the secret's */

/* The key rank R's leader proves. */
static const struct ccs_dsx_key *client_key(int32_t r)
{
    return kx ? &fk.client[r >= 0 && r < FUZZ_RANKS ? r : 0] : &fk.secret;
}

#define NCONN 2

static struct ccs_dsx_coord *coord_new(int32_t wsize, size_t nconn)
{
    struct ccs_dsx_coord *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    k->wsize = wsize;
    k->lfd = -1;
    memcpy(k->job, fk.job, sizeof k->job);
    if (kx) { /* as ccs_dsx_coord_start_cred with every rank's public key */
        k->kx = 1;
        memcpy(k->pk, fk.cpk, sizeof k->pk);
        memcpy(k->sk, fk.csk, sizeof k->sk);
        k->peers = malloc((size_t)wsize * CCS_DSX_PKBYTES);
        k->rkeys = calloc((size_t)wsize, sizeof *k->rkeys);
        k->rkey_ok = calloc((size_t)wsize, 1);
        if (!k->peers || !k->rkeys || !k->rkey_ok)
            abort();
        memcpy(k->peers, fk.pk, (size_t)wsize * CCS_DSX_PKBYTES);
    } else {
        k->key = fk.secret;
    }
    pthread_mutex_init(&k->lock, NULL);
    /* Short thresholds: the statuses say how long a rank has been blocked. */
    k->t = (struct ccs_dsx_thresholds){.block_ms = 10,
                                       .straggler_ms = 20,
                                       .suspect_ms = 20,
                                       .heartbeat_ms = 100000,
                                       .mismatch_wait_ms = 0,
                                       .record_wait_ms = 0};
    k->period_ms = 10;
    char why[160];
    k->cl = calloc(nconn, sizeof *k->cl);
    if (ccs_dsx_coord_tables(k, why, sizeof why) != 0 || !k->cl)
        abort();
    k->lfd = k->epfd = -1; /* no listening socket, no epoll set */
    /* Accepted connections awaiting the handshake (as ccs_dsx_coord_accept
     * leaves them); real descriptors, as ccs_dsx_coord_drop closes them. */
    for (size_t i = 0; i < nconn; i++) {
        struct ccs_dsx_conn *c = &k->cl[i];
        c->fd = dup(devnull);
        c->state = CCS_DSX_C_CONNECTING;
        c->t_open = ccs_clock_mono_ms();
        snprintf(c->peer, sizeof c->peer, "fuzz peer %zu", i);
    }
    k->ncl = k->capcl = nconn;
    k->nunauth = (int)nconn;
    return k;
}

/* The coordinator's loop for client I after a read: its frames, and the
 * drop when they are refused.  1 while the connection stays up. */
static int serve(struct ccs_dsx_coord *k, size_t i)
{
    char why[256];
    if (k->cl[i].fd < 0)
        return 0;
    if (ccs_dsx_coord_frames(k, i, why, sizeof why) != 0 || k->cl[i].state == CCS_DSX_C_DROP) {
        ccs_dsx_coord_drop(k, i, why);
        return 0;
    }
    return 1;
}

/* The client's side: reads everything the coordinator sent.  Only WELCOME
 * before the handshake; after it, frames that authenticate, and verdicts
 * that a client accepts. */
static void client_reads(struct ccs_dsx_coord *k, size_t i, struct ccs_dsx_conn *cc)
{
    struct ccs_dsx_frame f;
    const unsigned char *p;
    char why[256];
    int rc;
    if (k->cl[i].fd < 0)
        return;
    fuzz_deliver(cc, &k->cl[i]);
    if (!cc->sealed)
        return; /* the handshake reads its WELCOME itself */
    while ((rc = ccs_dsx_conn_next_frame(cc, &f, &p, why, sizeof why)) == 1) {
        if (f.type == CCS_DSX_M_VERDICT) {
            struct ccs_dsx_verdict v;
            if (f.length != sizeof v)
                abort();
            memcpy(&v, p, sizeof v);
            if (ccs_dsx_check_verdict(&v, k->wsize, why, sizeof why) != 0) {
                fprintf(stderr, "coordinator sent a verdict its clients refuse: %s\n", why);
                abort();
            }
        }
        ccs_dsx_conn_consume(cc);
    }
    if (rc < 0) {
        fprintf(stderr, "coordinator sent a frame its clients refuse: %s\n", why);
        abort();
    }
}

/* The client's two HELLOs (its ticket, then its proof), and the
 * coordinator's proof checked.  FIELDS: take them from the input (mode 3). */
static int handshake(struct ccs_dsx_coord *k, size_t i, struct ccs_dsx_conn *cc, int32_t rank, int fields,
                     struct fz *z)
{
    static const unsigned char zero_nonce[CCS_DSX_NONCE];
    char why[256];
    struct ccs_dsx_frame f;
    const unsigned char *p;
    const struct ccs_dsx_key *key = client_key(rank);
    struct ccs_dsx_hello h1, h2;
    uint8_t how = 0;
    if (!fields) {
        if (ccs_dsx_conn_hello(cc, -1, key, k->wsize, rank, FUZZ_HOST, fk.job) != 0)
            abort();
    } else {
        fz_copy(z, &h1, sizeof h1);
        fz_copy(z, &h2, sizeof h2);
        how = fz_u8(z);
        if (!(how & 4))
            memcpy(h1.job, fk.job, sizeof h1.job), memcpy(h2.job, fk.job, sizeof h2.job);
        key = client_key(h1.rank);
        memset(cc, 0, sizeof *cc);
        cc->fd = -1;
        cc->state = CCS_DSX_C_CONNECTING;
        memcpy(cc->nonce_c, h1.nonce, sizeof cc->nonce_c);
        if (!(how & 8))
            ccs_dsx_auth_mac(key, CCS_DSX_AUTH_TICKET, cc->nonce_c, zero_nonce, &h1, h1.mac);
        if (ccs_dsx_conn_queue(cc, CCS_DSX_M_HELLO, &h1, sizeof h1) != 0)
            abort();
    }
    fuzz_deliver(&k->cl[i], cc);
    if (!serve(k, i)) {
        if (!fields)
            abort(); /* an honest member's ticket is taken */
        return -1;
    }
    if (how & 8)
        abort(); /* a ticket without the key is refused */
    fuzz_deliver(cc, &k->cl[i]);
    if (ccs_dsx_conn_next_frame(cc, &f, &p, why, sizeof why) != 1)
        abort(); /* the coordinator answers a ticket with a WELCOME */
    if (!fields) {
        if (ccs_dsx_conn_welcome(cc, key, k->wsize, rank, FUZZ_HOST, fk.job, &f, p, why, sizeof why) != 0)
            abort(); /* an honest client answers it with its proof */
        ccs_dsx_conn_consume(cc);
    } else {
        struct ccs_dsx_hello w;
        if (f.type != CCS_DSX_M_WELCOME || f.length != sizeof w)
            abort();
        memcpy(&w, p, sizeof w);
        ccs_dsx_conn_consume(cc);
        memcpy(cc->nonce_s, w.nonce, sizeof cc->nonce_s);
        if (!(how & 1))
            memcpy(h2.nonce, cc->nonce_c, sizeof h2.nonce);
        if (!(how & 2))
            ccs_dsx_auth_mac(key, CCS_DSX_AUTH_CLIENT, cc->nonce_c, cc->nonce_s, &h2, h2.mac);
        if (ccs_dsx_conn_queue(cc, CCS_DSX_M_HELLO, &h2, sizeof h2) != 0)
            abort();
        cc->state = CCS_DSX_C_HELLO;
    }
    fuzz_deliver(&k->cl[i], cc);
    if (!serve(k, i)) {
        if (!fields)
            abort(); /* an honest member's proof is taken */
        return -1;
    }
    if (!k->cl[i].sealed || (how & 2))
        abort(); /* both HELLOs answered: authenticated, or dropped when the MAC is not the key's */
    /* The coordinator's proof, which its clients verify. */
    fuzz_deliver(cc, &k->cl[i]);
    if (ccs_dsx_conn_next_frame(cc, &f, &p, why, sizeof why) != 1 ||
        ccs_dsx_conn_welcome(cc, key, k->wsize, rank, FUZZ_HOST, fk.job, &f, p, why, sizeof why) != 1)
        abort();
    ccs_dsx_conn_consume(cc);
    return 0;
}

/* Raw bytes from a peer, read as the coordinator thread reads them
 * (ccs_dsx_coord_serve: ccs_dsx_conn_fill, the frames, the drop) until nothing
 * more moves: then it waits, and the handshake deadline would drop it. */
static void raw(struct ccs_dsx_coord *k, struct fz *z)
{
    struct ccs_dsx_conn *c = &k->cl[0];
    int peer = fuzz_raw_peer(c, z->p, z->n);
    while (c->fd >= 0) {
        uint64_t got = c->bytes_in;
        size_t had = c->inlen;
        ccs_dsx_coord_serve(k, 0, EPOLLIN);
        if (c->fd < 0 || (c->bytes_in == got && c->inlen == had))
            break;
    }
    close(peer);
}

/* One rules pass and one search pass, as the coordinator's timer runs
 * them; the clients read what they were sent. */
static void tick(struct ccs_dsx_coord *k, struct ccs_dsx_conn *cc, size_t n)
{
    ccs_dsx_coord_eval(k);
    ccs_dsx_coord_probe(k, ccs_clock_mono_ms());
    ccs_dsx_coord_count_io(k);
    for (size_t i = 0; i < n; i++)
        client_reads(k, i, &cc[i]);
}

/* Sealed frames from the input, from N authenticated clients. */
static void frames(struct ccs_dsx_coord *k, struct ccs_dsx_conn *cc, size_t n, uint8_t flags, struct fz *z)
{
    while (z->n) {
        size_t i = 0;
        if (n > 1) {
            uint8_t c = fz_u8(z);
            if (c == 0xff) { /* that host's connection closes */
                i = fz_u8(z) % n;
                if (k->cl[i].fd >= 0)
                    ccs_dsx_coord_drop(k, i, "connection closed");
                continue;
            }
            i = c % n;
        }
        uint8_t t = fz_u8(z);
        uint16_t type = t & 0x80 ? t : (uint16_t)(1 + t % 7);
        size_t len = fz_u16(z), got;
        const uint8_t *p = fz_bytes(z, len, &got);
        if (k->cl[i].fd < 0)
            continue; /* closed: nothing more arrives from it */
        if (ccs_dsx_conn_queue(&cc[i], type, p, got) != 0)
            abort();
        fuzz_deliver(&k->cl[i], &cc[i]);
        serve(k, i);
        if (flags & 1)
            tick(k, cc, n);
        else
            client_reads(k, i, &cc[i]);
    }
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
    uint8_t m = fz_u8(&z), mode = m % 4, ws = fz_u8(&z), flags = fz_u8(&z);
    int32_t wsize = 1 + ws % 64, rank = (ws >> 6) % wsize;
    kx = (m >> 2) & 1;
    size_t n = mode == 2 && (flags & 2) ? NCONN : 1;
    struct ccs_dsx_coord *k = coord_new(wsize, n);
    if (flags & 4)
        ccs_dsx_coord_tree(k, 2);
    struct ccs_dsx_conn cc[NCONN] = {{.fd = -1}, {.fd = -1}};
    if (mode == 0) {
        raw(k, &z);
    } else {
        int up = 1;
        for (size_t i = 0; i < n && up; i++) /* the second host's leader: the next rank */
            up = handshake(k, i, &cc[i], (rank + (int32_t)i) % wsize, mode == 3, &z) == 0;
        if (up && mode == 1)
            raw(k, &z);
        else if (up)
            frames(k, cc, n, flags, &z);
    }
    tick(k, cc, n);
    for (size_t i = 0; i < NCONN; i++)
        free(cc[i].in), free(cc[i].out);
    /* ccs_dsx_coord_stop without the thread */
    ccs_dsx_coord_refused_log(k, NULL, NULL, 0, 2);
    ccs_dsx_coord_free(k);
    return 0;
}
