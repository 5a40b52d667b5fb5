/*
 * fuzz_dsx.h - what fuzz_dsx_coord.c and fuzz_dsx_client.c share: the
 * network between the two ends of a side-channel connection, lossless and
 * in order, raw bytes from a peer read through ccs_dsx_conn_fill (and so
 * with its bounds) from a socket pair, and the job's keys both ways the
 * side channel gets them (desync_auth.h): from the job's secret, or from
 * an X25519 key exchange between each rank's key pair and the
 * coordinator's.
 */
#ifndef CCS_FUZZ_DSX_H
#define CCS_FUZZ_DSX_H

#include "desync_auth.h"
#include "desync_conn.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_SECRET "ccshim-fuzz-secret-of-this-job"
#define FUZZ_RANKS 64 /* the largest world the targets make */

/* The job's credentials, made once per process. */
struct fuzz_keys {
    unsigned char job[CCS_DSX_JOBTAG];
    struct ccs_dsx_key secret;                          /* the job's secret, stretched for JOB */
    unsigned char cpk[CCS_DSX_PKBYTES], csk[CCS_DSX_PKBYTES]; /* the coordinator's pair */
    unsigned char pk[FUZZ_RANKS][CCS_DSX_PKBYTES], sk[FUZZ_RANKS][CCS_DSX_PKBYTES]; /* each rank's */
    struct ccs_dsx_key client[FUZZ_RANKS]; /* rank R's key as its leader derives it */
    struct ccs_dsx_key coord[FUZZ_RANKS];  /* ... and as the coordinator does */
};

static inline void fuzz_keys_init(struct fuzz_keys *fk)
{
    char why[128];
    ccs_dsx_auth_jobtag("ccshim-fuzz-job", fk->job);
    if (ccs_dsx_auth_key_job(FUZZ_SECRET, fk->job, &fk->secret, why, sizeof why) != 0 ||
        ccs_dsx_auth_keypair(fk->cpk, fk->csk) != 0)
        abort();
    for (int r = 0; r < FUZZ_RANKS; r++)
        if (ccs_dsx_auth_keypair(fk->pk[r], fk->sk[r]) != 0 ||
            ccs_dsx_auth_key_kx(fk->pk[r], fk->sk[r], fk->cpk, 0, fk->job, &fk->client[r]) != 0 ||
            ccs_dsx_auth_key_kx(fk->cpk, fk->csk, fk->pk[r], 1, fk->job, &fk->coord[r]) != 0)
            abort();
}

/* Moves what FROM queued into TO's input. */
static inline void fuzz_deliver(struct ccs_dsx_conn *to, struct ccs_dsx_conn *from)
{
    size_t n = from->outlen - from->outoff;
    if (ccs_dsx_grow(&to->in, &to->incap, to->inlen + n) != 0)
        abort();
    if (n)
        memcpy(to->in + to->inlen, from->out + from->outoff, n);
    to->inlen += n;
    from->outlen = from->outoff = 0;
}

/* Makes C's socket one end of a socket pair holding N bytes from P (at
 * most 64 KiB), sent by a peer that stays connected.  Returns the peer's
 * end, to close at the end. */
static inline int fuzz_raw_peer(struct ccs_dsx_conn *c, const uint8_t *p, size_t n)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    int big = 1 << 18;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (n > 65536)
        n = 65536;
    if (n && write(sv[1], p, n) != (ssize_t)n)
        abort();
    if (c->fd >= 0)
        close(c->fd);
    c->fd = sv[0];
    ccs_dsx_socket_nonblock(c->fd);
    return sv[1];
}

#endif
