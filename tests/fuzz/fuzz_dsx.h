/*
 * fuzz_dsx.h - what fuzz_dsx_coord.c and fuzz_dsx_client.c share: the
 * network between the two ends of a side-channel connection, lossless and
 * in order, and raw bytes from a peer read through ccs_dsx_conn_fill (and
 * so with its bounds) from a socket pair.
 */
#ifndef CCS_FUZZ_DSX_H
#define CCS_FUZZ_DSX_H

#include "desync_conn.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
