/*
 * ring.c - one ring of records per thread, mapped on the thread's first
 * recorded call.  Single producer (the thread); readers (the trace writer,
 * the desync collector, the flight recorder) each with a cursor of their
 * own, through ccs_ring_read; the producer never waits and never takes a
 * lock.  The pages are
 * touched when the ring is mapped, not one by one on the hot path.
 */
#include "ccs_config.h"
#include "log.h"
#include "ring.h"
#include "trace_format.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Atomic(struct ccs_ring *) all_rings;
static atomic_uint nrings;
__thread struct ccs_ring *ccs_tls_ring __attribute__((tls_model("initial-exec")));
__thread struct ccs_ring *ccs_tls_call_ring __attribute__((tls_model("initial-exec")));
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
    r->thread_word = CCS_AT((uint8_t)r->index, 3, 1); /* the record's thread byte */
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

/* One reader for every consumer of a ring (the trace writer through
 * ccs_ring_drain, the desync collector with cursors of its own, the flight
 * recorder through ccs_ring_last): the only place that knows which records
 * a lapping producer may have overwritten. */
size_t ccs_ring_read(struct ccs_ring *r, struct ccs_ring_cursor *c, struct ccs_record *out, size_t max)
{
    uint64_t cap = r->mask + 1;
    uint64_t from = atomic_load_explicit(&c->next, memory_order_relaxed);
    for (;;) {
        /* One slot is the guard the producer may be writing at any moment
         * (index head overwrites index head - cap), so at most cap - 1
         * published records are intact. */
        uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
        if (head - from > cap - 1) {
            atomic_fetch_add_explicit(&c->lost, head - from - (cap - 1), memory_order_relaxed);
            from = head - (cap - 1);
        }
        size_t n = head - from < max ? (size_t)(head - from) : max;
        for (size_t i = 0; i < n; i++) {
            /* The lines were just written by another core: keep several
             * transfers in flight rather than one at a time. */
            __builtin_prefetch(&r->rec[(from + i + 8) & r->mask]);
            out[i] = r->rec[(from + i) & r->mask];
        }
        /* The producer may have lapped us while we copied: the record it is
         * writing now (index head2) overwrites index head2 - cap, so only
         * indices above head2 - cap are intact.  The fence keeps the copy's
         * loads before the second look at the head (a seqlock's reader). */
        atomic_thread_fence(memory_order_acquire);
        uint64_t head2 = atomic_load_explicit(&r->head, memory_order_relaxed);
        uint64_t valid_from = head2 + 1 > cap ? head2 + 1 - cap : 0;
        size_t torn = 0;
        if (valid_from > from) {
            torn = valid_from - from < n ? (size_t)(valid_from - from) : n;
            atomic_fetch_add_explicit(&c->lost, torn, memory_order_relaxed);
            memmove(out, out + torn, (n - torn) * sizeof *out);
        }
        from += n;
        atomic_store_explicit(&c->next, from, memory_order_release);
        /* 0 only when nothing is new: a copy overwritten whole is read again
         * from where the producer is now. */
        if (n == 0 || torn < n)
            return n - torn;
    }
}

size_t ccs_ring_reader_pass(struct ccs_ring_reader *rd, uint64_t tail, struct ccs_record *buf, size_t max,
                            int (*each)(void *ctx, struct ccs_record *recs, size_t n), void *ctx)
{
    uint32_t pid = (uint32_t)getpid();
    size_t unread = 0;
    for (struct ccs_ring *r = atomic_load(&all_rings); r; r = r->next) {
        if (r->pid != pid)
            continue;
        if (r->index >= CCS_RING_READER_RINGS) {
            unread++;
            continue;
        }
        struct ccs_ring_cursor *c = &rd->cursor[r->index];
        uint64_t left = UINT64_MAX;
        if (tail) {
            uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
            uint64_t next = atomic_load_explicit(&c->next, memory_order_relaxed);
            if (head > next && head - next > tail)
                atomic_store_explicit(&c->next, head - tail, memory_order_relaxed);
            left = tail; /* what a producer adds while this pass reads is the next pass's */
        }
        size_t k;
        while (left > 0 && (k = ccs_ring_read(r, c, buf, left < max ? (size_t)left : max)) > 0) {
            left -= k;
            if (each(ctx, buf, k) != 0)
                return unread;
        }
    }
    return unread;
}

uint64_t ccs_ring_reader_lost(const struct ccs_ring_reader *rd)
{
    uint64_t n = 0;
    for (size_t i = 0; i < CCS_RING_READER_RINGS; i++)
        n += atomic_load_explicit(&rd->cursor[i].lost, memory_order_relaxed);
    return n;
}

void ccs_ring_reader_at_end(struct ccs_ring_reader *rd)
{
    memset(rd->cursor, 0, sizeof rd->cursor);
    for (struct ccs_ring *r = atomic_load(&all_rings); r; r = r->next)
        if (r->index < CCS_RING_READER_RINGS)
            ccs_ring_cursor_at_end(r, &rd->cursor[r->index]);
}

size_t ccs_ring_drain(struct ccs_ring *r, struct ccs_record *out, size_t max)
{
    return ccs_ring_read(r, &r->drain, out, max);
}

void ccs_ring_cursor_at_end(struct ccs_ring *r, struct ccs_ring_cursor *c)
{
    atomic_store_explicit(&c->next, atomic_load_explicit(&r->head, memory_order_acquire), memory_order_relaxed);
    atomic_store_explicit(&c->lost, 0, memory_order_relaxed);
}

size_t ccs_ring_last(struct ccs_ring *r, struct ccs_record *out, size_t n)
{
    uint64_t cap = r->mask + 1;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t avail = head < cap - 1 ? head : cap - 1; /* keep clear of the slot being written */
    if (n > avail)
        n = (size_t)avail;
    struct ccs_ring_cursor c = {.next = head - n};
    return ccs_ring_read(r, &c, out, n);
}

void ccs_ring_reset_all(void)
{
    uint32_t pid = (uint32_t)getpid();
    for (struct ccs_ring *r = atomic_load(&all_rings); r; r = r->next) {
        ccs_ring_cursor_at_end(r, &r->drain);
        atomic_store(&r->inflight, NULL);
        memset(r->counts, 0, sizeof r->counts);
        r->pid = pid;
    }
    /* The forking thread's next call goes through ccs_call_first, which
     * starts the child's features (ccs_features_fork_child). */
    ccs_tls_call_ring = NULL;
}
