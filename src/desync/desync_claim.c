/*
 * desync_claim.c - who of a host logs a verdict (desync_claim.h).
 */
#include "desync_claim.h"
#include "ccs_kinds.h"
#include "fingerprint.h"

#define OWNER_BITS 24
#define OWNER_MASK ((UINT64_C(1) << OWNER_BITS) - 1)

uint64_t ccs_dsx_claim_key(const struct ccs_dsx_verdict *v)
{
    uint64_t seq = ccs_verdict_once(v->cls) ? 0 : v->seq;
    uint64_t k = ccs_hash_mix(ccs_hash_mix(v->cls, v->comm), seq) >> OWNER_BITS;
    return k ? k : 1;
}

int32_t ccs_dsx_claim(struct ccs_dsx_claims *t, uint64_t key, int32_t proposed, int *won, unsigned *slot)
{
    *won = 0;
    if (proposed < 0 || proposed > CCS_DSX_CLAIM_MAXRANK || key == 0 || key >> (64 - OWNER_BITS))
        return -1;
    uint64_t mine = key << OWNER_BITS | (uint64_t)(proposed + 1);
    for (unsigned i = 0; i < CCS_DSX_NCLAIM; i++) {
        unsigned at = (unsigned)((key + i) % CCS_DSX_NCLAIM);
        _Atomic uint64_t *w = &t->w[at];
        uint64_t cur = atomic_load(w);
        if (slot)
            *slot = at;
        if (cur == 0 && atomic_compare_exchange_strong(w, &cur, mine)) {
            *won = 1;
            return proposed;
        }
        /* Taken, by this key (another rank was first) or by another one. */
        if (cur >> OWNER_BITS == key)
            return (int32_t)(cur & OWNER_MASK) - 1;
    }
    return -1;
}

void ccs_dsx_claim_seen(struct ccs_dsx_claims *t, unsigned slot)
{
    if (slot < CCS_DSX_NCLAIM)
        atomic_store(&t->seen[slot], 1);
}

int ccs_dsx_claim_was_seen(struct ccs_dsx_claims *t, unsigned slot)
{
    return slot < CCS_DSX_NCLAIM && atomic_load(&t->seen[slot]);
}

int32_t ccs_dsx_claim_propose(int coord, int rank0_here, int32_t lowest)
{
    return coord && rank0_here ? 0 : lowest;
}
