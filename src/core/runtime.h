/*
 * runtime.h - start-up and shut-down of the shim (runtime.c): the library
 * constructor's work, the world from MPI, the end of the run, the
 * fatal-signal handlers.
 */
#ifndef CCS_RUNTIME_H
#define CCS_RUNTIME_H

#include "attributes.h"
#include <stdint.h>

/* Idempotent; called by the library constructor and, defensively, by the
 * first wrapper entered.  Returns 0, or -1 when the shim disabled itself. */
CCS_HIDDEN int ccs_runtime_init(void);

/* World rank and size from MPI after MPI_Init; reopens a per-rank log. */
CCS_HIDDEN void ccs_runtime_set_world(int rank, int size);

/* Flushes the trace and writes the summary; REASON is enum ccs_end_reason.
 * Called from MPI_Finalize, atexit and fatal-signal handlers. */
CCS_HIDDEN void ccs_runtime_finish(int reason, int signo);

/* Collectives this process issued so far (its own threads' rings, not
 * those a fork inherited): 0 in a process that is not a rank (a shell, a
 * launcher's agent, a wrapper script that inherited the preload), which
 * then says nothing at its exit. */
CCS_HIDDEN uint64_t ccs_process_collectives(void);

/* Installs the fatal-signal handlers after MPI_Init (libccshim-mpi.so), in
 * front of the MPI library's own, which then still run. */
CCS_HIDDEN void ccs_runtime_signals_after_mpi_init(void);

#endif
