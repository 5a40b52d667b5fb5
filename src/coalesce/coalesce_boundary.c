/*
 * coalesce_boundary.c - the step boundary: before deferred reductions are
 * completed (and before an optimizer step reads them), the ranks make sure
 * they ended the step alike.
 *
 * A completion is a collective on every communicator with deferred calls
 * pending.  A rank that made fewer or more calls in the step than the
 * others (it skipped a mini-batch, or ran one more) has different pending
 * reductions from them, and a completion would wait forever for ranks that
 * are elsewhere: blocked in the step's real reduction, or gone on to the
 * next step because nothing was pending for them.  So a rank with pending
 * calls first agrees with the members of each such communicator, over
 * desync's side channel, on a digest of what it called in the step (per
 * pending identity: its place among them, its calls in the step, its pending calls).
 * While it waits it is published as "at its step boundary" (step.h),
 * and desync's boundary rule turns a member that can never join it into a
 * DESYNC naming the ranks, the step and both counts (docs/coalescing.md).
 * Only when every member gave the same digest is the completion made.
 */
#include "ccs_config.h"
#include "ccshim.h"
#include "coalesce.h"
#include "log.h"
#include "agree.h"
#include "step.h"
#include "verdicts.h"
#include "clock.h"
#include "comm.h"
#include "fingerprint.h"
#include "process.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct pending_comms {
    size_t n;
    int overflow;
    uint64_t comm[CCS_BOUNDARY_COMMS];
    uintptr_t handle[CCS_BOUNDARY_COMMS];
    uint8_t backend[CCS_BOUNDARY_COMMS];
    uint64_t dig[CCS_BOUNDARY_COMMS];
    uint64_t calls;
};

/* X has deferred calls pending.  An identity's place among those of its
 * communicator (ccs_coalesce_place) is the same on every member that ended
 * the step alike; its agreed_ord is not: under every:N that is its ordinal
 * (a healthy job was stopped as desynchronised when DDP's rebuild moved
 * one rank's bucket only: tests/torch/ddp-skip.sh, every:5, about one run
 * in 60). */
static int has_pending(const struct ccs_coal_id *x, const struct ccs_coal_id *id)
{
    (void)id;
    return atomic_load_explicit(&x->pending, memory_order_relaxed) != 0;
}

/* Order-independent digest per communicator of what this rank called there
 * in the step, over its identities with deferred calls pending. */
static void collect_one(struct ccs_coal_id *id, void *arg)
{
    struct pending_comms *p = arg;
    uint32_t pending = atomic_load_explicit(&id->pending, memory_order_relaxed);
    if (!pending)
        return;
    size_t i = 0;
    while (i < p->n && p->comm[i] != id->comm)
        i++;
    if (i == p->n) {
        if (p->n == CCS_BOUNDARY_COMMS) {
            p->overflow = 1;
            return;
        }
        p->comm[i] = id->comm;
        p->handle[i] = id->handle;
        p->backend[i] = id->backend;
        p->dig[i] = 0x626f756e64617279ULL; /* "boundary" */
        p->n++;
    }
    uint64_t h = ccs_hash_mix(id->comm, ccs_coalesce_place(id, has_pending));
    h = ccs_hash_mix(h, atomic_load_explicit(&id->in_step, memory_order_relaxed));
    h = ccs_hash_mix(h, pending);
    p->dig[i] += h;
    p->calls += pending;
}

static void sort_by_comm(struct pending_comms *p)
{
    for (size_t i = 1; i < p->n; i++)
        for (size_t j = i; j > 0 && p->comm[j] < p->comm[j - 1]; j--) {
            uint64_t c = p->comm[j], d = p->dig[j];
            uintptr_t h = p->handle[j];
            uint8_t b = p->backend[j];
            p->comm[j] = p->comm[j - 1], p->dig[j] = p->dig[j - 1];
            p->handle[j] = p->handle[j - 1], p->backend[j] = p->backend[j - 1];
            p->comm[j - 1] = c, p->dig[j - 1] = d, p->handle[j - 1] = h, p->backend[j - 1] = b;
        }
}

static uint32_t agreed_step1, failed_step1; /* step + 1 decided at its boundary (one thread steps) */
static int unchecked_logged, overflow_logged;

/* The agreement on the members of every communicator of P, in increasing
 * identity order on every rank.  0: all agreed; 1: a verdict came or they
 * differ (desynchronised); -1: the side channel could not tell. */
static int agree_all(struct pending_comms *p, uint32_t step)
{
    uint64_t verdicts = ccs_verdicts_seen();
    uint64_t key = ccs_hash_mix(0x626f756e64617279ULL, step);
    for (size_t i = 0; i < p->n; i++) {
        struct ccs_comm *c = ccs_comm_lookup(p->backend[i], p->handle[i]);
        if (!c || !c->agreed)
            continue; /* not known across ranks: nothing to agree with */
        uint64_t hi = 0, lo = 1;
        /* No time limit: members still computing in the step come when they
         * come; one that never can is a verdict, which ends the wait. */
        if (ccs_agree_u64(c, key, p->dig[i], &hi, &lo, INT_MAX) == 0) {
            if (hi != lo)
                return 1;
            continue;
        }
        return ccs_verdicts_seen() != verdicts ? 1 : -1;
    }
    return 0;
}

/* Waits at the end of STEP for the members of P's communicators (published
 * meanwhile) and remembers the outcome for the step: as agree_all. */
static int wait_at_boundary(struct pending_comms *p, uint32_t step)
{
    sort_by_comm(p);
    ccs_boundary_enter(step, p->comm, (uint32_t)p->n);
    int r = agree_all(p, step);
    ccs_boundary_leave();
    if (r == 0)
        agreed_step1 = step + 1;
    else if (r > 0)
        failed_step1 = step + 1;
    return r;
}

/* After a failed boundary under CCSHIM_ON_DESYNC=abort: desync ends the job
 * once its report is out (docs/desync.md); the rank waits for that here
 * rather than racing it with its own abort. */
static void await_abort(void)
{
    if (ccs_coalesce_abort_on_error())
        for (int i = 0; i < 100; i++)
            ccs_sleep_ms(100);
}

int ccs_coalesce_boundary(void) { return ccs_coalesce_boundary_of(ccs_step_now()); }

int ccs_coalesce_boundary_of(uint32_t step)
{
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_OFF)
        return 0;
    if (agreed_step1 == step + 1)
        return 0;
    if (failed_step1 == step + 1)
        return -1;
    static struct pending_comms p;
    memset(&p, 0, sizeof p);
    ccs_coalesce_foreach(collect_one, &p);
    if (!p.n)
        return 0;
    if (p.overflow)
        ccs_log_once(&overflow_logged, CCS_LOG_WARN,
                     "coalescing: deferred calls pending on more than %d communicators; the step boundary checks "
                     "the first %d",
                     CCS_BOUNDARY_COMMS, CCS_BOUNDARY_COMMS);
    if (!ccs_agree_available()) {
        ccs_log_once(&unchecked_logged, CCS_LOG_WARN,
                     "coalescing: no side channel (CCSHIM_DESYNC=0): the ranks' calls per step are not compared "
                     "before deferred reductions are completed; a rank that skipped a mini-batch makes the "
                     "completion wait");
        return 0;
    }
    int r = wait_at_boundary(&p, step);
    if (r < 0) {
        ccs_log_once(&unchecked_logged, CCS_LOG_WARN,
                     "coalescing: the side channel stopped while this rank waited at the end of step %u; deferred "
                     "reductions are completed unchecked",
                     step);
        return 0;
    }
    if (r == 0)
        return 0;
    CCS_LOG(ERROR,
            "coalescing: step %u: this rank ended the step with %llu deferred all-reduce(s) pending, and the other "
            "ranks did not end it alike (see the DESYNC): they are not completed, no optimizer step may read them",
            step, (unsigned long long)p.calls);
    await_abort();
    return -1;
}

int ccshim_coalesce_boundary(void) { return ccs_coalesce_boundary(); }

/* ------------------------------------------------ a helper's step boundary */

/* Every communicator coalescing has seen reductions on (the helper's
 * skipped mini-batches would have been reduced there). */
static void comm_one(struct ccs_coal_id *id, void *arg)
{
    struct pending_comms *p = arg;
    for (size_t i = 0; i < p->n; i++)
        if (p->comm[i] == id->comm)
            return;
    if (p->n == CCS_BOUNDARY_COMMS) {
        p->overflow = 1;
        return;
    }
    p->comm[p->n] = id->comm;
    p->handle[p->n] = id->handle;
    p->backend[p->n] = id->backend;
    p->n++;
}

int ccshim_step_boundary(uint32_t units)
{
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_OFF)
        return 0;
    uint32_t step = ccs_step_now();
    if (agreed_step1 == step + 1)
        return 0;
    if (failed_step1 == step + 1)
        return -1;
    ccshim_step_units(units);
    static struct pending_comms p;
    memset(&p, 0, sizeof p);
    ccs_coalesce_foreach(comm_one, &p);
    if (!p.n || !ccs_agree_available())
        return 0;
    for (size_t i = 0; i < p.n; i++)
        p.dig[i] = ccs_hash_mix(0x756e697473000000ULL /* "units" */, units);
    if (wait_at_boundary(&p, step) <= 0)
        return 0;
    CCS_LOG(ERROR,
            "coalescing: step %u: this rank ended the step after %u backward pass(es) with its gradients not yet "
            "reduced, and the other ranks did not end it alike (see the DESYNC): no optimizer step may read them",
            step, units);
    await_abort();
    return -1;
}
