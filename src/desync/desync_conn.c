/*
 * desync_conn.c - one connection of the TCP side channel: framing, sealing,
 * the handshake and bounded buffers (desync_conn.h).  What a peer can make
 * this side buffer is bounded: before the handshake only its frames, of
 * their exact size and checked from the header, at most PREAUTH_BUF bytes;
 * after it whole frames up to CCS_DSX_MAX_FRAME; at most MAX_OUT bytes
 * queued for a peer that does not read.
 */
#include "desync_conn.h"
#include "clock.h"
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_OUT (16u << 20) /* a peer that does not read: drop it */
#define PREAUTH_BUF (2 * (sizeof(struct ccs_dsx_frame) + sizeof(struct ccs_dsx_hello)))

/* The job tags compared (public values: no need for constant time). */
static int job_differs(const unsigned char *a, const unsigned char *b)
{
    return memcmp(a, b, CCS_DSX_JOBTAG);
}

void ccs_dsx_conn_close(struct ccs_dsx_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    ccs_dsx_auth_wipe(&c->key);
    ccs_dsx_auth_session_wipe(&c->sess);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

int ccs_dsx_grow(unsigned char **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need)
        nc *= 2;
    unsigned char *nb = realloc(*b, nc);
    if (!nb)
        return -1;
    *b = nb;
    *cap = nc;
    return 0;
}

/* Sealed after the handshake: payload encrypted, then the tag; the header,
 * authenticated, says the length with the tag. */
int ccs_dsx_conn_queue(struct ccs_dsx_conn *c, uint16_t type, const void *p, size_t n)
{
    size_t tag = c->sealed ? CCS_DSX_TAGBYTES : 0;
    struct ccs_dsx_frame f = {
        .magic = CCS_DSX_MAGIC, .version = CCS_DSX_VERSION, .type = type, .length = (uint32_t)(n + tag)};
    size_t need = c->outlen + sizeof f + n + tag;
    if (need - c->outoff > MAX_OUT || ccs_dsx_grow(&c->out, &c->outcap, need) != 0)
        return -1;
    unsigned char *h = c->out + c->outlen;
    memcpy(h, &f, sizeof f);
    if (n)
        memcpy(h + sizeof f, p, n);
    if (tag)
        ccs_dsx_auth_seal(&c->sess, h, sizeof f, h + sizeof f, n, h + sizeof f + n);
    c->outlen = need;
    return 0;
}

/* A buffer larger than this (a burst: a backlog read at once, verdicts
 * queued to a slow peer) is freed once empty, not held for the job: the
 * coordinator keeps one of each per host. */
#define IN_KEEP (64u << 10)

int ccs_dsx_conn_flush(struct ccs_dsx_conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            return -1;
        c->outoff += (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
    if (c->outoff == c->outlen) {
        c->outoff = c->outlen = 0;
        if (c->outcap > IN_KEEP) { /* (as the input buffer: given back once sent) */
            free(c->out);
            c->out = NULL;
            c->outcap = 0;
        }
    }
    return 0;
}

int ccs_dsx_conn_fill(struct ccs_dsx_conn *c)
{
    if (c->inoff) { /* the frames not yet consumed to the front */
        memmove(c->in, c->in + c->inoff, c->inlen - c->inoff);
        c->inlen -= c->inoff;
        c->inoff = 0;
    }
    for (;;) {
        size_t room = 16384;
        if (!c->sealed) {
            if (c->inlen >= PREAUTH_BUF)
                return 0; /* the handshake's frames first */
            room = PREAUTH_BUF - c->inlen;
        }
        if (ccs_dsx_grow(&c->in, &c->incap, c->inlen + room) != 0)
            return -1;
        ssize_t r = recv(c->fd, c->in + c->inlen, !c->sealed ? room : c->incap - c->inlen, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0)
            return -1;
        c->inlen += (size_t)r;
        c->bytes_in += (uint64_t)r;
        if (c->inlen > CCS_DSX_MAX_FRAME + sizeof(struct ccs_dsx_frame) + 65536)
            return 0; /* process before reading more */
    }
}

int ccs_dsx_conn_next_frame(struct ccs_dsx_conn *c, struct ccs_dsx_frame *f, const unsigned char **payload,
                            char *why, size_t n)
{
    const unsigned char *in = c->in + c->inoff;
    size_t avail = c->inlen - c->inoff;
    if (avail < sizeof *f)
        return 0;
    memcpy(f, in, sizeof *f);
    if (ccs_dsx_check_frame(f, why, n) != 0)
        return -1;
    /* Before the handshake only its frames, of their exact size: checked
     * from the header, before anything more is buffered. */
    if (!c->sealed && ((f->type != CCS_DSX_M_HELLO && f->type != CCS_DSX_M_WELCOME) ||
                       f->length != sizeof(struct ccs_dsx_hello))) {
        snprintf(why, n, "frame of type %u and %u bytes before the handshake (expected a HELLO of %zu bytes)",
                 f->type, f->length, sizeof(struct ccs_dsx_hello));
        return -1;
    }
    if (c->sealed && f->length < CCS_DSX_TAGBYTES) {
        snprintf(why, n, "sealed frame of %u bytes, shorter than its tag", f->length);
        return -1;
    }
    if (avail < sizeof *f + f->length)
        return 0;
    c->cur_wire = sizeof *f + f->length;
    c->t_rx = ccs_clock_mono_ms();
    *payload = in + sizeof *f;
    if (c->sealed) {
        /* Altered, injected, replayed or reordered: refused here. */
        size_t len = f->length - CCS_DSX_TAGBYTES;
        unsigned char *w = c->in + c->inoff; /* (opened in place) */
        if (ccs_dsx_auth_open(&c->sess, w, sizeof *f, w + sizeof *f, len, w + sizeof *f + len) != 0) {
            snprintf(why, n, "a frame of type %u does not authenticate (altered or injected on the way?)", f->type);
            return -1;
        }
        f->length = (uint32_t)len; /* what the caller reads */
    }
    return 1;
}

/* Past the frame: the frames after it stay where they are until the next
 * read (moving the rest of the buffer for each frame cost the coordinator
 * quadratic time in a backlog of small frames), and a buffer a burst made
 * large is given back once it is empty. */

void ccs_dsx_conn_consume(struct ccs_dsx_conn *c)
{
    c->inoff += c->cur_wire;
    if (c->inoff < c->inlen)
        return;
    c->inoff = c->inlen = 0;
    if (c->incap > IN_KEEP) {
        free(c->in);
        c->in = NULL;
        c->incap = 0;
    }
}

short ccs_dsx_conn_events(const struct ccs_dsx_conn *c)
{
    return (short)(POLLIN | (c->outlen > c->outoff ? POLLOUT : 0));
}

void ccs_dsx_socket_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ------------------------------------------------------------ handshake */

/* The client's HELLO, with its nonce and the job's tag (the MAC is added
 * by the caller). */
static struct ccs_dsx_hello client_hello(const struct ccs_dsx_conn *c, int32_t wsize, int32_t rank,
                                         const char *hostname, const unsigned char *job)
{
    struct ccs_dsx_hello h = {
        .byteorder = CCS_DSX_BYTEORDER, .wsize = wsize, .rank = rank, .pid = (uint32_t)getpid()};
    memcpy(h.nonce, c->nonce_c, sizeof h.nonce);
    snprintf(h.host, sizeof h.host, "%s", hostname);
    memcpy(h.job, job, sizeof h.job);
    return h;
}

static const unsigned char zero_nonce[CCS_DSX_NONCE];

int ccs_dsx_conn_hello(struct ccs_dsx_conn *c, int fd, const struct ccs_dsx_key *key, int32_t wsize, int32_t rank,
                       const char *hostname, const unsigned char job[CCS_DSX_JOBTAG])
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->state = CCS_DSX_C_CONNECTING;
    c->t_open = ccs_clock_mono_ms();
    ccs_dsx_auth_nonce(c->nonce_c);
    struct ccs_dsx_hello h = client_hello(c, wsize, rank, hostname, job);
    /* The ticket: the client proves the key first (without the
     * coordinator's nonce: it only buys admission, not the session). */
    ccs_dsx_auth_mac(key, CCS_DSX_AUTH_TICKET, c->nonce_c, zero_nonce, &h, h.mac);
    return ccs_dsx_conn_queue(c, CCS_DSX_M_HELLO, &h, sizeof h);
}

/* The coordinator's WELCOME fields (PROOF: with its MAC). */
static struct ccs_dsx_hello coord_welcome(const struct ccs_dsx_conn *c, int32_t wsize,
                                          const unsigned char job[CCS_DSX_JOBTAG])
{
    struct ccs_dsx_hello w = {.byteorder = CCS_DSX_BYTEORDER, .wsize = wsize, .rank = -1};
    memcpy(w.nonce, c->nonce_s, sizeof w.nonce);
    memcpy(w.host, "coordinator", 12);
    memcpy(w.job, job, sizeof w.job);
    return w;
}

int ccs_dsx_conn_welcome(struct ccs_dsx_conn *c, const struct ccs_dsx_key *key, int32_t wsize, int32_t rank,
                         const char *hostname, const unsigned char job[CCS_DSX_JOBTAG], const struct ccs_dsx_frame *f,
                         const unsigned char *p, char *why, size_t n)
{
    struct ccs_dsx_hello w;
    if (f->type != CCS_DSX_M_WELCOME || f->length != sizeof w) {
        snprintf(why, n, "coordinator sent type %u before the handshake", f->type);
        return -1;
    }
    memcpy(&w, p, sizeof w);
    if (w.byteorder != CCS_DSX_BYTEORDER || w.wsize != wsize) {
        snprintf(why, n, "coordinator world size %d differs from %d", w.wsize, wsize);
        return -1;
    }
    if (job_differs(w.job, job) != 0) {
        snprintf(why, n, "the coordinator is another job's (its job tag differs)");
        return -2;
    }
    if (c->state == CCS_DSX_C_CONNECTING) { /* our ticket was taken: prove the key for its nonce */
        memcpy(c->nonce_s, w.nonce, sizeof c->nonce_s);
        struct ccs_dsx_hello h = client_hello(c, wsize, rank, hostname, job);
        ccs_dsx_auth_mac(key, CCS_DSX_AUTH_CLIENT, c->nonce_c, c->nonce_s, &h, h.mac);
        if (ccs_dsx_conn_queue(c, CCS_DSX_M_HELLO, &h, sizeof h) != 0)
            return -1;
        c->state = CCS_DSX_C_HELLO;
        return 0;
    }
    if (memcmp(w.nonce, c->nonce_s, sizeof w.nonce) != 0 ||
        ccs_dsx_auth_verify(key, CCS_DSX_AUTH_COORD, c->nonce_c, c->nonce_s, &w) != 0) {
        snprintf(why, n, "the coordinator's proof does not verify");
        return -2;
    }
    ccs_dsx_auth_session(key, CCS_DSX_AUTH_CLIENT, c->nonce_c, c->nonce_s, &c->sess);
    c->sealed = 1; /* every frame after this WELCOME, both ways */
    c->state = CCS_DSX_C_AUTHED;
    return 1;
}

int ccs_dsx_conn_on_hello(struct ccs_dsx_conn *c, ccs_dsx_key_fn key_fn, void *arg, int32_t wsize,
                          const unsigned char job[CCS_DSX_JOBTAG], const struct ccs_dsx_frame *f,
                          const unsigned char *p, char *why, size_t n)
{
    struct ccs_dsx_hello h;
    if (f->type != CCS_DSX_M_HELLO || f->length != sizeof h) {
        snprintf(why, n, "expected a HELLO of %zu bytes, got type %u of %u bytes", sizeof h, f->type, f->length);
        return -1;
    }
    memcpy(&h, p, sizeof h);
    if (h.byteorder != CCS_DSX_BYTEORDER || h.wsize != wsize) {
        snprintf(why, n, "peer byte order %#x / world size %d does not match %#x / %d", h.byteorder, h.wsize,
                 CCS_DSX_BYTEORDER, wsize);
        return -1;
    }
    if (job_differs(h.job, job) != 0) {
        snprintf(why, n, "a leader of another job (its job tag differs: another job id, or another job's "
                         "coordinator address)");
        return -1;
    }
    if (h.rank < 0 || h.rank >= wsize || h.host[CCS_DSX_HOST - 1] != 0) {
        snprintf(why, n, "peer claims rank %d of %d", h.rank, wsize);
        return -1;
    }
    if (c->state == CCS_DSX_C_CONNECTING) { /* first HELLO: its ticket, then our nonce */
        const struct ccs_dsx_key *key = key_fn(h.rank, arg);
        if (!key || ccs_dsx_auth_verify(key, CCS_DSX_AUTH_TICKET, h.nonce, zero_nonce, &h) != 0) {
            snprintf(why, n, "its ticket does not verify (wrong CCSHIM_SECRET, or not a member of this job)");
            return -1;
        }
        c->key = *key;
        c->peer_rank = h.rank;
        c->ticketed = 1;
        memcpy(c->nonce_c, h.nonce, sizeof c->nonce_c);
        ccs_dsx_auth_nonce(c->nonce_s);
        struct ccs_dsx_hello w = coord_welcome(c, wsize, job);
        if (ccs_dsx_conn_queue(c, CCS_DSX_M_WELCOME, &w, sizeof w) != 0)
            return -1;
        c->state = CCS_DSX_C_HELLO;
        return 0;
    }
    if (h.rank != c->peer_rank || memcmp(h.nonce, c->nonce_c, sizeof h.nonce) != 0 ||
        ccs_dsx_auth_verify(&c->key, CCS_DSX_AUTH_CLIENT, c->nonce_c, c->nonce_s, &h) != 0) {
        snprintf(why, n, "handshake MAC does not verify (wrong CCSHIM_SECRET, or not a member of this job)");
        return -1;
    }
    /* Authenticated: its rank, pid and host are the MAC's.  Our proof, then
     * every frame sealed both ways. */
    c->peer_pid = h.pid;
    memcpy(c->host, h.host, sizeof c->host);
    struct ccs_dsx_hello w = coord_welcome(c, wsize, job);
    ccs_dsx_auth_mac(&c->key, CCS_DSX_AUTH_COORD, c->nonce_c, c->nonce_s, &w, w.mac);
    if (ccs_dsx_conn_queue(c, CCS_DSX_M_WELCOME, &w, sizeof w) != 0)
        return -1;
    c->state = CCS_DSX_C_AUTHED;
    ccs_dsx_auth_session(&c->key, CCS_DSX_AUTH_COORD, c->nonce_c, c->nonce_s, &c->sess);
    c->sealed = 1;
    return 1;
}
