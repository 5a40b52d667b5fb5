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
