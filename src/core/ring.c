/*
 * ring.c - one ring of records per thread, mapped on the thread's first
 * recorded call.  Single producer (the thread), single consumer (the trace
 * writer); the producer never waits and never takes a lock.  The pages are
 * touched when the ring is mapped, not one by one on the hot path.
 */
#include "ccs_config.h"
#include "log.h"
#include "shim.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Atomic(struct ccs_ring *) all_rings;
static atomic_uint nrings;
__thread struct ccs_ring *ccs_tls_ring __attribute__((tls_model("initial-exec")));
static __thread int self_failed __attribute__((tls_model("initial-exec")));
static int oom_logged;

static uint64_t capacity(void)
{
    uint64_t want = (uint64_t)ccs_cfg.ring_size, c = 1024;
    while (c < want)
        c <<= 1;
    return c;
}

/* Touches every page of a new ring now, on the thread's first call, which
 * maps it anyway: left to the hot path, the first lap through the ring takes
 * a page fault every 4096 / sizeof(struct ccs_record) = 46 calls (about 2 us
 * each in a VM), which averaged 40-80 ns per call over a job's first 65536
 * calls.  Transparent huge pages where the system allows them on request
 * (fewer faults now, fewer TLB misses later).  Both are advice: when the
 * kernel refuses, the pages fault in as the ring fills, as before. */
static void prefault(void *m, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(m, bytes, MADV_HUGEPAGE);
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif
    if (madvise(m, bytes, MADV_POPULATE_WRITE) != 0) {
        long page = sysconf(_SC_PAGESIZE);
        for (size_t off = 0; page > 0 && off < bytes; off += (size_t)page)
            ((volatile char *)m)[off] = 0;
    }
}

static struct ccs_ring *ring_new(void)
{
    uint64_t cap = capacity();
    size_t bytes = sizeof(struct ccs_ring) + cap * sizeof(struct ccs_record);
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        ccs_log_once(&oom_logged, CCS_LOG_WARN,
                     "cannot map a ring of %llu records (%zu bytes); calls of this thread are not recorded",
                     (unsigned long long)cap, bytes);
        return NULL;
    }
    prefault(m, bytes);
    struct ccs_ring *r = m; /* mmap memory is zeroed */
    r->mask = cap - 1;
    r->pid = (uint32_t)getpid();
    r->index = atomic_fetch_add(&nrings, 1);
    struct ccs_ring *head = atomic_load(&all_rings);
    do {
        r->next = head;
    } while (!atomic_compare_exchange_weak(&all_rings, &head, r));
    return r;
}

struct ccs_ring *ccs_ring_self_slow(void)
{
    if (self_failed)
        return NULL;
    struct ccs_ring *r = ring_new();
    if (!r)
        self_failed = 1;
    ccs_tls_ring = r;
    return r;
}

struct ccs_ring *ccs_ring_first(void) { return atomic_load(&all_rings); }

size_t ccs_ring_drain(struct ccs_ring *r, struct ccs_record *out, size_t max)
{
    /* One slot is the guard the producer may be writing at any moment
     * (index head overwrites index head - cap), so at most cap - 1
     * published records are intact. */
    uint64_t cap = r->mask + 1;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (head - tail > cap - 1) {
        atomic_fetch_add_explicit(&r->dropped, head - tail - (cap - 1), memory_order_relaxed);
        tail = head - (cap - 1);
    }
    size_t n = head - tail < max ? (size_t)(head - tail) : max;
    for (size_t i = 0; i < n; i++)
        out[i] = r->rec[(tail + i) & r->mask];
    /* The producer may have lapped us while we copied: the record it is
     * writing now (index head2) overwrites index head2 - cap, so only indices
     * above head2 - cap are intact. */
    uint64_t head2 = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t valid_from = head2 + 1 > cap ? head2 + 1 - cap : 0;
    size_t skip = 0;
    if (valid_from > tail) {
        skip = valid_from - tail < n ? (size_t)(valid_from - tail) : n;
        atomic_fetch_add_explicit(&r->dropped, skip, memory_order_relaxed);
        memmove(out, out + skip, (n - skip) * sizeof *out);
    }
    atomic_store_explicit(&r->tail, tail + n, memory_order_release);
    return n - skip;
}

size_t ccs_ring_last(struct ccs_ring *r, struct ccs_record *out, size_t n)
{
    uint64_t cap = r->mask + 1;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t avail = head < cap - 1 ? head : cap - 1; /* keep clear of the slot being written */
    if (n > avail)
        n = (size_t)avail;
    for (size_t i = 0; i < n; i++)
        out[i] = r->rec[(head - n + i) & r->mask];
    return n;
}

void ccs_ring_reset_all(void)
{
    uint32_t pid = (uint32_t)getpid();
    for (struct ccs_ring *r = atomic_load(&all_rings); r; r = r->next) {
        atomic_store(&r->tail, atomic_load(&r->head));
        atomic_store(&r->dropped, 0);
        atomic_store(&r->inflight, NULL);
        memset(r->counts, 0, sizeof r->counts);
        r->pid = pid;
    }
}
