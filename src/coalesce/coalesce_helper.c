/*
 * coalesce_helper.c - a language helper beside ccshim's own coalescing
 * (docs/coalescing.md): the torch helper says when it avoids the
 * per-mini-batch reductions itself (DDP skipping them, as under no_sync)
 * and how many it skipped in a step; the API it reads (the period ccshim
 * learned, the calls of the step so far).  Apart from the policy
 * (coalesce_policy.c), which says what coalescing may touch at all.
 */
#include "ccshim.h"
#include "coalesce.h"
#include "log.h"
#include <stdatomic.h>
#include <stdint.h>

atomic_int ccs_coalesce_helper_on;
static _Atomic uint32_t helper_gen, helper_skipped;

void ccs_coalesce_helper_step(uint32_t *gen, uint32_t *skipped)
{
    *gen = atomic_load_explicit(&helper_gen, memory_order_acquire);
    *skipped = atomic_load_explicit(&helper_skipped, memory_order_relaxed);
}

struct common_period {
    uint32_t n;
    int mixed;
};

static void period_one(struct ccs_coal_id *id, void *arg)
{
    struct common_period *c = arg;
    uint32_t p = atomic_load_explicit(&id->period, memory_order_relaxed);
    if (p < 2)
        return;
    if (c->n && c->n != p)
        c->mixed = 1;
    c->n = p;
}

uint32_t ccshim_coalesce_period(void)
{
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_OFF || !atomic_load(&ccs_coalesce_on))
        return 0;
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_EVERY)
        return ccs_coalesce_policy()->every;
    struct common_period c = {0, 0};
    ccs_coalesce_foreach(period_one, &c);
    return c.mixed ? 0 : c.n;
}

static void step_calls_one(struct ccs_coal_id *id, void *arg)
{
    *(uint64_t *)arg += atomic_load_explicit(&id->in_step, memory_order_relaxed);
}

uint64_t ccshim_coalesce_step_calls(void)
{
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_OFF)
        return 0;
    uint64_t n = 0;
    ccs_coalesce_foreach(step_calls_one, &n);
    return n;
}

static void relearn_one(struct ccs_coal_id *id, void *arg)
{
    (void)arg;
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_AUTO) {
        atomic_store_explicit(&id->period, 0, memory_order_relaxed);
        id->learned = 0;
        id->learn_run = 0;
        id->agree_failed = 0;
    }
    atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
}

int ccshim_coalesce_helper(int on)
{
    if (ccs_coalesce_policy()->mode == CCS_COALESCE_OFF)
        return -1;
    int was = atomic_exchange(&ccs_coalesce_helper_on, on ? 1 : 0);
    if (was == (on ? 1 : 0))
        return 0;
    if (on)
        CCS_LOG(INFO, "coalescing: the language helper now avoids the per-mini-batch reductions itself "
                      "(DDP skips them as under no_sync); every reduction that remains is real");
    else {
        /* Back to ccshim's own coalescing, learned afresh: the helper's
         * steps carried one reduction per bucket, not the job's pattern. */
        ccs_coalesce_foreach(relearn_one, NULL);
        CCS_LOG(INFO, "coalescing: the language helper stopped avoiding reductions; ccshim learns the pattern again");
    }
    return 0;
}

void ccshim_coalesce_helper_skipped(uint32_t skipped)
{
    atomic_store_explicit(&helper_skipped, skipped, memory_order_relaxed);
    atomic_fetch_add_explicit(&helper_gen, 1, memory_order_release);
}
