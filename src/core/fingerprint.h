/*
 * fingerprint.h - hashing (fingerprint.c): identities, the hot path's table
 * slots, and the fingerprint of the fields every member of a communicator
 * must agree on for one collective.
 */
#ifndef CCS_FINGERPRINT_H
#define CCS_FINGERPRINT_H

#include "attributes.h"
#include "ccs_kinds.h"
#include "trace_format.h"
#include <stddef.h>
#include <stdint.h>

/* 64-bit mixing hash of a byte string, and of one more word. */
CCS_HIDDEN uint64_t ccs_hash_bytes(const void *p, size_t n, uint64_t seed);
CCS_HIDDEN uint64_t ccs_hash_mix(uint64_t h, uint64_t v);

/* Slot index (BITS bits) of a pointer-like key: one multiplication, for the
 * hot path's table probes (Fibonacci hashing; the high bits are the mixed ones). */
static inline size_t ccs_slot_hash(uint64_t key, unsigned bits)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> (64 - bits));
}

/* The odd multiplier of the fingerprint key and the running hash. */
#define CCS_HASH_MUL 0xd6e8feb86659fd93ULL

/* Bytes of COUNT elements of DTYPE (COUNT itself for CCS_DT_DERIVED). */
static inline uint64_t ccs_sig_bytes(uint64_t count, unsigned dtype)
{
    return dtype == CCS_DT_DERIVED ? count : count * ccs_dtype_size(dtype);
}

/* Which fields enter a kind's fingerprint: the columns sig, bytes, op and
 * root of CCS_KIND_LIST (ccs_kinds.h says why each kind has its own), and
 * CCS_FP_COLL, the nonblocking flag, for every collective.  Anything else
 * hashes the kind only.  A switch over constants: it folds where KIND does. */
enum { CCS_FP_SIG = 1, CCS_FP_BYTES = 2, CCS_FP_OP = 4, CCS_FP_ROOT = 8, CCS_FP_COLL = 16 };

static inline unsigned ccs_fp_fields(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, cnt, sig, bytes, op, root, types, ...)                                            \
    case n:                                                                                                \
        return ((c) == CCS_CLASS_COLL ? CCS_FP_COLL : 0) | ((sig) ? CCS_FP_SIG : 0) |                      \
               ((bytes) ? CCS_FP_BYTES : 0) | ((op) ? CCS_FP_OP : 0) | ((root) ? CCS_FP_ROOT : 0);
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return 0;
}

/* The fields every member must agree on for KIND under MPI's matching
 * rules, packed into two words (not mixed): W holds the kind and the
 * nonblocking flag always, the op and the basic type of reductions, the
 * root of rooted kinds; C the count: for reductions the whole type
 * signature (COUNT, DTYPE, SIG), for bcast/gather/scatter/allgather(v)/
 * alltoall the signature's size in bytes, else 0.  SIG: hash of a
 * multi-type signature's repeating unit (DTYPE CCS_DT_DERIVED, COUNT then
 * in bytes), else 0.  Point-to-point kinds: the kind only.  Inline and
 * without a multiplication (the field choice folds with a constant KIND):
 * the hot path folds both words into its communicator's running hash. */
struct ccs_fp_words {
    uint64_t w, c;
};

static inline struct ccs_fp_words ccs_fp_words(unsigned kind, unsigned flags, uint64_t count, unsigned dtype,
                                               unsigned op, int root, uint32_t sig)
{
    unsigned f = ccs_fp_fields(kind);
    struct ccs_fp_words k = {(uint64_t)kind, 0};
    if (f & CCS_FP_COLL)
        k.w |= (uint64_t)(flags & CCS_F_NONBLOCKING) << 16;
    if (f & CCS_FP_SIG) {
        k.w |= (uint64_t)(dtype & 0xff) << 24;
        k.c = count ^ ((uint64_t)sig << 40) ^ ((uint64_t)sig >> 24);
    } else if (f & CCS_FP_BYTES) {
        k.c = ccs_sig_bytes(count, dtype);
    }
    if (f & CCS_FP_OP)
        k.w |= (uint64_t)(op & 0xff) << 32;
    if (f & CCS_FP_ROOT)
        k.w |= (uint64_t)((uint32_t)root & 0xffffff) << 40;
    return k;
}

/* The two words in one (the count through an odd multiplier, a
 * bijection), for the fingerprint (fingerprint.c). */
static inline uint64_t ccs_fp_key(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                  int root, uint32_t sig)
{
    struct ccs_fp_words k = ccs_fp_words(kind, flags, count, dtype, op, root, sig);
    return k.w ^ (k.c * CCS_HASH_MUL);
}

/* The running hash of a communicator's collectives, through one more call
 * whose words are K and which coalescing answered locally or not
 * (DEFERRED): (H ^ W) * B + C', with B odd and C' the count word, marked
 * when deferred.  One multiplication, on the hot path of every collective
 * (record.h).  Each step is a bijection of H for given words, so two
 * sequences that differ in one call never hash alike afterwards, whatever
 * follows alike; and for one H, words that differ give hashes that differ:
 * always where W is equal (C' differs), else but for a coincidence (the
 * products then differ by D * B, D a sum of +-2^k over the bits where the
 * W differ, which the difference of the C' would have to equal: for the
 * few bits two calls' W differ in, a chance of the order of 2^-40;
 * test_fingerprint checks a grid of real calls).  The ranks compare these
 * hashes at equal seqs (docs/desync.md). */
static inline uint64_t ccs_running_hash(uint64_t h, struct ccs_fp_words k, int deferred)
{
    return (h ^ k.w) * CCS_HASH_MUL + (k.c ^ (deferred ? 0x7f4a7c159e3779b9ULL : 0));
}

/* Fingerprint of the fields every member must agree on for one collective:
 * ccs_fp_key, mixed (the operations in a status carry it). */
CCS_HIDDEN uint64_t ccs_fingerprint_sig(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                        int root, uint32_t sig);
/* The same with SIG 0 (one basic type, as NCCL always has). */
CCS_HIDDEN uint64_t ccs_fingerprint(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                    int root);
/* For the kinds whose fingerprint has the signature's size only: the
 * basic-type pattern to compare beside it (a dtype, or SIG for a derived
 * one), 0 when there is none to compare (empty, MPI_PACKED, not known, or
 * a kind that needs none).  Two members of one collective whose keys are
 * both nonzero must have equal keys. */
CCS_HIDDEN uint32_t ccs_sig_key(unsigned kind, unsigned dtype, uint32_t sig);

/* The fingerprint of a record read from a ring (whose own fingerprint
 * field holds its communicator's running hash there, see ccs_call_store). */
static inline uint64_t ccs_record_fingerprint(const struct ccs_record *r)
{
    return ccs_fingerprint_sig(r->kind, r->flags, r->count, r->dtype, r->op, r->root, r->sig);
}

#endif
