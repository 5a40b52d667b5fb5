/*
 * fake_nccl_shm.c - the shared segment, barrier and bounded waits of the
 * test-only host NCCL (see fake_nccl.h).
 */
#include "fake_nccl.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread char last_error[256];

void fn_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const char *fn_last_error(void)
{
    return last_error;
}

double fn_timeout(void)
{
    const char *s = getenv("FAKENCCL_TIMEOUT");
    double t = s ? atof(s) : 0;
    return t > 0 ? t : 60.0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fn_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

_Atomic int fn_aborted;

ncclResult_t fn_wait_change(_Atomic uint32_t *word, uint32_t old, int short_wait)
{
    double deadline = now_s() + fn_timeout();
    /* A short spin first: with a few ranks on a few cores the partner is
     * often about to arrive. */
    for (int i = 0; i < 64; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return ncclSuccess;
        sched_yield();
    }
    struct timespec ts = {0, short_wait ? 1000000 : 20000000};
    while (atomic_load_explicit(word, memory_order_acquire) == old) {
        if (atomic_load(&fn_aborted)) {
            fn_set_error("fake NCCL: the communicator was aborted while this call waited");
            return ncclRemoteError;
        }
        if (now_s() > deadline) {
            fn_set_error("fake NCCL: gave up waiting for the other ranks after %.0f s", fn_timeout());
            return ncclSystemError;
        }
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, old, &ts, NULL, 0);
        if (short_wait)
            return ncclSuccess; /* the caller re-checks its own condition */
    }
    return ncclSuccess;
}

ncclResult_t fn_barrier(struct ncclComm *c)
{
    struct fn_hdr *h = c->hdr;
    uint32_t g = atomic_load_explicit(&h->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&h->count, 1, memory_order_acq_rel) == (uint32_t)c->nranks - 1) {
        atomic_store_explicit(&h->count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->gen, 1, memory_order_release);
        fn_wake(&h->gen);
        return ncclSuccess;
    }
    return fn_wait_change(&h->gen, g, 0);
}

static size_t layout(int n, size_t *rings, size_t *slots, size_t *ring_data)
{
    *rings = 4096;
    *slots = *rings + (size_t)n * (size_t)n * sizeof(struct fn_ring);
    *slots = (*slots + 4095) & ~(size_t)4095;
    *ring_data = *slots + (size_t)n * FN_SLOT_BYTES;
    return *ring_data + (size_t)n * (size_t)n * FN_RING_BYTES;
}

ncclResult_t fn_attach(struct ncclComm *c, const char *name, int nranks, int rank)
{
    size_t rings, slots, ring_data, len = layout(nranks, &rings, &slots, &ring_data);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        fn_set_error("fake NCCL: shm_open(%s): %s", name, strerror(errno));
        return ncclSystemError;
    }
    /* Every member sets the same size; a later one changes nothing. */
    if (ftruncate(fd, (off_t)len) != 0) {
        fn_set_error("fake NCCL: ftruncate(%s, %zu): %s", name, len, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fn_set_error("fake NCCL: mmap(%s): %s", name, strerror(errno));
        return ncclSystemError;
    }
    snprintf(c->name, sizeof c->name, "%s", name);
    c->base = p;
    c->len = len;
    c->rank = rank;
    c->nranks = nranks;
    c->hdr = p;
    c->rings = (struct fn_ring *)((char *)p + rings);
    c->slots = (unsigned char *)p + slots;
    c->ring_data = (unsigned char *)p + ring_data;
    int32_t expect = 0;
    if (!atomic_compare_exchange_strong(&c->hdr->nranks, &expect, nranks) && expect != nranks) {
        fn_set_error("fake NCCL: rank %d says %d ranks, another member said %d", rank, nranks, (int)expect);
        fn_detach(c);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

void fn_detach(struct ncclComm *c)
{
    if (c->base)
        munmap(c->base, c->len);
    c->base = NULL;
}

unsigned char *fn_slot(struct ncclComm *c, int rank)
{
    return c->slots + (size_t)rank * FN_SLOT_BYTES;
}
