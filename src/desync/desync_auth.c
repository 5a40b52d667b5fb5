/*
 * desync_auth.c - the side channel's handshake MAC (desync_auth.h) on
 * libsodium: crypto_auth (HMAC-SHA-512-256) keyed by a BLAKE2b hash of the
 * job's secret, verified by crypto_auth_verify (constant time).
 */
#include "desync_auth.h"
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

_Static_assert(CCS_DSX_MACBYTES == crypto_auth_BYTES, "MAC size");
_Static_assert(CCS_DSX_KEYBYTES == crypto_auth_KEYBYTES, "key size");
_Static_assert(CCS_DSX_TAGBYTES == crypto_aead_chacha20poly1305_ietf_ABYTES, "tag size");
_Static_assert(32 == crypto_aead_chacha20poly1305_ietf_KEYBYTES, "session key size");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int sodium_ok;

static void init(void)
{
    sodium_ok = sodium_init() >= 0;
}

/* Domain separation: keys derived for this protocol are for nothing else. */
static const char KDF_CONTEXT[] = "ccshim-desync-side-channel-key-2";

_Static_assert(CCS_DSX_JOBTAG == crypto_pwhash_SALTBYTES, "job tag is the salt");
_Static_assert(CCS_DSX_PKBYTES == crypto_kx_PUBLICKEYBYTES && CCS_DSX_PKBYTES == crypto_kx_SECRETKEYBYTES,
               "key pair size");

/* Argon2id at 3 passes over 8 MiB: about 30 ms once per process (a leader,
 * the coordinator); each guess at a typed secret costs an attacker as much. */
#define PWHASH_OPS 3
#define PWHASH_MEM (8u << 20)

int ccs_dsx_auth_key_job(const char *secret, const unsigned char job[CCS_DSX_JOBTAG], struct ccs_dsx_key *key,
                         char *why, size_t whylen)
{
    pthread_once(&once, init);
    if (!sodium_ok) {
        snprintf(why, whylen, "libsodium cannot be initialised");
        return -1;
    }
    if (!secret || !*secret) {
        snprintf(why, whylen, "empty secret");
        return -1;
    }
    static const unsigned char zero[CCS_DSX_JOBTAG];
    unsigned char pre[32], id[32];
    /* Domain separation first (the secret hashed with the protocol's
     * context), then the stretch salted by the job's tag. */
    crypto_generichash(pre, sizeof pre, (const unsigned char *)secret, strlen(secret),
                       (const unsigned char *)KDF_CONTEXT, sizeof KDF_CONTEXT - 1);
    /* One stretch per process for one (secret, job): rank 0 holds both the
     * coordinator and its host's client. */
    static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
    static unsigned char cache_id[32], cache_key[CCS_DSX_KEYBYTES];
    static int cached;
    crypto_generichash(id, sizeof id, job ? job : zero, CCS_DSX_JOBTAG, pre, sizeof pre);
    pthread_mutex_lock(&cache_lock);
    if (cached && sodium_memcmp(id, cache_id, sizeof id) == 0) {
        memcpy(key->k, cache_key, sizeof key->k);
        pthread_mutex_unlock(&cache_lock);
        sodium_memzero(pre, sizeof pre);
        return 0;
    }
    int rc = crypto_pwhash(key->k, sizeof key->k, (const char *)pre, sizeof pre, job ? job : zero, PWHASH_OPS,
                           PWHASH_MEM, crypto_pwhash_ALG_ARGON2ID13);
    if (rc == 0) {
        memcpy(cache_id, id, sizeof id);
        memcpy(cache_key, key->k, sizeof cache_key);
        cached = 1;
    }
    pthread_mutex_unlock(&cache_lock);
    sodium_memzero(pre, sizeof pre);
    if (rc != 0) {
        snprintf(why, whylen, "crypto_pwhash failed (out of memory for its %u MiB?)", PWHASH_MEM >> 20);
        return -1;
    }
    return 0;
}

int ccs_dsx_auth_key(const char *secret, struct ccs_dsx_key *key, char *why, size_t whylen)
{
    return ccs_dsx_auth_key_job(secret, NULL, key, why, whylen);
}

int ccs_dsx_auth_port(const struct ccs_dsx_key *key, unsigned i)
{
    pthread_once(&once, init);
    static const char ctx[] = "ccshim-desync-coordinator-port-1";
    unsigned char in[sizeof ctx + 4], out[8];
    memcpy(in, ctx, sizeof ctx);
    memcpy(in + sizeof ctx, &i, 4);
    crypto_generichash(out, sizeof out, in, sizeof in, key->k, sizeof key->k);
    uint64_t v;
    memcpy(&v, out, sizeof v);
    return CCS_DSX_PORT_LO + (int)(v % (uint64_t)(CCS_DSX_PORT_HI - CCS_DSX_PORT_LO + 1));
}

void ccs_dsx_auth_jobtag(const char *text, unsigned char job[CCS_DSX_JOBTAG])
{
    pthread_once(&once, init);
    static const char ctx[] = "ccshim-desync-job-tag-1";
    crypto_generichash(job, CCS_DSX_JOBTAG, (const unsigned char *)text, strlen(text), (const unsigned char *)ctx,
                       sizeof ctx - 1);
}

int ccs_dsx_auth_keypair(unsigned char pk[CCS_DSX_PKBYTES], unsigned char sk[CCS_DSX_PKBYTES])
{
    pthread_once(&once, init);
    if (!sodium_ok)
        return -1;
    return crypto_kx_keypair(pk, sk) == 0 ? 0 : -1;
}

int ccs_dsx_auth_key_kx(const unsigned char pk[CCS_DSX_PKBYTES], const unsigned char sk[CCS_DSX_PKBYTES],
                        const unsigned char peer[CCS_DSX_PKBYTES], int server, const unsigned char job[CCS_DSX_JOBTAG],
                        struct ccs_dsx_key *key)
{
    pthread_once(&once, init);
    unsigned char rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
    int rc = server ? crypto_kx_server_session_keys(rx, tx, pk, sk, peer)
                    : crypto_kx_client_session_keys(rx, tx, pk, sk, peer);
    if (!sodium_ok || rc != 0)
        return -1;
    /* The client's tx is the coordinator's rx: one root for the pair. */
    static const char ctx[] = "ccshim-desync-kx-key-1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, server ? rx : tx, sizeof tx, sizeof key->k);
    crypto_generichash_update(&st, (const unsigned char *)ctx, sizeof ctx - 1);
    crypto_generichash_update(&st, job, CCS_DSX_JOBTAG);
    crypto_generichash_final(&st, key->k, sizeof key->k);
    sodium_memzero(rx, sizeof rx);
    sodium_memzero(tx, sizeof tx);
    sodium_memzero(&st, sizeof st);
    return 0;
}

void ccs_dsx_auth_nonce(unsigned char nonce[CCS_DSX_NONCE])
{
    pthread_once(&once, init);
    randombytes_buf(nonce, CCS_DSX_NONCE);
}

/* What is authenticated: a fixed tag, the role, both nonces (client's
 * first), then the sender's fields in a fixed little-endian layout. */
#define MSG_TAG "ccshim-dsx-hs-v3"
#define MSG_LEN (16 + 1 + 2 * CCS_DSX_NONCE + 4 + 4 + CCS_DSX_HOST + 4 + 4 + CCS_DSX_JOBTAG)

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void message(unsigned role, const unsigned char *nc, const unsigned char *ns, const struct ccs_dsx_hello *h,
                    unsigned char m[MSG_LEN])
{
    size_t o = 0;
    memcpy(m, MSG_TAG, 16);
    o += 16;
    m[o++] = (unsigned char)role;
    memcpy(m + o, nc, CCS_DSX_NONCE);
    o += CCS_DSX_NONCE;
    memcpy(m + o, ns, CCS_DSX_NONCE);
    o += CCS_DSX_NONCE;
    put32(m + o, h->byteorder);
    o += 4;
    put32(m + o, (uint32_t)h->wsize);
    o += 4;
    memcpy(m + o, h->host, CCS_DSX_HOST);
    o += CCS_DSX_HOST;
    put32(m + o, (uint32_t)h->rank);
    o += 4;
    put32(m + o, h->pid);
    o += 4;
    memcpy(m + o, h->job, CCS_DSX_JOBTAG);
}

void ccs_dsx_auth_mac(const struct ccs_dsx_key *key, unsigned role, const unsigned char nonce_c[CCS_DSX_NONCE],
                      const unsigned char nonce_s[CCS_DSX_NONCE], const struct ccs_dsx_hello *h,
                      unsigned char out[CCS_DSX_MACBYTES])
{
    unsigned char m[MSG_LEN];
    message(role, nonce_c, nonce_s, h, m);
    crypto_auth(out, m, sizeof m, key->k);
}

int ccs_dsx_auth_verify(const struct ccs_dsx_key *key, unsigned role, const unsigned char nonce_c[CCS_DSX_NONCE],
                        const unsigned char nonce_s[CCS_DSX_NONCE], const struct ccs_dsx_hello *h)
{
    unsigned char m[MSG_LEN];
    message(role, nonce_c, nonce_s, h, m);
    return crypto_auth_verify(h->mac, m, sizeof m, key->k) == 0 ? 0 : -1;
}

void ccs_dsx_auth_wipe(struct ccs_dsx_key *key)
{
    sodium_memzero(key->k, sizeof key->k);
}

/* One direction's key: BLAKE2b keyed by the job's key over a label naming
 * the direction and both nonces. */
static void direction_key(const struct ccs_dsx_key *key, const char *label, const unsigned char *nc,
                          const unsigned char *ns, unsigned char out[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, key->k, sizeof key->k, 32);
    crypto_generichash_update(&st, (const unsigned char *)label, strlen(label));
    crypto_generichash_update(&st, nc, CCS_DSX_NONCE);
    crypto_generichash_update(&st, ns, CCS_DSX_NONCE);
    crypto_generichash_final(&st, out, 32);
    sodium_memzero(&st, sizeof st);
}

void ccs_dsx_auth_session(const struct ccs_dsx_key *key, unsigned role, const unsigned char nonce_c[CCS_DSX_NONCE],
                          const unsigned char nonce_s[CCS_DSX_NONCE], struct ccs_dsx_session *s)
{
    int client = role == CCS_DSX_AUTH_CLIENT;
    direction_key(key, "ccshim-dsx client->coordinator", nonce_c, nonce_s, client ? s->tx : s->rx);
    direction_key(key, "ccshim-dsx coordinator->client", nonce_c, nonce_s, client ? s->rx : s->tx);
    s->ntx = s->nrx = 0;
}

static void npub_of(uint64_t n, unsigned char npub[crypto_aead_chacha20poly1305_ietf_NPUBBYTES])
{
    memset(npub, 0, crypto_aead_chacha20poly1305_ietf_NPUBBYTES);
    for (int i = 0; i < 8; i++)
        npub[i] = (unsigned char)(n >> (8 * i));
}

void ccs_dsx_auth_seal(struct ccs_dsx_session *s, const unsigned char *ad, size_t adlen, unsigned char *buf,
                       size_t len, unsigned char tag[CCS_DSX_TAGBYTES])
{
    unsigned char npub[crypto_aead_chacha20poly1305_ietf_NPUBBYTES];
    npub_of(s->ntx++, npub);
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(buf, tag, NULL, buf, len, ad, adlen, NULL, npub, s->tx);
}

int ccs_dsx_auth_open(struct ccs_dsx_session *s, const unsigned char *ad, size_t adlen, unsigned char *buf,
                      size_t len, const unsigned char tag[CCS_DSX_TAGBYTES])
{
    unsigned char npub[crypto_aead_chacha20poly1305_ietf_NPUBBYTES];
    npub_of(s->nrx, npub);
    if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(buf, NULL, buf, len, tag, ad, adlen, npub, s->rx) != 0)
        return -1;
    s->nrx++;
    return 0;
}

void ccs_dsx_auth_session_wipe(struct ccs_dsx_session *s)
{
    sodium_memzero(s, sizeof *s);
}
