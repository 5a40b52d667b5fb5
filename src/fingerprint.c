/*
 * fingerprint.c - hashing of identities and of the fields that every member
 * of a communicator must agree on for one collective.
 */
#include "shim.h"
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

static int is_v_variant(unsigned kind)
{
    return kind == CCS_KIND_ALLGATHERV || kind == CCS_KIND_ALLTOALLV || kind == CCS_KIND_GATHERV ||
           kind == CCS_KIND_SCATTERV || kind == CCS_KIND_REDUCE_SCATTER;
}

static int is_reduction(unsigned kind)
{
    return kind == CCS_KIND_ALLREDUCE || kind == CCS_KIND_REDUCE || kind == CCS_KIND_REDUCE_SCATTER ||
           kind == CCS_KIND_REDUCE_SCATTER_BLOCK || kind == CCS_KIND_SCAN || kind == CCS_KIND_EXSCAN;
}

static int is_rooted(unsigned kind)
{
    return kind == CCS_KIND_REDUCE || kind == CCS_KIND_BCAST || kind == CCS_KIND_GATHER ||
           kind == CCS_KIND_GATHERV || kind == CCS_KIND_SCATTER || kind == CCS_KIND_SCATTERV;
}

uint64_t ccs_fingerprint(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op, int root)
{
    uint64_t h = ccs_hash_mix(0x63637368696dULL /* "ccshim" */, kind);
    if (ccs_kind_class(kind) != CCS_CLASS_COLL)
        return h;
    h = ccs_hash_mix(h, flags & CCS_F_NONBLOCKING);
    if (kind == CCS_KIND_BARRIER)
        return h;
    if (!is_v_variant(kind))
        h = ccs_hash_mix(h, count);
    h = ccs_hash_mix(h, dtype);
    if (is_reduction(kind))
        h = ccs_hash_mix(h, op);
    if (is_rooted(kind))
        h = ccs_hash_mix(h, (uint64_t)(int64_t)root);
    return h;
}
