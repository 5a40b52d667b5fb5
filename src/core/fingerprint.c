/*
 * fingerprint.c - hashing of identities and of the fields that every member
 * of a communicator must agree on for one collective.
 */
#include "ccs_kinds.h"
#include "fingerprint.h"
#include <string.h>

/* Finalizer of splitmix64: a cheap, well-mixed 64-bit permutation. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t ccs_hash_mix(uint64_t h, uint64_t v) { return mix64(h ^ mix64(v + 0x9e3779b97f4a7c15ULL)); }

uint64_t ccs_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h = mix64(seed ^ n);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = ccs_hash_mix(h, w);
        b += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, b, n);
        h = ccs_hash_mix(h, w);
    }
    return h;
}

/* The types column of CCS_KIND_LIST. */
static int types_compared(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, cnt, sig, bytes, op, root, types, ...)                                            \
    case n:                                                                                                \
        return types;
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

uint64_t ccs_fingerprint_sig(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op, int root,
                             uint32_t sig)
{
    return mix64(ccs_fp_key(kind, flags, count, dtype, op, root, sig) ^ 0x63637368696dULL /* "ccshim" */);
}

uint64_t ccs_fingerprint(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op, int root)
{
    return ccs_fingerprint_sig(kind, flags, count, dtype, op, root, 0);
}

uint32_t ccs_sig_key(unsigned kind, unsigned dtype, uint32_t sig)
{
    if (!types_compared(kind))
        return 0; /* in the fingerprint, or nothing to compare */
    if (dtype == CCS_DT_DERIVED)
        return sig;
    if (dtype == CCS_DT_NONE || dtype >= CCS_DT_DERIVED)
        return 0;
    return dtype;
}
