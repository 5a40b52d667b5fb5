/*
 * boundary.c - a rank at its step boundary (step.h): coalescing writes it,
 * desync reads it into the rank's status.
 */
#include "step.h"
#include <stdatomic.h>

/* A seqlock of one writer: odd while the communicators are being written. */
static _Atomic uint32_t boundary_gen;
static _Atomic uint32_t boundary_step1;
static _Atomic uint64_t boundary_comm[CCS_BOUNDARY_COMMS];
static _Atomic uint32_t boundary_n;

void ccs_boundary_enter(uint32_t step, const uint64_t *comms, uint32_t n)
{
    if (n > CCS_BOUNDARY_COMMS)
        n = CCS_BOUNDARY_COMMS;
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_acq_rel);
    for (uint32_t i = 0; i < n; i++)
        atomic_store_explicit(&boundary_comm[i], comms[i], memory_order_relaxed);
    atomic_store_explicit(&boundary_n, n, memory_order_relaxed);
    atomic_store_explicit(&boundary_step1, step + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_release);
}

void ccs_boundary_leave(void)
{
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_acq_rel);
    atomic_store_explicit(&boundary_step1, 0, memory_order_relaxed);
    atomic_store_explicit(&boundary_n, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&boundary_gen, 1, memory_order_release);
}

uint32_t ccs_boundary_get(uint64_t *comms, uint32_t *n)
{
    for (int tries = 0; tries < 100; tries++) {
        uint32_t g = atomic_load_explicit(&boundary_gen, memory_order_acquire);
        if (g & 1)
            continue;
        uint32_t s = atomic_load_explicit(&boundary_step1, memory_order_relaxed);
        uint32_t k = atomic_load_explicit(&boundary_n, memory_order_relaxed);
        k = k > CCS_BOUNDARY_COMMS ? CCS_BOUNDARY_COMMS : k;
        for (uint32_t i = 0; i < k; i++)
            comms[i] = atomic_load_explicit(&boundary_comm[i], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&boundary_gen, memory_order_relaxed) == g) {
            *n = s ? k : 0;
            return s;
        }
    }
    *n = 0;
    return 0;
}
