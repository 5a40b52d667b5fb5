/* fuzz_conn.c - libFuzzer target for the bytes a peer sends on a TCP
 * connection of the side channel, with the job's key in place: the
 * coordinator's side of the handshake (frames checked from their header,
 * a HELLO's ticket and proof verified with the key) and, on a connection
 * already sealed with a session derived from that key, every frame opened
 * (ChaCha20-Poly1305) before its payload is looked at.  Built and run by
 * desync-fuzz.sh next to fuzz_proto.c. */
#include "desync_conn.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ccs_dsx_key key;
static unsigned char job[CCS_DSX_JOBTAG];

static const struct ccs_dsx_key *key_of(int32_t rank, void *arg)
{
    (void)arg;
    return rank >= 0 && rank < 64 ? &key : NULL;
}

/* Feeds DATA to connection C as if read from its socket (bounded as
 * ccs_dsx_conn_fill bounds it), handling frames as the coordinator does. */
static void feed(struct ccs_dsx_conn *c, const uint8_t *data, size_t size)
{
    c->in = malloc(size ? size : 1);
    if (!c->in)
        return;
    memcpy(c->in, data, size);
    c->inlen = c->incap = size;
    struct ccs_dsx_frame f;
    const unsigned char *p;
    char why[256];
    while (ccs_dsx_conn_next_frame(c, &f, &p, why, sizeof why) == 1) {
        if (!c->sealed && ccs_dsx_conn_on_hello(c, key_of, NULL, 64, job, &f, p, why, sizeof why) < 0)
            break;
        if (c->sealed && f.length > CCS_DSX_MAX_FRAME)
            abort(); /* an opened frame is never longer than the limit */
        ccs_dsx_conn_consume(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        char why[128];
        if (ccs_dsx_auth_key("fuzzing-secret-0123456789abcdef0123", &key, why, sizeof why) != 0)
            abort();
        init = 1;
    }
    /* The handshake, from the first byte. */
    struct ccs_dsx_conn c;
    memset(&c, 0, sizeof c);
    c.fd = -1;
    c.state = CCS_DSX_C_CONNECTING;
    feed(&c, data, size);
    ccs_dsx_conn_close(&c);
    /* A sealed connection: the same bytes as frames after the handshake. */
    memset(&c, 0, sizeof c);
    c.fd = -1;
    c.state = CCS_DSX_C_AUTHED;
    c.sealed = 1;
    unsigned char nc[CCS_DSX_NONCE] = {1}, ns[CCS_DSX_NONCE] = {2};
    ccs_dsx_auth_session(&key, CCS_DSX_AUTH_COORD, nc, ns, &c.sess);
    feed(&c, data, size);
    ccs_dsx_conn_close(&c);
    return 0;
}
