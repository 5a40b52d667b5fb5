/*
 * wrapper_probe.c - a stand-in for the shim's MPI_Allreduce wrapper, built
 * by bench/job-bench.sh in several variants (-DPROBE=...) and preloaded
 * under `mpi_loop N 8 ab`, to show what a wrapper's work costs per call on
 * 2 ranks, where each call waits for the other rank:
 *
 *   bare        forwarding only (the interposed layer itself)
 *   stores      12 stores into one per-process record, before the real call
 *   stores_after the same 12 stores after the real call returns
 *   chain       12 loads added up in a chain (about 17 cycles of latency,
 *               a handful of instructions), before the real call
 *   ring_small  a 96-byte record per call into a ring of 64 records (always
 *               in the L1 cache), the ring's head published after the call
 *   ring_big    the same into a ring of 65536 records (6 MiB, the shim's
 *               default), whose lines come from outside L1 and L2
 *   ring_tls    ring_small reached as the shim reaches its rings, through a
 *               thread-local pointer (initial-exec), plus a sequence counter
 *               behind a second pointer, as a communicator's
 *
 * Not part of ccshim; only the benchmark builds it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#define BARE 0
#define STORES 1
#define STORES_AFTER 2
#define CHAIN 3
#define RING_SMALL 4
#define RING_BIG 5
#define RING_TLS 6
#ifndef PROBE
#define PROBE BARE
#endif
#if PROBE == RING_BIG
#define RECS 65536u
#else
#define RECS 64u
#endif

struct rec {
    uint64_t w[12];
};
static struct rec *ring;
static struct rec one __attribute__((unused)); /* the stores variants */
static uint64_t head;
/* ring_tls's: a communicator's counter behind a pointer, the ring's thread-local one. */
static struct counter {
    uint64_t seq;
} comm_entry, *_Atomic comm_ptr __attribute__((unused)) = &comm_entry;
static __thread struct rec *tls_ring __attribute__((tls_model("initial-exec"), unused));
static volatile uint64_t src[12], sink;
static int (*real)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

__attribute__((constructor)) static void probe_init(void)
{
    *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Allreduce");
    ring = mmap(NULL, sizeof(struct rec) * RECS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                -1, 0);
}

static inline void fill(struct rec *r, const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Comm comm)
{
    r->w[0] = head;
    r->w[1] = (uint64_t)(uintptr_t)comm;
    r->w[2] = (uint64_t)n;
    r->w[3] = (uint64_t)(uintptr_t)rb;
    r->w[4] = (uint64_t)(uintptr_t)sb;
    r->w[5] = 0;
    r->w[6] = 0;
    r->w[7] = (uint64_t)(uintptr_t)dt;
    r->w[8] = 1;
    r->w[9] = 2;
    r->w[10] = 3;
    r->w[11] = 4;
    __asm__ volatile("" ::"r"(r) : "memory");
}

int MPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
#if PROBE == BARE
    return real(sb, rb, n, dt, op, comm);
#else
#if PROBE == STORES
    fill(&one, sb, rb, n, dt, comm);
#elif PROBE == CHAIN
    uint64_t s = 0;
    for (int i = 0; i < 12; i++)
        s += src[i];
    sink = s;
#elif PROBE == RING_SMALL || PROBE == RING_BIG
    fill(&ring[head & (RECS - 1)], sb, rb, n, dt, comm);
#elif PROBE == RING_TLS
    struct rec *base = tls_ring;
    if (__builtin_expect(base == NULL, 0))
        tls_ring = base = ring;
    struct counter *c = atomic_load_explicit(&comm_ptr, memory_order_relaxed);
    uint64_t seq = c->seq + 1;
    c->seq = seq;
    fill(&base[head & (RECS - 1)], sb, rb, n, dt, comm);
    base[head & (RECS - 1)].w[0] = seq;
#endif
    int rc = real(sb, rb, n, dt, op, comm);
#if PROBE == STORES_AFTER
    fill(&one, sb, rb, n, dt, comm);
#endif
    __atomic_store_n(&head, head + 1, __ATOMIC_RELEASE);
    return rc;
#endif
}
