/*
 * callsite.c - call sites: the return address of an intercepted call, its
 * full stack unwound once (libunwind) the first time the site is seen and
 * cached.  Lock-free: a slot is claimed with one compare-and-swap; every
 * later call from the same site costs one hash probe.
 */
#include <config.h>
#include "ccs_config.h"
#include "log.h"
#include "callsite.h"
#include "fingerprint.h"
#include <stdatomic.h>
#include <dlfcn.h>
#include <stdio.h>
#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#define SITE_BITS 13
#define SITE_SLOTS (1u << SITE_BITS)

struct site_slot {
    _Atomic uintptr_t pc;
    _Atomic uint32_t id;
    atomic_int ready; /* stack filled in */
    uint32_t depth;
    void *pcs[CCS_MAX_STACK];
};

static struct site_slot slots[SITE_SLOTS];
static struct site_slot *_Atomic by_id[SITE_SLOTS + 1];
static _Atomic uint32_t nsites;
static int full_logged;

/* Unwinds the caller's stack into S, starting at the frame whose return
 * address is PC (the frames of ccshim itself are dropped). */
static void unwind_into(struct site_slot *s, void *pc)
{
    s->pcs[0] = pc;
    s->depth = 1;
#ifdef HAVE_LIBUNWIND
    int want = (int)ccs_cfg.stack_depth;
    if (want <= 1)
        return;
    void *buf[CCS_MAX_STACK + 8];
    int n = unw_backtrace(buf, CCS_MAX_STACK + 8);
    int start = -1;
    for (int i = 0; i < n; i++)
        if (buf[i] == pc) {
            start = i;
            break;
        }
    if (start < 0)
        return;
    int d = n - start < want ? n - start : want;
    for (int i = 0; i < d; i++)
        s->pcs[i] = buf[start + i];
    s->depth = (uint32_t)d;
#endif
}

uint32_t ccs_site_id(void *pc)
{
    uintptr_t key = (uintptr_t)pc;
    if (!key)
        return 0;
    size_t i = ccs_slot_hash(key, SITE_BITS);
    for (size_t n = 0; n < SITE_SLOTS; n++, i = (i + 1) & (SITE_SLOTS - 1)) {
        struct site_slot *s = &slots[i];
        uintptr_t k = atomic_load_explicit(&s->pc, memory_order_acquire);
        if (k == 0) {
            uintptr_t expect = 0;
            if (!atomic_compare_exchange_strong(&s->pc, &expect, key)) {
                k = expect;
                goto occupied;
            }
            /* First sighting: this thread owns the slot. */
            uint32_t id = atomic_fetch_add(&nsites, 1) + 1;
            atomic_store_explicit(&s->id, id, memory_order_release);
            unwind_into(s, pc);
            atomic_store_explicit(&s->ready, 1, memory_order_release);
            if (id <= SITE_SLOTS)
                atomic_store_explicit(&by_id[id], s, memory_order_release);
            return id;
        }
    occupied:
        if (k == key) {
            uint32_t id;
            /* Another thread is claiming it this instant: its id follows
             * within a few instructions. */
            while ((id = atomic_load_explicit(&s->id, memory_order_acquire)) == 0)
                ;
            return id;
        }
    }
    ccs_log_once(&full_logged, CCS_LOG_WARN, "more than %d call sites; new ones are recorded without a site",
                 SITE_SLOTS);
    return 0;
}

int ccs_site_get(uint32_t id, void **pcs, uint32_t *depth)
{
    if (id == 0 || id > SITE_SLOTS)
        return -1;
    struct site_slot *s = atomic_load_explicit(&by_id[id], memory_order_acquire);
    if (!s || !atomic_load_explicit(&s->ready, memory_order_acquire))
        return -1;
    for (uint32_t i = 0; i < s->depth; i++)
        pcs[i] = s->pcs[i];
    *depth = s->depth;
    return 0;
}

uint32_t ccs_site_count(void) { return atomic_load(&nsites); }

void ccs_site_symbolize(void *pc, char *buf, size_t n)
{
    Dl_info di;
    if (dladdr((char *)pc - 1, &di) && di.dli_fname) {
        const char *mod = di.dli_fname;
        unsigned long moff = (unsigned long)((char *)pc - (char *)di.dli_fbase);
        if (di.dli_sname)
            snprintf(buf, n, "%s+0x%lx (%s+0x%lx)", di.dli_sname,
                     (unsigned long)((char *)pc - (char *)di.dli_saddr), mod, moff);
        else
            snprintf(buf, n, "%s+0x%lx", mod, moff);
    } else {
        snprintf(buf, n, "%p", pc);
    }
}
