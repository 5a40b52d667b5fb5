/*
 * nccl_redop.c - the table of PreMulSum operators (see nccl_redop.h).
 *
 * Each entry is a tiny seqlock: a writer (holding the mutex) makes the
 * counter odd, writes the fields, makes it even again; a reader copies the
 * fields between two reads of an even, unchanged counter.  The fields are
 * relaxed atomics so that a reader racing a writer is not a data race; the
 * counter check throws such a torn copy away.
 */
#include "nccl_redop.h"
#include "log.h"
#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct entry {
    _Atomic uint32_t gen; /* odd while being written */
    _Atomic int used;
    _Atomic uintptr_t comm;
    _Atomic int op;
    _Atomic int nccl_dtype;
    _Atomic int host_scalar;
    _Atomic uint64_t scalar; /* the 8 scalar bytes */
    _Atomic uintptr_t dev_ptr;
};

static struct entry table[CCS_NCCL_REDOPS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int full_logged;

static void write_begin(struct entry *e)
{
    atomic_fetch_add_explicit(&e->gen, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void write_end(struct entry *e)
{
    atomic_fetch_add_explicit(&e->gen, 1, memory_order_release);
}

int ccs_nccl_redop_add(const struct ccs_nccl_premul *p)
{
    uint64_t scalar;
    memcpy(&scalar, p->scalar, sizeof scalar);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < CCS_NCCL_REDOPS; i++) {
        struct entry *e = &table[i];
        if (atomic_load_explicit(&e->used, memory_order_relaxed))
            continue;
        write_begin(e);
        atomic_store_explicit(&e->comm, p->comm, memory_order_relaxed);
        atomic_store_explicit(&e->op, p->op, memory_order_relaxed);
        atomic_store_explicit(&e->nccl_dtype, p->nccl_dtype, memory_order_relaxed);
        atomic_store_explicit(&e->host_scalar, p->host_scalar, memory_order_relaxed);
        atomic_store_explicit(&e->scalar, scalar, memory_order_relaxed);
        atomic_store_explicit(&e->dev_ptr, (uintptr_t)p->dev_ptr, memory_order_relaxed);
        atomic_store_explicit(&e->used, 1, memory_order_relaxed);
        write_end(e);
        pthread_mutex_unlock(&lock);
        return 0;
    }
    pthread_mutex_unlock(&lock);
    ccs_log_once(&full_logged, CCS_LOG_WARN,
                 "more than %d live ncclRedOpCreatePreMulSum operators; operator %d is recorded as a user op",
                 CCS_NCCL_REDOPS, p->op);
    return -1;
}

/* Copies entry E if it is stable and in use; returns 1 when it matched. */
static int read_entry(struct entry *e, uintptr_t comm, int op, struct ccs_nccl_premul *out)
{
    for (int tries = 0; tries < 64; tries++) {
        uint32_t g = atomic_load_explicit(&e->gen, memory_order_acquire);
        if (g & 1)
            continue;
        struct ccs_nccl_premul copy;
        uint64_t scalar;
        int used = atomic_load_explicit(&e->used, memory_order_relaxed);
        copy.comm = atomic_load_explicit(&e->comm, memory_order_relaxed);
        copy.op = atomic_load_explicit(&e->op, memory_order_relaxed);
        copy.nccl_dtype = atomic_load_explicit(&e->nccl_dtype, memory_order_relaxed);
        copy.host_scalar = atomic_load_explicit(&e->host_scalar, memory_order_relaxed);
        scalar = atomic_load_explicit(&e->scalar, memory_order_relaxed);
        copy.dev_ptr = (const void *)atomic_load_explicit(&e->dev_ptr, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->gen, memory_order_relaxed) != g)
            continue;
        if (!used || copy.comm != comm || copy.op != op)
            return 0;
        memcpy(copy.scalar, &scalar, sizeof scalar);
        if (out)
            *out = copy;
        return 1;
    }
    return 0; /* a writer kept it busy: not this caller's operator */
}

int ccs_nccl_redop_find(uintptr_t comm, int op, struct ccs_nccl_premul *out)
{
    for (size_t i = 0; i < CCS_NCCL_REDOPS; i++) {
        struct entry *e = &table[i];
        /* Cheap filter before the consistent copy. */
        if (atomic_load_explicit(&e->op, memory_order_relaxed) != op ||
            atomic_load_explicit(&e->comm, memory_order_relaxed) != comm)
            continue;
        if (read_entry(e, comm, op, out))
            return 1;
    }
    return 0;
}

int ccs_nccl_redop_remove(uintptr_t comm, int op, struct ccs_nccl_premul *removed)
{
    int found = -1;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < CCS_NCCL_REDOPS; i++) {
        struct entry *e = &table[i];
        if (!atomic_load_explicit(&e->used, memory_order_relaxed) ||
            atomic_load_explicit(&e->comm, memory_order_relaxed) != comm ||
            atomic_load_explicit(&e->op, memory_order_relaxed) != op)
            continue;
        if (removed)
            read_entry(e, comm, op, removed);
        write_begin(e);
        atomic_store_explicit(&e->used, 0, memory_order_relaxed);
        atomic_store_explicit(&e->comm, 0, memory_order_relaxed);
        write_end(e);
        found = 0;
        break;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void ccs_nccl_redop_forget_comm(uintptr_t comm)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < CCS_NCCL_REDOPS; i++) {
        struct entry *e = &table[i];
        if (!atomic_load_explicit(&e->used, memory_order_relaxed) ||
            atomic_load_explicit(&e->comm, memory_order_relaxed) != comm)
            continue;
        write_begin(e);
        atomic_store_explicit(&e->used, 0, memory_order_relaxed);
        atomic_store_explicit(&e->comm, 0, memory_order_relaxed);
        write_end(e);
    }
    pthread_mutex_unlock(&lock);
}
