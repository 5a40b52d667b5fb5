/*
 * fingerprint.h - hashing (fingerprint.c): identities, the hot path's table
 * slots, and the fingerprint of the fields every member of a communicator
 * must agree on for one collective.
 */
#ifndef CCS_FINGERPRINT_H
#define CCS_FINGERPRINT_H

#include "attributes.h"
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

/* Fingerprint of the fields every member must agree on for KIND under MPI's
 * matching rules (fingerprint.c): the kind and the nonblocking flag always;
 * for reductions the whole type signature (COUNT, DTYPE, SIG) and the op;
 * for bcast/gather/scatter/allgather(v)/alltoall the signature's size in
 * bytes; the root for rooted kinds.  SIG: hash of a multi-type signature's
 * repeating unit (DTYPE CCS_DT_DERIVED, COUNT then in bytes), else 0.
 * Point-to-point kinds hash the kind only. */
CCS_HIDDEN uint64_t ccs_fingerprint_sig(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                        int root, uint32_t sig);
/* The same with SIG 0 (one basic type, as NCCL always has). */
CCS_HIDDEN uint64_t ccs_fingerprint(unsigned kind, unsigned flags, uint64_t count, unsigned dtype, unsigned op,
                                    int root);
/* Bytes of COUNT elements of DTYPE (COUNT itself for CCS_DT_DERIVED). */
CCS_HIDDEN uint64_t ccs_sig_bytes(uint64_t count, unsigned dtype);
/* For the kinds whose fingerprint has the signature's size only: the
 * basic-type pattern to compare beside it (a dtype, or SIG for a derived
 * one), 0 when there is none to compare (empty, MPI_PACKED, not known, or
 * a kind that needs none).  Two members of one collective whose keys are
 * both nonzero must have equal keys. */
CCS_HIDDEN uint32_t ccs_sig_key(unsigned kind, unsigned dtype, uint32_t sig);

/* The fingerprint of a record read from a ring. */
static inline uint64_t ccs_record_fingerprint(const struct ccs_record *r)
{
    return ccs_fingerprint_sig(r->kind, r->flags, r->count, r->dtype, r->op, r->root, r->sig);
}

#endif
