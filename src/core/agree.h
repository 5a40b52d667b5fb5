/*
 * agree.h - a service: agreement on a value among the members of a
 * communicator.  Desync's side channel provides it (desync_agree.c);
 * coalescing's auto mode and its step boundary use it.  Registered by the
 * provider, so the core and the user name neither.
 */
#ifndef CCS_AGREE_H
#define CCS_AGREE_H

#include "attributes.h"
#include "comm.h"
#include <stdint.h>

/* Agreement on one 64-bit value among the members of communicator C: each
 * member passes MINE under the same KEY; fills the largest and smallest
 * value contributed.  Returns 0, or -1 when it could not complete within
 * TIMEOUT_MS (or no service).  Slow path: step markers only. */
typedef int (*ccs_agree_fn)(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                            uint64_t *agreed_min, int timeout_ms);

/* Registers the agreement service (NULL withdraws it). */
CCS_HIDDEN void ccs_agree_register(ccs_agree_fn fn);
/* 1 when a service is registered and running. */
CCS_HIDDEN int ccs_agree_available(void);
CCS_HIDDEN int ccs_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max,
                             uint64_t *agreed_min, int timeout_ms);

#endif
