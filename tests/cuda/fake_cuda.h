/*
 * fake_cuda.h - the test-only CUDA driver (tests/cuda/libcuda.so.1).
 *
 * It implements the few driver entry points ccshim and the test NCCL use,
 * over host memory, so that completion tracking can be tested without a
 * GPU.  A stream is a pair of counters: work enqueued and work completed
 * (in order).  Whoever "runs" work on a stream (the test NCCL's worker
 * thread in its asynchronous mode) takes a ticket when it enqueues and
 * completes the ticket when the work is done.  An event snapshots the
 * enqueued counter of its stream when recorded and is complete once the
 * stream's completed counter reaches the snapshot.  Capture is a flag per
 * stream (cuStreamBeginCapture / cuStreamEndCapture, or FAKECUDA_CAPTURING=1
 * for every stream).  Not a product.
 *
 * The functions below are extras of the test library, for the test NCCL
 * and the tests (found with dlsym, never linked by ccshim).
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <cuda.h>
#include <stdint.h>

/* Takes the next ticket of STREAM (NULL: the legacy stream). */
uint64_t fakecuda_stream_enqueue(CUstream stream);
/* Work TICKET of STREAM is done (tickets complete in order); ERROR nonzero
 * makes the stream's later synchronisations fail. */
void fakecuda_stream_complete(CUstream stream, uint64_t ticket, int error);

/* What the tests check (counted since the library was loaded). */
struct fakecuda_counts {
    uint64_t events_created, events_recorded, events_queried;
    uint64_t recorded_while_capturing; /* cuEventRecord on a capturing stream */
    uint64_t queried_while_capturing;  /* cuStreamQuery/Synchronize on one */
    uint64_t stream_queries;
    uint64_t proc_lookups; /* cuGetProcAddress calls */
};
void fakecuda_counts(struct fakecuda_counts *out);

#endif
