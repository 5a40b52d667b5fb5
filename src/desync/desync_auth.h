/*
 * desync_auth.h - mutual authentication of the TCP side channel
 * (docs/desync.md, "Security"): a keyed MAC from libsodium (crypto_auth,
 * HMAC-SHA-512-256) over the sender's role, both nonces and the sender's
 * handshake fields, compared in constant time.  Nothing hand-written.
 *
 * Handshake (no key ever travels; the client proves first):
 *   client -> HELLO(nonce_c, job, MAC(key, TICKET, nonce_c, 0, its fields))
 *   coord  -> WELCOME(nonce_s)                   (only when the ticket verifies)
 *   client -> HELLO(nonce_c, MAC(key, CLIENT, nonce_c, nonce_s, its fields))
 *   coord  -> WELCOME(nonce_s, MAC(key, COORD, nonce_c, nonce_s, its fields))
 * The coordinator says nothing keyed to a peer that has not proved the
 * key, so connecting gives no offline-guessing oracle; the ticket (a MAC
 * without the coordinator's nonce) lets it admit the job's leaders before
 * unknown peers.  The role tag and the fixed order of the nonces defeat
 * reflection, the coordinator's fresh nonce defeats replay, and binding the
 * fields (with the job's tag) makes rank, pid, host and job authenticated.
 *
 * The key: under MPI, per rank, from an X25519 key exchange (libsodium's
 * crypto_kx) between the rank's key pair and the coordinator's, of which
 * only the public halves cross MPI; otherwise from the job's secret,
 * stretched with crypto_pwhash (Argon2id) salted by the job's tag.
 */
#ifndef CCS_DESYNC_AUTH_H
#define CCS_DESYNC_AUTH_H

#include "desync_proto.h"
#include <stddef.h>
#include <stdint.h>

enum ccs_dsx_role_tag { CCS_DSX_AUTH_COORD = 1, CCS_DSX_AUTH_CLIENT = 2, CCS_DSX_AUTH_TICKET = 3 };

struct ccs_dsx_key {
    unsigned char k[CCS_DSX_KEYBYTES];
};

/* Initialises libsodium (once, thread-safe) and derives the MAC key from
 * SECRET for the job of tag JOB (NULL: all zero), stretched with
 * crypto_pwhash.  Returns 0, or -1 when libsodium cannot be used or SECRET
 * is empty (WHY). */
int ccs_dsx_auth_key_job(const char *secret, const unsigned char job[CCS_DSX_JOBTAG], struct ccs_dsx_key *key,
                         char *why, size_t whylen);
/* The same for a job of tag zero (tests). */
int ccs_dsx_auth_key(const char *secret, struct ccs_dsx_key *key, char *why, size_t whylen);

/* The coordinator's port without MPI and without CCSHIM_COORD (docs/desync.md,
 * "Security"): candidate I (0 .. CCS_DSX_PORT_TRIES - 1) of a sequence of
 * ports in CCS_DSX_PORT_LO .. CCS_DSX_PORT_HI keyed by KEY (the secret
 * stretched, salted by the job's tag).  MASTER_PORT + 1 was there for any
 * local user to bind first (detection across hosts off, the leaders'
 * tickets collected); this one is known only to holders of the secret,
 * and is new per job.  The coordinator listens on the first candidate it
 * can bind; a leader tries them in turn. */
#define CCS_DSX_PORT_TRIES 8
#define CCS_DSX_PORT_LO 20000
#define CCS_DSX_PORT_HI 32767 /* below Linux's ephemeral ports (32768..60999), which outgoing connections take */
int ccs_dsx_auth_port(const struct ccs_dsx_key *key, unsigned i);

/* The job's tag from TEXT (a job id and what else names the job). */
void ccs_dsx_auth_jobtag(const char *text, unsigned char job[CCS_DSX_JOBTAG]);

/* A fresh X25519 key pair (crypto_kx).  0, or -1 without libsodium. */
int ccs_dsx_auth_keypair(unsigned char pk[CCS_DSX_PKBYTES], unsigned char sk[CCS_DSX_PKBYTES]);

/* The key one rank and the coordinator share: a crypto_kx exchange between
 * this side's pair (PK, SK) and the other side's public key PEER, bound to
 * JOB.  SERVER: this side is the coordinator.  0, or -1 when PEER is not a
 * valid public key. */
int ccs_dsx_auth_key_kx(const unsigned char pk[CCS_DSX_PKBYTES], const unsigned char sk[CCS_DSX_PKBYTES],
                        const unsigned char peer[CCS_DSX_PKBYTES], int server, const unsigned char job[CCS_DSX_JOBTAG],
                        struct ccs_dsx_key *key);

/* A fresh random nonce (libsodium's randombytes: getrandom(2)). */
void ccs_dsx_auth_nonce(unsigned char nonce[CCS_DSX_NONCE]);

/* The MAC of hello H sent by ROLE, bound to the client's and the
 * coordinator's nonces (H->mac itself is not covered). */
void ccs_dsx_auth_mac(const struct ccs_dsx_key *key, unsigned role, const unsigned char nonce_c[CCS_DSX_NONCE],
                      const unsigned char nonce_s[CCS_DSX_NONCE], const struct ccs_dsx_hello *h,
                      unsigned char out[CCS_DSX_MACBYTES]);

/* 0 when H->mac is the MAC of H by ROLE for these nonces (constant-time
 * comparison), -1 otherwise. */
int ccs_dsx_auth_verify(const struct ccs_dsx_key *key, unsigned role, const unsigned char nonce_c[CCS_DSX_NONCE],
                        const unsigned char nonce_s[CCS_DSX_NONCE], const struct ccs_dsx_hello *h);

/* Wipes KEY (sodium_memzero). */
void ccs_dsx_auth_wipe(struct ccs_dsx_key *key);

/* After the handshake every frame is sealed: its payload encrypted and its
 * header and payload authenticated with ChaCha20-Poly1305 (libsodium's IETF
 * AEAD), one key per direction derived from the job's key and both nonces,
 * the nonce a per-direction frame counter (never reused, and a replayed,
 * dropped or reordered frame fails). */
#define CCS_DSX_TAGBYTES 16 /* crypto_aead_chacha20poly1305_ietf_ABYTES */

struct ccs_dsx_session {
    unsigned char tx[32], rx[32];
    uint64_t ntx, nrx;
};

/* Derives the session keys of one side (ROLE: CCS_DSX_AUTH_COORD or
 * CCS_DSX_AUTH_CLIENT). */
void ccs_dsx_auth_session(const struct ccs_dsx_key *key, unsigned role, const unsigned char nonce_c[CCS_DSX_NONCE],
                          const unsigned char nonce_s[CCS_DSX_NONCE], struct ccs_dsx_session *s);

/* Encrypts BUF (LEN bytes) in place and writes the tag over AD (the frame
 * header) to TAG. */
void ccs_dsx_auth_seal(struct ccs_dsx_session *s, const unsigned char *ad, size_t adlen, unsigned char *buf,
                       size_t len, unsigned char tag[CCS_DSX_TAGBYTES]);

/* Checks TAG over AD and BUF and decrypts BUF in place: 0, or -1 when the
 * frame is not the next one the peer sealed (altered, injected, replayed). */
int ccs_dsx_auth_open(struct ccs_dsx_session *s, const unsigned char *ad, size_t adlen, unsigned char *buf,
                      size_t len, const unsigned char tag[CCS_DSX_TAGBYTES]);

void ccs_dsx_auth_session_wipe(struct ccs_dsx_session *s);

#endif
