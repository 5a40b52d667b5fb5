/*
 * pysite.c - annotated call sites: the Python line (or any other text a
 * language helper names) that caused the collectives a thread issues now
 * (docs/python-sites.md).
 *
 * ccshim_annotate(text) interns TEXT once (slow path: a spin lock, a string
 * compare per probe) and makes its id the process's current site;
 * ccshim_annotate_id(id) switches to an id already interned (one relaxed
 * store).  The hot path copies the current id into each record's `pysite`
 * with one relaxed load.  The current site is process-wide, not per thread:
 * PyTorch's autograd engine runs DDP's bucket reductions on its own threads
 * while the Python thread that called backward() waits, and those
 * reductions belong to that backward() line.
 *
 * Texts are stored once, in fixed slots, and never move or change once
 * published: readers (the trace writer, the desync report) read them without
 * the lock, up to the published count.
 */
#include "ccshim.h"
#include "fingerprint.h"
#include "log.h"
#include "pysite.h"
#include <string.h>

#define PYSITE_SLOTS 4096 /* distinct sites per process */
#define PYSITE_HASH_BITS 13

_Atomic uint32_t ccs_pysite_current;

static char texts[PYSITE_SLOTS][CCS_PYSITE_TEXT];
static uint64_t hashes[PYSITE_SLOTS];
static uint32_t by_hash[1u << PYSITE_HASH_BITS]; /* id, 0 = empty (open addressing) */
static _Atomic uint32_t npysites;                /* published: ids 1..npysites */
static atomic_flag lock = ATOMIC_FLAG_INIT;
static int full_logged;

static void lock_take(void)
{
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
        ;
}

static void lock_give(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

uint32_t ccs_pysite_intern(const char *text)
{
    if (!text || !*text)
        return 0;
    size_t len = strnlen(text, CCS_PYSITE_TEXT - 1);
    uint64_t h = ccs_hash_bytes(text, len, 0x9517e);
    uint32_t id = 0;
    lock_take();
    uint32_t n = atomic_load_explicit(&npysites, memory_order_relaxed);
    size_t mask = (1u << PYSITE_HASH_BITS) - 1, i = ccs_slot_hash(h, PYSITE_HASH_BITS);
    for (;; i = (i + 1) & mask) {
        uint32_t e = by_hash[i];
        if (e == 0)
            break;
        if (hashes[e - 1] == h && strncmp(texts[e - 1], text, len) == 0 && texts[e - 1][len] == 0) {
            id = e;
            break;
        }
    }
    if (!id && n < PYSITE_SLOTS) {
        memcpy(texts[n], text, len);
        texts[n][len] = 0;
        hashes[n] = h;
        id = n + 1;
        by_hash[i] = id; /* the table has twice the slots: a free one was found */
        atomic_store_explicit(&npysites, id, memory_order_release);
    } else if (!id && !full_logged) {
        full_logged = 1;
        CCS_LOG(WARN, "more than %d annotated call sites; later ones are recorded without one", PYSITE_SLOTS);
    }
    lock_give();
    return id;
}

const char *ccs_pysite_text(uint32_t id)
{
    if (id == 0 || id > atomic_load_explicit(&npysites, memory_order_acquire))
        return NULL;
    return texts[id - 1];
}

uint32_t ccs_pysite_count(void) { return atomic_load_explicit(&npysites, memory_order_acquire); }

void ccs_pysite_forked(void)
{
    /* A thread of the parent may have held the lock at fork: it does not
     * exist here.  What was published stays valid (the same memory). */
    atomic_flag_clear(&lock);
}

uint32_t ccshim_annotate(const char *site)
{
    uint32_t id = ccs_pysite_intern(site);
    atomic_store_explicit(&ccs_pysite_current, id, memory_order_relaxed);
    return id;
}

void ccshim_annotate_id(uint32_t id)
{
    if (id > atomic_load_explicit(&npysites, memory_order_acquire))
        id = 0; /* never interned: no site rather than a wrong one */
    atomic_store_explicit(&ccs_pysite_current, id, memory_order_relaxed);
}

_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t) && _Alignof(_Atomic uint32_t) == _Alignof(uint32_t),
              "ccshim_annotate_word hands out the current site as a plain 32-bit word");

uint32_t *ccshim_annotate_word(void) { return (uint32_t *)&ccs_pysite_current; }

uint32_t ccshim_annotate_current(void) { return atomic_load_explicit(&ccs_pysite_current, memory_order_relaxed); }
