/*
 * coalesce_policy.c - what coalescing is asked to do: CCSHIM_COALESCE
 * (off, every:N, auto), and which reductions it may touch at all (op,
 * datatype, size, call site).  Everything else passes through untouched.
 */
#include "ccs_config.h"
#include "ccshim.h"
#include "coalesce.h"
#include "log.h"
#include "callsite.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

atomic_int ccs_coalesce_on;

static struct ccs_coalesce_policy policy;
static _Atomic uint32_t generation; /* policies put in force so far */
static atomic_int inited;
static int abort_on_error;

const struct ccs_coalesce_policy *ccs_coalesce_policy(void) { return &policy; }

int ccs_coalesce_abort_on_error(void) { return abort_on_error; }

void ccs_coalesce_init(void)
{
    char why[128];
    struct ccs_coalesce_policy p;
    if (atomic_exchange(&inited, 1))
        return;
    if (ccs_coalesce_parse(ccs_cfg.coalesce, &p, why, sizeof why) != 0) {
        CCS_LOG(ERROR, "CCSHIM_COALESCE='%s' ignored: %s; coalescing stays off", ccs_cfg.coalesce, why);
        return;
    }
    ccs_coalesce_configure(&p);
}

void ccs_coalesce_configure(const struct ccs_coalesce_policy *p)
{
    policy = *p;
    atomic_store(&ccs_coalesce_on, 0);
    atomic_fetch_add(&generation, 1); /* the step module starts learning anew */
    if (policy.mode == CCS_COALESCE_OFF)
        return;
    abort_on_error = ccs_cfg.on_desync == CCS_ON_DESYNC_ABORT; /* a failed verification follows the desync policy */
    if (policy.mode == CCS_COALESCE_EVERY)
        CCS_LOG(INFO, "coalescing every:%u: %u of every %u eligible all-reduces per identity answered locally",
                policy.every, policy.every - 1, policy.every);
    else
        CCS_LOG(INFO, "coalescing auto: each all-reduce identity is coalesced once %ld consecutive step(s) called it "
                      "the same number of times and the ranks agree; all real until then",
                ccs_cfg.coalesce_learn_steps);
    atomic_store(&ccs_coalesce_on, 1);
}

uint32_t ccs_coalesce_policy_generation(void) { return atomic_load(&generation); }

void ccs_coalesce_disable(const char *why)
{
    if (atomic_exchange(&ccs_coalesce_on, 0))
        CCS_LOG(WARN, "coalescing switched off for the rest of the run: %s", why);
}

int ccs_coalesce_eligible(unsigned op, unsigned dtype, uint64_t bytes)
{
    if (op != CCS_OP_SUM && op != CCS_OP_AVG && op != CCS_OP_PREMULSUM)
        return 0;
    if (dtype != CCS_DT_FLOAT32 && dtype != CCS_DT_FLOAT64 && dtype != CCS_DT_FLOAT16 && dtype != CCS_DT_BFLOAT16)
        return 0;
    return bytes >= (uint64_t)ccs_cfg.coalesce_min_bytes;
}

/* ------------------------------------------------------------ call sites */

#define SITE_CACHE 512 /* power of two */

/* Decisions per return address: 1 allowed, 2 refused.  A slot is claimed
 * with one compare-and-swap; a full cache decides again each time. */
static struct {
    _Atomic uintptr_t pc;
    atomic_int ok;
} site_cache[SITE_CACHE];

/* 1 when one of the comma-separated substrings of LIST occurs in TEXT. */
static int names_one_of(const char *list, const char *text)
{
    while (list && *list) {
        size_t n = strcspn(list, ",");
        if (n > 0) {
            char pat[256];
            snprintf(pat, sizeof pat, "%.*s", (int)(n < sizeof pat ? n : sizeof pat - 1), list);
            if (strstr(text, pat))
                return 1;
        }
        list += n + (list[n] == ',');
    }
    return 0;
}

/* Slow path, once per call site: symbolises its stack and applies the
 * include and exclude lists to every frame. */
static int decide_site(void *pc)
{
    void *pcs[CCS_MAX_STACK];
    uint32_t depth = 0;
    const char *inc = ccs_cfg.coalesce_include, *exc = ccs_cfg.coalesce_exclude;
    int included = !(inc && *inc), excluded = 0;
    if (ccs_site_get(ccs_site_id(pc), pcs, &depth) != 0) {
        pcs[0] = pc;
        depth = 1;
    }
    for (uint32_t i = 0; i < depth; i++) {
        char sym[512];
        ccs_site_symbolize(pcs[i], sym, sizeof sym);
        if (!included && names_one_of(inc, sym))
            included = 1;
        if (exc && *exc && names_one_of(exc, sym))
            excluded = 1;
    }
    char sym[512];
    ccs_site_symbolize(pc, sym, sizeof sym);
    CCS_LOG(DEBUG, "coalescing %s at call site %s", included && !excluded ? "allowed" : "refused", sym);
    return included && !excluded;
}

int ccs_coalesce_site_ok(void *pc)
{
    const char *inc = ccs_cfg.coalesce_include, *exc = ccs_cfg.coalesce_exclude;
    if ((!inc || !*inc) && (!exc || !*exc))
        return 1;
    uintptr_t key = (uintptr_t)pc;
    size_t i = (size_t)(ccs_hash_mix(0, key) & (SITE_CACHE - 1));
    for (size_t n = 0; n < SITE_CACHE; n++, i = (i + 1) & (SITE_CACHE - 1)) {
        uintptr_t k = atomic_load_explicit(&site_cache[i].pc, memory_order_acquire);
        if (k == key) {
            int ok = atomic_load_explicit(&site_cache[i].ok, memory_order_acquire);
            if (ok)
                return ok == 1;
            return decide_site(pc); /* being decided by another thread */
        }
        if (k == 0) {
            uintptr_t expect = 0;
            if (!atomic_compare_exchange_strong(&site_cache[i].pc, &expect, key)) {
                if (expect == key)
                    return decide_site(pc);
                continue;
            }
            int ok = decide_site(pc);
            atomic_store_explicit(&site_cache[i].ok, ok ? 1 : 2, memory_order_release);
            return ok;
        }
    }
    return decide_site(pc);
}

/* ------------------------------------------------------- a language helper */

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
    if (policy.mode == CCS_COALESCE_OFF || !atomic_load(&ccs_coalesce_on))
        return 0;
    if (policy.mode == CCS_COALESCE_EVERY)
        return policy.every;
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
    if (policy.mode == CCS_COALESCE_OFF)
        return 0;
    uint64_t n = 0;
    ccs_coalesce_foreach(step_calls_one, &n);
    return n;
}

static void relearn_one(struct ccs_coal_id *id, void *arg)
{
    (void)arg;
    if (policy.mode == CCS_COALESCE_AUTO) {
        atomic_store_explicit(&id->period, 0, memory_order_relaxed);
        id->learned = 0;
        id->learn_run = 0;
        id->agree_failed = 0;
    }
    atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
}

int ccshim_coalesce_helper(int on)
{
    if (policy.mode == CCS_COALESCE_OFF)
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
