/*
 * comm.c - the communicator table: local handle -> identity and sequence
 * counters.  Open addressing over a static array; lookups are lock-free
 * (acquire loads), insertions and retirements take a mutex (they happen at
 * communicator creation and destruction only).  Retired slots become
 * tombstones so probe chains stay intact; handles may be reused.
 */
#include "ccs_kinds.h"
#include "clock.h"
#include "comm.h"
#include "fingerprint.h"
#include "log.h"
#include "process.h"
#include "record.h"
#include "trace_format.h"
#include <pthread.h>
#include <string.h>

#define TOMBSTONE ((uintptr_t)1)

static struct ccs_comm table[CCS_COMM_SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int full_logged, adopt_logged;
static _Atomic uint64_t adopted;

/* Every definition ever registered, in order, for the trace writer: a
 * communicator freed before the writer's next pass must still be described. */
#define MAX_DEFS 16384
static struct ccs_trace_comm defs[MAX_DEFS];
static _Atomic size_t ndefs;
static int defs_logged;

/* The final counts of retired communicators, newest last, for desync's
 * collector: it learns that a communicator is gone only when its entry has
 * left the table, a period later, by which time the entry may hold another
 * communicator.  Written under LOCK at retirement (cold); read lock-free as
 * a seqlock (ID cleared while the slot is rewritten). */
#define NFINAL 1024
static struct {
    _Atomic uint64_t id, seq, hash;
} finals[NFINAL];
static _Atomic uint64_t nfinal;

static inline size_t slot_of(int backend, uintptr_t handle)
{
    return ccs_slot_hash((uint64_t)handle ^ ((uint64_t)backend << 62), CCS_COMM_SLOT_BITS);
}

struct ccs_comm *ccs_comm_lookup(int backend, uintptr_t handle)
{
    size_t i = slot_of(backend, handle);
    for (size_t n = 0; n < CCS_COMM_SLOTS; n++, i = (i + 1) & (CCS_COMM_SLOTS - 1)) {
        uintptr_t h = atomic_load_explicit(&table[i].handle, memory_order_acquire);
        if (h == 0)
            return NULL;
        if (h == handle && table[i].backend == backend)
            return &table[i];
    }
    return NULL;
}

/* C's three step turns, none known (a fresh communicator, or a forked
 * child's half-written one). */
static void clear_turns(struct ccs_comm *c)
{
    for (int i = 0; i < 3; i++) {
        atomic_store_explicit(&c->turn[i].step, 0, memory_order_relaxed);
        atomic_store_explicit(&c->turn[i].seq0, 0, memory_order_relaxed);
        atomic_store_explicit(&c->turn[i].kinds, 0, memory_order_relaxed);
    }
}

struct ccs_comm *ccs_comm_register(int backend, uintptr_t handle, uint64_t id, uint64_t parent, int rank, int size,
                                   int how, int color)
{
    return ccs_comm_register_inter(backend, handle, id, parent, rank, size, 0, how, color);
}

struct ccs_comm *ccs_comm_register_inter(int backend, uintptr_t handle, uint64_t id, uint64_t parent, int rank,
                                         int size, int remote_size, int how, int color)
{
    struct ccs_comm *c = NULL;
    if (handle <= TOMBSTONE)
        return NULL;
    pthread_mutex_lock(&lock);
    /* A live entry for the same handle means the job freed it behind our
     * back (or through a call we do not intercept): replace it. */
    struct ccs_comm *old = ccs_comm_lookup(backend, handle);
    if (old)
        atomic_store_explicit(&old->handle, TOMBSTONE, memory_order_release);
    size_t i = slot_of(backend, handle);
    for (size_t n = 0; n < CCS_COMM_SLOTS; n++, i = (i + 1) & (CCS_COMM_SLOTS - 1)) {
        uintptr_t h = atomic_load_explicit(&table[i].handle, memory_order_relaxed);
        if (h == 0 || h == TOMBSTONE) {
            c = &table[i];
            break;
        }
    }
    if (!c) {
        pthread_mutex_unlock(&lock);
        ccs_log_once(&full_logged, CCS_LOG_WARN,
                     "communicator table full (%d live communicators); calls on new ones are not recorded",
                     CCS_COMM_SLOTS);
        return NULL;
    }
    /* Fill every field before publishing the handle. */
    c->id = id;
    c->parent = parent;
    c->rank = rank;
    c->size = size;
    c->backend = (uint16_t)backend;
    c->how = (uint16_t)how;
    c->color = color;
    c->t_created = ccs_ticks();
    c->remote_size = remote_size > 0 ? remote_size : 0;
    c->agreed = c->remote_size == 0;
    c->nonblocking = 0;
    c->feature[0] = c->feature[1] = NULL;
    atomic_store_explicit(&c->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&c->p2p, 0, memory_order_relaxed);
    atomic_store_explicit(&c->hash, 0, memory_order_relaxed);
    atomic_store_explicit(&c->step_at, UINT32_MAX, memory_order_relaxed);
    atomic_store_explicit(&c->kinds, 0, memory_order_relaxed);
    atomic_store_explicit(&c->turn_gen, 0, memory_order_relaxed);
    clear_turns(c);
    atomic_store_explicit(&c->children, 0, memory_order_relaxed);
    atomic_store_explicit(&c->handle, handle, memory_order_release);
    size_t n = atomic_load_explicit(&ndefs, memory_order_relaxed);
    if (n < MAX_DEFS) {
        defs[n] = (struct ccs_trace_comm){.id = id, .parent = parent, .handle = handle, .rank = rank,
                                          .size = size, .backend = (uint16_t)backend, .how = (uint16_t)how,
                                          .color = color, .t_created = c->t_created};
        atomic_store_explicit(&ndefs, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&lock);
    if (n >= MAX_DEFS)
        ccs_log_once(&defs_logged, CCS_LOG_WARN,
                     "more than %d communicators created; later ones are missing from the trace", MAX_DEFS);
    return c;
}

void ccs_comm_step_turn(struct ccs_comm *c, uint32_t step, uint64_t seq)
{
#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)
    uint32_t g = LD(c->turn_gen);
    ST(c->turn_gen, g + 1); /* odd: being written */
    atomic_thread_fence(memory_order_release);
    ST(c->turn[2].step, LD(c->turn[1].step));
    ST(c->turn[2].seq0, LD(c->turn[1].seq0));
    ST(c->turn[2].kinds, LD(c->turn[1].kinds));
    ST(c->turn[1].step, LD(c->turn[0].step));
    ST(c->turn[1].seq0, LD(c->turn[0].seq0));
    ST(c->turn[1].kinds, LD(c->kinds)); /* the step that ended: its kinds were live */
    ST(c->turn[0].step, step);
    ST(c->turn[0].seq0, seq);
    ST(c->kinds, 0);
    ST(c->step_at, step);
    atomic_store_explicit(&c->turn_gen, g + 2, memory_order_release);
}

void ccs_comm_turns(struct ccs_comm *c, struct ccs_comm_turns *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t g = atomic_load_explicit(&c->turn_gen, memory_order_acquire);
        if (g & 1)
            continue;
        for (int i = 0; i < 3; i++) {
            out->step[i] = LD(c->turn[i].step);
            out->seq0[i] = LD(c->turn[i].seq0);
            out->kinds[i] = i ? LD(c->turn[i].kinds) : LD(c->kinds);
        }
        atomic_thread_fence(memory_order_acquire);
        if (LD(c->turn_gen) == g)
            return;
    }
    memset(out, 0, sizeof *out); /* never consistent: nothing known */
#undef LD
#undef ST
}

void ccs_comm_forked(void)
{
    for (size_t i = 0; i < CCS_COMM_SLOTS; i++) {
        struct ccs_comm *c = &table[i];
        uint32_t g = atomic_load_explicit(&c->turn_gen, memory_order_relaxed);
        if (!(g & 1))
            continue;
        clear_turns(c);
        atomic_store_explicit(&c->kinds, 0, memory_order_relaxed);
        atomic_store_explicit(&c->turn_gen, g + 1, memory_order_release);
    }
}

void ccs_comm_set_rank(struct ccs_comm *c, int rank, int size)
{
    pthread_mutex_lock(&lock);
    c->rank = rank;
    c->size = size;
    /* Its definition too, if the trace writer has not taken it yet. */
    size_t n = atomic_load_explicit(&ndefs, memory_order_relaxed);
    for (size_t i = n; i-- > 0;)
        if (defs[i].id == c->id) {
            defs[i].rank = rank;
            defs[i].size = size;
            break;
        }
    pthread_mutex_unlock(&lock);
}

void ccs_comm_retire(struct ccs_comm *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&lock);
    uint64_t n = atomic_load_explicit(&nfinal, memory_order_relaxed);
    size_t k = (size_t)(n % NFINAL);
    atomic_store_explicit(&finals[k].id, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&finals[k].seq, atomic_load_explicit(&c->seq, memory_order_relaxed), memory_order_relaxed);
    atomic_store_explicit(&finals[k].hash, atomic_load_explicit(&c->hash, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&finals[k].id, c->id, memory_order_release);
    atomic_store_explicit(&nfinal, n + 1, memory_order_release);
    atomic_store_explicit(&c->handle, TOMBSTONE, memory_order_release);
    pthread_mutex_unlock(&lock);
}

int ccs_comm_final(uint64_t id, uint64_t *seq, uint64_t *hash)
{
    uint64_t n = atomic_load_explicit(&nfinal, memory_order_acquire);
    for (uint64_t i = n; id && i > 0 && n - i < NFINAL; i--) {
        size_t k = (size_t)((i - 1) % NFINAL);
        if (atomic_load_explicit(&finals[k].id, memory_order_acquire) != id)
            continue;
        uint64_t s = atomic_load_explicit(&finals[k].seq, memory_order_relaxed);
        uint64_t h = atomic_load_explicit(&finals[k].hash, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&finals[k].id, memory_order_relaxed) != id)
            return -1; /* rewritten while read: retired more than NFINAL ago */
        *seq = s;
        *hash = h;
        return 0;
    }
    return -1;
}

uint64_t ccs_comm_child_id(struct ccs_comm *parent, int how, int64_t discriminator)
{
    uint64_t pid = parent ? parent->id : 0;
    uint64_t n = parent ? atomic_fetch_add_explicit(&parent->children, 1, memory_order_relaxed) : 0;
    uint64_t h = ccs_hash_mix(pid, (uint64_t)how);
    h = ccs_hash_mix(h, n);
    return ccs_hash_mix(h, (uint64_t)discriminator) | 1; /* never 0 */
}

struct ccs_comm *ccs_comm_adopt(int backend, uintptr_t handle, int rank, int size)
{
    return ccs_comm_adopt_inter(backend, handle, rank, size, 0);
}

struct ccs_comm *ccs_comm_adopt_inter(int backend, uintptr_t handle, int rank, int size, int remote_size)
{
    uint64_t n = atomic_fetch_add(&adopted, 1);
    uint64_t id = ccs_hash_mix(ccs_hash_bytes(ccs_hostname(), strlen(ccs_hostname()), (uint64_t)ccs_world_rank()),
                               0xadull << 32 | n);
    struct ccs_comm *c = ccs_comm_register_inter(backend, handle, id | 1, 0, rank, size, remote_size, 0, -1);
    if (c) {
        c->agreed = 0;
        ccs_log_once(&adopt_logged, CCS_LOG_INFO,
                     "%s communicator %#lx was created by a call ccshim does not intercept; its calls are "
                     "counted under a local identity and not compared across ranks",
                     ccs_backend_name((unsigned)backend), (unsigned long)handle);
    }
    return c;
}

void ccs_comm_foreach(void (*fn)(struct ccs_comm *, void *), void *arg)
{
    for (size_t i = 0; i < CCS_COMM_SLOTS; i++) {
        uintptr_t h = atomic_load_explicit(&table[i].handle, memory_order_acquire);
        if (h > TOMBSTONE)
            fn(&table[i], arg);
    }
}

/* The torch.distributed groups described so far (ccs_comm_define_group):
 * a job has a few; past this many the rest are not. */
#define MAX_GROUPS 256
static uint64_t groups[MAX_GROUPS];
static size_t ngroups;

int ccs_comm_define_group(uint64_t id, int rank, int size)
{
    if (!id || size <= 0 || rank < 0 || rank >= size)
        return -1;
    pthread_mutex_lock(&lock);
    int rc = -1;
    for (size_t i = 0; i < ngroups; i++)
        if (groups[i] == id)
            rc = 0;
    size_t n = atomic_load_explicit(&ndefs, memory_order_relaxed);
    if (rc != 0 && ngroups < MAX_GROUPS && n < MAX_DEFS) {
        groups[ngroups++] = id;
        defs[n] = (struct ccs_trace_comm){.id = id,
                                          .handle = 0,
                                          .rank = rank,
                                          .size = size,
                                          .backend = CCS_BE_TORCH,
                                          .how = CCS_KIND_COMM_INIT,
                                          .color = -1,
                                          .t_created = ccs_ticks()};
        atomic_store_explicit(&ndefs, n + 1, memory_order_release);
        rc = 0;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

size_t ccs_comm_defs(size_t from, struct ccs_trace_comm *out, size_t max)
{
    size_t n = atomic_load_explicit(&ndefs, memory_order_acquire), k = 0;
    for (size_t i = from; i < n && k < max; i++)
        out[k++] = defs[i];
    return k;
}
