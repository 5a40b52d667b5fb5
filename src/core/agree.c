/*
 * agree.c - the agreement service's slot (agree.h): whoever provides it
 * (desync) registers it, whoever needs it calls through.
 */
#include "agree.h"
#include <stdatomic.h>

static _Atomic(ccs_agree_fn) agree_service;

void ccs_agree_register(ccs_agree_fn fn) { atomic_store(&agree_service, fn); }

int ccs_agree_available(void) { return atomic_load(&agree_service) != NULL; }

int ccs_agree_u64(struct ccs_comm *c, uint64_t key, uint64_t mine, uint64_t *agreed_max, uint64_t *agreed_min,
                  int timeout_ms)
{
    ccs_agree_fn fn = atomic_load(&agree_service);
    return fn ? fn(c, key, mine, agreed_max, agreed_min, timeout_ms) : -1;
}
