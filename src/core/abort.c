/*
 * abort.c - the ways to end the whole job (abort.h), registered by the
 * backends and published as the registry's hooks are: appended, the count
 * stored last, read without a lock.
 */
#include "abort.h"
#include <stdatomic.h>

#define MAX_ABORTS 4

static struct {
    int (*fn)(void *, uint64_t);
    void *arg;
    int job_wide;
} aborts[MAX_ABORTS];
static atomic_int naborts;

int ccs_abort_register(int (*fn)(void *, uint64_t), void *arg, int job_wide)
{
    static atomic_int claimed;
    int i = atomic_fetch_add(&claimed, 1);
    if (i >= MAX_ABORTS)
        return -1;
    aborts[i].fn = fn;
    aborts[i].arg = arg;
    aborts[i].job_wide = job_wide;
    int expect = i;
    while (!atomic_compare_exchange_weak(&naborts, &expect, i + 1))
        expect = i;
    return 0;
}

int ccs_abort_job_wide(void)
{
    int n = atomic_load(&naborts), wide = 0;
    for (int i = 0; i < n; i++)
        wide |= aborts[i].job_wide;
    return wide;
}

int ccs_abort_job(uint64_t comm)
{
    int n = atomic_load(&naborts), rc = -1;
    for (int i = 0; i < n; i++) {
        int r = aborts[i].fn(aborts[i].arg, comm);
        if (r == 0)
            return 0;
        if (r == 1)
            rc = 1;
    }
    return rc;
}
