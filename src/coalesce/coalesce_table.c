/*
 * coalesce_table.c - the reduction identities and the decision for one call.
 *
 * A fixed table of CCS_COALESCE_SLOTS entries, open addressing on a hash of
 * (communicator, buffers, count, datatype, op, scalar).  Lookups take no
 * lock; inserting a new identity (first sight, once per identity) takes a
 * mutex so that each gets its per-communicator ordinal without a race.
 * An identity that does not fit is passed through and the overflow logged
 * once.
 *
 * The counters of one identity are only touched by the calls on its
 * communicator, which MPI and NCCL require to be issued one at a time, and
 * by the step marker: relaxed loads and stores are enough.
 */
#include "ccs_config.h"
#include "coalesce.h"
#include "log.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include "process.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct ccs_coal_id table[CCS_COALESCE_SLOTS];
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;
static int full_logged;

static uint64_t key_hash(uint64_t comm, uintptr_t send, uintptr_t recv, uint64_t count, unsigned dtype,
                         unsigned op, uint64_t scalar)
{
    uint64_t h = ccs_hash_mix(0x636f616c /* "coal" */, comm);
    h = ccs_hash_mix(h, send);
    h = ccs_hash_mix(h, recv);
    h = ccs_hash_mix(h, count);
    h = ccs_hash_mix(h, (uint64_t)dtype << 8 | op);
    h = ccs_hash_mix(h, scalar);
    return h ? h : 1;
}

static int same(const struct ccs_coal_id *e, uint64_t comm, uintptr_t handle, uintptr_t send, uintptr_t recv,
                uint64_t count, unsigned dtype, unsigned op, uint64_t scalar)
{
    return e->comm == comm && e->handle == handle && e->send == send && e->recv == recv && e->count == count &&
           e->dtype == dtype && e->op == op && e->scalar == scalar;
}

/* Slow path: claims a free slot for a new identity, under the mutex. */
static struct ccs_coal_id *insert(uint64_t h, uint64_t comm, uintptr_t handle, int size, uintptr_t send,
                                  uintptr_t recv, uint64_t count, unsigned dtype, unsigned op, uint64_t scalar,
                                  unsigned backend)
{
    struct ccs_coal_id *found = NULL;
    uint32_t ordinal = 0;
    pthread_mutex_lock(&insert_lock);
    size_t i = (size_t)(h & (CCS_COALESCE_SLOTS - 1));
    for (size_t n = 0; n < CCS_COALESCE_SLOTS; n++, i = (i + 1) & (CCS_COALESCE_SLOTS - 1)) {
        struct ccs_coal_id *e = &table[i];
        uint64_t eh = atomic_load_explicit(&e->hash, memory_order_acquire);
        if (eh == h && same(e, comm, handle, send, recv, count, dtype, op, scalar)) {
            found = e; /* another thread inserted it meanwhile */
            break;
        }
        if (eh == 0) {
            /* The step of the communicator's first identity: its first
             * eligible all-reduce, issued in the same step on every member
             * (an identity's own first step is not: it depends on the
             * rank's allocator). */
            uint32_t comm_first = (uint32_t)ccs_step_now();
            for (size_t j = 0; j < CCS_COALESCE_SLOTS; j++)
                if (atomic_load_explicit(&table[j].hash, memory_order_relaxed) && table[j].comm == comm &&
                    table[j].handle == handle) {
                    if (!ordinal++ || table[j].comm_first < comm_first)
                        comm_first = table[j].comm_first;
                }
            e->comm = comm;
            e->handle = handle;
            e->size = size;
            e->send = send;
            e->recv = recv;
            e->count = count;
            e->scalar = scalar;
            e->dtype = (uint8_t)dtype;
            e->op = (uint8_t)op;
            e->backend = (uint8_t)backend;
            e->ordinal = ordinal;
            e->agreed_ord = ordinal;
            e->seen_step1 = 0;
            e->agree_waits = 0;
            e->comm_first = comm_first;
            e->learned = 0;
            e->learn_run = 0;
            e->agree_failed = 0;
            e->completions = 0;
            atomic_store_explicit(&e->stream, 0, memory_order_relaxed);
            atomic_store_explicit(&e->aux, -1, memory_order_relaxed);
            const struct ccs_coalesce_policy *p = ccs_coalesce_policy();
            atomic_store_explicit(&e->period, p->mode == CCS_COALESCE_EVERY ? p->every : 0, memory_order_relaxed);
            atomic_store_explicit(&e->pending, 0, memory_order_relaxed);
            atomic_store_explicit(&e->in_step, 0, memory_order_relaxed);
            atomic_store_explicit(&e->deferred, 0, memory_order_relaxed);
            atomic_store_explicit(&e->real, 0, memory_order_relaxed);
            atomic_store_explicit(&e->hash, h, memory_order_release);
            found = e;
            break;
        }
    }
    pthread_mutex_unlock(&insert_lock);
    if (!found)
        ccs_log_once(&full_logged, CCS_LOG_WARN,
                     "coalescing: more than %d reduction identities; the others pass through uncoalesced",
                     CCS_COALESCE_SLOTS);
    return found;
}

struct ccs_coal_id *ccs_coalesce_identity(uint64_t comm, uintptr_t handle, int size, const void *sendp,
                                          const void *recvp, uint64_t count, unsigned dtype, unsigned op,
                                          uint64_t scalar, unsigned backend)
{
    uintptr_t send = (uintptr_t)sendp, recv = (uintptr_t)recvp;
    uint64_t h = key_hash(comm, send, recv, count, dtype, op, scalar) ^ handle;
    h = h ? h : 1;
    size_t i = (size_t)(h & (CCS_COALESCE_SLOTS - 1));
    for (size_t n = 0; n < CCS_COALESCE_SLOTS; n++, i = (i + 1) & (CCS_COALESCE_SLOTS - 1)) {
        struct ccs_coal_id *e = &table[i];
        uint64_t eh = atomic_load_explicit(&e->hash, memory_order_acquire);
        if (eh == 0)
            break;
        if (eh == h && same(e, comm, handle, send, recv, count, dtype, op, scalar))
            return e;
    }
    return insert(h, comm, handle, size, send, recv, count, dtype, op, scalar, backend);
}

/* The helper's mode: every call real; the first of each of the helper's
 * steps carries the mini-batches it made DDP skip (counted, flagged). */
static enum ccs_coalesce_action helper_decide(struct ccs_coal_id *id)
{
    uint32_t gen, skipped;
    ccs_coalesce_helper_step(&gen, &skipped);
    if (id->helper_gen == gen || !skipped)
        return CCS_COALESCE_PASS;
    id->helper_gen = gen;
    atomic_fetch_add_explicit(&id->helper_avoided, skipped, memory_order_relaxed);
    atomic_fetch_add_explicit(&id->helper_real, 1, memory_order_relaxed);
    return CCS_COALESCE_REAL;
}

enum ccs_coalesce_action ccs_coalesce_decide(struct ccs_coal_id *id)
{
    atomic_store_explicit(&id->in_step, atomic_load_explicit(&id->in_step, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (atomic_load_explicit(&ccs_coalesce_helper_on, memory_order_relaxed))
        return helper_decide(id);
    uint32_t period = atomic_load_explicit(&id->period, memory_order_relaxed);
    if (period < 2)
        return CCS_COALESCE_PASS;
    /* every:N under the PyTorch helper: nothing deferred in the step of
     * the communicator's first all-reduce.  DDP rebuilds its buckets in its
     * first iteration, after the first backward (step 0 as a rule; the
     * first step(closure) runs its backward passes after the step marker
     * that opens it, so step 1 there); a rank whose allocator hands the
     * freed buffer to the new bucket would go on counting that identity's
     * cycle where another starts a new one, and the two would defer
     * different calls.  From the next step on (a step that ends is
     * completed, so every cycle starts at its first call) every identity
     * starts its cycle at the same call on every rank.  The communicator's
     * first step, not the identity's: an identity first seen later (a
     * fresh tensor at an address one rank had used and the other had not)
     * would otherwise be passed on one rank and deferred on the other.
     * (auto has no period before an identity's third step.) */
    if (ccs_cfg.torch_helper && ccs_step_now() == id->comm_first)
        return CCS_COALESCE_PASS;
    uint32_t k = atomic_load_explicit(&id->pending, memory_order_relaxed) + 1;
    if (k < period) {
        atomic_store_explicit(&id->pending, k, memory_order_relaxed);
        atomic_store_explicit(&id->deferred, atomic_load_explicit(&id->deferred, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return CCS_COALESCE_DEFER;
    }
    atomic_store_explicit(&id->pending, 0, memory_order_relaxed);
    atomic_store_explicit(&id->real, atomic_load_explicit(&id->real, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return CCS_COALESCE_REAL;
}

void ccs_coalesce_foreach(void (*fn)(struct ccs_coal_id *, void *), void *arg)
{
    for (size_t i = 0; i < CCS_COALESCE_SLOTS; i++)
        if (atomic_load_explicit(&table[i].hash, memory_order_acquire))
            fn(&table[i], arg);
}

struct place {
    const struct ccs_coal_id *id;
    int (*among)(const struct ccs_coal_id *, const struct ccs_coal_id *);
    uint32_t n;
};

static void place_one(struct ccs_coal_id *x, void *arg)
{
    struct place *p = arg;
    if (x != p->id && x->comm == p->id->comm && x->handle == p->id->handle && x->ordinal < p->id->ordinal &&
        p->among(x, p->id))
        p->n++;
}

uint32_t ccs_coalesce_place(const struct ccs_coal_id *id,
                            int (*among)(const struct ccs_coal_id *x, const struct ccs_coal_id *id))
{
    struct place p = {id, among, 0};
    ccs_coalesce_foreach(place_one, &p);
    return p.n;
}

void ccs_coalesce_table_reset(void)
{
    pthread_mutex_lock(&insert_lock);
    for (size_t i = 0; i < CCS_COALESCE_SLOTS; i++)
        atomic_store(&table[i].hash, 0);
    pthread_mutex_unlock(&insert_lock);
}

void ccs_coalesce_describe(const struct ccs_coal_id *id, char *buf, size_t n)
{
    if (id->send == id->recv)
        snprintf(buf, n, "%s comm %016llx #%u, buffer %#llx in place, %llu x %s %s", ccs_backend_name(id->backend),
                 (unsigned long long)id->comm, id->ordinal, (unsigned long long)id->recv,
                 (unsigned long long)id->count, ccs_dtype_name(id->dtype), ccs_op_name(id->op));
    else
        snprintf(buf, n, "%s comm %016llx #%u, buffers %#llx -> %#llx, %llu x %s %s",
                 ccs_backend_name(id->backend), (unsigned long long)id->comm, id->ordinal,
                 (unsigned long long)id->send, (unsigned long long)id->recv, (unsigned long long)id->count,
                 ccs_dtype_name(id->dtype), ccs_op_name(id->op));
}
